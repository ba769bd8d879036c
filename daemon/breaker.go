package daemon

import (
	"log/slog"

	"github.com/logjail/logjail/control"
	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/ops"
	"github.com/logjail/logjail/rules"
)

// The circuit breaker, as the daemon shows it (DESIGN.md, "Lists, ranges
// and safety"): a trip is logged at ERROR, counted, shown in the gauge and
// recorded in the history; it stays open until an operator resets it
// (Control.ResetBreaker, `logjail breaker reset`), across a reload and a
// restart, which say so.

// tripped is the detector's BreakerTripped: it runs in the decider, in
// the middle of a batch, before the ban that tripped the breaker is
// recorded.
func (d *decider) tripped(b detector.BreakerState) {
	logOnly := control.BreakerRules(d.cfg)
	d.log.Error("circuit breaker tripped: rules are log-only until an operator runs `logjail breaker reset`",
		"bans", b.Bans, "window", b.Window.String(), "max_bans_per_minute", b.Limit, "log_only_rules", logOnly,
		"rule", b.Rule, "key", b.Key, "log_time", b.Tripped, "trips", b.Trips)
	if m := d.o.Metrics; m != nil {
		m.BreakerTrips.Inc()
		m.BreakerOpen.Set(1)
	}
	d.w.Decisions([]detector.Decision{control.TripDecision(b, d.cfg)})
}

// breakerAtStart says, at ERROR, that a breaker restored open is still
// open: a restart does not reset it.
func breakerAtStart(det *detector.Detector, cfg *rules.Config, log *slog.Logger, m *ops.Metrics) {
	b := det.Breaker()
	if m != nil && b.Open {
		m.BreakerOpen.Set(1)
	}
	if !b.Open {
		return
	}
	log.Error("circuit breaker open (restored): rules are log-only until an operator runs `logjail breaker reset`",
		"tripped", b.Tripped, "bans", b.Bans, "window", b.Window.String(), "max_bans_per_minute", b.Limit,
		"log_only_rules", control.BreakerRules(cfg), "trips", b.Trips)
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
