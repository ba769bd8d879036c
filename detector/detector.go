package detector

import (
	"math"
	"net/netip"
	"strings"
	"time"

	"github.com/logjail/logjail/internal/pool"
	"github.com/logjail/logjail/rules"
)

// Kind is the kind of a Decision.
type Kind string

// Decision kinds.
const (
	Throttle Kind = "throttle" // answer with Retry-After: Delay until Until
	Ban      Kind = "ban"      // block until Until (zero: until lifted)
	Unban    Kind = "unban"    // lift a ban
)

// Decision is what the detector decided about one key at one log time.
type Decision struct {
	Rule       string        // rule name ("range:NAME" for range rules, "deny" for static bans)
	Key        string        // canonical key
	Kind       Kind          //
	Time       time.Time     // log time of the decision (for an unban: the ban's until)
	Until      time.Time     // end of the throttle or ban; zero for static bans and unbans
	Delay      time.Duration // throttle delay (Retry-After); 0 for bans and unbans
	Violations int           // violations while throttled when the decision was made
	// Addresses are, for keys that are not single addresses (prefixes, users,
	// user agents, ranges), the addresses seen on the key within the rule's
	// longest window, at most 64, in address order; each is blocked as its own
	// address key. An unban carries the addresses of the ban it ends. Callers
	// must not modify the slice.
	Addresses []netip.Addr
	Reason    string // for a person: "rate 31 per 10s > 30 (rule scanners)"
	Origin    string // "detector", "deny", "range" or "operator"
	Who       string // the operator, for an operator's decision (the daemon's control sets it)
	LogOnly   bool   // record, act on nothing: the rule is log_only, or the circuit breaker was open
	Node      string // the fleet node that decided it (fleet.node); "" outside a fleet
}

// Options configure a Detector.
type Options struct {
	// Skew is how much older than the newest time seen an entry may be and
	// still be counted in its own bucket (rules.Config.Skew).
	Skew time.Duration
	// MaxKeys caps the tracked (rule, key) states; ≤ 0 means 1,000,000.
	MaxKeys int
	// MaxBansPerMinute trips the circuit breaker when exceeded; 0 means 100,
	// < 0 disables the breaker.
	MaxBansPerMinute int
	// Evicted, if set, is called with the totals and peaks of a state just
	// before it is evicted, so that a report can keep them. The KeyPeak's
	// Key and Peak are valid only during the call (strings.Clone the key
	// to keep it).
	Evicted func(KeyPeak)
	// NoPeaks keeps no peaks: KeyPeak.Peak holds each limit's initial
	// value (0, +Inf for a last N), and checkpoints save those. For a
	// daemon, which reads no peaks (8 bytes a limit a key less).
	NoPeaks bool
	// BreakerTripped, if set, is called when the circuit breaker trips,
	// with its state (the ban that tripped it, the count, the window),
	// before that ban's decision is appended.
	BreakerTripped func(BreakerState)
	// Fleet journals the charges of fleet rules (rules.Rule.Fleet) for
	// FleetDeltas: the daemon sets it when the configuration has a
	// fleet. Off (replay, a daemon alone), a fleet rule is an ordinary
	// rule, so that a replay of every node's logs merged decides what
	// the fleet decides.
	Fleet bool
}

// Stats counts what a Detector did.
type Stats struct {
	Charges      int64 `json:"charges"`       // charges counted in windows
	Late         int64 `json:"late"`          // of which older than newest−skew, counted in the oldest open bucket
	Blocked      int64 `json:"blocked"`       // charges of banned keys: counted here, not in windows
	Keys         int   `json:"keys"`          // tracked (rule, key) states
	Banned       int   `json:"banned"`        // of which banned now
	Evictions    int64 `json:"evictions"`     // states evicted by MaxKeys
	Throttles    int64 `json:"throttles"`     // throttle decisions
	Bans         int64 `json:"bans"`          // ban decisions of rules (not static)
	Unbans       int64 `json:"unbans"`        // unban decisions of rules (not static)
	BreakerTrips int64 `json:"breaker_trips"` // times the circuit breaker tripped
	BreakerOpen  bool  `json:"breaker_open"`  // decisions are LogOnly until ResetBreaker
	// The fleet's counters (not saved by a checkpoint: this process's).
	FleetDropped int64 `json:"fleet_dropped,omitempty"` // charges not journaled: the journal was full
	FleetIgnored int64 `json:"fleet_ignored,omitempty"` // Absorb calls ignored: unknown rule, or no such summable limit
}

// KeyPeak is the tuning summary of one tracked (rule, key).
type KeyPeak struct {
	Rule     *rules.Rule
	Key      string  // valid only during the call it is given to
	Requests int64   // entries charged
	Blocked  int64   // entries seen while banned, not charged
	CPU      float64 // CPU seconds charged
	// Peak holds, per limit of the rule, the highest value the limit's window
	// reached, in the limit's own units:
	//   - rate: the count in the window;
	//   - cpu or duration share: the share as a fraction (0.07 for 7%);
	//   - token bucket: the bucket level in requests, counting the request
	//     itself (over when above the burst);
	//   - last N within D: the shortest span of N requests in seconds, +Inf
	//     while the key has had fewer than N (over when below D).
	// The slice is reused between calls.
	Peak      []float64
	FirstOver time.Time // first entry over the rule's limits; zero if never
}

// Detector holds the windows and ladders of every tracked (rule, key). The
// zero value is not usable; call New. A Detector is used by one goroutine.
type Detector struct {
	opt     Options
	maxKeys int
	maxBans int

	rulesByIndex []*ruleInfo
	rulesByPtr   map[*rules.Rule]*ruleInfo
	ruleIDs      map[string]int32
	// infos are the compiled rules states are built for, by ruleInfo.ci
	// (a place is reused once no state names it and a newer compile of its
	// rule is in use); latest is the newest compile of each rule, by id.
	infos  []*ruleInfo
	freeCI []uint16
	latest []*ruleInfo

	// keys maps a key to the first of its states (one per rule), chained
	// by state.sib in the order they were made (newState adds at the end,
	// a restored checkpoint at the front: the order changes no decision,
	// only how many states a lookup reads); lastKey (or lastFixed) and
	// lastHead remember the previous lookup, since the charges of one entry
	// come one rule after another with one key. It holds while lastHead ≥ 0: lastFixed when
	// that key is a fixed one, else lastKey, a view of the key table's own
	// text (never the caller's string, which may be a buffer read into
	// again); a drop of any key clears it (lastHead -1).
	keys      keyTable
	lastKey   string
	lastFixed rules.FixedKey
	lastHead  int32
	chunks    []*[1 << chunkBits]state // the slab: at indexes a chunk by a mask, no bounds check within it
	// The pools states refer to: their windows' rings, their windows past
	// the first, their ladders and addresses seen (aux), the addresses.
	rings  pool.Pool[uint64]
	wins   pool.Pool[window]
	auxs   pool.Pool[aux]
	addrs  pool.Pool[addrSeen]
	extras int         // ladders made (each an allocation of extraSize)
	one    [1]addrSeen // seenAddrs' copy of a flagOne state's address
	// peakRows hold the peaks of the states' limits, a row of peakW per
	// slot, chunked as the slab is (peak); none with NoPeaks.
	peakRows [][]float64
	peakW    int
	used     int32      // slots handed out
	free     []int32    // slots of evicted states
	lruLen   int        // states on the LRU lists
	lru      [2]lruList // listCold: allowed states; listHot: throttled ones
	banned   int        // states banned (off the LRU lists)

	expiries expiryHeap
	seq      uint64

	newest  int64     // newest log time seen, unix ns
	newestT time.Time // the same as given
	started bool

	brk breaker

	static map[string]rules.StaticBan

	stats Stats

	// Checkpoint bookkeeping (snapshot.go): the slots of states changed
	// since the last Changes, the states dropped since, the static bans
	// changed since, and the LRU stamp handed out last.
	dirty       []int32
	moved       []int32 // changes' scratch: the states moved on a list, most recent first
	tracking    bool    // dirty is kept: Changes was called, or Restore
	gone        []goneKey
	staticDirty map[string]struct{}
	lruStamp    uint64
	ks          KeyState
	buf         []byte
	zeroX       extra // the ladder of a state without one, as written

	// The fleet (fleet.go): the journal of charges of fleet rules since
	// the last FleetDeltas, its bound, whether it is full until the next
	// drain, and the generation of each slot (chunked as the slab is;
	// only with Options.Fleet).
	journal     []fleetEntry
	journalMax  int
	journalFull bool
	gens        [][]uint32
	fleetReason bool // the decision being made is on the fleet's sums (a reason says so)

	// relink moves a state to its list's front by unlinkS and pushFrontS
	// always, as before touchS's own steps (TestTouchAsRelink).
	relink bool
	// chainFront makes a key's new state the first of its chain, as
	// before newState put it at the end (TestChainOrderChangesNothing).
	chainFront bool

	// scratch for one charge
	vals  []float64
	overs []bool
	peaks []float64
	sig   string // the charge's signature (rules.Charge.Signature), for its reasons
	// chargeT is the log time of the charges being made (Charge,
	// ChargeAll), as the ladder's decisions carry it.
	chargeT time.Time
}

// New returns an empty Detector.
func New(o Options) *Detector {
	d := &Detector{
		opt:        o,
		maxKeys:    o.MaxKeys,
		maxBans:    o.MaxBansPerMinute,
		rulesByPtr: map[*rules.Rule]*ruleInfo{},
		ruleIDs:    map[string]int32{},
		keys:       newKeyTable(),
		lastHead:   -1,
		lru:        [2]lruList{{-1, -1}, {-1, -1}},
		journalMax: defaultJournalMax,
	}
	if d.opt.Skew < 0 {
		d.opt.Skew = 0
	}
	if d.maxKeys <= 0 {
		d.maxKeys = 1_000_000
	}
	if d.maxBans == 0 {
		d.maxBans = 100
	}
	return d
}

// Charge feeds one charged request at log time t and appends the decisions it
// causes to out: first the unbans of bans that ended by t, then at most one
// throttle or ban for c's (rule, key).
func (d *Detector) Charge(t time.Time, c *rules.Charge, out []Decision) []Decision {
	ns, out := d.step(t, 1, out)
	return d.charge(ns, c, out)
}

// ChargeAll is Charge of each of cs in turn at log time t (the charges of
// one entry, as the pipeline makes them): the same decisions in the same
// order, and the clock's step taken once. A later charge of cs would find
// the clock where the first left it (only that step moves it): nothing to
// do, but count a late entry again (TestChargeAllAsCharge).
func (d *Detector) ChargeAll(t time.Time, cs []rules.Charge, out []Decision) []Decision {
	if len(cs) == 0 {
		return out
	}
	ns, out := d.step(t, len(cs), out)
	for i := range cs {
		out = d.charge(ns, &cs[i], out)
	}
	return out
}

// step takes the clock's step for n charges at log time t (clock, when t
// moves it or is late: n late entries then) and sets chargeT; it returns
// the time to charge at, in ns.
func (d *Detector) step(t time.Time, n int, out []Decision) (int64, []Decision) {
	ns := t.UnixNano()
	if !d.started || ns > d.newest || ns < d.newest-int64(d.opt.Skew) {
		var late bool
		if t, ns, late, out = d.clock(t, ns, out); late {
			d.stats.Late += int64(n)
		}
	}
	d.chargeT = t
	return ns, out
}

// clock is a charge's step of the clock at log time t (ns), newer than
// the newest or more than the skew older: a newer t moves it (and appends
// the unbans due), an older one is late, charged at the oldest time still
// open (its t and ns).
func (d *Detector) clock(t time.Time, ns int64, out []Decision) (time.Time, int64, bool, []Decision) {
	if !d.started || ns > d.newest {
		d.started = true
		d.newest, d.newestT = ns, t
		return t, ns, false, d.expire(ns, out)
	}
	return d.newestT.Add(-d.opt.Skew), d.newest - int64(d.opt.Skew), true, out
}

// charge is Charge of c at d.chargeT (ns), the clock stepped.
func (d *Detector) charge(ns int64, c *rules.Charge, out []Decision) []Decision {
	ri := d.ruleAt(c.Rule)
	if ri == nil {
		ri = d.rule(c.Rule)
	}
	var i int32
	var s *state
	if !c.Fixed.IsZero() {
		i, s = d.lookupFixed(ri, &c.Fixed)
	} else {
		i, s = d.lookupK(ri, keyOf(c.Key))
	}
	if s.flags&flagOne != 0 && ns > s.seen { // willSee's own test, without the call
		if s.phase == phaseBanned {
			d.willSee(s, netip.Addr{}, ns) // a blocked entry notes no address
		} else {
			d.willSee(s, c.Addr, ns)
		}
	}
	s.seen = max(s.seen, ns)
	if s.phase == phaseBanned {
		d.stats.Blocked++
		d.xOf(s).blocked++ // a banned state has its extra
		d.markDirty(i)
		return out
	}
	d.touchS(i, s)
	if s.ci != ri.ci {
		d.adopt(i, s, ri)
	}
	d.stats.Charges++
	d.countRequest(s)
	s.cpu += c.CPU
	if s.multi() {
		d.noteAddr(s, c.Addr, ns)
	}
	over := d.measure(i, s, ri, ns, c)
	if over {
		x := d.ext(s)
		if x.firstOver == 0 {
			x.firstOver = ns
		}
	}
	if over || s.phase != phaseAllowed {
		// (An allowed state under its limits stays as it is: ladder's
		// first step, without the call.)
		d.sig = c.Signature // for the reasons (overReason)
		out = d.ladder(i, s, ri, d.chargeT, ns, over, out)
	}
	if s.phase != phaseBanned && s.hot() != (s.phase == phaseThrottled) {
		d.touchS(i, s) // throttled or allowed again: to the front of its list
	}
	// A ban decided on a late entry may already be over.
	if len(d.expiries) > 0 && d.expiries[0].until <= d.newest { // expire's own test, without the call
		return d.expire(d.newest, out)
	}
	return out
}

// Advance moves log time to t without a charge and appends the unbans of bans
// that ended by t, in order of their until. A t older than the newest time
// seen changes nothing.
func (d *Detector) Advance(t time.Time, out []Decision) []Decision {
	if ns := t.UnixNano(); !d.started || ns > d.newest {
		d.started = true
		d.newest, d.newestT = ns, t
	}
	return d.expire(d.newest, out)
}

// Newest returns the newest log time the detector was given (zero before
// the first): its clock, which a checkpoint saves and Restore gives back.
func (d *Detector) Newest() time.Time {
	if !d.started {
		return time.Time{}
	}
	return d.newestT
}

// Status reports the ladder state of (r, key) at log time t: Ban or Throttle
// with its until, or "" when the key is allowed or not tracked.
func (d *Detector) Status(r *rules.Rule, key string, t time.Time) (Kind, time.Time) {
	return d.status(r, keyOf(key), t)
}

func (d *Detector) status(r *rules.Rule, k akey, t time.Time) (Kind, time.Time) {
	_, s := d.findK(r, k)
	if s == nil {
		return "", time.Time{}
	}
	x := d.xOf(s)
	if x == nil || t.UnixNano() >= x.until {
		return "", time.Time{}
	}
	switch s.phase {
	case phaseBanned:
		return Ban, x.untilT
	case phaseThrottled:
		return Throttle, x.untilT
	}
	return "", time.Time{}
}

// Banned reports whether the (rule, key) of c is banned at log time t.
func (d *Detector) Banned(t time.Time, c *rules.Charge) bool {
	k, _ := d.status(c.Rule, chargeKey(c), t)
	return k == Ban
}

// Lift ends the ban or throttle of (r, key) at log time t, as an operator's
// unban does, and appends the unban decision (reason "lifted") if the key
// was banned. Earlier bans stay remembered for escalation. Either way the
// key becomes the most recently charged, as a charge would make it.
func (d *Detector) Lift(t time.Time, r *rules.Rule, key string, out []Decision) []Decision {
	i, s := d.find(r, key)
	if s == nil {
		return out
	}
	switch s.phase {
	case phaseBanned:
		out = d.unban(i, s, t, "lifted", out)
	case phaseThrottled:
		d.allow(s)
		d.touch(i)
	}
	return out
}

// ResetBreaker closes the circuit breaker if it is open: later decisions
// act again, and it counts bans afresh. It reports whether it was open (a
// closed breaker is left as it is). The trips and the last trip stay
// (Breaker).
func (d *Detector) ResetBreaker() bool {
	if !d.brk.open {
		return false
	}
	d.brk = breaker{trips: d.brk.trips, last: d.brk.last}
	return true
}

// Stats returns the detector's counters.
func (d *Detector) Stats() Stats {
	st := d.stats
	st.Keys = d.lruLen + d.banned
	st.Banned = d.banned
	st.BreakerTrips = d.brk.trips
	st.BreakerOpen = d.brk.open
	return st
}

// Memory is an estimate of the heap a Detector holds.
type Memory struct {
	States int   // tracked (rule, key) states, as Stats.Keys
	Keys   int   // distinct keys among them
	Bytes  int64 // the states' slots, windows, rings, ladders and addresses, and the key index
}

// PerState returns Bytes over States (0 when none is tracked).
func (m Memory) PerState() int64 {
	if m.States == 0 {
		return 0
	}
	return m.Bytes / int64(m.States)
}

// Memory estimates the heap the detector holds, from the sizes of its
// slab, pools and key table (no walk over the states): within a tenth of
// runtime.MemStats' measure after a GC (TestMemoryEstimate). The pools
// keep what they held at their largest; the collector's headroom (the
// process needs up to 1.25x this, see internal/gcgoal) is not in it.
func (d *Detector) Memory() Memory {
	n := int64(len(d.chunks)) << chunkBits * stateSize
	n += d.rings.Capacity()*8 + d.wins.Capacity()*windowSize + d.auxs.Capacity()*auxSize +
		d.addrs.Capacity()*addrSeenSize + int64(d.extras)*extraSize + int64(len(d.peakRows)*d.peakW)<<chunkBits*8 +
		int64(len(d.gens))<<chunkBits*4 + int64(cap(d.journal))*fleetEntrySize
	return Memory{
		States: d.lruLen + d.banned,
		Keys:   d.keys.n,
		Bytes:  n + d.keys.memory() + int64(cap(d.dirty))*4,
	}
}

// Peaks calls fn for every tracked (rule, key), in the order the states were
// created or restored (slots of evicted states are reused). The KeyPeak's
// Key and Peak are valid only during the call: a million keys cost no
// copy (strings.Clone the key to keep it).
func (d *Detector) Peaks(fn func(KeyPeak)) {
	for i := int32(0); i < d.used; i++ {
		if s := d.at(i); s.kid != 0 {
			fn(d.keyPeak(i, s))
		}
	}
}

func (d *Detector) keyPeak(i int32, s *state) KeyPeak {
	d.peaks = d.peaks[:0]
	ri := d.ri(s)
	for j := range ri.lims {
		d.peaks = append(d.peaks, d.peakValue(i, j, &ri.lims[j]))
	}
	kp := KeyPeak{Rule: ri.rule, Key: d.keys.view(s.kid), Requests: d.requests(s), Blocked: d.blocked(s), CPU: s.cpu, Peak: d.peaks}
	if x := d.xOf(s); x != nil && x.firstOver != 0 {
		kp.FirstOver = time.Unix(0, x.firstOver).In(d.newestT.Location())
	}
	return kp
}

// rule returns the compiled form of r, made on first sight. Rules are told
// apart by pointer; two rules of one name (a reload) share their states.
func (d *Detector) rule(r *rules.Rule) *ruleInfo {
	if ri := d.ruleAt(r); ri != nil {
		return ri
	}
	ri := d.rulesByPtr[r]
	if ri == nil {
		id, ok := d.ruleIDs[r.Name]
		if !ok {
			id = int32(len(d.ruleIDs))
			d.ruleIDs[r.Name] = id
		}
		ri = compileRule(r, id)
		ri.fleet = r.Fleet && d.opt.Fleet
		d.place(ri)
		if n := len(ri.lims); n > d.peakW && !d.opt.NoPeaks {
			d.widenPeaks(n)
		}
		d.rulesByPtr[r] = ri
		if n := len(ri.lims); n > len(d.vals) {
			d.vals = make([]float64, n)
			d.overs = make([]bool, n)
		}
	}
	if r.Index >= 0 && r.Index < 1<<16 {
		for len(d.rulesByIndex) <= r.Index {
			d.rulesByIndex = append(d.rulesByIndex, nil)
		}
		d.rulesByIndex[r.Index] = ri
	}
	return ri
}

// ruleAt is the compiled form of r found by its index (every charge but
// a rule's first, inlined into Charge), or nil: then rule finds or makes it.
func (d *Detector) ruleAt(r *rules.Rule) *ruleInfo {
	if k := uint(r.Index); k < uint(len(d.rulesByIndex)) {
		if ri := d.rulesByIndex[k]; ri != nil && ri.rule == r {
			return ri
		}
	}
	return nil
}

// place gives ri, just compiled, its place in infos and makes it the
// latest compile of its rule; a compile of the rule no state names any
// more gives its place up.
func (d *Detector) place(ri *ruleInfo) {
	if n := len(d.freeCI); n > 0 {
		ri.ci = d.freeCI[n-1]
		d.freeCI = d.freeCI[:n-1]
		d.infos[ri.ci] = ri
	} else {
		if len(d.infos) > math.MaxUint16 { // state.ci is 16 bits
			panic("detector: too many compiled rules in use")
		}
		ri.ci = uint16(len(d.infos))
		d.infos = append(d.infos, ri)
	}
	for len(d.latest) <= int(ri.id) {
		d.latest = append(d.latest, nil)
	}
	old := d.latest[ri.id]
	d.latest[ri.id] = ri
	if old != nil && old.refs == 0 {
		d.retire(old)
	}
}

// unref counts one state fewer built for ri.
func (d *Detector) unref(ri *ruleInfo) {
	ri.refs--
	if ri.refs == 0 && d.latest[ri.id] != ri {
		d.retire(ri)
	}
}

// retire forgets ri, an older compile no state names: its place is free.
func (d *Detector) retire(ri *ruleInfo) {
	d.infos[ri.ci] = nil
	d.freeCI = append(d.freeCI, ri.ci)
	if d.rulesByPtr[ri.rule] == ri {
		delete(d.rulesByPtr, ri.rule)
	}
	if i := ri.rule.Index; i >= 0 && i < len(d.rulesByIndex) && d.rulesByIndex[i] == ri {
		d.rulesByIndex[i] = nil
	}
}

// find returns the state of (r, key) and its slot, or nil.
func (d *Detector) find(r *rules.Rule, key string) (int32, *state) { return d.findK(r, keyOf(key)) }

// findK returns the state of (r, k) and its slot, or nil.
func (d *Detector) findK(r *rules.Rule, k akey) (int32, *state) {
	id, ok := d.ruleIDs[r.Name]
	if !ok {
		return -1, nil
	}
	for i := d.chainK(k); i >= 0; {
		s := d.at(i)
		if d.ri(s).id == id {
			return i, s
		}
		i = s.sib
	}
	return -1, nil
}

// chain returns the first state of key's chain, or -1.
func (d *Detector) chain(key string) int32 { return d.chainK(keyOf(key)) }

// chainK returns the first state of k's chain, or -1.
func (d *Detector) chainK(k akey) int32 {
	if d.lastHead >= 0 {
		if k.f.IsZero() {
			if d.lastFixed.IsZero() && k.text == d.lastKey {
				return d.lastHead
			}
		} else if k.f == d.lastFixed {
			return d.lastHead
		}
	}
	id := d.keys.findK(k, d.keys.hashK(k))
	if id == 0 {
		return -1
	}
	i := d.keys.rec(id).head
	d.remember(k, id, i)
	return i
}

// remember makes key id (k), whose first state is i, the previous lookup.
func (d *Detector) remember(k akey, id uint32, i int32) {
	if k.f.IsZero() {
		d.lastKey, d.lastFixed = d.keys.view(id), rules.FixedKey{} // the table's text: k's may be a reused buffer's
	} else {
		d.lastKey, d.lastFixed = "", k.f
	}
	d.lastHead = i
}

// lookup returns the state of (ri, key), making it (and evicting the least
// recently charged state if the cap is reached) if there is none.
func (d *Detector) lookup(ri *ruleInfo, key string) (int32, *state) { return d.lookupK(ri, keyOf(key)) }

// lookupK is lookup of the key k.
func (d *Detector) lookupK(ri *ruleInfo, k akey) (int32, *state) {
	if i, s := d.inChain(d.chainK(k), ri); s != nil {
		return i, s
	}
	return d.newState(ri, k)
}

// inChain returns ri's state in the key's chain starting at i, or nil.
func (d *Detector) inChain(i int32, ri *ruleInfo) (int32, *state) {
	for i >= 0 {
		s := d.at(i)
		if s.ci == ri.ci || d.ri(s).id == ri.id { // s built for ri itself: ri's id
			return i, s
		}
		i = s.sib
	}
	return -1, nil
}

// lookupFixed is lookupK of the fixed key f (a charge's, most of them):
// the previous lookup's key compared, or f's slot found, without making an
// akey of f, hashing it as any key or comparing it with the previous
// lookup's twice (TestFixedKeysDecideAsText: as the keys' text;
// TestLookupFixedAsLookupK: as lookupK).
func (d *Detector) lookupFixed(ri *ruleInfo, f *rules.FixedKey) (int32, *state) {
	head := d.lastHead
	if head < 0 || *f != d.lastFixed {
		id := d.keys.findFixed(f, d.keys.hashFixed(*f))
		if id == 0 {
			return d.newState(ri, akey{f: *f})
		}
		head = d.keys.rec(id).head
		d.lastKey, d.lastFixed, d.lastHead = "", *f, head // remember's, for a fixed key
	}
	if i, s := d.inChain(head, ri); s != nil {
		return i, s
	}
	return d.newState(ri, akey{f: *f})
}

// newState makes the state of (ri, k), which has none, evicting the least
// recently charged state if the cap is reached.
func (d *Detector) newState(ri *ruleInfo, k akey) (int32, *state) {
	if d.lruLen+d.banned >= d.maxKeys && d.lruLen > 0 {
		d.evict()
	}
	head := d.chainK(k)
	var i int32
	if n := len(d.free); n > 0 {
		i = d.free[n-1]
		d.free = d.free[:n-1]
	} else {
		i = d.alloc()
	}
	s := d.at(i)
	s.sib = -1
	if head >= 0 && d.chainFront {
		s.kid, s.sib = d.at(head).kid, head
		d.keys.rec(s.kid).head = i
		head = i
	} else if head >= 0 {
		// At the chain's end: a key's states stay in the order they were
		// made, which is the order its entries charge them in (the rules'
		// order), so that the first rule's charge finds its state at the
		// head and the next rule's one further, without reading the state
		// of a rule made later (a 4xx rule's, say) on every entry.
		t := d.at(head)
		for t.sib >= 0 {
			t = d.at(t.sib)
		}
		t.sib = i
		s.kid = t.kid
	} else {
		s.kid = d.keys.insertK(k, d.keys.hashK(k), i)
		head = i
	}
	d.bindRule(s, ri)
	s.setFlag(flagMulti, isMulti(ri.rule.Key, k))
	d.initWindows(i, s)
	d.remember(k, s.kid, head)
	d.pushFrontS(i, s)
	return i, s
}

// isMulti reports whether a key is not a single address, so that its
// decisions list the addresses seen on it: under an ip or prefix rule, a
// key whose text has a "/" (a fixed key that is a prefix).
func isMulti(kind rules.KeyKind, k akey) bool {
	switch kind {
	case rules.KeyIP, rules.KeyPrefix:
		if !k.f.IsZero() {
			return k.f.Multi()
		}
		return strings.IndexByte(k.text, '/') >= 0
	}
	return true
}

const chunkBits = 10

func (d *Detector) alloc() int32 {
	i := d.used
	if int(i>>chunkBits) == len(d.chunks) {
		c := new([1 << chunkBits]state)
		pool.Touch(c[:]) // written before a state straddling its pages is read
		d.chunks = append(d.chunks, c)
		if d.peakW > 0 {
			r := make([]float64, d.peakW<<chunkBits)
			pool.Touch(r)
			d.peakRows = append(d.peakRows, r)
		}
		if d.opt.Fleet {
			d.gens = append(d.gens, make([]uint32, 1<<chunkBits))
		}
	}
	d.used++
	return i
}

func (d *Detector) at(i int32) *state {
	return &d.chunks[i>>chunkBits][i&(1<<chunkBits-1)]
}

// The LRU lists: a list's head is its most recently charged state. A state
// is on the hot list while it is throttled (s.hot()), on the cold one while it
// is allowed; banned states are on neither. Eviction takes the cold list's
// tail, and the hot list's only when the cold one is empty, so that a flood
// of new keys forgets the quiet keys before any key that is violating its
// limits. Every state moved to the front of a list is marked moved (and
// dirty) for the next checkpoint, so that the states moved since the last
// one are the first ones of each list (snapshot.go).

const (
	listCold = 0
	listHot  = 1
)

// lruList is one LRU list: its ends, by slot, -1 when empty.
type lruList struct{ head, tail int32 }

// listOf returns the list s is on (or would go on).
func (d *Detector) listOf(hot bool) *lruList {
	if hot {
		return &d.lru[listHot]
	}
	return &d.lru[listCold]
}

// victim returns the state eviction would take, or -1.
func (d *Detector) victim() int32 {
	if t := d.lru[listCold].tail; t >= 0 {
		return t
	}
	return d.lru[listHot].tail
}

func (d *Detector) pushFront(i int32) { d.pushFrontS(i, d.at(i)) }

// pushFrontS is pushFront of s, the state in slot i.
func (d *Detector) pushFrontS(i int32, s *state) {
	d.linkS(i, s)
	d.markMoved(i, s)
}

// link puts s at the front of the list its phase says.
func (d *Detector) link(i int32) { d.linkS(i, d.at(i)) }

// linkS is link of s, the state in slot i.
func (d *Detector) linkS(i int32, s *state) {
	s.setFlag(flagHot, s.phase == phaseThrottled)
	l := d.listOf(s.hot())
	s.prev, s.next = -1, l.head
	if l.head >= 0 {
		d.at(l.head).prev = i
	} else {
		l.tail = i
	}
	l.head = i
	d.lruLen++
}

func (d *Detector) unlink(i int32) { d.unlinkS(i, d.at(i)) }

// unlinkS is unlink of s, the state in slot i.
func (d *Detector) unlinkS(i int32, s *state) {
	l := d.listOf(s.hot())
	if s.prev >= 0 {
		d.at(s.prev).next = s.next
	} else {
		l.head = s.next
	}
	if s.next >= 0 {
		d.at(s.next).prev = s.prev
	} else {
		l.tail = s.prev
	}
	s.prev, s.next = -1, -1
	d.lruLen--
}

// touch moves s to the front of the list its phase says.
func (d *Detector) touch(i int32) { d.touchS(i, d.at(i)) }

// touchS is touch of s, the state in slot i.
func (d *Detector) touchS(i int32, s *state) {
	hot := s.phase == phaseThrottled
	if hot != s.hot() || d.relink {
		d.unlinkS(i, s) // to the other list
		d.pushFrontS(i, s)
		return
	}
	// On its list already (every charge but a change of phase): to its
	// front, as unlinkS then pushFrontS would, in fewer steps
	// (TestTouchAsRelink).
	l := d.listOf(hot)
	if l.head != i {
		prev, next := s.prev, s.next // prev ≥ 0: i is not the head
		d.at(prev).next = next
		if next >= 0 {
			d.at(next).prev = prev
		} else {
			l.tail = prev
		}
		s.prev, s.next = -1, l.head
		d.at(l.head).prev = i
		l.head = i
	}
	d.markMoved(i, s)
}
