package detector

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/logjail/logjail/limits"
	"github.com/logjail/logjail/rules"
)

// benchRules is a realistic rule set: a rate rule with the throttle ladder,
// a CPU share rule and a 4xx rule (the configuration contract's example).
func benchRules() []*rules.Rule {
	return []*rules.Rule{
		{
			Name: "flood", Index: 0,
			Limits:   []rules.Limit{rate(20, time.Second), rate(300, time.Minute)},
			Throttle: &rules.Throttle{InitialDelay: 10 * time.Second, MaxDelay: 60 * time.Second, Quiet: 3 * time.Second},
			Ban:      rules.Ban{After: 4, For: 3 * time.Minute, Factor: 2, Max: 24 * time.Hour, Remember: 30 * 24 * time.Hour},
		},
		{
			Name: "heavy", Index: 1,
			Limits: []rules.Limit{share(limits.Share{Weight: limits.CPU}, 0.25, 15*time.Second)},
			Ban:    rules.Ban{For: 15 * time.Second},
		},
		{
			Name: "scanners", Index: 2,
			Limits: []rules.Limit{rate(30, 10*time.Second)},
			Ban:    rules.Ban{For: time.Hour},
		},
	}
}

// benchLine is one generated request: its client, CPU seconds and whether
// it was a 4xx (charged to the scanners rule).
type benchLine struct {
	key int32
	cpu float32
	bad bool
}

// benchLog makes n lines over the given number of clients, uniformly.
func benchLog(clients, n int) (keys []string, addrs []netip.Addr, lines []benchLine) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := range clients {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		addrs = append(addrs, a)
		keys = append(keys, a.String())
	}
	lines = make([]benchLine, n)
	for i := range lines {
		lines[i] = benchLine{key: int32(rnd.IntN(clients)), cpu: float32(rnd.ExpFloat64() * 0.02), bad: rnd.IntN(20) == 0}
	}
	return keys, addrs, lines
}

// BenchmarkCharge charges one log line per iteration (two or three charges)
// at 1000 lines per second of log time, uniformly over the clients, after
// every client was seen once. ns/entry is per line; B/key is the heap per
// tracked (rule, key) state.
func BenchmarkCharge(b *testing.B) {
	for _, clients := range []int{1_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("keys=%s", count(clients)), func(b *testing.B) {
			rs := benchRules()
			keys, addrs, lines := benchLog(clients, 1<<20)
			var out []Decision
			now := at(0)
			step := time.Millisecond
			charge := func(d *Detector, l benchLine) {
				now = now.Add(step)
				c := rules.Charge{Rule: rs[0], Key: keys[l.key], Addr: addrs[l.key], CPU: float64(l.cpu), Duration: float64(l.cpu)}
				out = d.Charge(now, &c, out[:0])
				c.Rule = rs[1]
				out = d.Charge(now, &c, out[:0])
				if l.bad {
					c.Rule = rs[2]
					out = d.Charge(now, &c, out[:0])
				}
			}

			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			d := New(Options{Skew: 5 * time.Second, MaxKeys: 4 * clients})
			for i := range clients {
				charge(d, benchLine{key: int32(i), cpu: 0.01, bad: i%20 == 0})
			}
			for _, l := range lines[:min(len(lines), 4*clients)] {
				charge(d, l)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			tracked := d.Stats().Keys
			perKey := float64(after.HeapAlloc-before.HeapAlloc) / float64(tracked)

			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				charge(d, lines[i])
				i++
				if i == len(lines) {
					i = 0
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/entry")
			b.ReportMetric(perKey, "B/key")
			b.ReportMetric(float64(tracked), "keys")
			runtime.KeepAlive(d)
		})
	}
}

func count(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1_000 && n%1_000 == 0:
		return fmt.Sprintf("%dk", n/1_000)
	}
	return fmt.Sprint(n)
}
