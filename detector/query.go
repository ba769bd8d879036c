package detector

import (
	"math"
	"time"

	"github.com/logjail/logjail/internal/pool"
	"github.com/logjail/logjail/rules"
)

// LimitState is one limit's window of a key at a time, as the decision
// endpoint's Cerberus query reports it.
type LimitState struct {
	Limit  string        // as configured: "20 per second"
	Window time.Duration // the limit's period
	Kind   rules.LimitKind
	// Count is the requests in the window (rate limits), or the requests
	// remembered (last N); 0 for shares and token buckets.
	Count int64
	Value float64 // the window's value as compared with the limit
	Over  bool    // the value is over the limit now
	// Sleep is how long until the window falls back within the limit when
	// no request comes meanwhile; 0 when it is within.
	Sleep time.Duration
}

// KeyQuery is what the detector holds for (rule, key) at a time.
type KeyQuery struct {
	Kind   Kind      // Ban, Throttle, or "" (allowed)
	Until  time.Time // of the ban or throttle
	Limits []LimitState
}

// Query reports the ladder state and every limit's window of (r, key) at
// log time t. It changes nothing: the caller may hold a read lock while
// another goroutine waits to charge. ok is false when the key is not
// tracked (allowed, every window empty).
func (d *Detector) Query(r *rules.Rule, key string, t time.Time) (q KeyQuery, ok bool) {
	_, s := d.find(r, key)
	if s == nil {
		return q, false
	}
	q.Kind, q.Until = d.Status(r, key, t)
	ns := t.UnixNano()
	ri := d.ri(s)
	for j := range ri.lims {
		li := &ri.lims[j]
		q.Limits = append(q.Limits, d.win(s, j).query(&d.rings, li, ns))
	}
	return q, true
}

// Charged returns the entries charged to (r, key) so far (not those seen
// while it was banned), and false when the key is not tracked. A replay's
// report asks it right after a ban, to say how many requests the ban came
// after; it changes nothing a decision depends on. An evicted key counts
// again from its next entry.
func (d *Detector) Charged(r *rules.Rule, key string) (int64, bool) {
	_, s := d.find(r, key)
	if s == nil {
		return 0, false
	}
	return d.requests(s), true
}

// query reads a window at ns without changing it.
func (w *window) query(a *pool.Pool[uint64], li *limitInfo, ns int64) LimitState {
	r := w.ring(a)
	ls := LimitState{Limit: li.text, Window: time.Duration(li.window)}
	switch li.kind {
	case rules.LimitRate, rules.LimitCPUShare, rules.LimitDurationShare:
		ls.Kind = li.kind
		cur := bucket(ns, li.width)
		// The buckets still in the window at ns, oldest first: bucket b
		// leaves it when cur reaches b+nb.
		var sum uint64
		first := uint16(0)
		for ; first < w.n && bucketOf(*w.at(r, first))+li.nb <= cur; first++ {
		}
		for i := first; i < w.n; i++ {
			sum += valueOf(*w.at(r, i))
		}
		if li.kind == rules.LimitRate {
			ls.Count, ls.Value = int64(sum), float64(sum)
		} else {
			ls.Value = float64(sum) * float64(li.unit) / float64(li.window)
		}
		ls.Over = sum > li.thr
		// Drop the oldest buckets until the sum is within: the window is
		// back within the limit when the last of them leaves.
		for i := first; i < w.n && sum > li.thr; i++ {
			x := *w.at(r, i)
			sum -= valueOf(x)
			leave := int64(bucketOf(x)+li.nb) * li.width
			ls.Sleep = time.Duration(max(0, leave-ns))
		}
	case rules.LimitTokenBucket:
		ls.Kind = li.kind
		if w.n == 0 {
			return ls
		}
		tokens := w.tokens()
		if t := uint64(max(ns, 0)); t > w.acc {
			tokens = min(li.burst, tokens+float64(t-w.acc)/1e9*li.n)
		}
		ls.Value = li.burst - tokens
		// The next request is over while fewer than one token is left.
		if tokens < 1-1e-9 {
			ls.Over = true
			ls.Sleep = time.Duration(math.Ceil((1 - tokens) / li.n * 1e9))
		}
	case rules.LimitLastN:
		ls.Kind = li.kind
		ls.Count = int64(w.n)
		if int(w.n) < li.lastN {
			ls.Value = math.Inf(1)
			return ls
		}
		// The next request is over while the oldest of the last N but one
		// is within the window of it.
		oldest := int64(*w.at(r, 1%w.n))
		if li.lastN == 1 {
			oldest = int64(*w.at(r, 0))
		}
		ls.Value = float64(int64(*w.at(r, w.n-1))-int64(*w.at(r, 0))) / 1e9
		if ns-oldest < li.window {
			ls.Over = true
			ls.Sleep = time.Duration(oldest + li.window - ns)
		}
	}
	return ls
}
