package detector

import (
	"container/heap"
	"net/netip"
	"slices"
	"time"

	"github.com/logjail/logjail/rules"
)

// What an operator asks of the detector (`logjail ban --rule`, `unban
// --forget`, `top`): none of it is decided by the log, so none of it
// happens in a replay.

// Impose bans (r, key) until until on an operator's word, as if r had
// banned it: the key's requests are not charged while it lasts, the ban
// ends at until (an unban decision like any other) or by Lift, and it is
// saved and restored with the key's state. It is no escalation: the key's
// earlier bans and the circuit breaker do not count it. A throttle or an
// earlier ban of the key is replaced. The decision returned says
// "operator" in Origin; its Addresses are those seen on a key that is not
// an address within the rule's longest window, as for a ban of the rule.
func (d *Detector) Impose(t time.Time, r *rules.Rule, key string, until time.Time, reason string) Decision {
	ri := d.rule(r)
	i, s := d.lookup(ri, key)
	if s.ci != ri.ci {
		d.adopt(i, s, ri)
	}
	x := d.ext(s)
	ns := t.UnixNano()
	if s.phase != phaseBanned {
		d.unlink(i)
		d.banned++
	}
	s.phase = phaseBanned
	d.willSee(s, netip.Addr{}, ns)
	s.seen = max(s.seen, ns)
	x.violations, x.delay = 0, 0
	x.until, x.untilT = until.UnixNano(), until
	x.banLogOnly = false
	x.banAddrs = d.addresses(s, ri, ns)
	d.seq++
	x.banSeq = d.seq
	heap.Push(&d.expiries, expiry{until: x.until, seq: d.seq, slot: i})
	d.markDirty(i)
	return Decision{
		Rule: r.Name, Key: d.keys.textOf(s.kid), Kind: Ban, Time: t, Until: until,
		Addresses: slices.Clone(x.banAddrs), Reason: reason, Origin: "operator",
	}
}

// Forget drops the state of (r, key): its windows, its ladder and the
// earlier bans that escalate its next one, as if the key had never been
// seen; the next checkpoint deletes it from the store. It reports whether
// there was a state to drop. A banned key is not forgotten (false): Lift
// it first.
func (d *Detector) Forget(r *rules.Rule, key string) bool {
	i, s := d.find(r, key)
	if s == nil || s.phase == phaseBanned {
		return false
	}
	d.unlink(i)
	d.drop(i)
	return true
}

// LimitNow is one limit of a key as it stands at a time, for `logjail top`.
type LimitNow struct {
	Limit rules.Limit
	// Value is the window's value in the limit's units, as KeyPeak.Peak
	// says; for last N within D, the span the next request would make
	// (+Inf while the key has too few recent requests).
	Value float64
	// Ratio is how close the key is to the limit: 1 at the limit, above
	// it when over (for last N: D over the span).
	Ratio float64
}

// KeyNow is a tracked (rule, key) as it stands at a time.
type KeyNow struct {
	Rule     *rules.Rule
	Key      string
	Phase    Kind      // "", Throttle or Ban
	Until    time.Time // of the throttle or ban
	Requests int64     // entries charged
	CPU      float64   // CPU seconds charged
	LastSeen time.Time // log time of its last entry
	Limits   []LimitNow
}

// Current calls fn for every tracked (rule, key) with its windows read at
// log time t: what each limit's value would be for a request at t. The
// KeyNow and its Limits are reused between calls. It changes nothing.
func (d *Detector) Current(t time.Time, fn func(*KeyNow)) {
	ns := t.UnixNano()
	var k KeyNow
	loc := d.newestT.Location()
	for i := int32(0); i < d.used; i++ {
		s := d.at(i)
		if s.kid == 0 {
			continue
		}
		ri := d.ri(s)
		k = KeyNow{Rule: ri.rule, Key: d.keys.textOf(s.kid), Requests: d.requests(s), CPU: s.cpu,
			LastSeen: time.Unix(0, s.seen).In(loc), Limits: k.Limits[:0]}
		if x := d.xOf(s); x != nil && ns < x.until {
			switch s.phase {
			case phaseBanned:
				k.Phase, k.Until = Ban, x.untilT
			case phaseThrottled:
				k.Phase, k.Until = Throttle, x.untilT
			}
		}
		for j := range ri.lims {
			li := &ri.lims[j]
			v, ratio := li.Kind.Now(d.win(s, j), &d.rings, li, ns)
			k.Limits = append(k.Limits, LimitNow{Limit: ri.rule.Limits[j], Value: v, Ratio: ratio})
		}
		fn(&k)
	}
}
