package pool

import (
	"math/rand/v2"
	"testing"
)

// TestAllocTouches: every run Alloc hands out of a page's fresh part lies
// in the part of the page it has touched (TestTouchMapsEveryPage: a
// touched page faults once, however it is first used), and it touches no
// more than touchAhead bytes ahead of its runs.
func TestAllocTouches(t *testing.T) {
	var p Pool[[3]uint64]
	rng := rand.New(rand.NewPCG(9, 10))
	for i := range 200_000 {
		n := uint16(1 + rng.IntN(40))
		if i%5000 == 0 {
			n = Page - 1
		}
		ref := p.Alloc(n)
		if page := ref >> pageBits; int(page) == len(p.pages)-1 && ref&(Page-1)+uint32(n) > p.touched {
			t.Fatalf("run %d (%d of %d) past the touched part (%d elements) of its page", i, ref&(Page-1), n, p.touched)
		}
		if ahead := (int(p.touched) - int(p.top)) * 24; ahead > touchAhead+24 {
			t.Fatalf("run %d: the page touched %d bytes ahead of its runs", i, ahead)
		}
		if rng.IntN(3) == 0 {
			p.Release(ref, n)
		}
	}
}
