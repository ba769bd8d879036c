package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/logjail/logjail/control"
	"github.com/logjail/logjail/ops"
	"github.com/logjail/logjail/pipeline"
	"github.com/spf13/cobra"
)

type breakerOptions struct {
	cfg configFlag
	out outputFlag
}

func newBreakerCmd(s streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "breaker status|reset",
		Short: "The circuit breaker (max_bans_per_minute): show it, reset it",
		Long: `More than max_bans_per_minute new bans within a minute trip the circuit
breaker: every rule that is not log_only becomes log-only (its decisions are
recorded, acted on by nothing) until an operator resets it. Neither time, nor a
reload (even one that raises max_bans_per_minute), nor a restart closes it.

  logjail breaker status   open or closed, the trips, the last one (when, how
                           many bans within which window, the ban that tripped
                           it), the rules it holds to log-only, the last reset
                           and who made it, the last trips and resets
  logjail breaker reset    close it: the rules act again

Both work through the running daemon, or on the database when no daemon
answers (a reset is then what the daemon restores when it starts).`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newBreakerStatusCmd(s), newBreakerResetCmd(s))
	return cmd
}

func newBreakerStatusCmd(s streams) *cobra.Command {
	var o breakerOptions
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Open or closed, the last trip, the rules held to log-only, the last resets",
		Long: `status shows the circuit breaker: open or closed, how often it tripped, the
last trip (the log time of the ban that tripped it, the bans within the
window, the limit then), the rules an open breaker holds to log-only, the
limit in force, the last reset and who made it, and the last 20 trips and
resets from the history. With no daemon it reads the database (the state of
the last checkpoint).

` + operatorExits,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.out.check(); err != nil {
				return err
			}
			return runBreakerStatus(cmd.Context(), &o, s)
		},
	}
	o.cfg.addFlag(cmd)
	o.out.addFlag(cmd)
	return cmd
}

func newBreakerResetCmd(s streams) *cobra.Command {
	var o breakerOptions
	cmd := &cobra.Command{
		Use:   "reset",
		Short: "Close the circuit breaker: the rules act again",
		Long: `reset closes the circuit breaker: the rules' decisions after it act again,
and the breaker counts bans afresh. The history records the reset and who
made it. Bans decided while it was open stay log-only (recorded, not
enforced) until they end; ban those keys by hand if they must be blocked.
Resetting a closed breaker changes nothing and is no error.

Through the running daemon it takes effect at once; with no daemon it writes
to the database, and the daemon starts with the breaker closed.

` + operatorExits,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.out.check(); err != nil {
				return err
			}
			return runBreakerReset(cmd.Context(), &o, s)
		},
	}
	o.cfg.addFlag(cmd)
	o.out.addFlag(cmd)
	return cmd
}

func runBreakerStatus(ctx context.Context, o *breakerOptions, s streams) error {
	op, err := open(&o.cfg, s)
	if err != nil {
		return err
	}
	c := op.client()
	defer c.Close()
	cctx, cancel := withTimeout(ctx, readTimeout)
	defer cancel()
	b, err := c.Breaker(cctx)
	if errors.Is(err, control.ErrNoDaemon) {
		b, err = offlineBreaker(op)
	}
	if err != nil {
		return apiError(err)
	}
	if o.out.json() {
		return writeJSON(s.out, b)
	}
	printBreakerStatus(s.out, b, op.cfg.ControlSocket)
	return nil
}

// offlineBreaker reads the breaker of the last checkpoint and its events.
func offlineBreaker(op *opener) (*control.BreakerStatus, error) {
	det := pipeline.NewDetector(op.cfg)
	b := &control.BreakerStatus{Version: control.SchemaVersion, Events: []control.Event{}}
	db, err := op.reader()
	if err != nil {
		return nil, err
	}
	if db == nil {
		b.Breaker, err = control.BreakerOf(det.Breaker(), op.cfg, nil)
		return b, err
	}
	defer db.Close()
	if _, err := control.RestoreDetector(db, op.cfg, det, false); err != nil {
		return nil, err
	}
	if b.Breaker, err = control.BreakerOf(det.Breaker(), op.cfg, db); err != nil {
		return nil, err
	}
	if b.Events, err = control.BreakerEvents(db); err != nil {
		return nil, err
	}
	return b, nil
}

func runBreakerReset(ctx context.Context, o *breakerOptions, s streams) error {
	res, cfg, err := change(ctx, &o.cfg, s,
		func(ctx context.Context, c *control.Client) (*control.BreakerResetResult, error) {
			return c.ResetBreaker(ctx)
		},
		func(e *control.Engine, who string, dl *ops.DecisionLog) (*control.BreakerResetResult, error) {
			res, _ := e.ResetBreaker(who)
			if res.WasOpen {
				// As the daemon writes it (daemon.Control.ResetBreaker).
				dl.Breaker(ops.BreakerEvent{Level: slog.LevelInfo, Event: "reset", Reason: "reset by an operator: rules act again",
					Source: ops.SourceOperator, Who: who, Attrs: []slog.Attr{slog.Int64("trips", res.Breaker.Trips)}})
			}
			return res, nil
		})
	if err != nil {
		return err
	}
	if o.out.json() {
		return writeJSON(s.out, res)
	}
	switch {
	case !res.WasOpen:
		fmt.Fprintln(s.out, "the circuit breaker was closed: nothing changed")
	case res.Live:
		fmt.Fprintf(s.out, "circuit breaker reset: rules %s act again\n", strings.Join(control.BreakerRules(cfg), ", "))
	default:
		fmt.Fprintf(s.out, "circuit breaker reset: no daemon answers on %s: written to the database; the daemon starts with it closed\n", cfg.ControlSocket)
	}
	return nil
}

// breakerLine is the breaker in one line, for status.
func breakerLine(b *control.Breaker) string {
	if !b.Open {
		return fmt.Sprintf("closed (tripped %s)", plural(int(b.Trips), "time", "times"))
	}
	line := "OPEN"
	if b.Tripped != nil {
		line += " since " + fmtTime(*b.Tripped)
	}
	return fmt.Sprintf("%s: rules %s are log-only until `logjail breaker reset` (tripped %s)",
		line, strings.Join(b.LogOnlyRules, ", "), plural(int(b.Trips), "time", "times"))
}

func printBreakerStatus(w io.Writer, st *control.BreakerStatus, socket string) {
	b := &st.Breaker
	if !st.Live {
		fmt.Fprintf(w, "daemon:    not running (no daemon answers on %s): as of the last checkpoint\n", socket)
	}
	fmt.Fprintf(w, "breaker:   %s\n", breakerLine(b))
	limit := fmt.Sprintf("max_bans_per_minute %d", b.MaxBansPerMinute)
	if b.MaxBansPerMinute < 0 {
		limit = "disabled (max_bans_per_minute < 0)"
	}
	fmt.Fprintf(w, "limit:     %s\n", limit)
	if b.Tripped != nil {
		fmt.Fprintf(w, "last trip: %s (log time): %d bans within %s > max_bans_per_minute %d; the last: %s, rule %s\n",
			fmtTime(*b.Tripped), b.Bans, time.Duration(b.WindowSeconds*float64(time.Second)), b.Limit, b.TripKey, b.TripRule)
	} else {
		fmt.Fprintln(w, "last trip: never")
	}
	if b.Reset != nil {
		fmt.Fprintf(w, "reset:     %s by %s\n", fmtTime(b.Reset.Time), b.Reset.Who)
	} else {
		fmt.Fprintln(w, "reset:     never")
	}
	if len(st.Events) > 0 {
		fmt.Fprintln(w, "events:")
	}
	for _, e := range st.Events {
		who := ""
		if e.Who != "" {
			who = " by " + e.Who
		}
		fmt.Fprintf(w, "  %s  %s%s: %s\n", fmtTime(e.Time), e.Kind, who, e.Reason)
	}
}
