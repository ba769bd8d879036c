package checkpoint

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/pipeline"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/store"
)

// BenchmarkFlush is one whole checkpoint, as the daemon takes it: the
// detector's changed key states (Changes) and their writing into a real
// SQLite database in one transaction, for 10k, 100k and 1M changed keys, and
// for 1M tracked keys of which 1% changed. The caller's share (collecting
// the changes) is reported apart as collect-ns/key: with NewAsyncWriter the
// writing runs beside the reading of the logs.
func BenchmarkFlush(b *testing.B) {
	cfg, err := rules.Parse("b.yaml", []byte(`
sources: [{name: web, paths: [/var/log/access.log], format: combined}]
rules:
  - name: flood
    limits: ["100 per 10s", "1000 per 10m"]
`), rules.Options{})
	if err != nil {
		b.Fatal(err)
	}
	rule := cfg.Rules[0]
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}) }
	t0 := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct{ tracked, changed int }{{10_000, 10_000}, {100_000, 100_000}, {1_000_000, 1_000_000}, {1_000_000, 10_000}} {
		name := fmt.Sprintf("changed=%dk", c.changed/1000)
		if c.tracked != c.changed {
			name = fmt.Sprintf("tracked=%dk,changed=%dk", c.tracked/1000, c.changed/1000)
		}
		b.Run(name, func(b *testing.B) {
			det := pipeline.NewDetector(cfg)
			var out []detector.Decision
			now := t0
			charge := func(from, n int) {
				for i := from; i < from+n; i++ {
					now = now.Add(time.Microsecond)
					ch := rules.Charge{Rule: rule, Key: addr(i % c.tracked).String(), Addr: addr(i % c.tracked)}
					out = det.Charge(now, &ch, out[:0])
				}
			}
			charge(0, c.tracked)
			db, err := store.Open(filepath.Join(b.TempDir(), "logjail.db"), store.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			w := NewWriter(db)
			if err := w.Flush(det, now); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			next := 0
			var collect time.Duration
			for b.Loop() {
				b.StopTimer()
				charge(next, c.changed)
				next += c.changed
				b.StartTimer()
				start := time.Now()
				ck := w.collect(det, now)
				collect += time.Since(start)
				if len(ck.Keys) != c.changed {
					b.Fatalf("%d changed keys collected, want %d", len(ck.Keys), c.changed)
				}
				if err := db.Checkpoint(ck); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*c.changed), "ns/key")
			b.ReportMetric(float64(collect.Nanoseconds())/float64(b.N*c.changed), "collect-ns/key")
		})
	}
}
