package limits

import (
	"testing"
	"time"
)

func TestShareGrammar(t *testing.T) {
	grammar(t, Share{},
		map[string]Limit{
			"7% cpu over 15s":             {Kind: Share{Weight: CPU}, N: 0.07, Window: 15 * time.Second},
			"10% duration over 1m":        {Kind: Share{Weight: Duration}, N: 0.1, Window: time.Minute},
			"50% cpu over 10s of machine": {Kind: Share{Weight: CPU}, N: 2, Window: 10 * time.Second, OfMachine: true, Cores: 4},
		},
		map[string]string{
			"7% memory over 15s": `unknown share "memory": want cpu or duration`,
			"7% cpu in 15s":      `want "X% cpu over DURATION [of machine]"`,
			"7% cpu over 15s of": `want "X% cpu over DURATION [of machine]"`,
		},
		[]string{"20 per second", "10/s", "last 3 within 1s"})
}

// TestShareCharge: the seconds of the weighed cost in the window over its
// length; a cpu share weighs CPU, a duration share duration.
func TestShareCharge(t *testing.T) {
	cost := Cost{CPU: 0.5, Duration: 2}
	cpu := newMeter(t, Share{}, "10% cpu over 10s")
	dur := newMeter(t, Share{}, "10% duration over 10s")
	if v, over := cpu.charge(100, cost); over || v != 0.05 {
		t.Errorf("cpu after 0.5s: %v, over %v; want 0.05, not over", v, over)
	}
	if v, over := cpu.charge(101, cost); over || v != 0.1 {
		t.Errorf("cpu at exactly its limit: %v, over %v; want 0.1, not over", v, over)
	}
	if v, over := dur.charge(100, cost); !over || v != 0.2 {
		t.Errorf("duration after 2s: %v, over %v; want 0.2, over", v, over)
	}
	if got, want := dur.explain(0.2), "duration 20.0% over 10s > 10%"; got != want {
		t.Errorf("reason %q, want %q", got, want)
	}
	mach := newMeter(t, Share{}, "50% cpu over 10s of machine")
	if got, want := mach.explain(2.4), "cpu 60.0% over 10s of machine > 50%"; got != want {
		t.Errorf("reason %q, want %q", got, want)
	}
	if _, ratio := cpu.c.Kind.Now(&cpu.w, &cpu.rings, &cpu.c, 105e9); ratio != 1 {
		t.Errorf("ratio %v at the limit, want 1", ratio)
	}
	cpu.roundTrip(t, 105)
}
