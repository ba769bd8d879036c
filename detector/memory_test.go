package detector

import (
	"fmt"
	"net/netip"
	"runtime"
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

// BenchmarkMemory charges N distinct keys under three rules (benchRules:
// two rate limits with a throttle ladder, a CPU share, a rate), each key
// twice, 10 s apart, at 1000 keys a second of log time, and reports the
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
				b.ReportAllocs()
				for b.Loop() {
					runtime.GC()
					var before, after runtime.MemStats
					runtime.ReadMemStats(&before)
					d := New(Options{Skew: 5 * time.Second, MaxKeys: 3 * n})
					var out []Decision
					for pass := range 2 {
						for i := range n {
							t := at(float64(i)/1000 + float64(pass*10))
							c := rules.Charge{Key: keys[i], Addr: addrs[i], CPU: 0.01, Duration: 0.01}
							for _, r := range rs {
								c.Rule = r
								out = d.Charge(t, &c, out[:0])
							}
						}
					}
					runtime.GC()
					runtime.ReadMemStats(&after)
					tracked = d.Stats().Keys
					perKey = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
					runtime.KeepAlive(d)
				}
				b.ReportMetric(perKey, "B/key")
				b.ReportMetric(float64(tracked), "states")
			})
		}
	}
}
