package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/logjail/logjail/control"
	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/pipeline"
	"github.com/spf13/cobra"
)

type statusOptions struct {
	cfg configFlag
	out outputFlag
}

func newStatusCmd(s streams) *cobra.Command {
	var o statusOptions
	cmd := &cobra.Command{
		Use:   "status",
		Short: "The daemon's state: version, uptime, sources, rules, actions, breaker, database",
		Long: `status asks the running daemon for its version, uptime and configuration
file; each source's files with how far they were read and what is left (and
how old the newest line read is); each rule's active throttles and bans; each
action's entries, pending changes and last error; the circuit breaker; the
database's size. With no daemon, it says so and reads what the database
holds (positions, bans, breaker as of the last checkpoint).

When the daemon cannot write its database (a full disk), status says so
first, with the error ("database": {"error": ...} in JSON), shows the rest
all the same, and exits 1: the daemon runs degraded (it keeps deciding and
acting, and writes again once there is room).

` + operatorExits,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.out.check(); err != nil {
				return err
			}
			return runStatus(cmd.Context(), &o, s)
		},
	}
	o.cfg.addFlag(cmd)
	o.out.addFlag(cmd)
	return cmd
}

func runStatus(ctx context.Context, o *statusOptions, s streams) error {
	op, err := open(&o.cfg, s)
	if err != nil {
		return err
	}
	cfg := op.cfg
	c := op.client()
	defer c.Close()
	cctx, cancel := withTimeout(ctx, readTimeout)
	defer cancel()
	st, err := c.Status(cctx)
	if errors.Is(err, control.ErrNoDaemon) {
		st, err = offlineStatus(op)
	}
	if err != nil {
		return apiError(err)
	}
	if o.out.json() {
		err = writeJSON(s.out, st)
	} else {
		printStatus(s.out, st, cfg.ControlSocket)
	}
	if err == nil && st.Database.Error != "" {
		// Degraded: a negative answer, said above already.
		return &exitError{code: exitNegative}
	}
	return err
}

func offlineStatus(op *opener) (*control.Status, error) {
	st := &control.Status{Version: control.SchemaVersion, Logjail: control.Version(), Actions: []control.ActionState{}}
	db, err := op.reader()
	if err != nil {
		return nil, err
	}
	if db == nil {
		st.Config, st.Database.Path, st.Sources, st.Rules = op.cfg.File, op.dbPath(), []control.Source{}, []control.RuleStatus{}
		st.Breaker, err = control.BreakerOf(pipeline.NewDetector(op.cfg).Breaker(), op.cfg, nil)
		return st, err
	}
	defer db.Close()
	if err := control.StatusOf(st, db, op.cfg, op.dbPath()); err != nil {
		return nil, err
	}
	// Keys and all, so that the tracked keys are the daemon's at its last
	// checkpoint.
	det := pipeline.NewDetector(op.cfg)
	if _, err := control.RestoreDetector(db, op.cfg, det, true); err != nil {
		return nil, err
	}
	if err := control.DetectorStatus(st, det, op.cfg, db); err != nil {
		return nil, err
	}
	return st, nil
}

func printStatus(w io.Writer, st *control.Status, socket string) {
	if st.Database.Error != "" {
		fmt.Fprintf(w, "DATABASE ERROR: %s\n", parser.Printable(st.Database.Error))
		fmt.Fprintln(w, "  the daemon keeps deciding and acting; what changed since its last checkpoint is in memory only")
	}
	if st.Live {
		fmt.Fprintf(w, "daemon:    running (pid %d), logjail %s, up %s since %s\n", st.PID, st.Logjail, fmtLeft(time.Duration(st.UptimeSeconds*float64(time.Second))), fmtTimePtr(st.Started))
	} else {
		fmt.Fprintf(w, "daemon:    not running (no daemon answers on %s); logjail %s\n", socket, st.Logjail)
	}
	fmt.Fprintf(w, "config:    %s\n", st.Config)
	size := "none yet"
	if st.Database.Bytes >= 0 {
		size = fmtBytes(st.Database.Bytes)
	}
	fmt.Fprintf(w, "database:  %s, %s, last checkpoint %s\n", st.Database.Path, size, fmtTimePtr(st.Database.Checkpoint))
	fmt.Fprintf(w, "breaker:   %s\n", breakerLine(&st.Breaker))
	if st.Live {
		fmt.Fprintf(w, "keys:      %d tracked, %s (about %d bytes a key), %d evicted\n", st.TrackedKeys, fmtBytes(st.TrackedKeyBytes), st.BytesPerKey, st.Evictions)
	}
	if f := st.Fleet; f != nil {
		printFleet(w, f)
	}
	fmt.Fprintln(w, "sources:")
	for _, src := range st.Sources {
		line := "  " + src.Name
		if src.LastLine != nil {
			line += fmt.Sprintf(": newest line %s (%s behind)", fmtTime(*src.LastLine), fmtLeft(time.Duration(*src.LagSeconds*float64(time.Second))))
		}
		if src.Future > 0 || src.Outliers > 0 {
			line += fmt.Sprintf("; not charged: %d lines ahead of the clock, %d outliers", src.Future, src.Outliers)
		}
		fmt.Fprintln(w, line)
		if len(src.Files) == 0 {
			fmt.Fprintln(w, "    no file read yet")
		}
		for _, f := range src.Files {
			size := "unreadable"
			if f.Size >= 0 {
				size = fmt.Sprintf("%s, %s left", fmtBytes(f.Size), fmtBytes(f.LagBytes))
			}
			fmt.Fprintf(w, "    %s: line %d, byte %d of %s\n", parser.Printable(f.Path), f.Line, f.Offset, size)
		}
	}
	fmt.Fprintln(w, "rules:")
	for _, r := range st.Rules {
		lo := ""
		if r.LogOnly {
			lo = " (log only)"
		}
		fmt.Fprintf(w, "  %s%s: %d throttled, %d banned\n", r.Name, lo, r.Throttles, r.Bans)
	}
	fmt.Fprintln(w, "actions:")
	if !st.Live {
		fmt.Fprintln(w, "  not running")
	}
	for _, a := range st.Actions {
		state := "ok"
		if a.Applied == nil {
			state = "not applied yet"
		}
		if a.LastError != "" {
			state = fmt.Sprintf("FAILING since %s: %s", fmtTimePtr(a.LastErrorAt), a.LastError)
		}
		fmt.Fprintf(w, "  %s (%s): %s, %d pending, %s; %s\n", a.Name, a.Type, plural(a.Entries, "entry", "entries"), a.Pending, plural(int(a.Errors), "error", "errors"), state)
	}
	if len(st.Endpoints) > 0 {
		fmt.Fprintln(w, "endpoints:")
	}
	for _, e := range st.Endpoints {
		state := "serving"
		if !e.Ready {
			state += ", bans not loaded yet (answering by fail)"
		}
		if e.Error != "" {
			state = "NOT SERVING: " + e.Error
		}
		fmt.Fprintf(w, "  %s on %s: %s; %d connections, %d evicted, %d accept errors\n", e.Name, e.Listen, state, e.Conns, e.Evicted, e.AcceptErrors)
	}
	if len(st.Bouncers) > 0 {
		fmt.Fprintln(w, "bouncers:")
	}
	for _, b := range st.Bouncers {
		fmt.Fprintf(w, "  %s: last pull %s from %s (%s)\n", clean(b.Name), fmtTimePtr(b.LastPull), orDash(b.IP), orDash(b.UserAgent))
	}
}

// printFleet writes the fleet's lines of a status: this node's link, then
// every node Redis knows, with its last sync and lag.
func printFleet(w io.Writer, f *control.FleetStatus) {
	link := fmt.Sprintf("ok, last sync %s, lag %s", fmtTimePtr(f.LastSync), fmtLag(f.LagSeconds))
	if f.Degraded {
		link = fmt.Sprintf("DEGRADED (working alone, last sync %s): %s", fmtTimePtr(f.LastSync), parser.Printable(f.Error))
	}
	fmt.Fprintf(w, "fleet:     node %s on %s: %s; %d queued, %d dropped\n", f.Node, f.Redis, link, f.Queued, f.Dropped)
	if f.NodesError != "" {
		fmt.Fprintf(w, "  nodes unknown: %s\n", parser.Printable(f.NodesError))
	}
	for _, n := range f.Nodes {
		state := ""
		if n.Degraded {
			state = ", degraded"
		}
		fmt.Fprintf(w, "  %s: last sync %s, lag %s%s\n", parser.Printable(n.Node), fmtTimePtr(n.LastSync), fmtLag(n.LagSeconds), state)
	}
}

// fmtLag writes a round trip: "3.2 ms".
func fmtLag(s float64) string { return fmt.Sprintf("%.1f ms", s*1000) }

func fmtBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
