package detector

import (
	"container/heap"
	"encoding/binary"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/logjail/logjail/rules"
)

const (
	defaultRemember = 30 * 24 * time.Hour
	longestBan      = 100 * 365 * 24 * time.Hour
)

// ladder moves s along the ban ladder for an entry at t (ns) whose limits
// were over or not.
func (d *Detector) ladder(i int32, s *state, ri *ruleInfo, t time.Time, ns int64, over bool, out []Decision) []Decision {
	r := ri.rule
	if s.phase == phaseThrottled {
		x := d.xOf(s)
		th := r.Throttle
		if th == nil { // the rule lost its throttle in a reload
			d.allow(s)
		} else if ns < x.until {
			// A violation.
			x.violations++
			x.last = max(x.last, ns)
			if r.Ban.For > 0 && x.violations > r.Ban.After {
				reason := fmt.Sprintf("%s > after %d (rule %s)", violations(x.violations), r.Ban.After, r.Name)
				return d.ban(i, s, ri, t, ns, x.violations, reason, out)
			}
			delay := x.delay * 2
			if delay < x.delay || (th.MaxDelay > 0 && delay > th.MaxDelay) {
				delay = max(th.MaxDelay, x.delay)
			}
			if until := ns + int64(delay); until > x.until {
				x.until, x.untilT = until, t.Add(delay)
			}
			if delay == x.delay {
				return out
			}
			x.delay = delay
			reason := fmt.Sprintf("%s, delay %s (rule %s)", violations(x.violations), delay, r.Name)
			return d.throttle(s, ri, t, ns, reason, out)
		} else if ns-max(x.until, x.last) >= int64(th.Quiet) {
			d.allow(s)
		} else {
			// Past until but not quiet yet: still throttled, no violation.
			x.last = max(x.last, ns)
			if !over {
				return out
			}
			x.until, x.untilT = ns+int64(x.delay), t.Add(x.delay)
			return d.throttle(s, ri, t, ns, d.overReason(ri), out)
		}
	}
	if !over {
		return out
	}
	if th := r.Throttle; th != nil {
		x := d.ext(s)
		s.phase = phaseThrottled
		x.violations, x.delay, x.last = 0, th.InitialDelay, ns
		x.until, x.untilT = ns+int64(th.InitialDelay), t.Add(th.InitialDelay)
		return d.throttle(s, ri, t, ns, d.overReason(ri), out)
	}
	if r.Ban.For > 0 {
		return d.ban(i, s, ri, t, ns, 0, d.overReason(ri), out)
	}
	return out
}

func (d *Detector) throttle(s *state, ri *ruleInfo, t time.Time, ns int64, reason string, out []Decision) []Decision {
	x := d.xOf(s)
	d.stats.Throttles++
	return append(out, Decision{
		Rule:       ri.rule.Name,
		Key:        d.keys.textOf(s.kid),
		Kind:       Throttle,
		Time:       t,
		Until:      x.untilT,
		Delay:      x.delay,
		Violations: x.violations,
		Addresses:  d.addresses(s, ri, ns),
		Reason:     reason,
		Origin:     "detector",
		LogOnly:    ri.rule.LogOnly || d.brk.open,
	})
}

func (d *Detector) addresses(s *state, ri *ruleInfo, ns int64) []netip.Addr {
	if !s.multi() {
		return nil
	}
	return d.addressesSince(s, ns-ri.span)
}

// ban bans s at t for the rule's ban length, escalated by earlier bans.
func (d *Detector) ban(i int32, s *state, ri *ruleInfo, t time.Time, ns int64, violations int, reason string, out []Decision) []Decision {
	r := ri.rule
	x := d.ext(s)
	remember := r.Ban.Remember
	if remember <= 0 {
		remember = defaultRemember
	}
	k := 0
	for k < len(x.bans) && x.bans[k] <= ns-int64(remember) {
		k++
	}
	x.bans = x.bans[:copy(x.bans, x.bans[k:])]
	length := banLength(r.Ban, len(x.bans))
	if len(x.bans) == maxBans {
		x.bans = x.bans[:copy(x.bans, x.bans[1:])]
	}
	x.bans = append(x.bans, ns)

	key := d.keys.textOf(s.kid)
	logOnly := r.LogOnly
	if !logOnly {
		logOnly = d.brk.admit(ns, d.maxBans)
		if logOnly && d.brk.justTripped {
			d.brk.justTripped = false
			d.brk.last = breakerTrip{at: t, bans: d.maxBans + 1, limit: d.maxBans, rule: r.Name, key: key}
			if d.opt.BreakerTripped != nil {
				d.opt.BreakerTripped(d.Breaker())
			}
		}
	}

	s.phase = phaseBanned
	x.violations, x.delay = 0, 0
	x.until, x.untilT = ns+int64(length), t.Add(length)
	x.banLogOnly = logOnly
	x.banAddrs = d.addresses(s, ri, ns)
	d.unlink(i)
	d.banned++
	d.seq++
	x.banSeq = d.seq
	heap.Push(&d.expiries, expiry{until: x.until, seq: d.seq, slot: i})
	d.stats.Bans++
	return append(out, Decision{
		Rule:       r.Name,
		Key:        key,
		Kind:       Ban,
		Time:       t,
		Until:      x.untilT,
		Violations: violations,
		Addresses:  slices.Clone(x.banAddrs),
		Reason:     reason,
		Origin:     "detector",
		LogOnly:    logOnly,
	})
}

// violations writes a count of violations for a reason: "1 violation",
// "5 violations".
func violations(n int) string {
	if n == 1 {
		return "1 violation"
	}
	return strconv.Itoa(n) + " violations"
}

// banLength is for × factor^earlier, capped at max.
func banLength(b rules.Ban, earlier int) time.Duration {
	f := b.Factor
	if f <= 0 {
		f = 1
	}
	limit := longestBan
	if b.Max > 0 {
		limit = min(b.Max, longestBan)
	}
	l := float64(b.For) * math.Pow(f, float64(earlier))
	if l >= float64(limit) || math.IsNaN(l) {
		return limit
	}
	return time.Duration(l)
}

// unban lifts the ban of s (banned) at t.
func (d *Detector) unban(i int32, s *state, t time.Time, reason string, out []Decision) []Decision {
	x := d.xOf(s)
	dec := Decision{
		Rule:      d.ri(s).rule.Name,
		Key:       d.keys.textOf(s.kid),
		Kind:      Unban,
		Time:      t,
		Addresses: x.banAddrs,
		Reason:    reason,
		Origin:    "detector",
		LogOnly:   x.banLogOnly,
	}
	x.banAddrs = nil
	d.allow(s)
	d.banned--
	d.pushFront(i)
	d.stats.Unbans++
	out = append(out, dec)
	// Back on the LRU list, s may put it over the cap.
	for d.lruLen+d.banned > d.maxKeys {
		if v := d.victim(); v < 0 || v == i {
			break
		}
		d.evict()
	}
	return out
}

func (d *Detector) evict() int32 {
	i := d.victim()
	old := d.at(i)
	if d.opt.Evicted != nil {
		d.opt.Evicted(d.keyPeak(i, old))
	}
	d.unlink(i)
	d.stats.Evictions++
	d.drop(i)
	return i
}

// drop frees the slot i of a state off the LRU list and not banned: out of
// the index, deleted from the store at the next checkpoint.
func (d *Detector) drop(i int32) {
	old := d.at(i)
	d.forget(old)
	kr := d.keys.rec(old.kid)
	if h := kr.head; h == i {
		if old.sib >= 0 {
			kr.head = old.sib
		} else {
			d.keys.remove(old.kid)
		}
	} else {
		p := d.at(h)
		for p.sib != i {
			p = d.at(p.sib)
		}
		p.sib = old.sib
	}
	d.lastKey, d.lastHead = "", -1
	d.freeWindows(old)
	d.freeAux(old)
	d.unref(d.ri(old))
	d.bumpGen(i)
	*old = state{prev: -1, next: -1, sib: -1, flags: old.flags & flagListed}
	d.free = append(d.free, i)
}

// expire unbans every ban whose until is at or before now, in order.
func (d *Detector) expire(now int64, out []Decision) []Decision {
	for len(d.expiries) > 0 && d.expiries[0].until <= now {
		e := heap.Pop(&d.expiries).(expiry)
		s := d.at(e.slot)
		// A ban's seq is unique: a slot reused, or a state lifted and
		// banned again, has another.
		if s.kid == 0 || s.phase != phaseBanned || d.xOf(s).banSeq != e.seq {
			continue
		}
		out = d.unban(e.slot, s, d.xOf(s).untilT, "ban expired", out)
	}
	return out
}

// expiry is a ban's end in the detector's heap.
type expiry struct {
	until int64
	seq   uint64
	slot  int32
}

type expiryHeap []expiry

func (h expiryHeap) Len() int { return len(h) }
func (h expiryHeap) Less(i, j int) bool {
	if h[i].until != h[j].until {
		return h[i].until < h[j].until
	}
	return h[i].seq < h[j].seq
}
func (h expiryHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)   { *h = append(*h, x.(expiry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// breakerWindow is the circuit breaker's window: max_bans_per_minute.
const breakerWindow = time.Minute

// breaker is the circuit breaker: the times of the last bans acted on.
type breaker struct {
	times       []int64 // ring of up to max ban times
	head        int
	open        bool
	justTripped bool
	trips       int64
	last        breakerTrip // the last trip, kept across a reset
}

// breakerTrip is what tripped the breaker last.
type breakerTrip struct {
	at        time.Time // log time of the ban that tripped it
	bans      int       // bans within the window, that one included
	limit     int       // MaxBansPerMinute then
	rule, key string    // the ban that tripped it
}

// admit counts a ban at ns and reports whether it must be log-only.
func (b *breaker) admit(ns int64, limit int) bool {
	if b.open {
		return true
	}
	if limit < 0 {
		return false
	}
	if len(b.times) == limit {
		if b.times[b.head] > ns-int64(breakerWindow) {
			b.open, b.justTripped = true, true
			b.trips++
			return true
		}
		b.times[b.head] = ns
		b.head = (b.head + 1) % limit
		return false
	}
	b.times = append(b.times, ns)
	return false
}

// oldestFirst returns the ring's ban times, oldest first, the newest n of
// them at most (n < 0: none).
func (b *breaker) oldestFirst(n int) []int64 {
	if n < 0 || len(b.times) == 0 {
		return nil
	}
	times := make([]int64, 0, len(b.times))
	for i := range b.times {
		times = append(times, b.times[(b.head+i)%len(b.times)])
	}
	return times[max(0, len(times)-n):]
}

// BreakerState is the circuit breaker as an operator sees it.
type BreakerState struct {
	Open  bool  // decisions are LogOnly until ResetBreaker
	Trips int64 // times it tripped
	// The last trip, kept after a reset; zero Tripped: it never tripped
	// (or tripped before a checkpoint that did not record trips).
	Tripped   time.Time     // log time of the ban that tripped it
	Bans      int           // bans acted on within Window up to that one, it included
	Limit     int           // MaxBansPerMinute when it tripped
	Window    time.Duration // one minute
	Rule, Key string        // the ban that tripped it (LogOnly itself)
	// MaxBansPerMinute is the limit in force now (< 0: disabled).
	MaxBansPerMinute int
}

// Breaker returns the circuit breaker's state.
func (d *Detector) Breaker() BreakerState {
	b := &d.brk
	return BreakerState{Open: b.open, Trips: b.trips, Tripped: b.last.at, Bans: b.last.bans, Limit: b.last.limit,
		Window: breakerWindow, Rule: b.last.rule, Key: b.last.key, MaxBansPerMinute: d.maxBans}
}

// SetMaxBansPerMinute changes the circuit breaker's limit (a reload): 0
// means 100, < 0 disables it. An open breaker stays open, whatever the
// limit: only ResetBreaker closes it. A lower limit keeps the newest ban
// times, as Restore does.
func (d *Detector) SetMaxBansPerMinute(n int) {
	if n == 0 {
		n = 100
	}
	if n == d.maxBans {
		return
	}
	d.brk.times, d.brk.head = d.brk.oldestFirst(n), 0
	d.maxBans = n
}

// appendBreakerTrip writes the last trip after the rest of the global
// state (SaveGlobal, which sets flag 8 for it: a checkpoint written
// before trips were recorded has neither).
func appendBreakerTrip(b []byte, t *breakerTrip) []byte {
	b = appendTime(b, t.at)
	b = binary.AppendUvarint(b, uint64(max(t.bans, 0)))
	b = binary.AppendVarint(b, int64(t.limit))
	b = appendString(b, t.rule)
	return appendString(b, t.key)
}

// breakerTrip reads what appendBreakerTrip wrote.
func (r *decoder) breakerTrip() breakerTrip {
	var t breakerTrip
	t.at = r.time()
	t.bans = r.count(1 << 30)
	t.limit = int(max(min(r.varint(), 1<<30), -1))
	t.rule = r.str()
	t.key = r.str()
	return t
}
