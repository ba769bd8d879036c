package detector

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"slices"
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
			fixed := make([]rules.FixedKey, len(keys))
			for i, k := range keys {
				fixed[i], _ = rules.ParseFixedKey(k)
			}
			var out []Decision
			now := at(0)
			step := time.Millisecond
			charge := func(d *Detector, l benchLine) {
				now = now.Add(step)
				// As the pipeline charges (rules.Config.ClassifyKeys): the fixed key alone.
				c := rules.Charge{Rule: rs[0], Fixed: fixed[l.key], Addr: addrs[l.key], CPU: float64(l.cpu), Duration: float64(l.cpu)}
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

// BenchmarkChargeKeys is row 1 of `make bench` (scripts/bench-table.sh) in
// the detector alone: one rule ("100000 per 1h", it never trips), IPv6
// clients keyed by address (ipv6_prefix: 128), every client seen once
// first, then charged in turn at 3,000 a second of log time; at 2,000
// keys and at 1,000,000. key=fixed charges as the pipeline does
// (rules.Config.ClassifyKeys: Charge.Fixed), key=text with the key's text
// alone (Charge.Key, parsed to the same key), key=prefetched as key=fixed
// with the hints replay's merger gives (Detector.Prefetch of the next three
// charges: slot, record, state). ns/op is one charge.
func BenchmarkChargeKeys(b *testing.B) {
	cfg := &rules.Config{IPv4Prefix: 24, IPv6Prefix: 128}
	r := &rules.Rule{Name: "rate", Limits: []rules.Limit{rate(100000, time.Hour)}, Ban: rules.Ban{For: time.Hour}}
	for _, n := range []int{2_000, 1_000_000} {
		charges := make([]rules.Charge, n)
		for i := range charges {
			a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 4: byte(i >> 24), 5: byte(i >> 16), 6: byte(i >> 8), 7: byte(i), 15: 1})
			charges[i] = rules.Charge{Rule: r, Key: cfg.IPKey(a), Fixed: cfg.IPFixed(a), Addr: a}
		}
		for _, path := range []string{"fixed", "text", "prefetched"} {
			b.Run(fmt.Sprintf("keys=%s/key=%s", count(n), path), func(b *testing.B) {
				cs := slices.Clone(charges)
				for i := range cs {
					if path == "text" {
						cs[i].Fixed = rules.FixedKey{}
					} else {
						cs[i].Key = ""
					}
				}
				d := New(Options{MaxKeys: n * 13 / 10, NoPeaks: true})
				now := at(0)
				var out []Decision
				i := 0
				charge := func() {
					now = now.Add(time.Second / 3000)
					if path == "prefetched" { // as replay's merger hints
						for a := range 3 {
							d.Prefetch(cs[(i+1+a)%len(cs)].Fixed, a)
						}
					}
					out = d.Charge(now, &cs[i], out[:0])
					if i++; i == len(cs) {
						i = 0
					}
				}
				for range n {
					charge()
				}
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					charge()
				}
				if len(out) != 0 || d.Stats().Keys != n {
					b.Fatalf("%d keys, decisions %v", d.Stats().Keys, out)
				}
			})
		}
	}
}
