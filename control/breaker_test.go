package control

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/state"
	"github.com/logjail/logjail/store"
)

// TestEngineResetBreaker trips a detector's breaker, resets it through the
// Engine and reads the breaker back from a real database the decisions
// were checkpointed into, as the daemon and the offline command do.
func TestEngineResetBreaker(t *testing.T) {
	cfg := testCfg(t)
	flood := cfg.Rule("flood")
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	var trips []detector.BreakerState
	det := detector.New(detector.Options{MaxBansPerMinute: 1, BreakerTripped: func(b detector.BreakerState) { trips = append(trips, b) }})
	rec := &recorder{bans: map[state.BanKey]state.Ban{}}
	var out []detector.Decision
	for _, key := range []string{"203.0.113.1", "203.0.113.2"} {
		for range 6 {
			out = det.Charge(now, &rules.Charge{Rule: flood, Key: key}, out)
		}
	}
	if len(trips) != 1 {
		t.Fatalf("trips = %+v, want one", trips)
	}
	rec.Decisions([]detector.Decision{TripDecision(trips[0], cfg)})
	rec.Decisions(out)
	if got := BreakerRules(cfg); !slices.Equal(got, []string{"flood", "range:office", "good_bots"}) {
		t.Errorf("BreakerRules = %v", got)
	}
	b, err := BreakerOf(det.Breaker(), cfg, nil)
	if err != nil || !b.Open || b.Bans != 2 || b.Limit != 1 || b.TripKey != "203.0.113.2" || len(b.LogOnlyRules) != 3 || b.Tripped == nil || !b.Tripped.Equal(now) {
		t.Errorf("BreakerOf = %+v, %v", b, err)
	}

	e := &Engine{Cfg: cfg, Det: det, W: rec, Now: now.Add(time.Hour)}
	res, ds := e.ResetBreaker("uid 0 (root)")
	if !res.WasOpen || res.Breaker.Open || res.Breaker.Trips != 1 || res.Breaker.Reset == nil || res.Breaker.Reset.Who != "uid 0 (root)" || len(res.Breaker.LogOnlyRules) != 0 {
		t.Errorf("ResetBreaker = %+v", res)
	}
	if len(ds) != 1 || ds[0].Kind != detector.Kind(state.KindBreakerReset) || ds[0].Who != "uid 0 (root)" || !ds[0].Time.Equal(e.Now) ||
		!strings.Contains(ds[0].Reason, "tripped at 2026-11-23T12:00:00Z by 2 bans within 1m") {
		t.Errorf("reset decisions = %+v", ds)
	}
	if res, ds := e.ResetBreaker("uid 0 (root)"); res.WasOpen || len(ds) != 0 {
		t.Errorf("a second reset: %+v, %+v; want nothing changed", res, ds)
	}

	// Into a database: the events and the last reset read back.
	db, err := store.Open(filepath.Join(t.TempDir(), "logjail.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c := &state.Checkpoint{Time: now, Global: det.SaveGlobal()}
	for _, d := range rec.ds {
		c.Events = append(c.Events, state.Event{Time: d.Time, Rule: d.Rule, Key: d.Key, Kind: string(d.Kind), Reason: d.Reason, Origin: d.Origin, Who: d.Who})
	}
	if err := db.Checkpoint(c); err != nil {
		t.Fatal(err)
	}
	es, err := BreakerEvents(db)
	if err != nil || len(es) != 2 || es[0].Kind != state.KindBreakerTrip || es[1].Kind != state.KindBreakerReset || es[1].Who != "uid 0 (root)" ||
		!strings.Contains(es[0].Reason, "2 bans within 1m > max_bans_per_minute 1 (the last: 203.0.113.2, rule flood): rules flood, range:office, good_bots are log-only") {
		t.Errorf("BreakerEvents = %+v, %v", es, err)
	}
	restored := detector.New(detector.Options{MaxBansPerMinute: 1})
	if _, err := RestoreDetector(db, cfg, restored, false); err != nil {
		t.Fatal(err)
	}
	b, err = BreakerOf(restored.Breaker(), cfg, db)
	if err != nil || b.Open || b.Trips != 1 || b.Reset == nil || b.Reset.Who != "uid 0 (root)" || !b.Reset.Time.Equal(e.Now) || b.TripKey != "203.0.113.2" {
		t.Errorf("restored BreakerOf = %+v, %v", b, err)
	}
}

// BenchmarkBreakerOf reads the breaker's last reset and events, as status
// and breaker status do, from a history of 100,000 other events: the key
// index finds them without reading the rest.
func BenchmarkBreakerOf(b *testing.B) {
	cfg := testCfg(b)
	db, err := store.Open(filepath.Join(b.TempDir(), "logjail.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	for batch := range 10 {
		c := &state.Checkpoint{Time: t0}
		for i := range 10_000 {
			n := batch*10_000 + i
			c.Events = append(c.Events, state.Event{Time: t0.Add(time.Duration(n) * time.Second), Rule: "flood",
				Key: fmt.Sprintf("198.51.100.%d", n%256), Kind: state.KindBan, Reason: "rate"})
		}
		if batch == 0 {
			c.Events = append(c.Events, state.Event{Time: t0, Key: BreakerKey, Kind: state.KindBreakerReset, Who: "uid 0 (root)"})
		}
		if err := db.Checkpoint(c); err != nil {
			b.Fatal(err)
		}
	}
	det := detector.New(detector.Options{})
	b.ReportAllocs()
	for b.Loop() {
		br, err := BreakerOf(det.Breaker(), cfg, db)
		if err != nil || br.Reset == nil {
			b.Fatal(br, err)
		}
		if es, err := BreakerEvents(db); err != nil || len(es) != 1 {
			b.Fatal(es, err)
		}
	}
}
