package limits

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestDeltaAbsorb: the units Delta says a charge adds, absorbed into an
// empty window, give the window the charges made: same buckets, same
// value, same verdict, for every kind a fleet can sum.
func TestDeltaAbsorb(t *testing.T) {
	for _, tc := range []struct {
		kind  Kind
		limit string
	}{
		{Rate{}, "10 per second"},
		{Rate{}, "50 per 10s"},
		{Rate{}, "500 per 5m"},
		{Share{}, "7% cpu over 15s"},
		{Share{}, "20% duration over 2m"},
		{Share{}, "5% cpu over 1m of machine"},
	} {
		t.Run(tc.limit, func(t *testing.T) {
			charged := newMeter(t, tc.kind, tc.limit)
			absorbed := newMeter(t, tc.kind, tc.limit)
			rnd := rand.New(rand.NewPCG(7, uint64(len(tc.limit))))
			ns := int64(1_700_000_000e9)
			for i := range 3000 {
				ns += rnd.Int64N(int64(300 * time.Millisecond))
				cost := Cost{CPU: rnd.ExpFloat64() * 0.05, Duration: rnd.ExpFloat64() * 0.2}
				v, over := charged.c.Kind.Charge(&charged.w, &charged.rings, &charged.c, ns, cost)
				b, u, ok := charged.c.Delta(ns, cost)
				if !ok {
					t.Fatal("Delta: not ok for a Buckets limit")
				}
				av, aover := absorbed.c.Absorb(&absorbed.w, &absorbed.rings, b, u, ns)
				if av != v || aover != over {
					t.Fatalf("request %d: Absorb read %v, over %v; Charge %v, over %v", i, av, aover, v, over)
				}
			}
			cp1, e1, acc1, _ := charged.w.Dump(&charged.rings, Buckets)
			cp2, e2, acc2, _ := absorbed.w.Dump(&absorbed.rings, Buckets)
			if diff := cmp.Diff([]any{cp1, e1, acc1}, []any{cp2, e2, acc2}); diff != "" {
				t.Errorf("windows differ (-charged +absorbed):\n%s", diff)
			}
		})
	}
}

// TestAbsorbSums: units of other nodes add to a bucket this node charged;
// a bucket already out of the window is not counted; the read is at ns.
func TestAbsorbSums(t *testing.T) {
	m := newMeter(t, Rate{}, "10 per 10s")
	for i := range 4 {
		m.charge(100+float64(i)*0.1, Cost{})
	}
	b, _, _ := m.c.Delta(100e9, Cost{})
	if v, over := m.c.Absorb(&m.w, &m.rings, b, 6, 100.5e9); v != 10 || over {
		t.Errorf("4 charged + 6 absorbed: %v, over %v; want 10, not over", v, over)
	}
	if v, over := m.c.Absorb(&m.w, &m.rings, b+1, 1, 101e9); v != 11 || !over {
		t.Errorf("+1 in the next bucket: %v, over %v; want 11, over", v, over)
	}
	// Read later, bucket 100 has left the window: only bucket 101 is in it.
	if v, over := m.c.Absorb(&m.w, &m.rings, b+1, 0, 110.5e9); v != 1 || over {
		t.Errorf("read at 110.5s: %v, over %v; want 1, not over", v, over)
	}
	// A bucket older than the window is ignored.
	if v, _ := m.c.Absorb(&m.w, &m.rings, b-20, 50, 110.5e9); v != 1 {
		t.Errorf("a bucket out of the window counted: %v, want 1", v)
	}
}

// TestFleetHelpersOtherLayouts: token buckets and last N have no deltas.
func TestFleetHelpersOtherLayouts(t *testing.T) {
	for _, tc := range []struct {
		kind  Kind
		limit string
	}{{Bucket{}, "10/s burst 20"}, {LastN{}, "last 5 within 2s"}} {
		m := newMeter(t, tc.kind, tc.limit)
		if _, _, ok := m.c.Delta(1e9, Cost{}); ok {
			t.Errorf("%s: Delta ok", tc.limit)
		}
		if v, over := m.c.Absorb(&m.w, &m.rings, 1, 100, 1e9); v != 0 || over || m.w.Len() != 0 {
			t.Errorf("%s: Absorb changed the window or read %v, %v", tc.limit, v, over)
		}
		if ttl := m.c.BucketTTL(); ttl != 0 {
			t.Errorf("%s: BucketTTL %v, want 0", tc.limit, ttl)
		}
	}
}

func TestBucketTTL(t *testing.T) {
	for limit, want := range map[string]time.Duration{
		"10 per second":   2 * time.Second,
		"50 per 10s":      11 * time.Second,
		"300 per hour":    time.Hour + time.Minute,
		"7% cpu over 15s": 16 * time.Second,
	} {
		kind := Kind(Rate{})
		if limit == "7% cpu over 15s" {
			kind = Share{}
		}
		m := newMeter(t, kind, limit)
		if got := m.c.BucketTTL(); got != want {
			t.Errorf("%s: BucketTTL %v, want %v", limit, got, want)
		}
	}
}
