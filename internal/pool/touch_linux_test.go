package pool

import (
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

// freshMemory is n bytes of memory no one has touched, in pages of 4 KiB
// (MADV_NOHUGEPAGE: on a host whose transparent huge pages are "always",
// a huge page would map 512 of them at one fault), unmapped at the test's
// end: what the runtime's heap takes from the kernel, without the heap's
// reuse of memory it already has.
func freshMemory(t *testing.T, n int) []byte {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Munmap(b) })
	if err := syscall.Madvise(b, syscall.MADV_NOHUGEPAGE); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTouchMapsEveryPage: memory read, then written, page by page faults
// twice a page (the zero page, then the copy on the write); after Touch,
// reading and writing it faults no more. And Touch changes no byte, the
// last one included.
func TestTouchMapsEveryPage(t *testing.T) {
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
	control := readWrite(freshMemory(t, n))
	if control < pages {
		t.Fatalf("%d faults for %d fresh pages read, then written: the test counts no fault", control, pages)
	}
	s := freshMemory(t, n)
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
