package replay

import (
	"math"
	"slices"
)

// pctSelect finds exact nearest-rank percentiles of values a caller can
// walk several times (the peaks of every key a rule tracked), without
// holding them: a radix select on the values' order-preserving bits, 16
// bits a walk. A walk also notes the smallest and largest value left in
// each percentile's range, so a range of equal values ends the search, and
// once a range holds at most selectKeep values the next walk keeps them
// and sorts them. Two or three walks suffice for real peaks (many keys
// share a value); four at most. A million keys under a rule cost a few
// hundred kilobytes here, not 8 MB a limit.
type pctSelect struct {
	pcts []float64 // wanted, in percent
	desc bool      // rank from the largest value (last N: the shortest span is the most severe)
	n    int       // values (the first walk counts them)
	hi   uint64    // the largest key
	lo   uint64    // the smallest key
	t    []pctTarget
	pass int
	// hist is the first walk's histogram, by the values' top 16 bits: the
	// same for every percentile (none has a prefix yet), so counted once.
	hist []uint32
}

// pctTarget is the search for one percentile.
type pctTarget struct {
	rank   int      // among the values with prefix, ascending, 0-based
	prefix uint64   // the high bits found so far
	bits   int      // how many
	hist   []uint32 // counts by the next 16 bits, this walk
	min    uint64   // the smallest and largest key with prefix, this walk
	max    uint64
	keep   bool     // this walk keeps the values with prefix
	kept   []uint64 //
	done   bool
	key    uint64 // the answer, once done
}

const selectKeep = 4096

func newPctSelect(desc bool, pcts ...float64) *pctSelect {
	s := &pctSelect{pcts: pcts, desc: desc, lo: math.MaxUint64, t: make([]pctTarget, len(pcts)), hist: make([]uint32, 1<<16)}
	for i := range s.t {
		s.t[i].min = math.MaxUint64
	}
	return s
}

// orderKey maps a float64 to a uint64 in the same order.
func orderKey(v float64) uint64 {
	b := math.Float64bits(v)
	if b>>63 != 0 {
		return ^b
	}
	return b | 1<<63
}

func fromOrderKey(k uint64) float64 {
	if k>>63 != 0 {
		return math.Float64frombits(k &^ (1 << 63))
	}
	return math.Float64frombits(^k)
}

// add feeds one value of the current walk.
func (s *pctSelect) add(v float64) {
	k := orderKey(v)
	if s.pass == 0 {
		s.n++
		s.hi, s.lo = max(s.hi, k), min(s.lo, k)
		s.hist[k>>48]++
		return
	}
	for i := range s.t {
		t := &s.t[i]
		if t.done || (t.bits > 0 && k>>(64-t.bits) != t.prefix) {
			continue
		}
		t.min, t.max = min(t.min, k), max(t.max, k)
		if t.keep {
			t.kept = append(t.kept, k)
		} else {
			t.hist[(k>>(48-t.bits))&0xffff]++
		}
	}
}

// next ends a walk and reports whether another is needed.
func (s *pctSelect) next() bool {
	if s.pass == 0 {
		for i := range s.t {
			k := int(math.Ceil(s.pcts[i]/100*float64(s.n))) - 1
			k = max(0, min(k, s.n-1))
			if s.desc {
				k = s.n - 1 - k
			}
			t := &s.t[i]
			t.rank, t.min, t.max, t.hist = k, s.lo, s.hi, s.hist
		}
	}
	s.pass++
	more := false
	for i := range s.t {
		t := &s.t[i]
		switch {
		case t.done:
			continue
		case s.n == 0:
			t.done = true
		case t.min == t.max:
			t.done, t.key = true, t.min
		case t.keep:
			slices.Sort(t.kept)
			t.done, t.key = true, t.kept[t.rank]
		default:
			// Only the buckets from t.min's to t.max's can hold a count
			// (every value of the walk with t's prefix is between them).
			lo, hi := t.bucket(t.min), t.bucket(t.max)
			below := 0
			for b := lo; b <= hi; b++ {
				c := t.hist[b]
				if below+int(c) > t.rank {
					t.rank -= below
					t.prefix = t.prefix<<16 | uint64(b)
					t.bits += 16
					t.keep = c <= selectKeep
					break
				}
				below += int(c)
			}
			if t.bits == 64 {
				t.done, t.key = true, t.prefix
			}
		}
		if !t.done {
			more = true
		}
	}
	// The next walk's histograms, once every percentile has read this
	// walk's (the first walk's is shared): a new one only for a
	// percentile that counts again, not for one that keeps its range's
	// values (most, after the first walk).
	s.hist = nil
	for i := range s.t {
		t := &s.t[i]
		t.hist = nil
		if t.done {
			t.kept = nil
			continue
		}
		t.min, t.max = math.MaxUint64, 0
		if !t.keep {
			t.hist = make([]uint32, 1<<16)
		}
	}
	return more
}

// bucket is the histogram bucket of key k in t's current walk: its 16
// bits after t's prefix.
func (t *pctTarget) bucket(k uint64) uint64 { return (k >> (48 - t.bits)) & 0xffff }

// values returns the percentiles, in the order asked, and the most severe
// value (the largest, or the smallest when desc); zeros when there were
// none.
func (s *pctSelect) values() ([]float64, float64) {
	out := make([]float64, len(s.t))
	if s.n == 0 {
		return out, 0
	}
	for i := range s.t {
		out[i] = fromOrderKey(s.t[i].key)
	}
	if s.desc {
		return out, fromOrderKey(s.lo)
	}
	return out, fromOrderKey(s.hi)
}
