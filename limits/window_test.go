package limits

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestBucketAsDivision checks bucket's constant division for one-second
// buckets against the plain division, for times all over the range and
// widths of a second and others.
func TestBucketAsDivision(t *testing.T) {
	rnd := rand.New(rand.NewPCG(23, 4))
	widths := []int64{secondNs, secondNs - 1, secondNs + 1, 2 * secondNs, 60 * secondNs, 86400 * secondNs / 60, 1}
	times := []int64{0, -1, 1, secondNs - 1, secondNs, secondNs + 1, math.MaxInt64, math.MinInt64, maxUint32 * secondNs, (maxUint32 + 1) * secondNs, maxUint32*secondNs - 1}
	for range 200000 {
		times = append(times, rnd.Int64(), rnd.Int64N(4e18), rnd.Int64N(1e12)*secondNs+rnd.Int64N(3)-1)
	}
	for _, w := range widths {
		for _, ns := range times {
			want := uint64(0)
			if ns > 0 {
				want = min(uint64(ns/w), maxUint32)
			}
			if got := bucket(ns, w); got != want {
				t.Fatalf("bucket(%d, %d) = %d, want %d", ns, w, got, want)
			}
		}
	}
}
