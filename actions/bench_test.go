package actions

import (
	"context"
	"testing"
	"time"
)

// benchApplyRemove applies add in one Apply and then del in another, as
// often as the benchmark runs, and reports the seconds of each: apply-s
// and remove-s, the figures the README's table of backends gives.
func benchApplyRemove(b *testing.B, be Backend, add, del []Change) {
	b.Helper()
	ctx := context.Background()
	b.ReportAllocs()
	var apply, remove time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := be.Apply(ctx, add); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := be.Apply(ctx, del); err != nil {
			b.Fatal(err)
		}
		apply += t1.Sub(t0)
		remove += time.Since(t1)
	}
	b.ReportMetric(apply.Seconds()/float64(b.N), "apply-s")
	b.ReportMetric(remove.Seconds()/float64(b.N), "remove-s")
}
