package detector

// pool hands out runs of n elements of T (1 ≤ n < poolPage) from pages
// that are never moved nor freed, so that a state can name a run by a
// 32-bit reference instead of holding a slice: the states' slab, the
// rings of their windows, the addresses they saw and the text of their
// keys then hold no pointers, and the garbage collector neither scans them
// nor needs a slice header (24 bytes) and an allocation per run. A released
// run goes on a free list of its length and is handed out again for that
// length. Reference 0 is never handed out: it means "none".
type pool[T any] struct {
	pages [][]T
	top   uint32              // next free element of the last page
	free  map[uint16][]uint32 // released runs by length
	inUse int64               // elements handed out and not released
	held  int64               // elements the pages hold
}

const (
	poolBits = 16
	poolPage = 1 << poolBits // elements a page holds
)

// alloc returns a zeroed run of n elements.
func (p *pool[T]) alloc(n uint16) uint32 {
	if n == 0 {
		panic("detector: pool: empty run")
	}
	p.inUse += int64(n)
	if f := p.free[n]; len(f) > 0 {
		ref := f[len(f)-1]
		p.free[n] = f[:len(f)-1]
		return ref
	}
	if len(p.pages) == 0 || int(p.top)+int(n) > len(p.pages[len(p.pages)-1]) {
		if len(p.pages) == 1<<(32-poolBits) {
			panic("detector: pool: out of pages")
		}
		// The first pages are small, so that a detector tracking a few
		// keys (a test, a sweep) holds little; from the ninth on a page
		// is full size.
		size := poolPage
		if len(p.pages) < 8 {
			size = max(256<<len(p.pages), int(n)+1)
		}
		p.pages = append(p.pages, make([]T, size))
		p.held += int64(size)
		p.top = 0
		if len(p.pages) == 1 {
			p.top = 1 // reference 0 means none
		}
	}
	ref := uint32(len(p.pages)-1)<<poolBits | p.top
	p.top += uint32(n)
	return ref
}

// get returns the run ref of n elements.
func (p *pool[T]) get(ref uint32, n uint16) []T {
	pg := p.pages[ref>>poolBits]
	o := ref & (poolPage - 1)
	return pg[o : o+uint32(n) : o+uint32(n)]
}

// release zeroes the run ref of n elements and keeps it for the next alloc
// of n.
func (p *pool[T]) release(ref uint32, n uint16) {
	if ref == 0 {
		return
	}
	clear(p.get(ref, n))
	if p.free == nil {
		p.free = map[uint16][]uint32{}
	}
	p.free[n] = append(p.free[n], ref)
	p.inUse -= int64(n)
}

// capacity returns the elements the pool's pages hold, handed out or not.
func (p *pool[T]) capacity() int64 { return p.held }
