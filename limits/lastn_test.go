package limits

import (
	"math"
	"testing"
	"time"
)

func TestLastNGrammar(t *testing.T) {
	grammar(t, LastN{},
		map[string]Limit{
			"last 10 within 2s": {Kind: LastN{}, N: 10, Window: 2 * time.Second},
		},
		map[string]string{
			"last 1 within 2s":     `count "1": want a whole number of at least 2`,
			"last 10001 within 2s": "count 10001: at most 10000 (each key keeps the times of its last N requests)",
			"last 10 in 2s":        `want "last N within DURATION"`,
			"last 10 within 0s":    "span must be positive",
		},
		[]string{"20 per second", "7% cpu over 15s", "10/s"})
}

// TestLastNCharge: over when the last N requests span less than D; a
// smaller span is worse (Lower), and no span exists before N requests.
func TestLastNCharge(t *testing.T) {
	m := newMeter(t, LastN{}, "last 3 within 2s")
	if !m.c.Lower || !math.IsInf(m.c.InitialPeak(), 1) {
		t.Fatalf("lower %v, initial peak %v; want true, +Inf", m.c.Lower, m.c.InitialPeak())
	}
	for i, want := range []struct {
		sec  float64
		v    float64
		over bool
	}{{100, math.Inf(1), false}, {100.5, math.Inf(1), false}, {101, 1, true}, {104, 3.5, false}} {
		if v, over := m.charge(want.sec, Cost{}); v != want.v || over != want.over {
			t.Errorf("request %d: span %v, over %v; want %v, %v", i+1, v, over, want.v, want.over)
		}
	}
	if got, want := m.explain(1), "last 3 within 1s < 2s"; got != want {
		t.Errorf("reason %q, want %q", got, want)
	}
	if v, ratio := m.c.Kind.Now(&m.w, &m.rings, &m.c, 105e9); v != 4 || ratio != 0.5 {
		t.Errorf("now at 105s: span %v, ratio %v; want 4, 0.5", v, ratio)
	}
	m.roundTrip(t, 104)
}
