package pool

import (
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"
)

// minorFaults is the process's minor page faults so far.
func minorFaults(t *testing.T) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return ru.Minflt
}

// TestTouchMapsEveryPage: memory made and then read and written page by
// page faults twice a page (the zero page, then the copy on the write);
// after Touch, reading and writing it faults no more. And Touch changes
// no byte, the last one included.
func TestTouchMapsEveryPage(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("page faults counted through Linux's getrusage")
	}
	const n = 16<<20 + 100 // not a whole number of pages
	readWrite := func(s []byte) int64 {
		before := minorFaults(t)
		var x byte
		for i := 0; i < len(s); i += pageSize {
			x += s[i]
		}
		for i := 0; i < len(s); i += pageSize {
			s[i] = x + 1
		}
		return minorFaults(t) - before
	}
	pages := int64(n / pageSize)
	control := readWrite(make([]byte, n))
	if control < pages {
		t.Skipf("%d faults for %d pages read then written: the memory came already mapped (huge pages, or reused): nothing to measure", control, pages)
	}
	s := make([]byte, n)
	Touch(s)
	for i, b := range s {
		if b != 0 {
			t.Fatalf("byte %d is %d after Touch", i, b)
		}
	}
	if got := readWrite(s); got > pages/20 {
		t.Errorf("%d faults reading and writing %d touched pages (%d untouched)", got, pages, control)
	}
	Touch([]uint64(nil))
	Touch(make([]struct{ a, b uint64 }, 3))
}

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
