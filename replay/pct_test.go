package replay

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPctSelectMatchesSort: the select gives what sorting every value and
// taking the nearest rank gives, for spread, clustered, equal, tiny and
// empty sets, in both directions, in at most four walks.
func TestPctSelectMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	sets := map[string][]float64{
		"empty":      nil,
		"one":        {3.5},
		"equal":      slices.Repeat([]float64{2}, 100_000),
		"two values": append(slices.Repeat([]float64{1}, 70_000), slices.Repeat([]float64{9}, 30_000)...),
	}
	var spread, shares, counts []float64
	for range 200_000 {
		spread = append(spread, rng.ExpFloat64()*1e3)
		shares = append(shares, float64(rng.IntN(1_000_000))/1e7)
		counts = append(counts, float64(1+rng.IntN(300)))
	}
	sets["spread"], sets["shares"], sets["counts"] = spread, shares, counts
	sets["with zero and inf-free negatives"] = append([]float64{0, -1, -0.5, 1e-300}, counts[:1000]...)
	for name, vals := range sets {
		for _, desc := range []bool{false, true} {
			s := newPctSelect(desc, 50, 90, 99)
			walks := 0
			for {
				walks++
				for _, v := range vals {
					s.add(v)
				}
				if !s.next() {
					break
				}
			}
			got, top := s.values()
			sorted := slices.Clone(vals)
			slices.Sort(sorted)
			if desc {
				slices.Reverse(sorted)
			}
			for i, p := range []float64{50, 90, 99} {
				var want float64
				if len(sorted) > 0 {
					want = pct(sorted, p)
				}
				if got[i] != want {
					t.Errorf("%s desc=%v: p%v = %v, want %v", name, desc, p, got[i], want)
				}
			}
			wantTop := 0.0
			if len(sorted) > 0 {
				wantTop = sorted[len(sorted)-1]
			}
			if top != wantTop {
				t.Errorf("%s desc=%v: most severe %v, want %v", name, desc, top, wantTop)
			}
			if walks > 4 {
				t.Errorf("%s: %d walks", name, walks)
			}
		}
	}
	if orderKey(math.Inf(-1)) >= orderKey(-1) || orderKey(-1) >= orderKey(0) || orderKey(0) >= orderKey(1e-300) {
		t.Error("orderKey does not keep the order")
	}
}

// pct is the nearest-rank percentile of sorted values: what pctSelect
// must give.
func pct(sorted []float64, p float64) float64 {
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
