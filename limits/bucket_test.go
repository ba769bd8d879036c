package limits

import (
	"testing"
	"time"
)

func TestBucketGrammar(t *testing.T) {
	grammar(t, Bucket{},
		map[string]Limit{
			"10/s burst 20": {Kind: Bucket{}, N: 10, Burst: 20, Window: 2 * time.Second},
			"10/s":          {Kind: Bucket{}, N: 10, Burst: 1, Window: 100 * time.Millisecond},
			"30/m burst 20": {Kind: Bucket{}, N: 0.5, Burst: 20, Window: 40 * time.Second},
		},
		map[string]string{
			"10/week":        `unknown rate unit "week": want s, m, h or d`,
			"0/s":            "rate must be positive",
			"10/s burst 0.5": "burst must be at least 1",
			"10/s bursts 20": `want "RATE/UNIT [burst N]"`,
		},
		[]string{"20 per second", "7% cpu over 15s", "last 3 within 1s"})
}

// TestBucketCharge: a burst of 3 at 1/s lets three requests through at
// once, refuses the fourth, and refills a token a second.
func TestBucketCharge(t *testing.T) {
	m := newMeter(t, Bucket{}, "1/s burst 3")
	for i, want := range []bool{false, false, false, true} {
		if v, over := m.charge(100, Cost{}); over != want || v != float64(i+1) {
			t.Errorf("request %d: level %v, over %v; want %d, %v", i+1, v, over, i+1, want)
		}
	}
	if got, want := m.explain(4), "bucket 4 > burst 3 at 1/s"; got != want {
		t.Errorf("reason %q, want %q", got, want)
	}
	q := m.c.Kind.Query(&m.w, &m.rings, &m.c, 100e9)
	if !q.Over || q.Sleep != 2*time.Second {
		t.Errorf("query: %+v; want over, 2s until a token", q)
	}
	if _, over := m.charge(103, Cost{}); over {
		t.Error("over after 3s of refill")
	}
	m.roundTrip(t, 103)
}
