package endpoint

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/logjail/logjail/actions"
	"github.com/logjail/logjail/state"
)

// BenchmarkCollectBans: what the daemon's active bans cost every
// collection (issue 23: the collector marks what holds pointers). A
// whole collection (runtime.GC) of a process holding an actions.Manager
// that drives this endpoint's view, as the daemon's does, with 0 or
// 100,000 active bans loaded as the daemon loads them from the store
// (single-address keys of 2001:db8::/32, each string its own, as the
// database's rows give them; scripts/bench-endpoint.sh's bans). The
// difference between the two is the bans' share of every cycle's mark
// work; live-MB is the heap the collection leaves.
func BenchmarkCollectBans(b *testing.B) {
	for _, n := range []int{0, 100_000} {
		b.Run(fmt.Sprintf("bans=%d", n), func(b *testing.B) {
			view := NewBans("endpoint")
			m := actions.NewManager([]actions.Configured{{Backend: view, Type: "endpoint", Kinds: []actions.Kind{actions.KindBan, actions.KindThrottle}}},
				actions.ManagerOptions{})
			until := time.Now().Add(2 * time.Hour)
			bans := make([]state.Ban, n)
			for i := range bans {
				a := netip.MustParseAddr(fmt.Sprintf("2001:db8:%x:%x::1", i>>16, i&0xffff))
				bans[i] = state.Ban{Rule: strings.Clone("flood"), Key: a.String(), Kind: string(actions.KindBan), Until: until,
					Reason: strings.Clone("flood: 4 > 3 per 10s"), Origin: state.OriginDetector}
			}
			m.Load(bans, nil)
			bans = nil
			m.Start(context.Background())
			defer m.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := m.Wait(ctx); err != nil {
				b.Fatal(err)
			}
			if view.Len() != n {
				b.Fatalf("view holds %d prefixes, want %d", view.Len(), n)
			}
			runtime.GC()
			b.ReportAllocs()
			for b.Loop() {
				runtime.GC()
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "live-MB")
			runtime.KeepAlive(m)
		})
	}
}
