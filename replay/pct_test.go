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

// TestPctSelectRandomSets holds pctSelect to the sorted values' nearest
// ranks on 600 random sets of 0 to 30,000 values: narrow clusters (one
// first walk's bucket, or a few), values spread over many exponents,
// counts with many ties, negatives and zeros, each in both orders and
// for random percentiles. The first walk's histogram is shared by the
// percentiles and the later ones are made only for those that count
// again: a shared count or a bucket range cut short fails here.
func TestPctSelectRandomSets(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 16))
	walks := map[int]int{}
	for set := range 600 {
		n := rng.IntN(30_000)
		if set%5 == 0 {
			n = rng.IntN(50)
		}
		base, width := rng.ExpFloat64()*100, math.Pow(10, float64(rng.IntN(12)-9))
		kind := rng.IntN(5)
		vals := make([]float64, n)
		for i := range vals {
			switch kind {
			case 0: // a narrow cluster
				vals[i] = base + rng.Float64()*width
			case 1: // many exponents
				vals[i] = math.Ldexp(rng.Float64(), rng.IntN(80)-40)
			case 2: // ties
				vals[i] = float64(rng.IntN(1 + rng.IntN(500)))
			case 3: // negatives and zeros among shares
				vals[i] = float64(rng.IntN(2000)-500) / 1e4
			default: // two clusters far apart
				vals[i] = base + rng.Float64()*width
				if rng.IntN(3) == 0 {
					vals[i] = base*1e6 + rng.Float64()
				}
			}
		}
		pcts := []float64{50, 90, 99}
		if set%2 == 1 {
			pcts = []float64{rng.Float64() * 100, 1 + rng.Float64()*99, 100}
		}
		desc := set%3 == 0
		s := newPctSelect(desc, pcts...)
		w := 0
		for {
			w++
			for _, v := range vals {
				s.add(v)
			}
			if !s.next() {
				break
			}
			if w == 8 {
				t.Fatalf("set %d (kind %d, %d values): still walking after %d walks", set, kind, n, w)
			}
		}
		walks[w]++
		got, _ := s.values()
		sorted := slices.Clone(vals)
		slices.Sort(sorted)
		if desc {
			slices.Reverse(sorted)
		}
		for i, p := range pcts {
			var want float64
			if len(sorted) > 0 {
				want = pct(sorted, p)
			}
			if got[i] != want {
				t.Fatalf("set %d (kind %d, %d values, desc=%v): p%v = %v, want %v", set, kind, n, desc, p, got[i], want)
			}
		}
	}
	if walks[1]+walks[2] == 600 || walks[3]+walks[4] == 0 {
		t.Fatalf("walks %v: the sets do not reach the later walks' histograms", walks)
	}
}
