package control

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/state"
)

// breakerEvents is how many of the breaker's events a BreakerStatus lists.
const breakerEvents = 20

// BreakerKey is the key of the breaker's history events (kinds
// breaker-trip and breaker-reset, no rule): no rule makes such a key, and
// the history's key index finds them without reading the whole history.
const BreakerKey = "breaker"

// BreakerOf is the API's view of the breaker b under cfg, with its last
// reset read from db's history (nil: none read).
func BreakerOf(b detector.BreakerState, cfg *rules.Config, db state.BanReader) (Breaker, error) {
	v := Breaker{Open: b.Open, Trips: b.Trips, MaxBansPerMinute: b.MaxBansPerMinute, LogOnlyRules: []string{}}
	if !b.Tripped.IsZero() {
		t := b.Tripped
		v.Tripped = &t
		v.Bans, v.WindowSeconds, v.Limit, v.TripRule, v.TripKey = b.Bans, b.Window.Seconds(), b.Limit, b.Rule, b.Key
	}
	if b.Open {
		v.LogOnlyRules = BreakerRules(cfg)
	}
	if db != nil {
		es, err := db.History(state.HistoryQuery{Key: BreakerKey, Kind: state.KindBreakerReset, Limit: 1})
		if err != nil {
			return v, err
		}
		if len(es) == 1 {
			v.Reset = &BreakerReset{Time: es[0].Time, Who: es[0].Who}
		}
	}
	return v, nil
}

// BreakerRules are the rules an open breaker holds to log-only: those
// that are not log_only themselves.
func BreakerRules(cfg *rules.Config) []string {
	out := []string{}
	for _, r := range cfg.Rules {
		if !r.LogOnly {
			out = append(out, r.Name)
		}
	}
	return out
}

// BreakerEvents reads the breaker's last trips and resets from db, oldest
// first.
func BreakerEvents(db state.BanReader) ([]Event, error) {
	var es []state.Event
	for _, kind := range []string{state.KindBreakerTrip, state.KindBreakerReset} {
		ks, err := db.History(state.HistoryQuery{Key: BreakerKey, Kind: kind, Limit: breakerEvents})
		if err != nil {
			return nil, err
		}
		es = append(es, ks...)
	}
	// Each kind newest first: oldest first, trips and resets merged.
	slices.Reverse(es)
	slices.SortStableFunc(es, func(a, b state.Event) int { return a.Time.Compare(b.Time) })
	es = es[max(0, len(es)-breakerEvents):]
	out := make([]Event, 0, len(es))
	for i := range es {
		out = append(out, eventOf(&es[i]))
	}
	return out, nil
}

// TripDecision is the history's record of a trip: a decision of kind
// breaker-trip that goes to the history only (the actions have nothing to
// do with it). Its time is the log time of the ban that tripped it.
func TripDecision(b detector.BreakerState, cfg *rules.Config) detector.Decision {
	return detector.Decision{
		Key:    BreakerKey,
		Kind:   detector.Kind(state.KindBreakerTrip),
		Time:   b.Tripped,
		Reason: TripReason(b, BreakerRules(cfg)),
		Origin: state.OriginDetector,
	}
}

// TripReason says what tripped the breaker and what it did, for the
// history and the log.
func TripReason(b detector.BreakerState, logOnly []string) string {
	return fmt.Sprintf("%d bans within %s > max_bans_per_minute %d (the last: %s, rule %s): rules %s are log-only until an operator resets the breaker",
		b.Bans, fmtWindow(b.Window), b.Limit, b.Key, b.Rule, strings.Join(logOnly, ", "))
}

func fmtWindow(d time.Duration) string {
	if d%time.Minute == 0 {
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}

// ResetBreaker closes the circuit breaker on who's word and records it:
// an event of kind breaker-reset, with who, when it was open. A closed
// breaker is left alone and nothing is recorded (WasOpen false).
func (e *Engine) ResetBreaker(who string) (*BreakerResetResult, []detector.Decision) {
	res := &BreakerResetResult{Version: SchemaVersion}
	var ds []detector.Decision
	before := e.Det.Breaker()
	if e.Det.ResetBreaker() {
		res.WasOpen = true
		reason := fmt.Sprintf("reset by an operator after %d trips: rules act again", before.Trips)
		if !before.Tripped.IsZero() {
			reason = fmt.Sprintf("reset by an operator (tripped at %s by %d bans within %s): rules act again",
				before.Tripped.Format(time.RFC3339), before.Bans, fmtWindow(before.Window))
		}
		ds = []detector.Decision{{Key: BreakerKey, Kind: detector.Kind(state.KindBreakerReset), Time: e.Now, Reason: reason,
			Origin: state.OriginOperator, Who: who}}
		e.W.Decisions(ds)
	}
	res.Breaker, _ = BreakerOf(e.Det.Breaker(), e.Cfg, nil)
	if res.WasOpen {
		res.Breaker.Reset = &BreakerReset{Time: e.Now, Who: who}
	}
	return res, ds
}

// eventOf is the API's view of a history event.
func eventOf(e *state.Event) Event {
	ev := Event{Time: e.Time, Rule: e.Rule, Key: e.Key, Kind: e.Kind, Reason: e.Reason, Violations: e.Violations,
		Addresses: addrStrings(e.Addresses), Origin: e.Origin, Who: e.Who, LogOnly: e.LogOnly, Node: e.Node}
	if !e.Until.IsZero() {
		u := e.Until
		ev.Until = &u
	}
	return ev
}
