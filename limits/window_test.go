package limits

import (
	"math"
	"math/rand/v2"
	"slices"
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

// TestAddBucketAsPops holds a Buckets window to a plain model (a sorted
// list of buckets, those that left the window dropped one by one) over
// random charges: times that step on, jump past the window (every bucket
// out at once: the ring emptied without its pops), come late within it and
// before it; values up to past 32 bits; now and then a snapshot's round
// trip (AppendWindow, DecodeWindow) before the next. After each charge the
// sum, the buckets, oldest first, and the newest bucket (kept apart for a
// ring in the pool, newestBucket) are the model's.
func TestAddBucketAsPops(t *testing.T) {
	type bv struct{ b, v uint64 }
	rnd := rand.New(rand.NewPCG(41, 2))
	for _, nb := range []uint64{1, 2, 3, 15, 60} {
		c := &Compiled{nb: nb, layout: Buckets}
		var w Window
		rings := new(Rings)
		trips := 0
		var model []bv
		b := uint64(1000)
		resets := 0
		for n := range 30000 {
			switch r := rnd.IntN(100); {
			case r < 50:
				b += uint64(rnd.IntN(3))
			case r < 60:
				b += nb + uint64(rnd.IntN(int(2*nb)+1)) // past the window
				resets++
			}
			at := b
			if rnd.IntN(5) == 0 {
				at = b - min(b, uint64(rnd.IntN(int(2*nb)+1))) // late
			}
			v := uint64(rnd.IntN(5))
			if rnd.IntN(100) == 0 {
				v = 1 << 33
			}
			v = min(v, maxUint32)
			// The model.
			switch {
			case len(model) == 0:
				model = append(model, bv{at, v})
			case at > model[len(model)-1].b:
				k := 0
				for k < len(model) && model[k].b+nb <= at {
					k++
				}
				model = append(model[k:], bv{at, v})
			case at+nb <= model[len(model)-1].b:
			default:
				k := 0
				for k < len(model) && model[k].b < at {
					k++
				}
				if k < len(model) && model[k].b == at {
					model[k].v = min(model[k].v+v, maxUint32)
				} else {
					model = append(model[:k], append([]bv{{at, v}}, model[k:]...)...)
				}
			}
			sum := uint64(0)
			var want []uint64
			for _, x := range model {
				sum += x.v
				want = append(want, x.b<<32|x.v)
			}
			if got := w.addBucket(rings, at, v, c); got != sum {
				t.Fatalf("nb %d, charge %d (bucket %d, %d): sum %d, want %d", nb, n, at, v, got, sum)
			}
			if _, elems, _, _ := w.Dump(rings, Buckets); !slices.Equal(elems, want) {
				t.Fatalf("nb %d, charge %d: buckets %v, want %v", nb, n, elems, want)
			}
			if got := w.newestBucket(rings); got != model[len(model)-1].b {
				t.Fatalf("nb %d, charge %d: newest bucket %d, want %d (ring of %d)", nb, n, got, model[len(model)-1].b, w.cp)
			}
			if rnd.IntN(40) == 0 {
				// A snapshot's round trip: the window read back goes on.
				b := AppendWindow(nil, &w, c, rings)
				var nw Window
				nr := new(Rings)
				r := &reader{b: b}
				DecodeWindow(r, &nw, c, nr)
				if r.err != "" || len(r.b) != 0 {
					t.Fatalf("nb %d, charge %d: decode: %q, %d bytes left", nb, n, r.err, len(r.b))
				}
				w, rings = nw, nr
				trips++
			}
		}
		if resets == 0 || trips == 0 {
			t.Fatalf("no jump past the window (%d) or no round trip (%d)", resets, trips)
		}
	}
}
