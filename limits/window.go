package limits

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// Window is the state of one limit of one key. Its Layout (the kind's)
// says what it holds:
//
//   - Buckets (rate and shares): the ring holds the non-empty buckets in
//     the window, oldest first, each as bucket<<32 | value (count, or cost
//     in units); acc is their sum.
//   - Times (last N): the ring holds the times (unix ns) of the last N
//     requests, oldest first.
//   - Tokens (token bucket): acc is the time of the last refill (unix ns),
//     the ring's one element the bits of the tokens left (a float64,
//     negative when requests went on while it was empty: see tokens), n is
//     1 once the bucket is filled.
//
// A ring of one or two elements (most keys: a bucket or two, or a token
// bucket) is v itself; a longer one is a run of the ring pool (Rings),
// v[0] its reference, and a Buckets window keeps its newest bucket in v[1]
// (newestBucket), so that a charge finds whether its bucket is the newest,
// newer or older without reading the ring: a random read, a cache miss for
// most keys (the pool's runs are far from the key's state). A Window holds
// no pointer; its zero value is empty.
type Window struct {
	v           [2]uint64 // cp ≤ 2: the ring; cp > 2: v[0] is the ring's run in the ring pool, v[1] a Buckets window's newest bucket
	acc         uint64
	head, n, cp uint16 // the ring: its oldest element, elements, capacity
}

// Layout is the shape of a window, and its tag in a snapshot (the numbers
// are on disk: never change one).
type Layout byte

// Layouts.
const (
	Buckets Layout = 1 // rate and shares: a ring of buckets
	Times   Layout = 2 // last N: a ring of times
	Tokens  Layout = 3 // token bucket: the time of the last refill and the tokens left
)

const (
	maxUint32 = 1<<32 - 1
	// inlineRing is the longest ring a window holds itself.
	inlineRing = 2
	// MaxRing is the longest ring: the buckets of a window (at most 61) or
	// the N of a last N (MaxLastN).
	MaxRing = 1<<16 - 1
)

// ring returns w's ring (its capacity long), valid until it grows.
func (w *Window) ring(a *Rings) []uint64 {
	if w.cp <= inlineRing {
		return w.v[:w.cp]
	}
	return a.Get(uint32(w.v[0]), w.cp)
}

// Release gives w's ring back to the pool and empties w.
func (w *Window) Release(a *Rings) {
	if w.cp > inlineRing {
		a.Release(uint32(w.v[0]), w.cp)
	}
	*w = Window{}
}

// setRing makes w's ring c long (c ≥ 1, empty).
func (w *Window) setRing(a *Rings, c uint16) {
	w.Release(a)
	w.cp = c
	if c > inlineRing {
		w.v[0] = uint64(a.Alloc(c))
	}
}

// at returns the i-th element of ring r (w's) from the oldest.
func (w *Window) at(r []uint64, i uint16) *uint64 {
	j := uint32(w.head) + uint32(i)
	if j >= uint32(len(r)) {
		j -= uint32(len(r))
	}
	return &r[j]
}

// push appends x as the newest element, growing the ring up to limit, and
// returns the ring.
func (w *Window) push(a *Rings, x uint64, limit int) []uint64 {
	r := w.ring(a)
	if w.n == w.cp {
		c := min(max(2*int(w.cp), 1), limit, MaxRing)
		if c <= int(w.cp) {
			panic("limits: window ring over its limit")
		}
		// The elements, oldest first, out of the way of the new ring
		// (which may be v itself).
		var inl [inlineRing]uint64
		from := r
		if w.cp <= inlineRing {
			inl = w.v
			from = inl[:w.cp]
		}
		var nr []uint64
		ref := uint32(0)
		if c > inlineRing {
			ref = a.Alloc(uint16(c))
			nr = a.Get(ref, uint16(c))
		} else {
			nr = w.v[:c]
		}
		for i := range w.n {
			nr[i] = *w.at(from, i)
		}
		if w.cp > inlineRing {
			a.Release(uint32(w.v[0]), w.cp)
		}
		if c > inlineRing {
			w.v = [inlineRing]uint64{uint64(ref)}
		}
		w.cp, w.head = uint16(c), 0
		r = nr
	}
	w.n++
	*w.at(r, w.n-1) = x
	return r
}

// popOldest drops the oldest element of ring r (w's).
func (w *Window) popOldest(r []uint64) uint64 {
	x := r[w.head]
	w.head++
	if w.head == w.cp {
		w.head = 0
	}
	w.n--
	return x
}

// sinkNewest moves the newest element back until the ring is in order by
// key (the element's value for times, the bucket for buckets).
func (w *Window) sinkNewest(r []uint64, key func(uint64) uint64) {
	for i := w.n - 1; i > 0; i-- {
		a, b := w.at(r, i-1), w.at(r, i)
		if key(*a) <= key(*b) {
			return
		}
		*a, *b = *b, *a
	}
}

// tokens returns a token bucket's tokens left (0 before it is filled).
func (w *Window) tokens() float64 {
	if w.cp == 0 {
		return 0
	}
	return math.Float64frombits(w.v[0])
}

// setTokens sets a token bucket's tokens left.
func (w *Window) setTokens(f float64) {
	w.cp = 1
	w.v[0] = math.Float64bits(f)
}

// Dump returns what w holds, for a test's comparison of two detectors:
// its ring's capacity, its elements oldest first (none for Tokens), acc,
// and the tokens left (Tokens).
func (w *Window) Dump(a *Rings, l Layout) (cp int, elems []uint64, acc uint64, tokens float64) {
	if l == Tokens {
		return int(w.cp), nil, w.acc, w.tokens()
	}
	r := w.ring(a)
	for i := range w.n {
		elems = append(elems, *w.at(r, i))
	}
	return int(w.cp), elems, w.acc, 0
}

// Len returns the elements of w's ring (1 for a filled token bucket).
func (w *Window) Len() int { return int(w.n) }

func bucketOf(x uint64) uint64 { return x >> 32 }
func valueOf(x uint64) uint64  { return x & maxUint32 }

// bucket is the bucket of time ns for buckets of width ns. A window of at
// most a minute has buckets of one second (compileBuckets): its division
// is by a constant, which the compiler makes a multiply, where a division
// by a variable costs tens of cycles for each limit of each charge
// (TestBucketAsDivision).
func bucket(ns, width int64) uint64 {
	if ns <= 0 {
		return 0
	}
	if width == secondNs {
		return min(uint64(ns/secondNs), maxUint32)
	}
	return min(uint64(ns/width), maxUint32)
}

// secondNs is the narrowest bucket width, a second, in ns.
const secondNs = int64(1e9)

// addBucket counts v in bucket b of a Buckets window and returns the
// window's sum, read at the key's newest bucket. A bucket already out of
// the window is not counted.
func (w *Window) addBucket(a *Rings, b, v uint64, c *Compiled) uint64 {
	v = min(v, maxUint32)
	if w.n == 0 {
		w.push(a, b<<32|v, int(c.nb))
		w.setNewest(b)
		w.acc = v
		return w.acc
	}
	if w.cp > inlineRing && w.v[1]+c.nb <= b {
		// The newest bucket (v[1]) has left the window, so has every
		// one: the ring emptied at once, its new bucket written first,
		// no element of it read (most of the genlog's charges: a client
		// back after its windows; TestAddBucketAsPops).
		w.head, w.n, w.acc = 0, 1, v
		a.Get(uint32(w.v[0]), w.cp)[0] = b<<32 | v
		w.v[1] = b
		return w.acc
	}
	r := w.ring(a)
	last := bucketOf(*w.at(r, w.n-1))
	switch {
	case b > last:
		if last+c.nb <= b {
			// The newest bucket has left the window, so has every
			// one: the ring emptied at once, not popped bucket by
			// bucket, its oldest not read (TestAddBucketAsPops).
			w.head, w.n, w.acc = 0, 0, 0
		}
		for w.n > 0 && bucketOf(*w.at(r, 0))+c.nb <= b {
			w.acc -= valueOf(w.popOldest(r))
		}
		if w.n < w.cp {
			// Room in the ring: push's own step, without its look-up
			// of the ring again.
			w.n++
			*w.at(r, w.n-1) = b<<32 | v
		} else {
			w.push(a, b<<32|v, int(c.nb))
		}
		w.setNewest(b)
		w.acc += v
	case b+c.nb <= last:
		// Older than the window: it would slide out at once.
	default:
		for i := w.n; i > 0; i-- {
			p := w.at(r, i-1)
			switch pb := bucketOf(*p); {
			case pb == b:
				nv := min(valueOf(*p)+v, maxUint32)
				w.acc += nv - valueOf(*p)
				*p = b<<32 | nv
				return w.acc
			case pb < b:
				i = 1 // not there: insert
			}
		}
		r = w.push(a, b<<32|v, int(c.nb))
		w.sinkNewest(r, bucketOf)
		w.setNewest(last) // push may have moved the ring to the pool
		w.acc += v
	}
	return w.acc
}

// setNewest keeps b, the newest bucket of a Buckets window, in v[1] when
// its ring is in the pool (v[1] is the ring's own second element
// otherwise). Every change of a Buckets window's newest bucket or of its
// ring's place calls it: addBucket and DecodeWindow
// (TestAddBucketAsPops).
func (w *Window) setNewest(b uint64) {
	if w.cp > inlineRing {
		w.v[1] = b
	}
}

// newestBucket is a Buckets window's newest bucket (v[1] for a ring in
// the pool, else the ring's newest element's), for a test; n > 0.
func (w *Window) newestBucket(a *Rings) uint64 {
	if w.cp > inlineRing {
		return w.v[1]
	}
	return bucketOf(*w.at(w.ring(a), w.n-1))
}

// compileBuckets sets the bucket width and count of a Buckets window:
// max(1s, window/60) wide, so that a window is at most 61 buckets.
func compileBuckets(c *Compiled) {
	c.width = max(secondNs, c.Window/60)
	c.nb = uint64((c.Window + c.width - 1) / c.width)
}

// bucketSum is the sum of the buckets of a Buckets window still in it for
// a request at ns.
func (w *Window) bucketSum(a *Rings, c *Compiled, ns int64) uint64 {
	r := w.ring(a)
	b := bucket(ns, c.width)
	var sum uint64
	for i := range w.n {
		x := *w.at(r, i)
		if bucketOf(x)+c.nb > b {
			sum += valueOf(x)
		}
	}
	return sum
}

// bucketQuery reads a Buckets window at ns: its sum, whether it is over,
// and how long until it is back within when nothing comes.
func (w *Window) bucketQuery(a *Rings, c *Compiled, ns int64) (sum uint64, over bool, sleep int64) {
	r := w.ring(a)
	cur := bucket(ns, c.width)
	// The buckets still in the window at ns, oldest first: bucket b
	// leaves it when cur reaches b+nb.
	first := uint16(0)
	for ; first < w.n && bucketOf(*w.at(r, first))+c.nb <= cur; first++ {
	}
	for i := first; i < w.n; i++ {
		sum += valueOf(*w.at(r, i))
	}
	over = sum > c.thr
	// Drop the oldest buckets until the sum is within: the window is
	// back within the limit when the last of them leaves.
	rest := sum
	for i := first; i < w.n && rest > c.thr; i++ {
		x := *w.at(r, i)
		rest -= valueOf(x)
		leave := int64(bucketOf(x)+c.nb) * c.width
		sleep = max(0, leave-ns)
	}
	return sum, over, sleep
}

// AppendFloat writes a float's bits byte-reversed as a uvarint: integers,
// 0 and ±Inf, whose low mantissa bytes are zero, take 1 to 3 bytes. A
// Reader's Float reads it back.
func AppendFloat(b []byte, f float64) []byte {
	return binary.AppendUvarint(b, bits.ReverseBytes64(math.Float64bits(f)))
}

// AppendWindow encodes w, a window of c: its layout's tag, then its ring's
// capacity and elements oldest first (buckets as delta and value, times as
// deltas), or its token bucket.
func AppendWindow(b []byte, w *Window, c *Compiled, a *Rings) []byte {
	l := c.layout
	b = append(b, byte(l))
	if l == Tokens {
		b = binary.AppendUvarint(b, uint64(w.n))
		b = binary.AppendUvarint(b, w.acc)
		return AppendFloat(b, w.tokens())
	}
	r := w.ring(a)
	b = binary.AppendUvarint(b, uint64(w.cp))
	b = binary.AppendUvarint(b, uint64(w.n))
	prev := uint64(0)
	for i := range w.n {
		x := *w.at(r, i)
		if l == Times {
			b = binary.AppendUvarint(b, x-prev)
			prev = x
			continue
		}
		b = binary.AppendUvarint(b, bucketOf(x)-prev)
		b = binary.AppendUvarint(b, valueOf(x))
		prev = bucketOf(x)
	}
	return b
}

// Reader is what DecodeWindow reads from: the detector's snapshot decoder.
// After a failure its reads return zeros.
type Reader interface {
	U8() byte
	Uvarint() uint64
	Float() float64      // as AppendFloat wrote it
	Count(limit int) int // a count of at most limit (else a failure)
	Fail(what string)    // the first failure is kept
	Failed() bool
}

// DecodeWindow reads a window that AppendWindow wrote into w, checked
// against c; with w and c nil it only skips it.
func DecodeWindow(r Reader, w *Window, c *Compiled, a *Rings) {
	tag := Layout(r.U8())
	if c != nil && tag != c.layout && !r.Failed() {
		r.Fail("window of another kind")
	}
	switch tag {
	case Tokens:
		n, acc, tokens := r.Uvarint(), r.Uvarint(), r.Float()
		if n > 1 {
			r.Fail("bad token bucket")
		}
		if w != nil {
			w.n, w.acc = uint16(n), acc
			if n > 0 || tokens != 0 {
				w.setTokens(tokens)
			}
		}
	case Buckets, Times:
		cp := r.Uvarint()
		n := r.Count(int(min(cp, MaxRing)))
		if c != nil {
			limit := c.nb
			if tag == Times {
				limit = uint64(c.lastN)
			}
			if cp > limit {
				r.Fail("ring over its limit")
			}
		}
		if cp > MaxRing {
			r.Fail("ring over its limit")
		}
		var ring []uint64
		if w != nil && !r.Failed() && cp > 0 {
			w.setRing(a, uint16(cp))
			ring = w.ring(a)
		}
		var prev, first, acc uint64
		for i := 0; i < n && !r.Failed(); i++ {
			d := r.Uvarint()
			x := prev + d
			if x < prev {
				r.Fail("time overflow")
			}
			if tag == Buckets {
				v := r.Uvarint()
				if (i > 0 && d == 0) || x > maxUint32 || v > maxUint32 {
					r.Fail("bad bucket")
				}
				if i == 0 {
					first = x
				}
				if c != nil && x-first >= c.nb {
					r.Fail("buckets wider than the window")
				}
				prev = x
				acc += v
				x = x<<32 | v
			} else {
				prev = x
			}
			if w != nil && !r.Failed() {
				ring[i] = x
			}
		}
		if w != nil && !r.Failed() {
			w.n = uint16(n)
			if tag == Buckets {
				w.acc = acc
				if n > 0 {
					w.setNewest(prev)
				}
			}
		}
	default:
		r.Fail("bad window")
	}
}
