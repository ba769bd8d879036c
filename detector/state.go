package detector

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"time"
	"unsafe"

	"github.com/logjail/logjail/internal/word"
)

// Ladder phases of a state.
const (
	phaseAllowed uint8 = iota
	phaseThrottled
	phaseBanned
)

// state is one tracked (rule, key): its windows, totals and ladder. It lives
// in the detector's slab and links into the LRU list by slot number (the
// functions that need its slot are given it). It holds no pointer: its key,
// its compiled rule, its ladder, the addresses it saw and its windows' rings
// are references into the detector's tables and pools, so that a million
// states are 80 bytes each, a few large pages the garbage collector does
// not scan.
type state struct {
	kid        uint32 // its key in d.keys
	prev, next int32  // LRU list
	sib        int32  // next state of the same key (another rule), -1 if none
	aux        uint32 // its ladder and addresses in d.auxs, 0 if none
	more       uint32 // its windows past the first in d.wins, 0 if none
	ci         uint16 // its compiled rule: d.infos[ci] (the one its windows were built for)
	phase      uint8
	flags      uint8  // flagHot, flagMulti, flagOne and the checkpoint bits (flagDirty, ...)
	reqs       uint32 // entries charged, the low 32 bits (the rest in extra.reqsHi: requests)
	seen       int64  // log time of the newest entry, charged or blocked, unix ns
	cpu        float64
	win0       window // the rule's first limit
}

// Bits of state.flags beside the checkpoint's (snapshot.go).
const (
	flagOne   uint8 = 1 << 4 // its addresses seen are one, its key's (keyTable.addrOf), seen at s.seen
	flagHot   uint8 = 1 << 6 // on the hot LRU list (throttled when linked)
	flagMulti uint8 = 1 << 7 // not a single address: track the addresses seen
)

func (s *state) hot() bool   { return s.flags&flagHot != 0 }
func (s *state) multi() bool { return s.flags&flagMulti != 0 }

func (s *state) setFlag(f uint8, on bool) {
	if on {
		s.flags |= f
	} else {
		s.flags &^= f
	}
}

// aux is the part of a state that only some states need: the ladder of
// keys over a limit or banned before, and the addresses seen on keys that
// are not single addresses.
type aux struct {
	x      *extra
	addrs  uint32 // the addresses seen, a run of d.addrs
	na, ca uint8  // addresses in it, its length
}

// extra is the ladder of a state.
type extra struct {
	until      int64     // end of the throttle or ban, unix ns
	untilT     time.Time // the same, as decided
	delay      time.Duration
	last       int64 // previous entry while throttled, unix ns
	violations int
	firstOver  int64
	banLogOnly bool
	banSeq     uint64       // the expiry heap's seq of the current ban
	blocked    int64        // entries seen while banned (only a state banned once has them)
	reqsHi     uint32       // entries charged, above the state's 32 bits (4 billion)
	bans       []int64      // start of earlier bans within remember, oldest first
	banAddrs   []netip.Addr // the addresses the current ban blocks
}

// zero reports whether x holds nothing.
func (x *extra) zero() bool {
	return x.until == 0 && x.untilT.IsZero() && x.delay == 0 && x.last == 0 && x.violations == 0 &&
		x.firstOver == 0 && !x.banLogOnly && x.banSeq == 0 && len(x.bans) == 0 && len(x.banAddrs) == 0
}

// addrSeen is an address seen on a key and when, without a pointer: the
// address as 16 bytes (an IPv4 address as IPv4-mapped IPv6, and read back
// as IPv4; zones are not kept).
type addrSeen struct {
	hi, lo uint64
	seen   int64
}

func (a addrSeen) key() addrKey { return addrKey{a.hi, a.lo} }

func makeAddrSeen(a netip.Addr, ns int64) addrSeen {
	hi, lo := word.Addr(a) // As16's words: Unmap changes none of them
	return addrSeen{hi: hi, lo: lo, seen: ns}
}

func (a *addrSeen) addr() netip.Addr {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], a.hi)
	binary.BigEndian.PutUint64(b[8:], a.lo)
	return netip.AddrFrom16(b).Unmap()
}

const (
	maxAddrs = 64 // addresses remembered per key that is not an address
	maxBans  = 64 // earlier bans remembered per key
)

// ri returns the compiled rule s's windows were built for.
func (d *Detector) ri(s *state) *ruleInfo { return d.infos[s.ci] }

// auxOf returns s's aux, or nil.
func (d *Detector) auxOf(s *state) *aux {
	if s.aux == 0 {
		return nil
	}
	return d.auxs.At(s.aux)
}

// makeAux returns s's aux, made if s has none.
func (d *Detector) makeAux(s *state) *aux {
	if s.aux == 0 {
		s.aux = d.auxs.Alloc(1)
	}
	return d.auxs.At(s.aux)
}

// xOf returns s's ladder, or nil.
func (d *Detector) xOf(s *state) *extra {
	if a := d.auxOf(s); a != nil {
		return a.x
	}
	return nil
}

// ext returns s's ladder, made if s has none.
func (d *Detector) ext(s *state) *extra {
	a := d.makeAux(s)
	if a.x == nil {
		a.x = &extra{}
		d.extras++
	}
	return a.x
}

// requests returns the entries charged to s.
func (d *Detector) requests(s *state) int64 {
	n := int64(s.reqs)
	if x := d.xOf(s); x != nil {
		n += int64(x.reqsHi) << 32
	}
	return n
}

// countRequest counts one entry charged to s.
func (d *Detector) countRequest(s *state) {
	s.reqs++
	if s.reqs == 0 {
		d.ext(s).reqsHi++
	}
}

// setRequests sets the entries charged to s (a restore).
func (d *Detector) setRequests(s *state, n int64) {
	s.reqs = uint32(n)
	if hi := uint32(uint64(n) >> 32); hi != 0 {
		d.ext(s).reqsHi = hi
	}
}

// blocked returns the entries seen while banned.
func (d *Detector) blocked(s *state) int64 {
	if x := d.xOf(s); x != nil {
		return x.blocked
	}
	return 0
}

// seenAddrs returns the addresses s saw (nil if none), valid until s
// notes another and, for a state with flagOne (whose one address is
// copied to d.one), until the next call.
func (d *Detector) seenAddrs(s *state) []addrSeen {
	if s.flags&flagOne != 0 {
		k := d.keys.addrOf(s.kid)
		d.one[0] = addrSeen{hi: k.hi, lo: k.lo, seen: s.seen}
		return d.one[:]
	}
	a := d.auxOf(s)
	if a == nil || a.ca == 0 {
		return nil
	}
	return d.addrs.Get(a.addrs, uint16(a.ca))[:a.na]
}

// willSee keeps s's addresses exact before s.seen moves to ns for an entry
// from addr (invalid: none, as a blocked entry or an operator's ban): a
// state with flagOne whose address is not the one that moves s.seen gets
// its own run of addresses first (spill).
func (d *Detector) willSee(s *state, addr netip.Addr, ns int64) {
	if s.flags&flagOne == 0 || ns <= s.seen {
		return
	}
	if !addr.IsValid() || d.keys.addrOf(s.kid) != makeAddrSeen(addr, 0).key() {
		d.spill(s)
	}
}

// spill moves the one address of a state with flagOne into its own run.
func (d *Detector) spill(s *state) {
	one := d.seenAddrs(s)[0]
	s.flags &^= flagOne
	a := d.makeAux(s)
	d.growAddrs(a)
	d.addrs.Get(a.addrs, uint16(a.ca))[0] = one
	a.na = 1
}

// win returns s's window of its rule's limit j.
func (d *Detector) win(s *state, j int) *window {
	if j == 0 {
		return &s.win0
	}
	return &d.wins.Get(s.more, uint16(len(d.ri(s).lims)-1))[j-1]
}

// initWindows gives s empty windows for its rule's limits.
func (d *Detector) initWindows(i int32, s *state) {
	lims := d.ri(s).lims
	if len(lims) > 1 {
		s.more = d.wins.Alloc(uint16(len(lims) - 1))
	}
	for j := range lims {
		if p := d.peak(i, j); p != nil {
			*p = lims[j].InitialPeak()
		}
	}
}

// peak returns where the peak of limit j of the state in slot i is kept,
// or nil when the detector keeps no peaks (Options.NoPeaks). Peaks are kept
// beside the slab, a row of peakW per slot, so that a detector that does
// not need them (a daemon) does not pay for them.
func (d *Detector) peak(i int32, j int) *float64 {
	if d.peakW == 0 {
		return nil
	}
	return &d.peakRows[i>>chunkBits][int(i&(1<<chunkBits-1))*d.peakW+j]
}

// peakValue returns the peak of limit j (li) of the state in slot i: the
// initial one when the detector keeps no peaks.
func (d *Detector) peakValue(i int32, j int, li *limitInfo) float64 {
	if p := d.peak(i, j); p != nil {
		return *p
	}
	return li.InitialPeak()
}

// widenPeaks makes the rows of peaks w wide (a rule with more limits than
// any before), keeping what they hold.
func (d *Detector) widenPeaks(w int) {
	rows := make([][]float64, len(d.chunks))
	for c := range rows {
		rows[c] = make([]float64, w<<chunkBits)
		if c < len(d.peakRows) && d.peakW > 0 {
			for i := range 1 << chunkBits {
				copy(rows[c][i*w:], d.peakRows[c][i*d.peakW:(i+1)*d.peakW])
			}
		}
	}
	d.peakRows, d.peakW = rows, w
}

// freeWindows releases s's rings and windows past the first.
func (d *Detector) freeWindows(s *state) {
	lims := d.ri(s).lims
	for j := range lims {
		d.win(s, j).Release(&d.rings)
	}
	if s.more != 0 {
		d.wins.Release(s.more, uint16(len(lims)-1))
		s.more = 0
	}
	s.win0 = window{}
}

// bindRule points s, new, at the compiled rule ri.
func (d *Detector) bindRule(s *state, ri *ruleInfo) {
	s.ci = ri.ci
	ri.refs++
}

// adopt moves s to a new compiled rule of the same name (a reload),
// keeping its windows when the limits are the same.
func (d *Detector) adopt(i int32, s *state, ri *ruleInfo) {
	old := d.ri(s)
	same := slices.Equal(old.lims, ri.lims)
	if !same {
		d.freeWindows(s)
		d.bumpGen(i) // its journal entries were of the old limits
	}
	d.unref(old)
	d.bindRule(s, ri)
	if !same {
		d.initWindows(i, s)
	}
}

// allow ends a throttle or ban: violations and delay reset, earlier bans stay.
func (d *Detector) allow(s *state) {
	s.phase = phaseAllowed
	if x := d.xOf(s); x != nil {
		x.violations, x.delay, x.until, x.untilT = 0, 0, 0, time.Time{}
	}
}

// noteAddr records that addr was seen on s's key at ns: at most maxAddrs,
// the least recent replaced first. The first address of a state, seen at
// its newest time, is its key's when the key has that one or none: the
// state holds it as flagOne (no aux, no run), as long as every entry that
// moves s.seen is from that address (willSee). The addresses under a
// prefix are the same for every rule that charges the prefix, most keys
// see one, and their times are then each state's own s.seen: exact, and
// 16 bytes a key instead of 40 a state.
func (d *Detector) noteAddr(s *state, addr netip.Addr, ns int64) {
	if !addr.IsValid() {
		return
	}
	seen := makeAddrSeen(addr, ns)
	if s.flags&flagOne != 0 {
		if d.keys.addrOf(s.kid) == seen.key() {
			return // seen at s.seen, which is at least ns
		}
		d.spill(s)
	}
	a := d.auxOf(s)
	if (a == nil || a.na == 0) && ns == s.seen && d.keys.claimAddr(s.kid, seen.key()) {
		s.flags |= flagOne
		return
	}
	a = d.makeAux(s)
	as := d.seenAddrs(s)
	oldest := 0
	for i := range as {
		p := &as[i]
		if p.hi == seen.hi && p.lo == seen.lo {
			p.seen = max(p.seen, ns)
			return
		}
		if p.seen < as[oldest].seen {
			oldest = i
		}
	}
	if int(a.na) < maxAddrs {
		if a.na == a.ca {
			d.growAddrs(a)
		}
		d.addrs.Get(a.addrs, uint16(a.ca))[a.na] = seen
		a.na++
		return
	}
	as[oldest] = seen
}

// growAddrs doubles the run of a's addresses (up to maxAddrs).
func (d *Detector) growAddrs(a *aux) {
	c := uint8(min(max(2*int(a.ca), 1), maxAddrs))
	ref := d.addrs.Alloc(uint16(c))
	if a.ca > 0 {
		copy(d.addrs.Get(ref, uint16(c)), d.addrs.Get(a.addrs, uint16(a.ca)))
		d.addrs.Release(a.addrs, uint16(a.ca))
	}
	a.addrs, a.ca = ref, c
}

// setAddrs replaces the addresses s saw (a restore).
func (d *Detector) setAddrs(s *state, as []addrSeen) {
	if len(as) == 0 {
		return
	}
	a := d.makeAux(s)
	for a.ca < uint8(len(as)) {
		d.growAddrs(a)
	}
	copy(d.addrs.Get(a.addrs, uint16(a.ca)), as)
	a.na = uint8(len(as))
}

// shareAddr makes s a state with flagOne if its one address, seen at
// s.seen, is its key's or its key has none (a restored state, once it has
// its key): as noteAddr would have.
func (d *Detector) shareAddr(s *state) {
	a := d.auxOf(s)
	if a == nil || a.na != 1 || s.flags&flagOne != 0 {
		return
	}
	one := d.addrs.Get(a.addrs, uint16(a.ca))[0]
	if one.seen != s.seen || !d.keys.claimAddr(s.kid, one.key()) {
		return
	}
	d.addrs.Release(a.addrs, uint16(a.ca))
	a.addrs, a.na, a.ca = 0, 0, 0
	s.flags |= flagOne
	if a.x == nil {
		d.auxs.Release(s.aux, 1)
		s.aux = 0
	}
}

// addressesSince returns the addresses s saw after since, in address order.
func (d *Detector) addressesSince(s *state, since int64) []netip.Addr {
	var as []netip.Addr
	for _, a := range d.seenAddrs(s) {
		if a.seen > since {
			as = append(as, a.addr())
		}
	}
	slices.SortFunc(as, netip.Addr.Compare)
	return as
}

// freeAux releases s's ladder and addresses.
func (d *Detector) freeAux(s *state) {
	a := d.auxOf(s)
	if a == nil {
		return
	}
	if a.ca > 0 {
		d.addrs.Release(a.addrs, uint16(a.ca))
	}
	if a.x != nil {
		d.extras--
	}
	d.auxs.Release(s.aux, 1) // zeroes a, so the collector may take a.x
	s.aux = 0
}

// Sizes for the memory estimate (Memory).
const (
	windowSize     = int64(unsafe.Sizeof(window{}))
	extraSize      = int64(unsafe.Sizeof(extra{}))
	auxSize        = int64(unsafe.Sizeof(aux{}))
	addrSeenSize   = int64(unsafe.Sizeof(addrSeen{}))
	stateSize      = int64(unsafe.Sizeof(state{}))
	fleetEntrySize = int64(unsafe.Sizeof(fleetEntry{}))
)
