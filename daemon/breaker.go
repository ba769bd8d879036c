package daemon

import (
	"log/slog"
	"time"

	"github.com/logjail/logjail/control"
	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/ops"
	"github.com/logjail/logjail/rules"
)

// The circuit breaker, as the daemon shows it (DESIGN.md, "Lists, ranges
// and safety"): a trip is logged at ERROR (the decision log's msg
// "breaker", kind breaker-trip), counted, shown in the gauge and
// recorded in the history; it stays open until an operator resets it
// (Control.ResetBreaker, `logjail breaker reset`), across a reload and a
// restart, which say so.

// tripped is the detector's BreakerTripped: it runs in the decider, in
// the middle of a batch, before the ban that tripped the breaker is
// recorded.
func (d *decider) tripped(b detector.BreakerState) {
	logOnly := control.BreakerRules(d.cfg)
	trip := control.TripDecision(b, d.cfg)
	d.dl.Breaker(ops.BreakerEvent{Level: slog.LevelError, Event: "trip", Rule: b.Rule, Key: b.Key, Reason: trip.Reason, Source: d.src,
		Note: breakerNote, Attrs: []slog.Attr{slog.Int("bans", b.Bans), slog.String("window", b.Window.String()),
			slog.Int("max_bans_per_minute", b.Limit), slog.Any("log_only_rules", logOnly),
			slog.String("log_time", b.Tripped.Format(time.RFC3339)), slog.Int64("trips", b.Trips)}})
	if m := d.o.Metrics; m != nil {
		m.BreakerTrips.Inc()
		m.BreakerOpen.Set(1)
	}
	d.w.Decisions([]detector.Decision{trip})
}

// breakerNote is what a breaker line tells the operator to do.
const breakerNote = "rules are log-only until an operator runs `logjail breaker reset`"

// breakerAtStart says, at ERROR, that a breaker restored open is still
// open: a restart does not reset it.
func breakerAtStart(det *detector.Detector, cfg *rules.Config, dl *ops.DecisionLog, m *ops.Metrics) {
	b := det.Breaker()
	if m != nil && b.Open {
		m.BreakerOpen.Set(1)
	}
	if !b.Open {
		return
	}
	dl.Breaker(ops.BreakerEvent{Level: slog.LevelError, Event: "open", Rule: b.Rule, Key: b.Key,
		Reason: "open when the daemon stopped: a restart does not reset it", Source: "checkpoint", Note: breakerNote,
		Attrs: []slog.Attr{slog.String("tripped", b.Tripped.Format(time.RFC3339)), slog.Int("bans", b.Bans),
			slog.String("window", b.Window.String()), slog.Int("max_bans_per_minute", b.Limit),
			slog.Any("log_only_rules", control.BreakerRules(cfg)), slog.Int64("trips", b.Trips)}})
}

// breakerAtReload gives the detector the reloaded max_bans_per_minute and
// says, at WARN, that an open breaker stays open whatever the new limit.
func (d *decider) breakerAtReload(cfg *rules.Config) {
	old := d.det.Breaker().MaxBansPerMinute
	d.det.SetMaxBansPerMinute(cfg.MaxBansPerMinute)
	b := d.det.Breaker()
	if !b.Open {
		return
	}
	d.log.Warn("reload: the circuit breaker stays open: rules are log-only until an operator runs `logjail breaker reset`",
		"max_bans_per_minute", b.MaxBansPerMinute, "was", old, "log_only_rules", control.BreakerRules(cfg))
}
