package detector

import (
	"time"

	"github.com/logjail/logjail/limits"
	"github.com/logjail/logjail/rules"
)

// LimitState is one limit's window of a key at a time, as the decision
// endpoint's Cerberus query reports it.
type LimitState struct {
	Limit  string        // as configured: "20 per second"
	Window time.Duration // the limit's period
	Kind   limits.Kind
	// Count, Value, Over and Sleep: the kind's reading (limits.State).
	limits.State
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
	return d.query(r, keyOf(key), t)
}

// QueryOf is Query for the rule and key of c: by c.Fixed when it is set,
// with no parse of the key's text (replay's charts ask it for every charge).
func (d *Detector) QueryOf(c *rules.Charge, t time.Time) (q KeyQuery, ok bool) {
	return d.query(c.Rule, chargeKey(c), t)
}

func (d *Detector) query(r *rules.Rule, k akey, t time.Time) (q KeyQuery, ok bool) {
	_, s := d.findK(r, k)
	if s == nil {
		return q, false
	}
	q.Kind, q.Until = d.status(r, k, t)
	ns := t.UnixNano()
	ri := d.ri(s)
	for j := range ri.lims {
		li := &ri.lims[j]
		q.Limits = append(q.Limits, LimitState{Limit: li.Text, Window: time.Duration(li.Window), Kind: li.Kind,
			State: li.Kind.Query(d.win(s, j), &d.rings, li, ns)})
	}
	return q, true
}

// Charged returns the entries charged to (r, key) so far (not those seen
// while it was banned), and false when the key is not tracked. A replay's
// report asks it right after a ban, to say how many requests the ban came
// after; it changes nothing a decision depends on. An evicted key counts
// again from its next entry.
func (d *Detector) Charged(r *rules.Rule, key string) (int64, bool) {
	return d.charged(r, keyOf(key))
}

// ChargedOf is Charged for the rule and key of c: by c.Fixed when it is
// set, with no parse of the key's text.
func (d *Detector) ChargedOf(c *rules.Charge) (int64, bool) { return d.charged(c.Rule, chargeKey(c)) }

func (d *Detector) charged(r *rules.Rule, k akey) (int64, bool) {
	_, s := d.findK(r, k)
	if s == nil {
		return 0, false
	}
	return d.requests(s), true
}
