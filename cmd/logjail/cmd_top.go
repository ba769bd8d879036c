package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/logjail/logjail/control"
	"github.com/logjail/logjail/pipeline"
	"github.com/spf13/cobra"
)

type topOptions struct {
	cfg     configFlag
	out     outputFlag
	headers headersFlag
	req     control.TopRequest
	watch   time.Duration
}

func newTopCmd(s streams) *cobra.Command {
	var o topOptions
	cmd := &cobra.Command{
		Use:   "top [--rule R] [--by requests|cpu] [--watch]",
		Short: "The keys closest to their limits now, their window values against the limits",
		Long: `top lists the keys closest to their rules' limits, like top for abusers: for
each, every limit's window value now against the limit, and the highest
ratio (1 at the limit, above it when over). --by requests ranks by the
request limits (rates, token buckets, last N), --by cpu by the share limits
(cpu and duration); by default, by any limit.

It asks the running daemon for its live windows; with no daemon, it reads
the windows of the last checkpoint in the database. Either way the windows
are read at the later of the newest log time and the wall clock (a quiet
log's windows drain), by the same code.
--watch refreshes every 2 s (--watch=5s: every 5 s) until interrupted.

` + operatorExits,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.out.check(); err != nil {
				return err
			}
			if o.req.By != "" && o.req.By != "requests" && o.req.By != "cpu" {
				return usageError(fmt.Errorf("--by %q: want requests or cpu", o.req.By))
			}
			return runTop(cmd.Context(), &o, s)
		},
	}
	o.cfg.addFlag(cmd)
	o.out.addFlag(cmd)
	o.headers.addFlag(cmd)
	f := cmd.Flags()
	f.StringVar(&o.req.Rule, "rule", "", "only this rule's keys")
	f.StringVar(&o.req.By, "by", "", "requests or cpu (default: any limit)")
	f.IntVarP(&o.req.N, "number", "n", 20, "how many keys")
	f.DurationVar(&o.watch, "watch", 0, "refresh every so often (2s when given without a value) until interrupted")
	f.Lookup("watch").NoOptDefVal = "2s"
	return cmd
}

func runTop(ctx context.Context, o *topOptions, s streams) error {
	op, err := open(&o.cfg, s)
	if err != nil {
		return err
	}
	if o.req.Rule != "" && op.cfg.Rule(o.req.Rule) == nil {
		return usageError(fmt.Errorf("--rule %q: not in the configuration", o.req.Rule))
	}
	c := op.client()
	defer c.Close()
	terminal := o.headers.table(s.out)
	for {
		top, err := topOnce(ctx, op, c, o.req)
		if err != nil {
			return apiError(err)
		}
		w := bufio.NewWriter(s.out)
		if o.watch > 0 && terminal {
			io.WriteString(w, "\033[H\033[2J")
		}
		if o.out.json() {
			err = writeJSON(w, top)
		} else if len(top.Keys) == 0 {
			if terminal {
				fmt.Fprintln(w, emptyTop(top, o.req.Rule)) // after the screen is cleared
			} else {
				sayEmpty(s, false, emptyTop(top, o.req.Rule))
			}
		} else {
			err = printTop(w, top, terminal)
		}
		if ferr := w.Flush(); err == nil {
			err = ferr
		}
		if err != nil || o.watch <= 0 {
			return err
		}
		select {
		case <-time.After(o.watch):
		case <-ctx.Done():
			return nil
		}
	}
}

// topOnce asks the daemon, or reads the last checkpoint when none answers.
func topOnce(ctx context.Context, op *opener, c *control.Client, req control.TopRequest) (*control.Top, error) {
	cctx, cancel := withTimeout(ctx, readTimeout)
	defer cancel()
	top, err := c.Top(cctx, req)
	if !errors.Is(err, control.ErrNoDaemon) {
		return top, err
	}
	det := pipeline.NewDetector(op.cfg)
	db, err := op.reader()
	if err != nil {
		return nil, err
	}
	var at time.Time
	if db != nil {
		defer db.Close()
		if at, err = control.RestoreDetector(db, op.cfg, det, true); err != nil {
			return nil, err
		}
	}
	return control.TopAt(det, at, time.Now(), req)
}

func printTop(w io.Writer, top *control.Top, terminal bool) error {
	if terminal {
		src := "live"
		if !top.Live {
			src = "no daemon: the last checkpoint's windows"
		}
		fmt.Fprintf(w, "%s, %s\n", fmtTime(top.Time), src)
	}
	t := newTable(w, terminal, "RULE", "KEY", "PHASE", "RATIO", "REQUESTS", "CPU", "LIMITS")
	for i := range top.Keys {
		k := &top.Keys[i]
		phase := k.Phase
		if k.Until != nil {
			phase += " until " + fmtTime(*k.Until)
		}
		var ls []string
		for _, l := range k.Limits {
			ls = append(ls, fmtLimit(l))
		}
		t.row(k.Rule, k.Key, phase, fmt.Sprintf("%.2f", k.Ratio), fmt.Sprint(k.Requests), fmt.Sprintf("%.1fs", k.CPU), strings.Join(ls, "; "))
	}
	return t.flush()
}

// emptyTop is the line top prints when no key is tracked.
func emptyTop(top *control.Top, rule string) string {
	what := "no keys tracked"
	if rule != "" {
		what += " by rule " + rule
	}
	if !top.Live {
		return what + " in the last checkpoint (no daemon runs)"
	}
	return what + " yet: no request was charged to a rule since the daemon started"
}

// fmtLimit writes a limit's value against it: "20 per second: 12 (0.60)".
func fmtLimit(l control.TopLimit) string {
	v := "-"
	if l.Value != nil {
		x := *l.Value
		switch {
		case strings.Contains(l.Limit, "%"):
			v = fmt.Sprintf("%.1f%%", x*100)
		case math.Abs(x-math.Round(x)) < 1e-9:
			v = fmt.Sprintf("%.0f", x)
		default:
			v = fmt.Sprintf("%.2f", x)
		}
	}
	return fmt.Sprintf("%s: %s (%.2f)", l.Limit, v, l.Ratio)
}
