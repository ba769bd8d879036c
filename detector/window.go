package detector

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/logjail/logjail/internal/pool"
	"github.com/logjail/logjail/rules"
)

// ruleInfo is a rule compiled for the detector.
type ruleInfo struct {
	rule *rules.Rule
	id   int32  // by name: states survive a reload of the same rule
	ci   uint16 // its place in Detector.infos, which states name it by
	refs int    // states built for it
	lims []limitInfo
	all  bool   // combine: all
	span int64  // longest window, ns: addresses seen within it are listed
	fp   uint64 // fingerprint of lims, saved with each state (snapshot.go)
}

// limitInfo is one limit compiled for the detector. It is comparable, so
// that a reload can tell whether a state's windows still fit.
type limitInfo struct {
	kind   rules.LimitKind
	text   string
	n      float64
	window int64  // ns: period, or span for last N
	width  int64  // bucket width, ns (rate, shares)
	nb     uint64 // buckets in the window (rate, shares)
	unit   int64  // ns of cost per stored unit (shares)
	thr    uint64 // over when the window's sum is above (rate, shares)
	burst  float64
	lastN  int
	cores  int // "of machine": the reason divides by it (presentation only; n has it)
}

const (
	maxUint32 = 1<<32 - 1
	// Share buckets hold cost in units small enough for this many busy
	// cores (or concurrent requests, for durations) within 32 bits.
	shareHeadroom = 128
)

func compileRule(r *rules.Rule, id int32) *ruleInfo {
	ri := &ruleInfo{rule: r, id: id, all: r.Combine == rules.CombineAll, span: int64(time.Second)}
	for _, l := range r.Limits {
		li := limitInfo{kind: l.Kind, text: l.Text, n: l.N, window: max(int64(l.Window), 1), cores: l.Cores}
		switch l.Kind {
		case rules.LimitRate, rules.LimitCPUShare, rules.LimitDurationShare:
			li.width = max(int64(time.Second), li.window/60)
			li.nb = uint64((li.window + li.width - 1) / li.width)
			if l.Kind == rules.LimitRate {
				li.thr = uint64(math.Floor(max(l.N, 0) + 1e-9))
			} else {
				li.unit = max(int64(time.Microsecond), (li.width*shareHeadroom+maxUint32-1)/maxUint32)
				li.thr = uint64(math.Floor(max(l.N, 0)*float64(li.window)/float64(li.unit) + 1e-6))
			}
		case rules.LimitTokenBucket:
			li.burst = max(l.Burst, 1)
		case rules.LimitLastN:
			li.lastN = min(max(int(l.N), 1), maxRing)
		}
		ri.span = max(ri.span, li.window)
		ri.lims = append(ri.lims, li)
	}
	ri.fp = limitsFingerprint(ri.lims)
	return ri
}

// window is the state of one limit of one key.
//
//   - rate and shares: the ring holds the non-empty buckets in the window,
//     oldest first, each as bucket<<32 | value (count, or cost in units);
//     acc is their sum.
//   - last N: the ring holds the times (unix ns) of the last N requests,
//     oldest first.
//   - token bucket: acc is the time of the last refill (unix ns), the ring's
//     one element the bits of the tokens left (a float64, negative when
//     requests went on while it was empty: see tokens), n is 1 once the
//     bucket is filled.
//
// A ring of one or two elements (most keys: a bucket or two, or a token
// bucket) is v itself; a longer one is a run of the detector's ring pool,
// v[0] its reference. A window holds no pointer. Its peak (the highest
// value its limit reached, for the replay report) is kept beside the
// states, in Detector.peakRows.
type window struct {
	v           [2]uint64 // cp ≤ 2: the ring; cp > 2: v[0] is the ring's run in the ring pool
	acc         uint64
	head, n, cp uint16 // the ring: its oldest element, elements, capacity
}

// inlineRing is the longest ring a window holds itself.
const inlineRing = 2

// maxRing is the longest ring: the buckets of a window (at most 61) or the
// N of a last N (rules.MaxLastN).
const maxRing = 1<<16 - 1

// ring returns w's ring (its capacity long), valid until it grows.
func (w *window) ring(a *pool.Pool[uint64]) []uint64 {
	if w.cp <= inlineRing {
		return w.v[:w.cp]
	}
	return a.Get(uint32(w.v[0]), w.cp)
}

// release gives w's ring back to the pool.
func (w *window) release(a *pool.Pool[uint64]) {
	if w.cp > inlineRing {
		a.Release(uint32(w.v[0]), w.cp)
	}
	*w = window{}
}

// setRing makes w's ring c long (c ≥ 1, empty).
func (w *window) setRing(a *pool.Pool[uint64], c uint16) {
	w.release(a)
	w.cp = c
	if c > inlineRing {
		w.v[0] = uint64(a.Alloc(c))
	}
}

// tokens returns a token bucket's tokens left (0 before it is filled).
func (w *window) tokens() float64 {
	if w.cp == 0 {
		return 0
	}
	return math.Float64frombits(w.v[0])
}

// setTokens sets a token bucket's tokens left.
func (w *window) setTokens(f float64) {
	w.cp = 1
	w.v[0] = math.Float64bits(f)
}

// at returns the i-th element of ring r (w's) from the oldest.
func (w *window) at(r []uint64, i uint16) *uint64 {
	j := uint32(w.head) + uint32(i)
	if j >= uint32(len(r)) {
		j -= uint32(len(r))
	}
	return &r[j]
}

// push appends x as the newest element, growing the ring up to limit, and
// returns the ring.
func (w *window) push(a *pool.Pool[uint64], x uint64, limit int) []uint64 {
	r := w.ring(a)
	if w.n == w.cp {
		c := min(max(2*int(w.cp), 1), limit, maxRing)
		if c <= int(w.cp) {
			panic("detector: window ring over its limit")
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
func (w *window) popOldest(r []uint64) uint64 {
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
func (w *window) sinkNewest(r []uint64, key func(uint64) uint64) {
	for i := w.n - 1; i > 0; i-- {
		a, b := w.at(r, i-1), w.at(r, i)
		if key(*a) <= key(*b) {
			return
		}
		*a, *b = *b, *a
	}
}

func bucketOf(x uint64) uint64 { return x >> 32 }
func valueOf(x uint64) uint64  { return x & maxUint32 }
func identity(x uint64) uint64 { return x }

// addBucket counts v in bucket b and returns the window's sum, read at the
// key's newest bucket. A bucket already out of the window is not counted.
func (w *window) addBucket(a *pool.Pool[uint64], b, v uint64, li *limitInfo) uint64 {
	v = min(v, maxUint32)
	if w.n == 0 {
		w.push(a, b<<32|v, int(li.nb))
		w.acc = v
		return w.acc
	}
	r := w.ring(a)
	last := bucketOf(*w.at(r, w.n-1))
	switch {
	case b > last:
		for w.n > 0 && bucketOf(*w.at(r, 0))+li.nb <= b {
			w.acc -= valueOf(w.popOldest(r))
		}
		w.push(a, b<<32|v, int(li.nb))
		w.acc += v
	case b+li.nb <= last:
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
		r = w.push(a, b<<32|v, int(li.nb))
		w.sinkNewest(r, bucketOf)
		w.acc += v
	}
	return w.acc
}

// addTime records a request at ns in a last-N ring and returns the span of
// the last N requests, or -1 while there have been fewer.
func (w *window) addTime(a *pool.Pool[uint64], ns int64, li *limitInfo) int64 {
	t := uint64(max(ns, 0))
	r := w.ring(a)
	switch {
	case int(w.n) < li.lastN:
		r = w.push(a, t, li.lastN)
		w.sinkNewest(r, identity)
	case t > *w.at(r, 0):
		w.popOldest(r)
		r = w.push(a, t, li.lastN)
		w.sinkNewest(r, identity)
	}
	if int(w.n) < li.lastN {
		return -1
	}
	return int64(*w.at(r, w.n-1) - *w.at(r, 0))
}

// take takes one token at ns and returns the bucket's level before it, in
// requests, counting this one: over when above the burst.
func (w *window) take(ns int64, li *limitInfo) float64 {
	t := uint64(max(ns, 0))
	if w.n == 0 {
		w.n, w.acc = 1, t
		w.setTokens(li.burst)
	}
	tokens := w.tokens()
	if t > w.acc {
		tokens = min(li.burst, tokens+float64(t-w.acc)/1e9*li.n)
		w.acc = t
	}
	level := li.burst - tokens + 1
	w.setTokens(tokens - 1)
	return level
}

// measure charges c at ns to every window of s and reports whether the rule's
// limits are over. d.vals and d.overs hold each limit's value and verdict.
func (d *Detector) measure(i int32, s *state, ri *ruleInfo, ns int64, c *rules.Charge) bool {
	if len(ri.lims) == 0 {
		return false
	}
	over := ri.all
	for j := range ri.lims {
		li := &ri.lims[j]
		w := d.win(s, j)
		var v float64
		var o bool
		switch li.kind {
		case rules.LimitRate:
			sum := w.addBucket(&d.rings, bucket(ns, li.width), 1, li)
			v, o = float64(sum), sum > li.thr
		case rules.LimitCPUShare, rules.LimitDurationShare:
			cost := c.CPU
			if li.kind == rules.LimitDurationShare {
				cost = c.Duration
			}
			sum := w.addBucket(&d.rings, bucket(ns, li.width), units(cost, li.unit), li)
			v, o = float64(sum)*float64(li.unit)/float64(li.window), sum > li.thr
		case rules.LimitTokenBucket:
			v = w.take(ns, li)
			o = v > li.burst+1e-9
		case rules.LimitLastN:
			span := w.addTime(&d.rings, ns, li)
			if span >= 0 {
				v, o = float64(span)/1e9, span < li.window
				if p := d.peak(i, j); p != nil {
					*p = min(*p, v)
				}
			} else {
				v = math.Inf(1)
			}
		}
		if p := d.peak(i, j); p != nil && li.kind != rules.LimitLastN {
			*p = max(*p, v)
		}
		d.vals[j], d.overs[j] = v, o
		if ri.all {
			over = over && o
		} else {
			over = over || o
		}
	}
	return over
}

func bucket(ns, width int64) uint64 {
	if ns <= 0 {
		return 0
	}
	return min(uint64(ns/width), maxUint32)
}

// units converts seconds of cost to stored units, rounding to the nearest.
func units(sec float64, unit int64) uint64 {
	if !(sec > 0) {
		return 0
	}
	return uint64(math.Min(sec*1e9/float64(unit)+0.5, maxUint32))
}

// overReason says which limits were over, for a person.
func (d *Detector) overReason(ri *ruleInfo) string {
	var b strings.Builder
	for j := range ri.lims {
		if !d.overs[j] {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(" and ")
		}
		li := &ri.lims[j]
		v := d.vals[j]
		switch li.kind {
		case rules.LimitRate:
			fmt.Fprintf(&b, "rate %d per %s > %s", int64(v), fmtDur(li.window), fmtNum(li.n))
		case rules.LimitCPUShare, rules.LimitDurationShare:
			// A share "of machine" reads as written: a share of all the
			// cores, not of one.
			what, of, cores := "cpu", "", 1.0
			if li.kind == rules.LimitDurationShare {
				what = "duration"
			}
			if li.cores > 0 {
				of, cores = " of machine", float64(li.cores)
			}
			fmt.Fprintf(&b, "%s %.1f%% over %s%s > %s%%", what, v*100/cores, fmtDur(li.window), of, fmtNum(li.n*100/cores))
		case rules.LimitTokenBucket:
			fmt.Fprintf(&b, "bucket %s > burst %s at %s/s", fmtNum(math.Round(v*10)/10), fmtNum(li.burst), fmtNum(li.n))
		case rules.LimitLastN:
			fmt.Fprintf(&b, "last %d within %s < %s", li.lastN, time.Duration(v*1e9).Round(time.Millisecond), fmtDur(li.window))
		}
	}
	if d.sig != "" {
		// A `signatures:` rule: what the entry that tipped it matched.
		fmt.Fprintf(&b, ", signature %s", d.sig)
	}
	fmt.Fprintf(&b, " (rule %s)", ri.rule.Name)
	return b.String()
}

// fmtDur writes a window the way a config does: 10s, 1m, 1h, 30d.
func fmtDur(ns int64) string {
	d := time.Duration(ns)
	switch {
	case d <= 0:
		return "0s"
	case d%(24*time.Hour) == 0:
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return d.String()
}

// fmtNum writes a threshold without float noise: 7, 0.5, 12.5.
func fmtNum(x float64) string {
	return strconv.FormatFloat(math.Round(x*1e6)/1e6, 'f', -1, 64)
}
