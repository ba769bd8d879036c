package detector

import (
	"net/netip"
	"slices"
	"time"
	"unsafe"
)

// Ladder phases of a state.
const (
	phaseAllowed uint8 = iota
	phaseThrottled
	phaseBanned
)

// state is one tracked (rule, key): its windows, totals and ladder. It lives
// in the detector's slab and links into the LRU list by slot number.
type state struct {
	key        string
	ri         *ruleInfo // the compiled rule its windows were built for
	slot       int32
	prev, next int32 // LRU list
	sib        int32 // next state of the same key (another rule), -1 if none
	gen        uint32
	phase      uint8
	hot        bool  // on the hot LRU list (throttled when linked)
	multi      bool  // not a single address: track the addresses seen
	flags      uint8 // checkpoint bookkeeping (flagDirty, ...)
	seen       int64 // log time of the newest entry, charged or blocked, unix ns
	requests   int64
	cpu        float64
	win0       window   // the rule's first limit
	more       []window // the others
	x          *extra   // ladder and earlier bans, made when needed
	as         *addrSet // addresses seen, for keys that are not single addresses
}

// extra is the part of a state that only keys over a limit or banned before
// need.
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
	bans       []int64      // start of earlier bans within remember, oldest first
	banAddrs   []netip.Addr // the addresses the current ban blocks
}

// addrSet is the addresses seen on a key that is not a single address (at
// most maxAddrs, the least recent replaced first).
type addrSet struct {
	addrs []addrSeen
}

// zero reports whether x holds nothing.
func (x *extra) zero() bool {
	return x.until == 0 && x.untilT.IsZero() && x.delay == 0 && x.last == 0 && x.violations == 0 &&
		x.firstOver == 0 && !x.banLogOnly && x.banSeq == 0 && len(x.bans) == 0 && len(x.banAddrs) == 0
}

type addrSeen struct {
	addr netip.Addr
	seen int64
}

const (
	maxAddrs = 64 // addresses remembered per key that is not an address
	maxBans  = 64 // earlier bans remembered per key
)

func (s *state) ext() *extra {
	if s.x == nil {
		s.x = &extra{}
	}
	return s.x
}

// blocked returns the entries seen while banned.
func (s *state) blocked() int64 {
	if s.x == nil {
		return 0
	}
	return s.x.blocked
}

func (s *state) win(j int) *window {
	if j == 0 {
		return &s.win0
	}
	return &s.more[j-1]
}

func (s *state) initWindows() {
	lims := s.ri.lims
	if len(lims) > 1 {
		s.more = make([]window, len(lims)-1)
	}
	for j := range lims {
		s.win(j).init(&lims[j])
	}
}

// adopt moves a state to a new compiled rule of the same name (a reload),
// keeping its windows when the limits are the same.
func (s *state) adopt(ri *ruleInfo) {
	same := slices.Equal(s.ri.lims, ri.lims)
	s.ri = ri
	if !same {
		s.win0, s.more = window{}, nil
		s.initWindows()
	}
}

// allow ends a throttle or ban: violations and delay reset, earlier bans stay.
func (s *state) allow() {
	s.phase = phaseAllowed
	if s.x != nil {
		s.x.violations, s.x.delay, s.x.until, s.x.untilT = 0, 0, 0, time.Time{}
	}
}

// noteAddr records that addr was seen on s's key at ns.
func (s *state) noteAddr(addr netip.Addr, ns int64) {
	if !addr.IsValid() {
		return
	}
	if s.as == nil {
		s.as = &addrSet{}
	}
	s.as.note(addr, ns)
}

// note records that addr was seen at ns.
func (x *addrSet) note(addr netip.Addr, ns int64) {
	if !addr.IsValid() {
		return
	}
	oldest := 0
	for i := range x.addrs {
		a := &x.addrs[i]
		if a.addr == addr {
			a.seen = max(a.seen, ns)
			return
		}
		if a.seen < x.addrs[oldest].seen {
			oldest = i
		}
	}
	if len(x.addrs) < maxAddrs {
		x.addrs = append(x.addrs, addrSeen{addr, ns})
		return
	}
	x.addrs[oldest] = addrSeen{addr, ns}
}

// addresses returns the addresses seen after since, in address order.
func (x *addrSet) addresses(since int64) []netip.Addr {
	var as []netip.Addr
	for _, a := range x.addrs {
		if a.seen > since {
			as = append(as, a.addr)
		}
	}
	slices.SortFunc(as, netip.Addr.Compare)
	return as
}

// Sizes for the memory estimate (Memory): a window, an extra, an address
// seen, and what a key costs in the index beyond its bytes (the string
// header and value in the map, with its load factor).
const (
	windowSize   = int64(unsafe.Sizeof(window{}))
	extraSize    = int64(unsafe.Sizeof(extra{}))
	addrSeenSize = int64(unsafe.Sizeof(addrSeen{}))
	stateSize    = int64(unsafe.Sizeof(state{}))
	keyOverhead  = 48
)

// heapBytes estimates what s holds beyond its slot: the windows past the
// first, the rings, the ladder and the addresses seen (the earlier bans and
// a ban's addresses, few and short, are left out).
func (s *state) heapBytes() int64 {
	if s.ri == nil {
		return 0
	}
	n := int64(len(s.more)) * windowSize
	for j := range s.ri.lims {
		n += int64(cap(s.win(j).ring)) * 8
	}
	if s.x != nil {
		n += extraSize
	}
	if s.as != nil {
		n += 24 + int64(cap(s.as.addrs))*addrSeenSize
	}
	return n
}

// keyBytes is what a key costs in the index: its bytes and the entry.
func keyBytes(key string) int64 { return int64(len(key)+7)&^7 + keyOverhead }
