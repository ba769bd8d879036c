package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/logjail/logjail/actions"
	"github.com/logjail/logjail/checkpoint"
	"github.com/logjail/logjail/daemon"
	"github.com/logjail/logjail/endpoint"
	"github.com/logjail/logjail/ops"
	"github.com/logjail/logjail/pipeline"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/store"
	"github.com/spf13/cobra"
)

type cleanOptions struct {
	cfg         configFlag
	vacuumPages int
	output      string
	flush       bool
}

func newCleanCmd(s streams) *cobra.Command {
	var o cleanOptions
	cmd := &cobra.Command{
		Use:   "clean [--config F] [--vacuum-pages N] [--flush]",
		Short: "Run the cleaner once: expire ended bans, prune old state and history",
		Long: `clean runs one pass of the cleaner on <state_dir>/logjail.db, for cron or a
systemd timer when the daemon is not running (the daemon cleans on its own
'cleaner' schedule): bans whose time has passed are lifted, with an unban in
the history; ended throttles leave the active bans; key states idle for twice
the longest window (and not banned within 'remember') and history older than
'history_retention' are deleted; --vacuum-pages free pages are given back to
the file system (negative: all); the write-ahead log is truncated. The
actions undo the lifted bans when the daemon next starts and reconciles.

--flush also removes everything the configured actions put in place: the
iptables and ip6tables chains with their jumps and ipsets, the nftables
table, the block files; list files are emptied (the web server's
configuration includes them) and the server reloaded. Stop the daemon first:
it refuses while the daemon runs. The active bans stay in the database, and
the daemon applies them again when it starts: --flush is for removing
logjail, or for starting its firewall state afresh.

It needs a configuration file: the embedded example is for replay and parse
only.

Exit codes: 0 done (also when there is no database yet); 2 no or an invalid
configuration; 3 the daemon runs (it holds the database).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.output != "text" && o.output != "json" {
				return usageError(fmt.Errorf("--output %q: want text or json", o.output))
			}
			return runClean(&o, s, time.Now())
		},
	}
	o.cfg.addFlag(cmd)
	f := cmd.Flags()
	f.IntVar(&o.vacuumPages, "vacuum-pages", ops.VacuumPages, "free pages to give back to the file system (0 none, negative all)")
	f.StringVarP(&o.output, "output", "o", "text", "text or json")
	f.BoolVar(&o.flush, "flush", false, "also remove what the actions put in place (chains, sets, tables, block files; list files emptied)")
	return cmd
}

// cleanReport is what clean prints with --output json.
type cleanReport struct {
	Database      string `json:"database"`
	Expired       int    `json:"expired"`
	Throttles     int    `json:"throttles_ended"`
	Keys          int64  `json:"keys_pruned"`
	History       int64  `json:"history_pruned"`
	VacuumedPages int64  `json:"vacuumed_pages"`
	FreePages     int64  `json:"free_pages"`
	WALTruncated  bool   `json:"wal_truncated"`
}

func runClean(o *cleanOptions, s streams, now time.Time) error {
	cfg, err := o.cfg.load(s.err, false)
	if err != nil {
		return err
	}
	path := daemon.DBPath(cfg)
	if o.flush {
		if err := flushActions(cfg, path, s); err != nil {
			return err
		}
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		// Do not make a database (and its directory) only to clean it.
		fmt.Fprintf(s.out, "%s: no database yet: nothing to clean\n", path)
		return nil
	}
	db, err := store.Open(path, store.Options{})
	if errors.Is(err, store.ErrLocked) {
		return &exitError{code: exitUnreachable, err: fmt.Errorf("%w: the daemon runs: it cleans on its own schedule", err)}
	}
	if err != nil {
		return err
	}
	defer db.Close()
	det := pipeline.NewDetector(cfg)
	if _, _, err := checkpoint.Restore(db, cfg, det); err != nil {
		return err
	}
	st, err := ops.Clean(db, cfg, det, now, o.vacuumPages)
	if err != nil {
		return err
	}
	if err := db.Close(); err != nil {
		return err
	}
	r := cleanReport{
		Database: path, Expired: st.Expired, Throttles: st.Throttles, Keys: st.Pruned.Keys, History: st.Pruned.History,
		VacuumedPages: st.Pruned.VacuumedPages, FreePages: st.Pruned.FreePages, WALTruncated: st.WAL,
	}
	if o.output == "json" {
		enc := json.NewEncoder(s.out)
		return enc.Encode(r)
	}
	printClean(s.out, r, st)
	return nil
}

// flushActions removes what the configured actions put in place, unless
// the daemon runs.
func flushActions(cfg *rules.Config, path string, s streams) error {
	if _, err := os.Stat(path); err == nil {
		db, err := store.Open(path, store.Options{})
		if errors.Is(err, store.ErrLocked) {
			return &exitError{code: exitUnreachable, err: fmt.Errorf("%w: stop the daemon before --flush (it would put everything back)", err)}
		}
		if err != nil {
			return err
		}
		// Held until the flush is done: no daemon starts meanwhile.
		defer db.Close()
	}
	cs, err := actions.Builtin(endpoint.CheckOptions).Build(cfg, actions.Env{})
	if err != nil {
		return usageError(err)
	}
	var errs []error
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, c := range cs {
		f, ok := c.Backend.(actions.Flusher)
		if !ok {
			fmt.Fprintf(s.out, "action %s (%s): nothing to flush\n", c.Name(), c.Type)
			continue
		}
		if err := f.Flush(ctx); err != nil {
			errs = append(errs, fmt.Errorf("action %s: flush: %w", c.Name(), err))
			continue
		}
		fmt.Fprintf(s.out, "action %s (%s): flushed\n", c.Name(), c.Type)
	}
	for _, c := range cs {
		c.Close()
	}
	return errors.Join(errs...)
}

func printClean(w io.Writer, r cleanReport, st ops.CleanStats) {
	fmt.Fprintf(w, "%s: %s expired, %s ended; pruned %s and %s; %s given back, %d free\n",
		r.Database, plural(r.Expired, "ban", "bans"), plural(r.Throttles, "throttle", "throttles"), plural(int(r.Keys), "key state", "key states"),
		plural(int(r.History), "history event", "history events"), plural(int(r.VacuumedPages), "page", "pages"), r.FreePages)
	for _, d := range st.Unbans {
		fmt.Fprintf(w, "  unban %s %s (ended %s)\n", d.Rule, d.Key, d.Time.Local().Format(time.DateTime))
	}
	if !r.WALTruncated {
		fmt.Fprintln(w, "  the write-ahead log is in use by a reader: not truncated")
	}
}
