// Package pool hands out runs of elements from pages that never move, named
// by 32-bit references, so that the structures holding them (the
// detector's slab of states, the rings of its windows, its key table) hold
// no pointers: the garbage collector neither scans them nor needs a slice
// header and an allocation per run. A Pool is not safe for concurrent use;
// its zero value is an empty pool.
//
// Boundaries: It owns where runs live and their reuse. It must not do I/O,
// read the clock or import anything of logjail's.
package pool

import "unsafe"

// Pool hands out runs of n elements of T (1 ≤ n < Page) from pages
// that are never moved nor freed, so that a state can name a run by a
// 32-bit reference instead of holding a slice: the states' slab, the
// rings of their windows, the addresses they saw and the text of their
// keys then hold no pointers, and the garbage collector neither scans them
// nor needs a slice header (24 bytes) and an allocation per run. A released
// run goes on a free list of its length and is handed out again for that
// length. Reference 0 is never handed out: it means "none".
type Pool[T any] struct {
	pages [][]T
	top   uint32 // next free element of the last page
	// touched: the last page's elements before it have been written
	// (Touch), never handed out ones included.
	touched uint32
	small   [smallRuns][]uint32 // released runs by length, below smallRuns
	free    map[uint16][]uint32 // released runs by length, the longer ones
	inUse   int64               // elements handed out and not released
	held    int64               // elements the pages hold
}

const (
	// smallRuns: the free lists of runs shorter than this (a window's
	// ring, a state's ladder, most keys' text) are kept in an array, not
	// the map: a map look-up, its hash, for every Alloc was 3.7% of a
	// replay at a million keys in random order.
	smallRuns = 64
	pageBits  = 16
	// Page is the elements a page holds: a run is shorter.
	Page = 1 << pageBits
)

// Alloc returns a zeroed run of n elements.
func (p *Pool[T]) Alloc(n uint16) uint32 {
	if n == 0 {
		panic("pool: empty run")
	}
	p.inUse += int64(n)
	if n < smallRuns {
		if f := p.small[n]; len(f) > 0 {
			ref := f[len(f)-1]
			p.small[n] = f[:len(f)-1]
			return ref
		}
	} else if f := p.free[n]; len(f) > 0 {
		ref := f[len(f)-1]
		p.free[n] = f[:len(f)-1]
		return ref
	}
	if len(p.pages) == 0 || int(p.top)+int(n) > len(p.pages[len(p.pages)-1]) {
		if len(p.pages) == 1<<(32-pageBits) {
			panic("pool: out of pages")
		}
		// The first pages are small, so that a detector tracking a few
		// keys (a test, a sweep) holds little; from the ninth on a page
		// is full size.
		size := Page
		if len(p.pages) < 8 {
			size = max(256<<len(p.pages), int(n)+1)
		}
		p.pages = append(p.pages, make([]T, size))
		p.held += int64(size)
		p.top, p.touched = 0, 0
		if len(p.pages) == 1 {
			p.top = 1 // reference 0 means none
		}
	}
	ref := uint32(len(p.pages)-1)<<pageBits | p.top
	p.top += uint32(n)
	if p.top > p.touched {
		// The page is written a little ahead of its runs (Touch): a run
		// handed out is zero and may be read before it is written.
		pg := p.pages[len(p.pages)-1]
		end := min(len(pg), int(p.top)+touchAhead/int(unsafe.Sizeof(*new(T)))+1)
		Touch(pg[p.touched:end])
		p.touched = uint32(end)
	}
	return ref
}

// Get returns the run ref of n elements.
func (p *Pool[T]) Get(ref uint32, n uint16) []T {
	pg := p.pages[ref>>pageBits]
	o := ref & (Page - 1)
	return pg[o : o+uint32(n) : o+uint32(n)]
}

// At returns the element of the run ref of one element: &Get(ref, 1)[0],
// in fewer steps (the detector's key records and ladders, read for every
// charge).
func (p *Pool[T]) At(ref uint32) *T {
	return &p.pages[ref>>pageBits][ref&(Page-1)]
}

// Release zeroes the run ref of n elements and keeps it for the next alloc
// of n.
func (p *Pool[T]) Release(ref uint32, n uint16) {
	if ref == 0 {
		return
	}
	clear(p.Get(ref, n))
	p.inUse -= int64(n)
	if n < smallRuns {
		p.small[n] = append(p.small[n], ref)
		return
	}
	if p.free == nil {
		p.free = map[uint16][]uint32{}
	}
	p.free[n] = append(p.free[n], ref)
}

// Capacity returns the elements the pool's pages hold, handed out or not.
func (p *Pool[T]) Capacity() int64 { return p.held }

// InUse returns the elements handed out and not released.
func (p *Pool[T]) InUse() int64 { return p.inUse }

// Touch writes a zero byte into each page of memory (4 KiB) that s spans:
// s must be newly made, all zero, and not yet read (a make or new of its
// own). Memory the runtime takes from the kernel is mapped at its first
// touch: read first, the kernel's zero page is mapped, and the first
// write after it is a copy-on-write fault that flushes the TLB of every
// core the process runs on (an interrupt to the other core); written
// first, one fault maps a zeroed page. The detector's states straddle
// pages, and some first reads of a state (its window, its ladder) came
// before its first write there: at a million keys 1.5% of a replay's
// samples were such faults and their flushes (issue 23).
func Touch[T any](s []T) {
	n := uintptr(len(s)) * unsafe.Sizeof(*new(T))
	if n == 0 {
		return
	}
	p := unsafe.Pointer(unsafe.SliceData(s))
	for off := uintptr(0); off < n; off += pageSize {
		*(*byte)(unsafe.Add(p, off)) = 0
	}
	*(*byte)(unsafe.Add(p, n-1)) = 0
}

// pageSize is the smallest page of the hosts logjail runs on;
// touchAhead is how far (in bytes) Alloc touches a pool's last page ahead
// of the runs it hands out: a page of 2 MB touched whole at once would hold
// its memory from the start (up to 2 MB a pool, against issue 15's bound).
const (
	pageSize   = 4096
	touchAhead = 64 << 10
)
