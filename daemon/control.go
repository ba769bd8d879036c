package daemon

import (
	"context"
	"errors"
	"fmt"

	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/store"
)

// Control is a handle on a running daemon for what operators ask of it
// (the control socket serves it). Its requests are carried out by the
// decider, in order with the log lines; the methods wait for the actions
// to have applied the result, so that an unban has taken effect in every
// action when the call returns.
type Control struct {
	reqs chan request
}

type request struct {
	fn   func(d *decider) error
	done chan error
}

// NewControl makes a Control; pass it to Run in Options.Control.
func NewControl() *Control { return &Control{reqs: make(chan request)} }

// ErrNotFound is the error of an unban of a key that is not banned.
var ErrNotFound = errors.New("no active ban or throttle")

// do runs fn in the decider and then waits for the actions.
func (c *Control) do(ctx context.Context, fn func(d *decider) error) error {
	done := make(chan error, 1)
	var acts interface{ Wait(context.Context) error }
	wrapped := func(d *decider) error {
		acts = d.acts
		return fn(d)
	}
	select {
	case c.reqs <- request{fn: wrapped, done: done}:
	case <-ctx.Done():
		return fmt.Errorf("the daemon did not take the request: %w", ctx.Err())
	}
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err != nil {
		return err
	}
	if err := acts.Wait(ctx); err != nil {
		return fmt.Errorf("recorded, but not every action has applied it yet: %w", err)
	}
	return nil
}

// Unban lifts the ban or throttle of key under rule, records it (with
// reason, by who) in the history and the checkpoint, and returns once every
// action has lifted it. The escalation memory stays. It returns the unban
// decisions made; ErrNotFound when the key was not banned.
func (c *Control) Unban(ctx context.Context, rule, key, who, reason string) ([]detector.Decision, error) {
	var out []detector.Decision
	err := c.do(ctx, func(d *decider) error {
		r := d.cfg.Rule(rule)
		if r == nil {
			return fmt.Errorf("rule %q: not in the configuration", rule)
		}
		now := d.now()
		t := d.last
		if t.IsZero() {
			t = now
		}
		kind, _ := d.det.Status(r, key, t)
		out = d.det.Lift(t, r, key, out)
		if len(out) == 0 && kind == detector.Throttle {
			// A throttle ends silently in the detector: record its end.
			out = append(out, detector.Decision{Rule: rule, Key: key, Kind: detector.Unban})
		}
		if len(out) == 0 {
			return fmt.Errorf("%s %s: %w", rule, key, ErrNotFound)
		}
		for i := range out {
			out[i].Time = now
			out[i].Reason = "unbanned by " + who
			if reason != "" {
				out[i].Reason += ": " + reason
			}
			out[i].Origin = store.OriginOperator
		}
		d.w.Decisions(out)
		d.acts.Decisions(out)
		d.dirty = true
		d.flush()
		return nil
	})
	return out, err
}
