package detector

import (
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/logjail/logjail/rules"
)

// memKeys returns n distinct keys of one kind, and their addresses: single
// IPv6 addresses ("ip", as under ipv6_prefix: 128), or /64 prefixes ("p64",
// the default ipv6_prefix, which also track the addresses seen), all in
// 2001:db8::/32.
func memKeys(n int, kind string) ([]string, []netip.Addr) {
	keys := make([]string, n)
	addrs := make([]netip.Addr, n)
	for i := range n {
		a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i), 15: 1})
		addrs[i] = a
		if kind == "p64" {
			keys[i] = netip.PrefixFrom(a, 64).Masked().String()
		} else {
			keys[i] = a.String()
		}
	}
	return keys, addrs
}

// chargeDistinct charges each key twice, 10 s apart, at 1000 keys a
// second of log time, under every rule of rs.
func chargeDistinct(d *Detector, rs []*rules.Rule, keys []string, addrs []netip.Addr) {
	var out []Decision
	charge := func(i int, t time.Time) {
		c := rules.Charge{Key: keys[i], Addr: addrs[i], CPU: 0.01, Duration: 0.01}
		for _, r := range rs {
			c.Rule = r
			out = d.Charge(t, &c, out[:0])
		}
	}
	secs := (len(keys) + 999) / 1000
	for sec := range secs + 10 {
		t := at(float64(sec))
		for _, from := range []int{sec - 10, sec} { // seen again, then new
			if from < 0 || from >= secs {
				continue
			}
			for i := from * 1000; i < min(len(keys), (from+1)*1000); i++ {
				charge(i, t)
			}
		}
	}
}

// memConfig is benchRules as a configuration, for a checkpoint's Restore.
const memConfig = `
sources:
  - {name: web, paths: [/var/log/nginx/access.log], format: combined, cpu_fallback: duration}
rules:
  - name: flood
    limits: ["20 per second", "300 per minute"]
    throttle: {initial_delay: 10s, max_delay: 60s, quiet: 3s}
    ban: {after: 4, for: 3m, factor: 2, max: 24h, remember: 30d}
  - name: heavy
    limits: ["25% cpu over 15s"]
    ban: {for: 15s}
  - name: scanners
    limits: ["30 per 10s"]
    ban: {for: 1h}
`

// TestMemoryEstimate: what Memory says a detector holds is within a tenth
// of the heap it holds (runtime.MemStats after a GC), for keys that are
// addresses and keys that are prefixes (with their addresses seen), after
// some were evicted, and after a checkpoint's restore.
func TestMemoryEstimate(t *testing.T) {
	const n = 50_000
	cfg := parseConfig(t, memConfig)
	rs := cfg.Rules
	for _, kind := range []string{"ip", "p64"} {
		t.Run(kind, func(t *testing.T) {
			keys, addrs := memKeys(n, kind)
			check := func(what string, build func() *Detector) {
				t.Helper()
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				d := build()
				runtime.GC()
				runtime.ReadMemStats(&after)
				heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
				m := d.Memory()
				if m.States != d.Stats().Keys || m.Keys == 0 {
					t.Errorf("%s: memory %+v, stats %+v", what, m, d.Stats())
				}
				t.Logf("%s: estimate %d, heap %d", what, m.Bytes, heap)
				if r := float64(m.Bytes) / float64(heap); r < 0.9 || r > 1.1 {
					t.Errorf("%s: estimate %d bytes (%d a state), heap %d: ratio %.2f, want 0.9 to 1.1", what, m.Bytes, m.PerState(), heap, r)
				}
				runtime.KeepAlive(d)
			}
			check("charged", func() *Detector {
				d := New(Options{MaxKeys: 3 * n})
				chargeDistinct(d, rs, keys, addrs)
				return d
			})
			check("evicting", func() *Detector {
				d := New(Options{MaxKeys: n})
				chargeDistinct(d, rs, keys, addrs)
				return d
			})
			d := New(Options{MaxKeys: 3 * n})
			chargeDistinct(d, rs, keys, addrs)
			var states []*KeyState
			d.Changes(func(ks *KeyState) {
				c := *ks
				c.Data = slices.Clone(ks.Data)
				states = append(states, &c)
			})
			global := d.SaveGlobal()
			check("restored", func() *Detector {
				r := New(Options{MaxKeys: 3 * n})
				if _, err := r.Restore(cfg, global, slices.Values(states)); err != nil {
					t.Fatal(err)
				}
				return r
			})
			runtime.KeepAlive(d) // not collected while the restored one is measured
			runtime.KeepAlive(states)
		})
	}
}

// BenchmarkMemory charges N distinct keys under three rules (benchRules:
// two rate limits with a throttle ladder, a CPU share, a rate), each key
// twice, 10 s apart, at 1000 new keys a second of log time (chargeDistinct),
// and reports the
// heap each key holds (B/key: runtime.MemStats.HeapAlloc after a GC, over
// N; a key is three (rule, key) states and its share of the key index).
// One iteration is one whole run; run it with -benchtime 1x.
func BenchmarkMemory(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		for _, kind := range []string{"ip", "p64"} {
			b.Run(fmt.Sprintf("keys=%s/%s", count(n), kind), func(b *testing.B) {
				rs := benchRules()
				keys, addrs := memKeys(n, kind)
				var perKey float64
				var tracked int
				var est int64
				b.ReportAllocs()
				for b.Loop() {
					runtime.GC()
					var before, after runtime.MemStats
					runtime.ReadMemStats(&before)
					d := New(Options{Skew: 5 * time.Second, MaxKeys: 3 * n})
					chargeDistinct(d, rs, keys, addrs)
					runtime.GC()
					runtime.ReadMemStats(&after)
					tracked = d.Stats().Keys
					est = d.Memory().Bytes
					perKey = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
					runtime.KeepAlive(d)
				}
				b.ReportMetric(perKey, "B/key")
				b.ReportMetric(float64(est)/float64(n), "est-B/key")
				b.ReportMetric(float64(tracked), "states")
			})
		}
	}
}
