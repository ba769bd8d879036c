package daemon

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/logjail/logjail/control"
	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/ops"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/state"
)

// Control is a handle on a running daemon for what operators ask of it:
// the control socket serves it (control.Daemon). Its requests are carried
// out by the decider, in order with the log lines; a change is in the
// database when the call returns, and has taken effect in every action:
// the methods wait for the actions to have applied it.
type Control struct {
	reqs      chan request
	endpoints atomic.Pointer[endpoints] // of the running daemon, for Status
}

var (
	_ control.Daemon      = (*Control)(nil)
	_ control.Cleaner     = (*Control)(nil)
	_ control.BatchBanner = (*Control)(nil)
)

type request struct {
	fn   func(d *decider) error
	done chan error
}

// NewControl makes a Control; pass it to Run in Options.Control.
func NewControl() *Control { return &Control{reqs: make(chan request)} }

// ErrNotFound is the error of an unban that matched nothing.
var ErrNotFound = control.ErrNotFound

// run runs fn in the decider and returns its error.
func (c *Control) run(ctx context.Context, fn func(d *decider) error) error {
	done := make(chan error, 1)
	select {
	case c.reqs <- request{fn: fn, done: done}:
	case <-ctx.Done():
		return fmt.Errorf("the daemon did not take the request: %w", ctx.Err())
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// do runs fn in the decider and then waits for the actions.
func (c *Control) do(ctx context.Context, fn func(d *decider) error) error {
	var acts interface{ Wait(context.Context) error }
	err := c.run(ctx, func(d *decider) error {
		acts = d.acts
		return fn(d)
	})
	if err != nil {
		return err
	}
	if err := acts.Wait(ctx); err != nil {
		return fmt.Errorf("recorded, but not every action has applied it yet: %w", err)
	}
	return nil
}

// engine is a control.Engine on the decider's state; with bans, after a
// checkpoint of everything decided so far, so that the active bans read
// are the detector's.
func (d *decider) engine(bans bool) (*control.Engine, error) {
	var active []state.Ban
	if bans {
		if err := d.sync(); err != nil {
			return nil, err
		}
		var err error
		if active, err = d.db.ActiveBans(); err != nil {
			return nil, err
		}
	}
	e := control.NewEngine(d.cfg, d.det, d.w, active, d.now(), d.last)
	if d.fl != nil {
		e.Node = d.fl.name
	}
	return e, nil
}

// sync takes a checkpoint and waits until it is written: readers of the
// database see everything decided so far.
func (d *decider) sync() error {
	d.flush()
	if err := d.w.Wait(); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// Ban bans on an operator's word (control.Engine.Ban) and returns once
// the ban is in the database and every action applied it.
func (c *Control) Ban(ctx context.Context, req control.BanRequest, who string) (*control.BanResult, error) {
	var res *control.BanResult
	err := c.do(ctx, func(d *decider) error {
		e, err := d.engine(false)
		if err != nil {
			return err
		}
		r, ds, err := e.Ban(req, who)
		if err != nil {
			return err
		}
		d.acts.Decisions(ds)
		d.dl.Decisions(ops.SourceOperator, ds, r.LogAttrs()...)
		d.publish(ds)
		r.Live = true
		res = r
		return d.sync()
	})
	return res, err
}

// BanBatch makes several bans on an operator's word as one
// (control.Engine.BanBatch: all or none), in one checkpoint, and returns
// once they are in the database and every action applied them.
func (c *Control) BanBatch(ctx context.Context, req control.BatchBanRequest, who string) (*control.BatchBanResult, error) {
	var res *control.BatchBanResult
	err := c.do(ctx, func(d *decider) error {
		e, err := d.engine(false)
		if err != nil {
			return err
		}
		r, ds, err := e.BanBatch(req, who)
		if err != nil {
			return err
		}
		d.acts.Decisions(ds)
		for i := range ds {
			d.dl.Decisions(ops.SourceOperator, ds[i:i+1], r.Bans[i].LogAttrs()...)
		}
		d.publish(ds)
		r.Live = true
		res = r
		return d.sync()
	})
	return res, err
}

// Lift lifts what req names (control.Engine.Unban), records it (with
// the reason, by who) in the history and the database, and returns once
// every action has lifted it. The escalation memory stays unless
// req.Forget. An unban that matched nothing is an error wrapping
// ErrNotFound.
func (c *Control) Lift(ctx context.Context, req control.UnbanRequest, who string) (*control.UnbanResult, error) {
	res, _, err := c.lift(ctx, req, who)
	return res, err
}

func (c *Control) lift(ctx context.Context, req control.UnbanRequest, who string) (*control.UnbanResult, []detector.Decision, error) {
	var res *control.UnbanResult
	var out []detector.Decision
	err := c.do(ctx, func(d *decider) error {
		e, err := d.engine(true)
		if err != nil {
			return err
		}
		r, ds, err := e.Unban(req, who)
		res = r
		if err != nil {
			return err
		}
		out = ds
		d.acts.Decisions(ds)
		d.dl.Decisions(ops.SourceOperator, ds)
		d.publish(ds)
		r.Live = true
		return d.sync()
	})
	return res, out, err
}

// Unban lifts the ban or throttle of key under rule (a configured rule),
// as Lift does, and returns the unban decisions made; an error wrapping
// ErrNotFound when the key was not banned.
func (c *Control) Unban(ctx context.Context, rule, key, who, reason string) ([]detector.Decision, error) {
	cfg, err := c.Config(ctx)
	if err != nil {
		return nil, err
	}
	if cfg.Rule(rule) == nil {
		return nil, fmt.Errorf("rule %q: not in the configuration", rule)
	}
	_, ds, err := c.lift(ctx, control.UnbanRequest{Rule: rule, Key: key, Reason: reason}, who)
	if err != nil {
		return nil, err
	}
	var out []detector.Decision
	for _, d := range ds {
		if d.Kind == detector.Unban {
			out = append(out, d)
		}
	}
	return out, nil
}

// Status reports the daemon's state.
func (c *Control) Status(ctx context.Context) (*control.Status, error) {
	st := &control.Status{Version: control.SchemaVersion, Live: true, Logjail: control.Version(), PID: os.Getpid()}
	var db state.Store
	var cfg *rules.Config
	var now time.Time
	lastLine := map[string]time.Time{}
	clocks := map[string]clockCounts{}
	var dbErr error
	var fl *fleetLink
	err := c.run(ctx, func(d *decider) error {
		fl = d.fl
		st.Fleet = d.fleetStatus()
		// The positions and bans read below are those of now, or, when
		// the database cannot be written (a full disk), those of the last
		// write that succeeded: the status says so rather than failing.
		dbErr = d.sync()
		db, cfg, now = d.db, d.cfg, d.now()
		started := d.started
		st.Started = &started
		st.UptimeSeconds = now.Sub(started).Seconds()
		if err := control.DetectorStatus(st, d.det, d.cfg, d.db); err != nil {
			dbErr = cmp.Or(dbErr, err)
		}
		for _, a := range d.acts.Status() {
			as := control.ActionState{Name: a.Name, Type: a.Type, Entries: a.Entries, Pending: a.Pending,
				Errors: a.Errors, LastError: a.LastError}
			as.Applied, as.LastErrorAt = optTime(a.Applied), optTime(a.LastErrorAt)
			st.Actions = append(st.Actions, as)
		}
		for k, v := range d.lastLine {
			lastLine[k] = v
		}
		for k, v := range d.clocks {
			clocks[k] = *v
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := control.StatusOf(st, db, cfg, DBPath(cfg)); err != nil {
		dbErr = cmp.Or(dbErr, err)
	}
	if dbErr != nil {
		st.Database.Error = dbErr.Error()
	}
	st.Endpoints = c.endpoints.Load().states()
	if fl != nil {
		fleetNodes(ctx, fl.node, st.Fleet)
	}
	for i := range st.Sources {
		if t, ok := lastLine[st.Sources[i].Name]; ok {
			lag := max(0, now.Sub(t).Seconds())
			st.Sources[i].LastLine, st.Sources[i].LagSeconds = &t, &lag
		}
		if c, ok := clocks[st.Sources[i].Name]; ok {
			st.Sources[i].Future, st.Sources[i].Outliers = c.future, c.outliers
		}
	}
	return st, nil
}

// Top reads the detector's windows now and returns the keys closest to
// their limits.
func (c *Control) Top(ctx context.Context, req control.TopRequest) (*control.Top, error) {
	var top *control.Top
	err := c.run(ctx, func(d *decider) error {
		var err error
		top, err = control.TopAt(d.det, d.last, d.now(), req)
		return err
	})
	if err != nil {
		return nil, err
	}
	top.Live = true
	return top, nil
}

// Clean runs one cleaner pass now, on an operator's word, as the
// cleaner's schedule does (ops.CleanWith on the decider's writer, in order
// with the log lines, then every action synced), with req.VacuumPages; it
// returns once every action undid the bans it lifted, with the report
// `logjail clean` prints.
func (c *Control) Clean(ctx context.Context, req control.CleanRequest, who string) (*control.CleanReport, error) {
	var res *control.CleanReport
	err := c.do(ctx, func(d *decider) error {
		st, err := d.clean(req.VacuumPages)
		if err != nil {
			return err
		}
		res = st.Report(DBPath(d.cfg))
		res.Live = true
		return nil
	})
	return res, err
}

// Config returns the configuration in force.
func (c *Control) Config(ctx context.Context) (*rules.Config, error) {
	var cfg *rules.Config
	err := c.run(ctx, func(d *decider) error {
		cfg = d.cfg
		return nil
	})
	return cfg, err
}

// Breaker reports the circuit breaker and its last trips and resets.
func (c *Control) Breaker(ctx context.Context) (*control.BreakerStatus, error) {
	b := &control.BreakerStatus{Version: control.SchemaVersion, Live: true}
	err := c.run(ctx, func(d *decider) error {
		// A trip just decided is in the history read below.
		if err := d.sync(); err != nil {
			return err
		}
		var err error
		if b.Breaker, err = control.BreakerOf(d.det.Breaker(), d.cfg, d.db); err != nil {
			return err
		}
		b.Events, err = control.BreakerEvents(d.db)
		return err
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// ResetBreaker resets the circuit breaker on who's word
// (control.Engine.ResetBreaker): the decisions after it act again. It
// returns once the reset is in the database, so that a restart keeps it.
func (c *Control) ResetBreaker(ctx context.Context, who string) (*control.BreakerResetResult, error) {
	var res *control.BreakerResetResult
	err := c.run(ctx, func(d *decider) error {
		e, err := d.engine(false)
		if err != nil {
			return err
		}
		r, _ := e.ResetBreaker(who)
		r.Live = true
		res = r
		if !r.WasOpen {
			return nil
		}
		d.dl.Breaker(ops.BreakerEvent{Level: slog.LevelInfo, Event: "reset", Reason: "reset by an operator: rules act again",
			Source: ops.SourceOperator, Who: who, Attrs: []slog.Attr{slog.Int64("trips", r.Breaker.Trips)}})
		if m := d.o.Metrics; m != nil {
			m.BreakerOpen.Set(0)
		}
		return d.sync()
	})
	return res, err
}

// optTime is t for a status, nil when zero (never).
func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
