package limits

import (
	"testing"
	"time"
)

func TestRateGrammar(t *testing.T) {
	grammar(t, Rate{},
		map[string]Limit{
			"20 per second": {Kind: Rate{}, N: 20, Window: time.Second},
			"5 per 10s":     {Kind: Rate{}, N: 5, Window: 10 * time.Second},
			"50 per 2d":     {Kind: Rate{}, N: 50, Window: 48 * time.Hour},
			"9 per month":   {Kind: Rate{}, N: 9, Window: 30 * 24 * time.Hour},
		},
		map[string]string{
			"20 per fortnight": "unknown period",
			"x per second":     `count "x": not a number`,
			"5 per 500ms":      "window 500ms is shorter than 1s",
		},
		[]string{"10/s", "last 3 within 1s", "7% cpu over 15s", "20"})
}

// TestRateCharge: over when the count in (t−P, t] is above N; the count
// falls as the buckets leave the window.
func TestRateCharge(t *testing.T) {
	m := newMeter(t, Rate{}, "3 per 10s")
	for i, want := range []bool{false, false, false, true} {
		if v, over := m.charge(100+float64(i), Cost{}); over != want || v != float64(i+1) {
			t.Errorf("request %d: %v, over %v; want %d, %v", i+1, v, over, i+1, want)
		}
	}
	if got, want := m.explain(4), "rate 4 per 10s > 3"; got != want {
		t.Errorf("reason %q, want %q", got, want)
	}
	q := m.c.Kind.Query(&m.w, &m.rings, &m.c, 105e9)
	if q.Count != 4 || !q.Over || q.Sleep != 5*time.Second {
		t.Errorf("query at 105s: %+v; want 4 requests, over, 5s until within", q)
	}
	if v, ratio := m.c.Kind.Now(&m.w, &m.rings, &m.c, 111e9); v != 2 || ratio != 2.0/3 {
		t.Errorf("now at 111s: %v, ratio %v; want 2, 2/3", v, ratio)
	}
	m.roundTrip(t, 105)
}
