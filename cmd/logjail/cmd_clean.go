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
	"github.com/logjail/logjail/control"
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
		Long: `clean runs one pass of the cleaner on <state_dir>/logjail.db (the daemon
also cleans on its own 'cleaner' schedule): bans whose time has passed are
lifted, with an unban in the history; ended throttles leave the active bans;
key states idle for twice the longest window (and not banned within
'remember') and history older than 'history_retention' are deleted;
--vacuum-pages free pages are given back to the file system (negative: all);
the write-ahead log is truncated.

While the daemon runs, it runs the same pass when asked on its control
socket, in order with the log lines, --vacuum-pages included (its reading
pauses while pages are given back: keep the number small, as its own
schedule does with 1000), and answers once every action undid the lifted
bans; the write-ahead log is truncated unless a reader holds it (the report
says so). With no daemon, clean works on the database, for cron or a systemd
timer, and the actions undo the lifted bans when the daemon next starts and
reconciles. The report is the same either way.

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
configuration; 3 the daemon holds the database but does not answer on its
control socket, --flush while it runs, or the caller may not reach it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.output != "text" && o.output != "json" {
				return usageError(fmt.Errorf("--output %q: want text or json", o.output))
			}
			return runClean(cmd.Context(), &o, s, time.Now())
		},
	}
	o.cfg.addFlag(cmd)
	f := cmd.Flags()
	f.IntVar(&o.vacuumPages, "vacuum-pages", ops.VacuumPages, "free pages to give back to the file system (0 none, negative all)")
	f.StringVarP(&o.output, "output", "o", "text", "text or json")
	f.BoolVar(&o.flush, "flush", false, "also remove what the actions put in place (chains, sets, tables, block files; list files emptied)")
	return cmd
}

// runClean runs one cleaner pass: through the daemon (control.Client.Clean:
// the decider runs ops.CleanWith), or, when no daemon answers, on the
// database (ops.Clean on a detector restored from it) at now. --flush
// first, which refuses while the daemon runs.
func runClean(ctx context.Context, o *cleanOptions, s streams, now time.Time) error {
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
	c := control.NewClient(cfg.ControlSocket)
	defer c.Close()
	cctx, cancel := withTimeout(ctx, changeTimeout)
	defer cancel()
	r, err := c.Clean(cctx, control.CleanRequest{VacuumPages: o.vacuumPages})
	if errors.Is(err, control.ErrNoDaemon) {
		r, err = offlineClean(cfg, path, s, now, o.vacuumPages)
	}
	if err != nil || r == nil {
		return apiError(err)
	}
	if o.output == "json" {
		enc := json.NewEncoder(s.out)
		return enc.Encode(r)
	}
	printClean(s.out, r)
	return nil
}

// offlineClean is the cleaner's pass on the database when no daemon
// answers; nil when there is no database yet.
func offlineClean(cfg *rules.Config, path string, s streams, now time.Time, vacuumPages int) (*control.CleanReport, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		// Do not make a database (and its directory) only to clean it.
		fmt.Fprintf(s.out, "%s: no database yet: nothing to clean\n", path)
		return nil, nil
	}
	db, err := store.Open(path, store.Options{})
	if errors.Is(err, store.ErrLocked) {
		return nil, &exitError{code: exitUnreachable, err: fmt.Errorf("%w: the daemon runs: it cleans on its own schedule, and does not answer on %s: is control_socket the same for it?", err, cfg.ControlSocket)}
	}
	if err != nil {
		return nil, err
	}
	defer db.Close()
	det := pipeline.NewDetector(cfg)
	if _, _, err := checkpoint.Restore(db, cfg, det); err != nil {
		return nil, err
	}
	st, err := ops.Clean(db, cfg, det, now, vacuumPages)
	if err != nil {
		return nil, err
	}
	if err := db.Close(); err != nil {
		return nil, err
	}
	return st.Report(path), nil
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

func printClean(w io.Writer, r *control.CleanReport) {
	fmt.Fprintf(w, "%s: %s expired, %s ended; pruned %s and %s; %s given back, %d free\n",
		r.Database, plural(r.Expired, "ban", "bans"), plural(r.Throttles, "throttle", "throttles"), plural(int(r.Keys), "key state", "key states"),
		plural(int(r.History), "history event", "history events"), plural(int(r.VacuumedPages), "page", "pages"), r.FreePages)
	for _, u := range r.Unbans {
		fmt.Fprintf(w, "  unban %s %s (ended %s)\n", u.Rule, u.Key, u.Ended.Local().Format(time.DateTime))
	}
	if !r.WALTruncated {
		fmt.Fprintln(w, "  the write-ahead log is in use by a reader: not truncated")
	}
}
