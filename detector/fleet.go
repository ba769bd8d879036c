package detector

import (
	"cmp"
	"container/heap"
	"net/netip"
	"slices"
	"time"

	"github.com/logjail/logjail/limits"
	"github.com/logjail/logjail/rules"
)

// The fleet (DESIGN.md, "Beyond one machine"; issue 20): the detector's
// side of windows summed over nodes and of bans decided elsewhere. Package
// fleet carries what these return and take through Redis; nothing here
// talks to the network.

// FleetDelta is what this node's charges added to one bucket of one
// limit of a (rule, key) since the last drain (FleetDeltas).
type FleetDelta struct {
	Rule, Key string
	Limit     int           // the limit's index in the rule
	Bucket    uint64        // bucket number (limits.Compiled.Delta)
	Units     uint64        // what the charges added to it
	TTL       time.Duration // how long the bucket matters (limits.Compiled.BucketTTL)
}

// FleetAdd is what other nodes added to one bucket of one limit of a
// (rule, key), for Absorb.
type FleetAdd struct {
	Rule, Key string
	Limit     int
	Bucket    uint64
	Units     uint64
}

// fleetEntry is one charge's delta in the journal: the state by its slot
// and the slot's generation (so that a slot freed and reused is told
// apart), no pointer.
type fleetEntry struct {
	units  uint64
	slot   int32
	gen    uint32
	bucket uint32
	limit  uint16
}

// defaultJournalMax bounds the journal (entries; 24 bytes each).
const defaultJournalMax = 1 << 20

// Rules makes the detector know rs by name, each as the newest compile of
// its rule, as a charge of it would: Absorb finds a rule by name, and a
// node may be told of a fleet rule's units before it charged the rule
// itself. The daemon calls it with the configuration's rules at start and
// after a reload.
func (d *Detector) Rules(rs []*rules.Rule) {
	for _, r := range rs {
		d.rule(r)
	}
}

// gen returns the generation of slot i (0 without a fleet).
func (d *Detector) gen(i int32) uint32 {
	if len(d.gens) == 0 {
		return 0
	}
	return d.gens[i>>chunkBits][i&(1<<chunkBits-1)]
}

// bumpGen makes slot i a new state for the journal: entries of the state
// it held are dropped at the drain.
func (d *Detector) bumpGen(i int32) {
	if len(d.gens) > 0 {
		d.gens[i>>chunkBits][i&(1<<chunkBits-1)]++
	}
}

// note journals what a charge at ns of cost added to limit j (li) of the
// state in slot i, a state of a fleet rule. A charge of the same state,
// limit and bucket among the last few entries adds to that entry, so that
// a busy key costs one entry a bucket.
func (d *Detector) note(i int32, j int, li *limitInfo, ns int64, cost limits.Cost) {
	b, u, ok := li.Delta(ns, cost)
	if !ok || u == 0 {
		return
	}
	g := d.gen(i)
	n := len(d.journal)
	for k := n - 1; k >= max(0, n-4); k-- {
		if e := &d.journal[k]; e.slot == i && e.gen == g && e.limit == uint16(j) && e.bucket == uint32(b) {
			e.units += u
			return
		}
	}
	if n >= d.journalMax && !d.compactJournal() {
		d.stats.FleetDropped++
		return
	}
	d.journal = append(d.journal, fleetEntry{units: u, slot: i, gen: g, bucket: uint32(b), limit: uint16(j)})
}

// compactJournal coalesces the journal in place (one entry per state,
// limit and bucket, those of states gone dropped) and reports whether
// there is room again: less than 7/8 of its bound. Once it is not, the
// journal is full until the next drain (journalFull), so that a journal
// of that many distinct buckets is not sorted again at every charge.
func (d *Detector) compactJournal() bool {
	if d.journalFull {
		return false
	}
	d.coalesce()
	if len(d.journal) >= d.journalMax-d.journalMax/8 {
		d.journalFull = true
		return false
	}
	return true
}

// coalesce sorts the journal by state, limit and bucket, merges equal
// entries and drops those whose state is gone: its slot freed or reused
// (another generation), or its rule no longer a fleet rule or its limit
// no longer there (a reload).
func (d *Detector) coalesce() {
	slices.SortFunc(d.journal, func(a, b fleetEntry) int {
		return cmp.Or(cmp.Compare(a.slot, b.slot), cmp.Compare(a.gen, b.gen), cmp.Compare(a.limit, b.limit), cmp.Compare(a.bucket, b.bucket))
	})
	out := d.journal[:0]
	for _, e := range d.journal {
		if s := d.at(e.slot); s.kid == 0 || d.gen(e.slot) != e.gen || !d.ri(s).fleet || int(e.limit) >= len(d.ri(s).lims) {
			continue
		}
		if n := len(out); n > 0 {
			if p := &out[n-1]; p.slot == e.slot && p.gen == e.gen && p.limit == e.limit && p.bucket == e.bucket {
				p.units += e.units
				continue
			}
		}
		out = append(out, e)
	}
	d.journal = out
}

// FleetDeltas drains the journal into out: what this node's charges of
// fleet rules added since the last call, one FleetDelta per (rule, key,
// limit, bucket), by state, limit and bucket. Only a detector with
// Options.Fleet journals. A state dropped or evicted before the drain
// loses its entries (its slot has another generation: the key's units
// were charged to a window this node no longer holds), and so does a
// state whose rule a reload made per node or whose limits it changed.
// Entries dropped because the journal was full are counted in
// Stats.FleetDropped. The Key strings are the caller's to keep.
func (d *Detector) FleetDeltas(out []FleetDelta) []FleetDelta {
	d.coalesce()
	for _, e := range d.journal {
		s := d.at(e.slot)
		ri := d.ri(s)
		li := &ri.lims[e.limit]
		out = append(out, FleetDelta{Rule: ri.rule.Name, Key: d.keys.textOf(s.kid), Limit: int(e.limit),
			Bucket: uint64(e.bucket), Units: e.units, TTL: li.BucketTTL()})
	}
	d.journal = d.journal[:0]
	d.journalFull = false
	return out
}

// Absorb adds a, the units other nodes added to a bucket of a (rule, key)
// (rule by name: the newest compile of that rule; Rules makes a rule
// known before it is charged), to this node's window at log time t, and
// appends the decisions that causes: first the unbans due by t (t moves
// the clock as Advance does; a t older than the newest time less
// Options.Skew is read at that), then at most one throttle or ban. The
// state is made if there is none (the key may have been evicted here, or
// never seen), and becomes the most recently charged. No request is
// counted and nothing is journaled (no echo). If the state is allowed and
// the rule's limits, read at t and combined as a charge combines them,
// are now over, it moves along the ladder as a charge that is over would:
// throttled or banned, with the reason a local decision has and ", fleet"
// before its closing parenthesis ("rate 16 per 1s > 10 (rule flood,
// fleet)"). A throttled or banned state keeps the units and moves not:
// violations are this node's requests. An unknown rule, a limit index out
// of range or of a kind the fleet cannot sum is ignored and counted in
// Stats.FleetIgnored; no units change nothing. t is this node's log
// time (its clock, Newest, or the time its sources reached): the other
// nodes' buckets are numbered in theirs.
func (d *Detector) Absorb(t time.Time, a FleetAdd, out []Decision) []Decision {
	if a.Units == 0 {
		return out
	}
	ns := t.UnixNano()
	switch {
	case !d.started || ns > d.newest:
		d.started = true
		d.newest, d.newestT = ns, t
		out = d.expire(ns, out)
	case ns < d.newest-int64(d.opt.Skew):
		ns = d.newest - int64(d.opt.Skew)
		t = d.newestT.Add(-d.opt.Skew)
	}
	id, ok := d.ruleIDs[a.Rule]
	if !ok || int(id) >= len(d.latest) || d.latest[id] == nil {
		d.stats.FleetIgnored++
		return out
	}
	ri := d.latest[id]
	if a.Limit < 0 || a.Limit >= len(ri.lims) || ri.lims[a.Limit].BucketTTL() == 0 {
		d.stats.FleetIgnored++
		return out
	}
	i, s := d.lookup(ri, a.Key)
	if s.ci != ri.ci {
		d.adopt(i, s, ri)
	}
	over := ri.all
	for j := range ri.lims {
		li := &ri.lims[j]
		var v float64
		var o bool
		if j == a.Limit {
			v, o = li.Absorb(d.win(s, j), &d.rings, a.Bucket, a.Units, ns)
		} else {
			q := li.Kind.Query(d.win(s, j), &d.rings, li, ns)
			v, o = q.Value, q.Over
		}
		if p := d.peak(i, j); p != nil {
			*p = li.Worse(*p, v)
		}
		d.vals[j], d.overs[j] = v, o
		if ri.all {
			over = over && o
		} else {
			over = over || o
		}
	}
	if s.phase == phaseBanned {
		d.markDirty(i)
		return d.expire(d.newest, out)
	}
	d.touch(i)
	if s.phase != phaseAllowed || !over {
		return d.expire(d.newest, out)
	}
	x := d.ext(s)
	if x.firstOver == 0 {
		x.firstOver = ns
	}
	d.sig, d.fleetReason = "", true
	out = d.ladder(i, s, ri, t, ns, true, out)
	d.fleetReason = false
	if s.phase != phaseBanned && s.hot() != (s.phase == phaseThrottled) {
		d.touch(i)
	}
	return d.expire(d.newest, out)
}

// Adopt takes a ban or throttle another node decided for (r, dec.Key)
// (dec as that node decided it: Kind, Time, Until, Delay, Violations,
// Reason, Origin, Who, LogOnly) and returns the decision this node hands
// its actions and store, and whether anything changed:
//
//   - Ban: the key is banned until dec.Until (zero: until lifted), as
//     Impose bans it: not charged meanwhile, an unban at until or by
//     Lift, saved and restored. A fleet rule's ban (Origin "detector",
//     r.Fleet) counts as an earlier ban of the key for escalation
//     (ban.factor), as a ban of this node's would, so that escalation is
//     fleet-wide; a scope: node rule's does not (its ladder is this
//     node's, like its windows), nor does an operator's, as Impose's
//     does not. A key already banned
//     here is not counted again (one ban, whichever node decided it
//     first). The circuit breaker does not count it: the deciding node's
//     did. The decision's Addresses are those seen here on a key that is
//     not an address within the rule's longest window (as Impose's),
//     with those dec carries.
//   - Throttle: the key is throttled until dec.Until with dec.Delay (its
//     violations the larger of this node's and dec's); a later entry of
//     it here before until is a violation, as after a throttle of this
//     node's. A throttle never replaces a ban.
//   - Unban: Lift (reason and origin as dec gives them); false when the
//     key was not banned (a throttle is ended silently, as Lift ends it).
//
// If the key is already banned (or throttled, for a throttle) with an
// until at or after dec.Until, nothing changes (false).
func (d *Detector) Adopt(r *rules.Rule, dec Decision) (Decision, bool) {
	switch dec.Kind {
	case Unban:
		i, s := d.find(r, dec.Key)
		if s == nil {
			return Decision{}, false
		}
		if s.phase != phaseBanned {
			d.Lift(dec.Time, r, dec.Key, nil)
			return Decision{}, false
		}
		reason := dec.Reason
		if reason == "" {
			reason = "lifted"
		}
		u := d.unban(i, s, dec.Time, reason, nil)[0]
		u.Origin, u.Who = dec.Origin, dec.Who
		return u, true
	case Ban, Throttle:
	default:
		return Decision{}, false
	}
	ri := d.rule(r)
	until := int64(1<<63 - 1) // zero: until lifted
	if !dec.Until.IsZero() {
		until = dec.Until.UnixNano()
	}
	if _, s := d.find(r, dec.Key); s != nil {
		x := d.xOf(s)
		switch {
		case s.phase == phaseBanned && (dec.Kind == Throttle || x.until >= until),
			s.phase == phaseThrottled && dec.Kind == Throttle && x.until >= until:
			return Decision{}, false
		}
	}
	i, s := d.lookup(ri, dec.Key)
	if s.ci != ri.ci {
		d.adopt(i, s, ri)
	}
	x := d.ext(s)
	ns := dec.Time.UnixNano()
	d.willSee(s, netip.Addr{}, ns)
	s.seen = max(s.seen, ns)
	addrs := mergeAddrs(d.addresses(s, ri, ns), dec.Addresses)
	out := Decision{Rule: r.Name, Key: d.keys.textOf(s.kid), Kind: dec.Kind, Time: dec.Time, Until: dec.Until,
		Violations: dec.Violations, Reason: dec.Reason, Origin: dec.Origin, Who: dec.Who, LogOnly: dec.LogOnly}
	if dec.Kind == Throttle {
		s.phase = phaseThrottled
		x.violations = max(x.violations, dec.Violations)
		x.delay = dec.Delay
		x.last = max(x.last, ns)
		x.until, x.untilT = until, dec.Until
		out.Delay, out.Violations = dec.Delay, x.violations
		out.Addresses = addrs
		d.touch(i)
		return out, true
	}
	if s.phase != phaseBanned {
		if dec.Origin == "detector" && r.Fleet {
			remember := r.Ban.Remember
			if remember <= 0 {
				remember = defaultRemember
			}
			k := 0
			for k < len(x.bans) && x.bans[k] <= ns-int64(remember) {
				k++
			}
			x.bans = x.bans[:copy(x.bans, x.bans[k:])]
			if len(x.bans) == maxBans {
				x.bans = x.bans[:copy(x.bans, x.bans[1:])]
			}
			x.bans = append(x.bans, ns)
		}
		d.unlink(i)
		d.banned++
	}
	s.phase = phaseBanned
	x.violations, x.delay = 0, 0
	x.until, x.untilT = until, dec.Until
	x.banLogOnly = dec.LogOnly
	x.banAddrs = addrs
	d.seq++
	x.banSeq = d.seq
	heap.Push(&d.expiries, expiry{until: x.until, seq: d.seq, slot: i})
	d.markDirty(i)
	out.Addresses = slices.Clone(addrs)
	return out, true
}

// mergeAddrs returns the addresses of a and b (a sorted, as addresses
// returns them), each once, in address order, at most maxAddrs.
func mergeAddrs(a, b []netip.Addr) []netip.Addr {
	if len(b) == 0 {
		return a
	}
	m := append(slices.Clone(a), b...)
	slices.SortFunc(m, netip.Addr.Compare)
	m = slices.Compact(m)
	return m[:min(len(m), maxAddrs)]
}
