package detector

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/logjail/logjail/limits"
	"github.com/logjail/logjail/rules"
)

// fleetCell is one bucket of one limit of a (rule, key).
type fleetCell struct {
	rule, key string
	limit     int
	bucket    uint64
}

// fleetSum stands in for Redis in these tests: it keeps each bucket's
// total over the nodes and each node's own part, and hands each node the
// other nodes' units it has not absorbed yet, as package fleet does with
// Redis (the daemon and fleet tests exercise that for real). Bans are
// delivered to the other nodes at once (Redis carries them in
// milliseconds, well within a sync interval).
type fleetSum struct {
	nodes []*fleetNode
	total map[fleetCell]uint64
}

// fleetNode is one node: its detector, the decisions it made itself, the
// ones it adopted, and what it contributed and absorbed per cell.
type fleetNode struct {
	d       *Detector
	rules   map[string]*rules.Rule
	own     map[fleetCell]uint64
	taken   map[fleetCell]uint64
	decided []Decision
	adopted []Decision
}

func newFleet(n int, rs []*rules.Rule, o Options) *fleetSum {
	f := &fleetSum{total: map[fleetCell]uint64{}}
	for range n {
		nd := &fleetNode{d: New(o), rules: map[string]*rules.Rule{}, own: map[fleetCell]uint64{}, taken: map[fleetCell]uint64{}}
		nd.d.Rules(rs)
		for _, r := range rs {
			nd.rules[r.Name] = r
		}
		f.nodes = append(f.nodes, nd)
	}
	return f
}

// decided records node k's decisions and hands its bans and throttles to
// the others.
func (f *fleetSum) decided(k int, out []Decision) {
	for _, dec := range out {
		f.nodes[k].decided = append(f.nodes[k].decided, dec)
		if dec.Kind == Unban {
			continue // an expiry: every node expires its own
		}
		for m, nd := range f.nodes {
			if m == k {
				continue
			}
			if got, ok := nd.d.Adopt(nd.rules[dec.Rule], dec); ok {
				nd.adopted = append(nd.adopted, got)
			}
		}
	}
}

// charge charges one entry on node k.
func (f *fleetSum) charge(k int, t time.Time, c rules.Charge) {
	f.decided(k, f.nodes[k].d.Charge(t, &c, nil))
}

// exchange is one sync at log time t: every node's deltas are summed, then
// each node absorbs the others' units it has not seen yet.
func (f *fleetSum) exchange(t time.Time) {
	changed := map[fleetCell]bool{}
	for _, nd := range f.nodes {
		for _, dl := range nd.d.FleetDeltas(nil) {
			c := fleetCell{dl.Rule, dl.Key, dl.Limit, dl.Bucket}
			f.total[c] += dl.Units
			nd.own[c] += dl.Units
			changed[c] = true
		}
	}
	cells := make([]fleetCell, 0, len(changed))
	for c := range changed {
		cells = append(cells, c)
	}
	slices.SortFunc(cells, func(a, b fleetCell) int {
		return cmp.Or(cmp.Compare(a.rule, b.rule), cmp.Compare(a.key, b.key), cmp.Compare(a.limit, b.limit), cmp.Compare(a.bucket, b.bucket))
	})
	for k, nd := range f.nodes {
		for _, c := range cells {
			others := f.total[c] - nd.own[c]
			if add := others - nd.taken[c]; add > 0 {
				nd.taken[c] = others
				f.decided(k, nd.d.Absorb(t, FleetAdd{Rule: c.rule, Key: c.key, Limit: c.limit, Bucket: c.bucket, Units: add}, nil))
			}
		}
	}
}

// fleetEvent is one entry of a node's log.
type fleetEvent struct {
	at   time.Time
	node int
	key  string
}

// runFleet feeds the events (in time order) to their nodes, exchanging
// every sync of log time, and each event's charges to rs on node k.
func (f *fleetSum) run(evs []fleetEvent, rs []*rules.Rule, sync time.Duration) {
	next := evs[0].at.Truncate(sync).Add(sync)
	for _, e := range evs {
		for !next.After(e.at) {
			f.exchange(next)
			next = next.Add(sync)
		}
		for _, r := range rs {
			f.charge(e.node, e.at, rules.Charge{Rule: r, Key: e.key})
		}
	}
	f.exchange(next)
}

// fleetRule is "10 per second" banning for an hour, scope fleet or node.
func fleetRule(fleet bool) *rules.Rule {
	return &rules.Rule{Name: "flood", Limits: []rules.Limit{rate(10, time.Second)}, Ban: rules.Ban{For: time.Hour}, Fleet: fleet}
}

// twoNodeFlood is an address sending 8 requests a second to each of two
// nodes for 5 s.
func twoNodeFlood() []fleetEvent {
	var evs []fleetEvent
	for k := range 40 {
		evs = append(evs,
			fleetEvent{at: at(float64(k)/8 + 0.01), node: 0, key: "203.0.113.7"},
			fleetEvent{at: at(float64(k)/8 + 0.0725), node: 1, key: "203.0.113.7"})
	}
	return evs
}

// TestFleetTwoNodes: 8 requests a second to each of two nodes under a
// fleet "10 per second" rule is banned within 1 s of log time of the line
// that crosses it (16 a second), by exactly one node, the other adopting
// its ban; under scope: node, or without Options.Fleet, neither bans.
func TestFleetTwoNodes(t *testing.T) {
	evs := twoNodeFlood()
	// The crossing: what one detector fed both logs merged decides.
	ref := New(Options{})
	var refOut []Decision
	for _, e := range evs {
		c := rules.Charge{Rule: fleetRule(true), Key: e.key}
		refOut = ref.Charge(e.at, &c, refOut)
	}
	if len(refOut) != 1 || refOut[0].Kind != Ban {
		t.Fatalf("merged log: %v, want one ban", refOut)
	}
	crossing := refOut[0].Time

	r := fleetRule(true)
	f := newFleet(2, []*rules.Rule{r}, Options{Fleet: true})
	f.run(evs, []*rules.Rule{r}, 200*time.Millisecond)
	var bans []Decision
	decider := -1
	for k, nd := range f.nodes {
		for _, dec := range nd.decided {
			if dec.Kind == Ban {
				bans = append(bans, dec)
				decider = k
			}
		}
	}
	if len(bans) != 1 {
		t.Fatalf("bans decided: %+v; want exactly one", bans)
	}
	if lag := bans[0].Time.Sub(crossing); lag < 0 || lag > time.Second {
		t.Errorf("banned at %v, %v after the crossing line at %v; want within 1s", bans[0].Time, lag, crossing)
	}
	other := f.nodes[1-decider]
	if len(other.adopted) != 1 || other.adopted[0].Kind != Ban || other.adopted[0].Until != bans[0].Until || other.adopted[0].Origin != "detector" {
		t.Errorf("node %d adopted %+v; want the ban of node %d", 1-decider, other.adopted, decider)
	}
	for k, nd := range f.nodes {
		if kind, until := nd.d.Status(r, "203.0.113.7", at(5)); kind != Ban || until != bans[0].Until {
			t.Errorf("node %d: status %q until %v; want banned until %v", k, kind, until, bans[0].Until)
		}
	}
	t.Logf("crossing line at %v, banned by node %d at %v: %s", crossing.Sub(t0), decider, bans[0].Time.Sub(t0), bans[0].Reason)

	for _, tc := range []struct {
		name  string
		fleet bool
		o     Options
	}{{"scope node", false, Options{Fleet: true}}, {"fleet off", true, Options{}}} {
		r := fleetRule(tc.fleet)
		f := newFleet(2, []*rules.Rule{r}, tc.o)
		f.run(evs, []*rules.Rule{r}, 200*time.Millisecond)
		for k, nd := range f.nodes {
			if len(nd.decided) != 0 || len(nd.adopted) != 0 {
				t.Errorf("%s: node %d decided %v, adopted %v; want nothing", tc.name, k, nd.decided, nd.adopted)
			}
		}
	}
}

// TestFleetEquivalence: keys well over or well under their limits, their
// requests split at random between 2 or 3 nodes exchanging every 200 ms:
// the (rule, key)s the fleet bans are those one detector fed the merged
// log bans, each banned once in the fleet and in force on every node.
// Keys are kept clear of the limits (at most 9 a second under "10 per
// second", 14 or more over it) so that the sync interval cannot tip one.
func TestFleetEquivalence(t *testing.T) {
	rs := []*rules.Rule{
		fleetRule(true),
		{Name: "slow", Index: 1, Limits: []rules.Limit{rate(40, 10*time.Second)}, Ban: rules.Ban{For: time.Hour}, Fleet: true},
	}
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(seed, 99))
			nodes := 2 + int(seed%2)
			var evs []fleetEvent
			for k := range 80 {
				key := fmt.Sprintf("198.51.100.%d", k)
				var rps float64
				switch k % 3 {
				case 0: // under both
					rps = 1 + rnd.Float64()*2
				case 1: // over slow only: at most 9 a second
					rps = 6 + rnd.Float64()
				case 2: // over both
					rps = 14 + rnd.Float64()*16
				}
				start := rnd.Float64() * 20
				for tm := start; tm < start+6; tm += (1 + (rnd.Float64()-0.5)*0.3) / rps {
					evs = append(evs, fleetEvent{at: at(tm), node: rnd.IntN(nodes), key: key})
				}
			}
			slices.SortStableFunc(evs, func(a, b fleetEvent) int { return a.at.Compare(b.at) })

			ref := New(Options{})
			want := map[string]bool{}
			for _, e := range evs {
				for _, r := range rs {
					c := rules.Charge{Rule: r, Key: e.key}
					for _, dec := range ref.Charge(e.at, &c, nil) {
						if dec.Kind == Ban {
							want[dec.Rule+" "+dec.Key] = true
						}
					}
				}
			}
			f := newFleet(nodes, rs, Options{Fleet: true})
			f.run(evs, rs, 200*time.Millisecond)
			got := map[string]int{}
			for _, nd := range f.nodes {
				for _, dec := range nd.decided {
					if dec.Kind == Ban {
						got[dec.Rule+" "+dec.Key]++
					}
				}
			}
			for rk := range want {
				if got[rk] != 1 {
					t.Errorf("%s: banned %d times by the fleet, want once", rk, got[rk])
				}
			}
			for rk := range got {
				if !want[rk] {
					t.Errorf("%s: banned by the fleet, not by the merged log", rk)
				}
			}
			if len(want) < 40 {
				t.Errorf("only %d bans in the merged log: the test shows little", len(want))
			}
			end := evs[len(evs)-1].at
			for rk := range want {
				var name, key string
				fmt.Sscan(rk, &name, &key)
				for k, nd := range f.nodes {
					if kind, _ := nd.d.Status(nd.rules[name], key, end); kind != Ban {
						t.Errorf("node %d: %s not banned at the end", k, rk)
					}
				}
			}
		})
	}
}

// TestAdopt: a rule's ban decided elsewhere counts for escalation as one
// of this node's; an operator's does not; an older or equal until changes
// nothing; an unban lifts; a throttle puts the key in the throttled phase.
func TestAdopt(t *testing.T) {
	r := &rules.Rule{Name: "esc", Limits: []rules.Limit{rate(10, time.Second)}, Ban: rules.Ban{For: time.Minute, Factor: 2, Max: time.Hour}, Fleet: true}
	d := New(Options{Fleet: true})
	const key = "203.0.113.9"
	remote := Decision{Rule: "esc", Key: key, Kind: Ban, Time: at(0), Until: at(60), Reason: "rate 16 per 1s > 10 (rule esc, fleet)", Origin: "detector"}
	got, ok := d.Adopt(r, remote)
	if !ok || got.Kind != Ban || got.Until != at(60) || got.Origin != "detector" || got.Reason != remote.Reason {
		t.Fatalf("Adopt: %+v, %v; want the ban as given", got, ok)
	}
	if kind, until := d.Status(r, key, at(1)); kind != Ban || until != at(60) {
		t.Errorf("status %q until %v, want ban until 60s", kind, until)
	}
	for _, until := range []float64{30, 60} {
		older := remote
		older.Until = at(until)
		if _, ok := d.Adopt(r, older); ok {
			t.Errorf("a ban until %vs adopted over one until 60s", until)
		}
	}
	// Not charged while banned.
	c := rules.Charge{Rule: r, Key: key}
	if out := d.Charge(at(2), &c, nil); len(out) != 0 || d.Stats().Blocked != 1 {
		t.Errorf("charge while banned: %v, %+v", out, d.Stats())
	}
	if out := d.Advance(at(61), nil); len(out) != 1 || out[0].Kind != Unban {
		t.Fatalf("at 61s: %v, want the unban", out)
	}
	// The next ban of this node is the second: 2m.
	var out []Decision
	for i := range 11 {
		out = d.Charge(at(100+float64(i)*0.05), &c, out)
	}
	if len(out) != 1 || out[0].Kind != Ban || out[0].Until.Sub(out[0].Time) != 2*time.Minute {
		t.Fatalf("local ban after an adopted one: %+v; want a ban of 2m", out)
	}
	// An unban from elsewhere lifts it, once.
	lift := Decision{Rule: "esc", Key: key, Kind: Unban, Time: at(110), Reason: "lifted", Origin: "operator", Who: "alice"}
	if got, ok := d.Adopt(r, lift); !ok || got.Kind != Unban || got.Origin != "operator" || got.Who != "alice" {
		t.Errorf("unban: %+v, %v", got, ok)
	}
	if kind, _ := d.Status(r, key, at(111)); kind != "" {
		t.Errorf("after the unban: %q", kind)
	}
	if _, ok := d.Adopt(r, lift); ok {
		t.Error("a second unban changed something")
	}

	// An operator's ban from elsewhere is no escalation.
	const key2 = "203.0.113.10"
	op := Decision{Rule: "esc", Key: key2, Kind: Ban, Time: at(0), Until: at(30), Reason: "operator", Origin: "operator", Who: "bob"}
	if _, ok := d.Adopt(r, op); !ok {
		t.Fatal("operator's ban not adopted")
	}
	d.Advance(at(200), nil)
	c.Key = key2
	out = out[:0]
	for i := range 11 {
		out = d.Charge(at(200+float64(i)*0.05), &c, out)
	}
	if len(out) != 1 || out[0].Until.Sub(out[0].Time) != time.Minute {
		t.Errorf("ban after an operator's: %+v; want a first ban of 1m", out)
	}

	// A throttle from elsewhere: a request here before its until is a
	// violation.
	th := &rules.Rule{Name: "th", Limits: []rules.Limit{rate(10, time.Second)},
		Throttle: &rules.Throttle{InitialDelay: 10 * time.Second, MaxDelay: time.Minute, Quiet: 3 * time.Second},
		Ban:      rules.Ban{After: 3, For: time.Minute}, Fleet: true}
	tdec := Decision{Rule: "th", Key: key, Kind: Throttle, Time: at(300), Until: at(310), Delay: 10 * time.Second, Origin: "detector", Reason: "rate 11 per 1s > 10 (rule th, fleet)"}
	if got, ok := d.Adopt(th, tdec); !ok || got.Kind != Throttle || got.Delay != 10*time.Second {
		t.Fatalf("throttle: %+v, %v", got, ok)
	}
	if _, ok := d.Adopt(th, tdec); ok {
		t.Error("the same throttle adopted twice")
	}
	d.Advance(at(300), nil) // key2's ban ends
	c = rules.Charge{Rule: th, Key: key}
	out = d.Charge(at(301), &c, nil)
	if len(out) != 1 || out[0].Kind != Throttle || out[0].Delay != 20*time.Second || out[0].Violations != 1 {
		t.Errorf("a request during the adopted throttle: %+v; want a violation, delay 20s", out)
	}
}

// TestAdoptNodeScope: a scope: node rule's ban decided elsewhere is
// enforced here but is no earlier ban of this node's: the next ban here
// is a first one.
func TestAdoptNodeScope(t *testing.T) {
	r := &rules.Rule{Name: "esc", Limits: []rules.Limit{rate(10, time.Second)}, Ban: rules.Ban{For: time.Minute, Factor: 2, Max: time.Hour}}
	d := New(Options{Fleet: true})
	const key = "203.0.113.9"
	remote := Decision{Rule: "esc", Key: key, Kind: Ban, Time: at(0), Until: at(60), Reason: "rate 16 per 1s > 10 (rule esc)", Origin: "detector"}
	if _, ok := d.Adopt(r, remote); !ok {
		t.Fatal("a scope: node rule's ban not adopted")
	}
	if kind, _ := d.Status(r, key, at(1)); kind != Ban {
		t.Fatalf("status %q, want ban", kind)
	}
	d.Advance(at(61), nil)
	c := rules.Charge{Rule: r, Key: key}
	var out []Decision
	for i := range 11 {
		out = d.Charge(at(100+float64(i)*0.05), &c, out)
	}
	if len(out) != 1 || out[0].Kind != Ban || out[0].Until.Sub(out[0].Time) != time.Minute {
		t.Fatalf("local ban after an adopted scope: node one: %+v; want a first ban of 1m", out)
	}
}

// TestAbsorb: other nodes' units reach a key evicted here (made again) or
// never seen; over, it is banned with the fleet's reason; an unknown rule,
// a limit out of range or one the fleet cannot sum is ignored and counted.
func TestAbsorb(t *testing.T) {
	r := fleetRule(true)
	bucket := fleetRule(true)
	bucket.Name, bucket.Index = "mixed", 1
	bucket.Limits = append(bucket.Limits, rules.Limit{Kind: limits.Bucket{}, N: 4, Window: time.Second, Burst: 4})
	d := New(Options{Fleet: true, MaxKeys: 2})
	d.Rules([]*rules.Rule{r, bucket})
	li := limits.Compile(&r.Limits[0])
	b0, _, _ := li.Delta(at(0.5).UnixNano(), limits.Cost{})

	// a, then b and c: a is evicted, its journal entries with it.
	for _, k := range []string{"203.0.113.1", "203.0.113.2", "203.0.113.3"} {
		for i := range 3 {
			c := rules.Charge{Rule: r, Key: k}
			d.Charge(at(0.1+float64(i)*0.1), &c, nil)
		}
	}
	if d.Stats().Evictions != 1 {
		t.Fatalf("evictions %d, want 1", d.Stats().Evictions)
	}
	deltas := d.FleetDeltas(nil)
	want := []FleetDelta{
		{Rule: "flood", Key: "203.0.113.2", Bucket: b0, Units: 3, TTL: 2 * time.Second},
		{Rule: "flood", Key: "203.0.113.3", Bucket: b0, Units: 3, TTL: 2 * time.Second},
	}
	slices.SortFunc(deltas, func(a, b FleetDelta) int { return cmp.Compare(a.Key, b.Key) })
	if !slices.Equal(deltas, want) {
		t.Errorf("deltas %+v, want %+v", deltas, want)
	}
	if again := d.FleetDeltas(nil); len(again) != 0 {
		t.Errorf("a second drain: %+v", again)
	}

	// 7 units of a from elsewhere: the state is made again, not over.
	if out := d.Absorb(at(0.6), FleetAdd{Rule: "flood", Key: "203.0.113.1", Bucket: b0, Units: 7}, nil); len(out) != 0 {
		t.Errorf("absorb 7: %v", out)
	}
	if n, ok := d.Charged(r, "203.0.113.1"); !ok || n != 0 {
		t.Errorf("absorbed key: charged %d, tracked %v; want tracked, no request counted", n, ok)
	}
	if q, ok := d.Query(r, "203.0.113.1", at(0.6)); !ok || q.Limits[0].Count != 7 {
		t.Errorf("absorbed key's window: %+v", q)
	}
	if len(d.FleetDeltas(nil)) != 0 {
		t.Error("absorbed units were journaled (an echo)")
	}
	// 4 more: 11 > 10, banned by the fleet's sum.
	out := d.Absorb(at(0.7), FleetAdd{Rule: "flood", Key: "203.0.113.1", Bucket: b0, Units: 4}, nil)
	if len(out) != 1 || out[0].Kind != Ban || out[0].Reason != "rate 11 per 1s > 10 (rule flood, fleet)" || out[0].Time != at(0.7) || out[0].Origin != "detector" {
		t.Fatalf("absorb 4 more: %+v; want a ban, rate 11 per 1s > 10 (rule flood, fleet)", out)
	}
	// Banned: more units are kept, nothing is decided.
	if out := d.Absorb(at(0.8), FleetAdd{Rule: "flood", Key: "203.0.113.1", Bucket: b0, Units: 40}, nil); len(out) != 0 {
		t.Errorf("absorb into a banned key: %v", out)
	}

	before := d.Stats()
	for _, a := range []FleetAdd{
		{Rule: "nope", Key: "203.0.113.1", Bucket: b0, Units: 50},
		{Rule: "flood", Key: "203.0.113.1", Limit: 3, Bucket: b0, Units: 50},
		{Rule: "mixed", Key: "203.0.113.1", Limit: 1, Bucket: b0, Units: 50},
	} {
		if out := d.Absorb(at(0.9), a, nil); len(out) != 0 {
			t.Errorf("%+v: %v", a, out)
		}
	}
	if st := d.Stats(); st.FleetIgnored != 3 || st.Keys != before.Keys {
		t.Errorf("ignored %d (want 3), keys %d (want %d)", st.FleetIgnored, st.Keys, before.Keys)
	}
	// A fleet rule's mixed limits: only the rate is journaled.
	c := rules.Charge{Rule: bucket, Key: "203.0.113.5"}
	d.Charge(at(1), &c, nil)
	if ds := d.FleetDeltas(nil); len(ds) != 1 || ds[0].Limit != 0 {
		t.Errorf("deltas of a rule with a token bucket: %+v; want the rate's only", ds)
	}
}

// TestFleetJournalBound: a full journal coalesces in place, then drops
// and counts; a drain empties it.
func TestFleetJournalBound(t *testing.T) {
	r := fleetRule(true)
	d := New(Options{Fleet: true})
	d.journalMax = 16
	c := rules.Charge{Rule: r, Key: "203.0.113.1"}
	for i := range 100 { // one key, one bucket a second: a few entries
		d.Charge(at(float64(i)/10), &c, nil)
	}
	if st := d.Stats(); st.FleetDropped != 0 {
		t.Errorf("dropped %d of one key's charges", st.FleetDropped)
	}
	for k := range 40 {
		c.Key = fmt.Sprintf("198.51.100.%d", k)
		d.Charge(at(10), &c, nil)
	}
	st := d.Stats()
	if st.FleetDropped == 0 || len(d.journal) > d.journalMax {
		t.Errorf("40 keys into a journal of 16: dropped %d, %d entries", st.FleetDropped, len(d.journal))
	}
	ds := d.FleetDeltas(nil)
	var units uint64
	for _, dl := range ds {
		units += dl.Units
	}
	if int64(units)+st.FleetDropped != 140 {
		t.Errorf("units drained %d + dropped %d, want 140", units, st.FleetDropped)
	}
	c.Key = "198.51.100.200"
	d.Charge(at(11), &c, nil)
	if ds := d.FleetDeltas(nil); len(ds) != 1 || d.Stats().FleetDropped != st.FleetDropped {
		t.Errorf("after a drain: %+v, dropped %d", ds, d.Stats().FleetDropped)
	}
}

// BenchmarkChargeFleet is BenchmarkCharge's load (100k clients, a line
// every millisecond of log time, its two or three charges) with every
// rule a fleet rule, under Options.Fleet on and off: what the journal
// costs a charge. The drain every 200 lines (200 ms of log time, the
// default sync) is outside the timing and reported apart, per delta
// (drain-ns/delta; its Key strings are the allocations it makes).
func BenchmarkChargeFleet(b *testing.B) {
	const clients = 100_000
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("fleet=%v", on), func(b *testing.B) {
			rs := benchRules()
			for _, r := range rs {
				r.Fleet = true
			}
			keys, addrs, lines := benchLog(clients, 1<<20)
			var out []Decision
			var deltas []FleetDelta
			now := at(0)
			charge := func(d *Detector, l benchLine) {
				now = now.Add(time.Millisecond)
				c := rules.Charge{Rule: rs[0], Key: keys[l.key], Addr: addrs[l.key], CPU: float64(l.cpu), Duration: float64(l.cpu)}
				out = d.Charge(now, &c, out[:0])
				c.Rule = rs[1]
				out = d.Charge(now, &c, out[:0])
				if l.bad {
					c.Rule = rs[2]
					out = d.Charge(now, &c, out[:0])
				}
			}
			d := New(Options{Skew: 5 * time.Second, MaxKeys: 4 * clients, Fleet: on, NoPeaks: true})
			for i := range clients {
				charge(d, benchLine{key: int32(i), cpu: 0.01, bad: i%20 == 0})
			}
			for i, l := range lines[:4*clients] {
				charge(d, l)
				if i%200 == 199 {
					deltas = d.FleetDeltas(deltas[:0])
				}
			}
			var drainNs time.Duration
			var drained int
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				charge(d, lines[i])
				i++
				if i == len(lines) {
					i = 0
				}
				if i%200 == 0 {
					b.StopTimer()
					start := time.Now()
					deltas = d.FleetDeltas(deltas[:0])
					drainNs += time.Since(start)
					drained += len(deltas)
					b.StartTimer()
				}
			}
			if drained > 0 {
				b.ReportMetric(float64(drainNs.Nanoseconds())/float64(drained), "drain-ns/delta")
			}
		})
	}
}

// TestFleetThrottle: under a fleet rule with a throttle, the node that
// sees the sum over throttles, the other adopts the throttle, and the
// client's requests to either node during it are violations that end in
// a ban, adopted in turn.
func TestFleetThrottle(t *testing.T) {
	r := &rules.Rule{Name: "flood", Limits: []rules.Limit{rate(10, time.Second)}, Fleet: true,
		Throttle: &rules.Throttle{InitialDelay: 10 * time.Second, MaxDelay: time.Minute, Quiet: 3 * time.Second},
		Ban:      rules.Ban{After: 3, For: time.Hour}}
	f := newFleet(2, []*rules.Rule{r}, Options{Fleet: true})
	f.run(twoNodeFlood(), []*rules.Rule{r}, 200*time.Millisecond)
	kinds := map[Kind]int{}
	var first Decision
	for _, nd := range f.nodes {
		for _, dec := range nd.decided {
			if first.Kind == "" || dec.Time.Before(first.Time) {
				first = dec
			}
			kinds[dec.Kind]++
		}
	}
	for k, nd := range f.nodes {
		for _, dec := range nd.decided {
			t.Logf("node %d at %v: %s %s", k, dec.Time.Sub(t0), dec.Kind, dec.Reason)
		}
	}
	if first.Kind != Throttle || kinds[Ban] != 1 {
		t.Fatalf("decided %v, first %+v; want a throttle first, then one ban", kinds, first)
	}
	for k, nd := range f.nodes {
		adoptedThrottle := slices.ContainsFunc(nd.adopted, func(d Decision) bool { return d.Kind == Throttle })
		decidedThrottle := slices.ContainsFunc(nd.decided, func(d Decision) bool { return d.Kind == Throttle })
		if !adoptedThrottle && !decidedThrottle {
			t.Errorf("node %d was never throttled", k)
		}
		if kind, _ := nd.d.Status(r, "203.0.113.7", at(5)); kind != Ban {
			t.Errorf("node %d: %q at the end, want banned", k, kind)
		}
	}
}
