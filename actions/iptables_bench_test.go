package actions

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/logjail/logjail/internal/nstest"
)

// iptBenchBans are n distinct single-address bans: IPv4 from 198.18.0.0/15
// (RFC 2544's benchmarking range), IPv6 from 2001:db8::/32.
func iptBenchBans(n int, v6 bool, until time.Time) (set, del []Change) {
	for i := range n {
		var a netip.Addr
		if v6 {
			a = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, byte(i >> 16), byte(i >> 8), byte(i)})
		} else {
			a = netip.AddrFrom4([4]byte{198, 18 + byte(i>>16&1), byte(i >> 8), byte(i)})
		}
		p := netip.PrefixFrom(a, a.BitLen())
		set = append(set, Change{Entry: Entry{Prefix: p, Kind: KindBan, Until: until}})
		del = append(del, Change{Entry: Entry{Prefix: p}, Delete: true})
	}
	return set, del
}

// BenchmarkIptablesApply10k applies 10,000 bans in one Apply and lifts
// them in another: apply-s and remove-s are the seconds each takes.
func BenchmarkIptablesApply10k(b *testing.B) {
	for _, mode := range []string{"rules", "ipset"} {
		for _, fam := range []string{"v4", "v6"} {
			b.Run(mode+"-"+fam, func(b *testing.B) {
				if !nstest.Enter(b, iptTestNeed(mode)...) {
					return
				}
				ctx := context.Background()
				be := iptTestBuild(b, map[string]any{"mode": mode})
				if err := be.Sync(ctx, nil, nil); err != nil {
					b.Fatal(err)
				}
				set, del := iptBenchBans(10000, fam == "v6", time.Now().Add(time.Hour))
				benchApplyRemove(b, be, set, del)
			})
		}
	}
}

// BenchmarkIptablesApplyOne bans one more address and lifts it while
// `held` bans are in place: what a single ban costs as the list grows.
func BenchmarkIptablesApplyOne(b *testing.B) {
	for _, mode := range []string{"rules", "ipset"} {
		for _, held := range []int{0, 1000, 10000} {
			b.Run(fmt.Sprintf("%s-held-%d", mode, held), func(b *testing.B) {
				if !nstest.Enter(b, iptTestNeed(mode)...) {
					return
				}
				ctx := context.Background()
				be := iptTestBuild(b, map[string]any{"mode": mode})
				until := time.Now().Add(time.Hour)
				set, _ := iptBenchBans(held+1, false, until)
				var entries []Entry
				for _, c := range set[:held] {
					entries = append(entries, c.Entry)
				}
				if err := be.Sync(ctx, entries, nil); err != nil {
					b.Fatal(err)
				}
				one := set[held:]
				lift := []Change{{Entry: Entry{Prefix: one[0].Prefix}, Delete: true}}
				b.ReportAllocs()
				for b.Loop() {
					if err := be.Apply(ctx, one); err != nil {
						b.Fatal(err)
					}
					if err := be.Apply(ctx, lift); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkIptablesSync10k syncs 10,000 bans into an empty chain or set,
// then again (nothing to change), as logjail's start does.
func BenchmarkIptablesSync10k(b *testing.B) {
	for _, mode := range []string{"rules", "ipset"} {
		b.Run(mode, func(b *testing.B) {
			if !nstest.Enter(b, iptTestNeed(mode)...) {
				return
			}
			ctx := context.Background()
			be := iptTestBuild(b, map[string]any{"mode": mode})
			set, _ := iptBenchBans(10000, false, time.Now().Add(time.Hour))
			var entries []Entry
			for _, c := range set {
				entries = append(entries, c.Entry)
			}
			var first, again time.Duration
			b.ReportAllocs()
			for b.Loop() {
				if err := be.Sync(ctx, nil, nil); err != nil {
					b.Fatal(err)
				}
				t0 := time.Now()
				if err := be.Sync(ctx, entries, nil); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := be.Sync(ctx, entries, nil); err != nil {
					b.Fatal(err)
				}
				first += t1.Sub(t0)
				again += time.Since(t1)
			}
			b.ReportMetric(first.Seconds()/float64(b.N), "sync-s")
			b.ReportMetric(again.Seconds()/float64(b.N), "resync-s")
		})
	}
}
