package pool

import (
	"math/rand/v2"
	"testing"
)

// TestPoolReusesRuns: a released run is handed out again, zeroed, for the
// same length, and runs never overlap.
func TestPoolReusesRuns(t *testing.T) {
	var p Pool[uint64]
	type run struct {
		ref uint32
		n   uint16
	}
	var live []run
	owner := map[[2]uint32]int{} // (page, offset) -> run index
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 20_000 {
		if len(live) > 0 && rng.IntN(2) == 0 {
			j := rng.IntN(len(live))
			r := live[j]
			p.Release(r.ref, r.n)
			live[j] = live[len(live)-1]
			live = live[:len(live)-1]
			continue
		}
		n := uint16(1 + rng.IntN(70))
		if i%1000 == 0 {
			n = Page - 1
		}
		ref := p.Alloc(n)
		if ref == 0 {
			t.Fatal("reference 0 handed out")
		}
		for k, x := range p.Get(ref, n) {
			if x != 0 {
				t.Fatalf("run %d of %d not zeroed at %d", ref, n, k)
			}
		}
		for k := range p.Get(ref, n) {
			p.Get(ref, n)[k] = uint64(i + 1)
		}
		live = append(live, run{ref, n})
	}
	clear(owner)
	for i, r := range live {
		for k := range uint32(r.n) {
			at := [2]uint32{r.ref >> pageBits, r.ref&(Page-1) + k}
			if j, dup := owner[at]; dup {
				t.Fatalf("runs %d and %d overlap", i, j)
			}
			owner[at] = i
		}
	}
	var want int64
	for _, r := range live {
		want += int64(r.n)
	}
	if p.inUse != want {
		t.Errorf("in use %d, want %d", p.inUse, want)
	}
}

// TestAtAsGet: At of a run of one element is the element Get gives, on
// small first pages and full ones, after runs were released and handed
// out again.
func TestAtAsGet(t *testing.T) {
	var p Pool[uint64]
	rng := rand.New(rand.NewPCG(5, 6))
	var refs []uint32
	for i := range 300_000 {
		if len(refs) > 0 && rng.IntN(4) == 0 {
			j := rng.IntN(len(refs))
			p.Release(refs[j], 1)
			refs[j] = refs[len(refs)-1]
			refs = refs[:len(refs)-1]
			continue
		}
		if rng.IntN(8) == 0 {
			p.Alloc(uint16(2 + rng.IntN(30))) // runs of other lengths between
		}
		ref := p.Alloc(1)
		*p.At(ref) = uint64(i) + 1
		refs = append(refs, ref)
	}
	for _, ref := range refs {
		if got, want := p.At(ref), &p.Get(ref, 1)[0]; got != want || *got == 0 {
			t.Fatalf("At(%#x) = %p (%d), Get's element %p", ref, got, *got, want)
		}
	}
	if len(p.pages) < 9 {
		t.Fatalf("%d pages: want full-size ones too", len(p.pages))
	}
}

// TestReleasedRunComesBack: the run released last of a length is the next
// Alloc of that length, for short runs (the array of free lists) and long
// ones (the map), and not of another length.
func TestReleasedRunComesBack(t *testing.T) {
	var p Pool[uint32]
	for _, n := range []uint16{1, 2, smallRuns - 1, smallRuns, smallRuns + 1, 300, Page - 1} {
		a, b := p.Alloc(n), p.Alloc(n)
		p.Release(a, n)
		p.Release(b, n)
		m := n + 1
		if n == Page-1 {
			m = n - 1
		}
		if other := p.Alloc(m); other == a || other == b {
			t.Fatalf("n %d: a run of %d came back for %d", n, n, m)
		}
		if got := p.Alloc(n); got != b {
			t.Fatalf("n %d: Alloc after releasing %d then %d gave %d", n, a, b, got)
		}
		if got := p.Alloc(n); got != a {
			t.Fatalf("n %d: second Alloc gave %d, want %d", n, got, a)
		}
	}
}
