package detector

import (
	"cmp"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"maps"
	"math"
	"math/bits"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/logjail/logjail/internal/pool"
	"github.com/logjail/logjail/limits"
	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/rules"
)

// KeyState is the saved state of one tracked (rule, key).
type KeyState struct {
	Rule string // rule name (static bans: the decision's rule name, "deny")
	Key  string
	// Data is the state, in a versioned binary encoding private to this
	// package (first byte a format version). nil means the (rule, key) is no
	// longer tracked (evicted, forgotten, static ban removed): delete it.
	Data []byte
	// A summary for readers of the store; Restore does not need it.
	LastSeen time.Time // log time of its last entry, charged or blocked (zero for static bans)
	Requests int64     // entries charged
	Blocked  int64     // entries seen while banned
	CPU      float64   // CPU seconds charged
	Phase    Kind      // "" (allowed), Throttle or Ban
	Until    time.Time // end of the throttle or ban; zero when allowed or a ban without end
}

// RestoreStats says what Restore did with the saved key states.
type RestoreStats struct {
	Keys    int // states restored, static bans included
	Dropped int // states of rules no longer in the configuration: forgotten
	Reset   int // of Keys, states whose rule's limits changed: ladder kept, windows afresh
}

// Errors of Restore.
var (
	// ErrCorrupt is wrapped by the errors of Restore about saved data it
	// cannot read: truncated, garbled, or of an unknown format version.
	ErrCorrupt = errors.New("corrupt checkpoint data")
	// ErrNotEmpty is returned by Restore into a detector that has been used.
	ErrNotEmpty = errors.New("restore into a detector that is not empty")
)

// snapshotVersion is the first byte of every encoding this file writes.
const snapshotVersion = 1

// The second byte of a key state's Data.
const (
	tagRule   byte = 1 // a rule's state
	tagStatic byte = 2 // a static ban
)

// Bits of a rule state's flags byte.
const (
	encMulti      = 1 << iota // state.multi
	encExtra                  // state.x follows (and the addresses seen)
	encBanLogOnly             // extra.banLogOnly
	encNoLadder               // with encExtra: state.x is nil, the block only carries the addresses
)

// Bits of state.flags.
const (
	flagListed uint8 = 1 << iota // the slot is in d.dirty (survives eviction)
	flagDirty                    // changed since the last Changes
	flagMoved                    // moved to the LRU front since the last Changes
	flagStored                   // reported by a Changes: the store holds it
	// flagCovered: changed (so reported, or about to be) since the last
	// MarkCover. Bit 5: flagOne (state.go) is bit 4.
	flagCovered uint8 = 1 << 5
)

// goneKey is a (rule, key) forgotten since the last Changes.
type goneKey struct{ rule, key string }

// markDirty marks s changed for the next Changes.
func (d *Detector) markDirty(i int32) {
	s := d.at(i)
	if s.flags&flagListed == 0 && d.tracking {
		d.dirty = append(d.dirty, i)
		s.flags |= flagListed
	}
	s.flags |= flagDirty | flagCovered
}

// markMoved marks s, the state in slot i, changed and moved to the LRU
// front.
func (d *Detector) markMoved(i int32, s *state) {
	if s.flags&flagListed == 0 && d.tracking {
		d.dirty = append(d.dirty, i)
		s.flags |= flagListed
	}
	s.flags |= flagDirty | flagMoved | flagCovered
}

// Pending returns how many key states the next Changes would report, at
// most: those changed or dropped since the last call (every state before
// the first). A caller bounds its checkpoints with it.
func (d *Detector) Pending() int {
	if !d.tracking {
		return d.lruLen + d.banned + len(d.gone) + len(d.staticDirty)
	}
	return len(d.dirty) + len(d.gone) + len(d.staticDirty)
}

// MarkCover starts a cover: from now on the states reported by the next
// Changes (those changed so far included) and every state changed after
// it are marked covered, the others not, until the next MarkCover. A
// caller that checkpoints calls it just before a Changes, so that the
// covered states are in that checkpoint or a later one
// (checkpoint.Writer: state.Checkpoint.Mark). It costs a pass over the
// slab (a flag cleared in each slot: some 0.2 ms for 200,000 states).
func (d *Detector) MarkCover() {
	for c := range d.chunks {
		ch := d.chunks[c]
		for j := range ch {
			if s := &ch[j]; s.flags&flagDirty == 0 {
				s.flags &^= flagCovered
			}
		}
	}
}

// CoverReady reports whether, once the next Changes has reported what
// changed, every state tracked will have been reported since the last
// MarkCover: then the checkpoints since that one hold every key state, and a
// store may drop whatever it holds from before it (state.Checkpoint.Cover).
// It holds when every state on the LRU lists has changed since the mark; the
// banned states (off the lists) and the static bans that have not are then
// marked changed, so that the next Changes reports them again (a static ban
// has no last-seen time, and a banned state is held while its ban lasts, or
// was made within the rules' remember: the store's Prune keeps both; a
// banned state Prune removed once its ban ended on the wall clock comes
// back, as the detector, on log time, still holds it). A state on a list
// that has not changed since may be one that Prune removed from the store
// (an idle one): it is not reported again, and no cover is ready until it
// changes or is evicted. It costs a pass over the slab; a caller asks only
// once as many states were reported since the mark as are tracked.
func (d *Detector) CoverReady() bool {
	var stale []int32
	for i := range d.used {
		s := d.at(i)
		if s.kid == 0 || s.flags&flagCovered != 0 {
			continue
		}
		if s.phase != phaseBanned {
			return false // on a list: not reported since the mark
		}
		stale = append(stale, i)
	}
	d.track()
	for _, i := range stale {
		d.markDirty(i)
	}
	for key := range d.static {
		d.staticChanged(key)
	}
	return true
}

// track starts listing the changed states (the first Changes): until
// then a detector whose state nobody saves (a replay without a database)
// keeps no list, and the states changed so far are found in the slab.
func (d *Detector) track() {
	if d.tracking {
		return
	}
	d.tracking = true
	for i := range d.used {
		if s := d.at(i); s.kid != 0 && s.flags&flagDirty != 0 {
			d.dirty = append(d.dirty, i)
			s.flags |= flagListed
		}
	}
}

// forget notes that s, about to be dropped, must be deleted from the store.
func (d *Detector) forget(s *state) {
	if s.flags&flagStored != 0 {
		d.gone = append(d.gone, goneKey{rule: d.ri(s).rule.Name, key: d.keys.textOf(s.kid)})
	}
}

// Changes calls fn for every (rule, key) whose state changed since the last
// call to Changes (every tracked one on the first call), and for every one
// dropped since (Data nil), then marks all clean. The dropped ones come
// first, so that a (rule, key) dropped and tracked again ends tracked. fn
// must not keep ks or its Data after it returns.
//
// The cost is proportional to the number of changed and dropped keys, not to
// the number tracked: changed states are listed as they change, and the
// states charged since the last call are the first ones of the LRU list.
// Each state's Data carries its place in the LRU order (a stamp handed out
// here, in list order), so that Restore rebuilds the same order.
func (d *Detector) Changes(fn func(ks *KeyState)) { d.changes(fn, false, nil) }

// ChangesView is Changes with ks.Key valid only during fn too (a view of
// the detector's own text of the key, not a copy): a caller that keeps
// the key copies it (checkpoint.Writer copies every key of a checkpoint
// into one string).
func (d *Detector) ChangesView(fn func(ks *KeyState)) { d.changes(fn, true, nil) }

// ChangesAppend is ChangesView with each state's Data encoded straight
// onto the end of buf (ks.Data is the bytes appended, its capacity
// capped), not into a buffer of the detector's: a caller that keeps the
// states' bytes together (checkpoint.Writer) copies none of them. It
// returns buf grown; a Data appended before buf grew stays valid.
func (d *Detector) ChangesAppend(buf []byte, fn func(ks *KeyState)) []byte {
	d.changes(fn, true, &buf)
	return buf
}

// changes reports the changes (Changes); with into, each Data is appended
// to *into rather than written into d.buf.
func (d *Detector) changes(fn func(ks *KeyState), view bool, into *[]byte) {
	d.track()
	ks := &d.ks
	for i, g := range d.gone {
		*ks = KeyState{Rule: g.rule, Key: g.key}
		fn(ks)
		d.gone[i] = goneKey{}
	}
	d.gone = d.gone[:0]

	// The states moved to the front of each list since the last call,
	// least recent first: their stamps follow every stamp handed out
	// before, so that each list's order comes back (a state's phase says
	// its list).
	d.prefetchMoved()
	for l := range d.lru {
		moved := d.moved[:0]
		for i := d.lru[l].head; i >= 0; {
			s := d.at(i)
			if s.flags&flagMoved == 0 {
				break
			}
			moved = append(moved, i)
			i = s.next
		}
		for k := len(moved) - 1; k >= 0; k-- {
			if k >= reportAhead {
				d.prefetchReport(moved[k-reportAhead])
			}
			i := moved[k]
			d.lruStamp++
			d.report(i, d.at(i), d.lruStamp, fn, view, into)
		}
		d.moved = moved[:0]
		if cap(moved) > 1<<16 { // a catch-up's, kept no longer
			d.moved = nil
		}
	}
	// The others: banned states (off the list), and slots freed since.
	for _, i := range d.dirty {
		s := d.at(i)
		s.flags &^= flagListed
		if s.kid != 0 && s.flags&flagDirty != 0 {
			d.report(i, s, 0, fn, view, into)
		}
	}
	d.dirty = d.dirty[:0]

	if len(d.staticDirty) > 0 {
		for _, key := range slices.Sorted(maps.Keys(d.staticDirty)) {
			b, ok := d.static[key]
			if !ok {
				continue // removed since: in gone
			}
			out := d.dataOut(into)
			n := len(*out)
			*out = appendStatic(*out, b)
			*ks = KeyState{Rule: staticRule, Key: key, Data: (*out)[n:len(*out):len(*out)], Phase: Ban}
			fn(ks)
		}
		clear(d.staticDirty)
	}
	*ks = KeyState{}
}

// dataOut is where a state's Data is appended: into (ChangesAppend), or
// d.buf emptied (Changes, ChangesView: valid until the next state).
func (d *Detector) dataOut(into *[]byte) *[]byte {
	if into != nil {
		return into
	}
	d.buf = d.buf[:0]
	return &d.buf
}

// report encodes s for fn and marks it clean and stored; with view, the
// key is a view of its text; with into, the state is appended to *into.
func (d *Detector) report(i int32, s *state, stamp uint64, fn func(*KeyState), view bool, into *[]byte) {
	s.flags = s.flags&^(flagDirty|flagMoved) | flagStored
	out := d.dataOut(into)
	n := len(*out)
	*out = d.appendState(*out, i, s, stamp)
	data := (*out)[n:len(*out):len(*out)]
	ks := &d.ks
	key := d.keys.view(s.kid)
	if !view {
		key = d.keys.textOf(s.kid)
	}
	*ks = KeyState{
		Rule:     d.ri(s).rule.Name,
		Key:      key,
		Data:     data,
		LastSeen: time.Unix(0, s.seen).In(d.newestT.Location()),
		Requests: d.requests(s),
		Blocked:  d.blocked(s),
		CPU:      s.cpu,
	}
	switch s.phase {
	case phaseThrottled:
		ks.Phase, ks.Until = Throttle, d.xOf(s).untilT
	case phaseBanned:
		ks.Phase, ks.Until = Ban, d.xOf(s).untilT
	}
	fn(ks)
}

// SaveGlobal encodes the detector-wide state: the newest time, the circuit
// breaker, Stats, the expiry and LRU sequence counters. Static bans are not
// in it: they are key states (rule "deny") reported by Changes. The expiry
// order is rebuilt by Restore from the banned states, which carry their
// place in it.
func (d *Detector) SaveGlobal() []byte {
	b := make([]byte, 0, 96+4*len(d.brk.times))
	var fl byte
	if d.started {
		fl |= 1
	}
	if d.brk.open {
		fl |= 2
	}
	if d.brk.justTripped {
		fl |= 4
	}
	fl |= 8 // the last trip follows the ban times
	b = append(b, snapshotVersion, fl)
	b = binary.AppendVarint(b, d.newest)
	b = appendTime(b, d.newestT)
	b = binary.AppendUvarint(b, d.seq)
	b = binary.AppendUvarint(b, d.lruStamp)
	st := &d.stats
	for _, n := range [...]int64{st.Charges, st.Late, st.Blocked, st.Evictions, st.Throttles, st.Bans, st.Unbans} {
		b = binary.AppendVarint(b, n)
	}
	b = binary.AppendVarint(b, d.brk.trips)
	// The breaker's ban times, oldest first.
	n := len(d.brk.times)
	b = binary.AppendUvarint(b, uint64(n))
	prev := int64(0)
	for i := range n {
		t := d.brk.times[(d.brk.head+i)%n]
		b = binary.AppendVarint(b, t-prev)
		prev = t
	}
	return appendBreakerTrip(b, &d.brk.last)
}

// Restore loads into an empty detector (fresh from New) the global state and
// the key states saved by SaveGlobal and Changes (the union of all
// checkpoints so far: the latest Data per (rule, key); states with nil Data
// are skipped). cfg resolves rule names to the current *rules.Rule.
//
//   - A state whose rule is no longer in cfg is dropped (RestoreStats.Dropped)
//     and reported deleted by the next Changes.
//   - A state whose rule's limits changed keeps its totals and ladder
//     (violations, throttle, ban, earlier bans, addresses) and starts its
//     windows afresh, as a reload does (RestoreStats.Reset).
//   - States are put back in the LRU order they had; if there are more than
//     Options.MaxKeys, the least recent are evicted (and reported deleted by
//     the next Changes). Bans are put back in their expiry order; those due
//     are lifted by the next Charge or Advance, as they would have been.
//
// After Restore, Changes reports nothing (but the deletions above) until the
// detector changes again. Data that cannot be read is an error wrapping
// ErrCorrupt, naming the (rule, key); on any error the detector is left
// empty.
func (d *Detector) Restore(cfg *rules.Config, global []byte, states iter.Seq[*KeyState]) (st RestoreStats, err error) {
	if d.used != 0 || d.started || d.static != nil || d.stats != (Stats{}) || d.brk.trips != 0 || len(d.gone) != 0 {
		return st, ErrNotEmpty
	}
	defer func() {
		if err != nil {
			*d = *New(d.opt)
			st = RestoreStats{}
		}
	}()
	locs := map[int]*time.Location{}
	g := decoder{b: global, locs: locs}
	d.decodeGlobal(&g)
	if g.err != nil {
		return st, fmt.Errorf("global state: %w", g.err)
	}

	type lruPlace struct {
		stamp uint64
		slot  int32
	}
	var order []lruPlace
	var lastRule *rules.Rule // states come in runs of one rule, often
	// One decoder for every state: the windows are read through an
	// interface (limits.DecodeWindow), which puts it on the heap.
	r := &decoder{}
	for ks := range states {
		if ks == nil || ks.Data == nil {
			continue
		}
		*r = decoder{b: ks.Data, locs: locs}
		if v := r.u8(); v != snapshotVersion && r.err == nil {
			r.fail(fmt.Sprintf("format version %d, want %d", v, snapshotVersion))
		}
		switch tag := r.u8(); {
		case r.err != nil:
		case tag == tagStatic:
			b := r.static()
			switch {
			case r.err != nil:
			case len(r.b) != 0:
				r.fail("trailing bytes")
			case prefixKey(b.Key) != ks.Key:
				r.fail(fmt.Sprintf("static ban of %s under key %q", b.Key, ks.Key))
			default:
				if _, dup := d.static[ks.Key]; dup {
					return st, fmt.Errorf("static ban %q: %w: saved twice", ks.Key, ErrCorrupt)
				}
				if d.static == nil {
					d.static = map[string]rules.StaticBan{}
				}
				d.static[strings.Clone(ks.Key)] = b
				st.Keys++
			}
		case tag == tagRule:
			rule := lastRule
			if rule == nil || rule.Name != ks.Rule {
				rule = cfg.Rule(ks.Rule)
				lastRule = rule
			}
			if rule == nil {
				st.Dropped++
				d.gone = append(d.gone, goneKey{rule: strings.Clone(ks.Rule), key: strings.Clone(ks.Key)})
				continue
			}
			ri := d.rule(rule)
			head := d.chain(ks.Key)
			for i := head; i >= 0; i = d.at(i).sib {
				if d.ri(d.at(i)).id == ri.id {
					return st, fmt.Errorf("rule %q key %q: %w: saved twice", ks.Rule, ks.Key, ErrCorrupt)
				}
			}
			i := d.alloc()
			s := d.at(i)
			*s = state{prev: -1, next: -1, sib: -1, flags: flagStored}
			d.bindRule(s, ri)
			stamp, reset := d.ruleState(r, i, s, ri)
			if r.err == nil && len(r.b) != 0 {
				r.fail("trailing bytes")
			}
			if r.err != nil {
				break
			}
			if head >= 0 {
				s.kid, s.sib = d.at(head).kid, head
				d.keys.rec(s.kid).head = i
			} else {
				k := keyOf(ks.Key) // parsed once: an address key is restored as a fixed one
				s.kid = d.keys.insertK(k, d.keys.hashK(k), i)
			}
			d.shareAddr(s)
			d.lastKey, d.lastHead = "", -1
			if reset {
				st.Reset++
			}
			if s.phase == phaseBanned {
				d.banned++
				x := d.xOf(s)
				d.expiries = append(d.expiries, expiry{until: x.until, seq: x.banSeq, slot: i})
			} else {
				order = append(order, lruPlace{stamp, i})
			}
			st.Keys++
		default:
			r.fail(fmt.Sprintf("unknown state tag %d", tag))
		}
		if r.err != nil {
			return st, fmt.Errorf("rule %q key %q: %w", ks.Rule, ks.Key, r.err)
		}
	}

	slices.SortFunc(order, func(a, b lruPlace) int {
		return cmp.Or(cmp.Compare(a.stamp, b.stamp), cmp.Compare(a.slot, b.slot))
	})
	for _, p := range order {
		d.link(p.slot)
		d.lruStamp = max(d.lruStamp, p.stamp)
	}
	heap.Init(&d.expiries)
	// As lookup and unban keep it: over the cap only while at most one
	// state is not banned.
	for d.lruLen+d.banned > d.maxKeys && d.lruLen > 1 {
		d.evict()
	}
	d.lastKey, d.lastHead = "", -1
	d.tracking = true
	return st, nil
}

// appendState encodes a rule's state s with its LRU stamp.
func (d *Detector) appendState(b []byte, i int32, s *state, stamp uint64) []byte {
	var fl byte
	if s.multi() {
		fl |= encMulti
	}
	x := d.xOf(s)
	addrs := d.seenAddrs(s)
	switch {
	case x != nil:
		fl |= encExtra
		if x.banLogOnly {
			fl |= encBanLogOnly
		}
	case len(addrs) > 0:
		// The addresses are written where they were when they lived in
		// extra, after a ladder of zeros.
		fl |= encExtra | encNoLadder
		x = &d.zeroX
	}
	b = append(b, snapshotVersion, tagRule, s.phase, fl)
	ri := d.ri(s)
	b = binary.LittleEndian.AppendUint64(b, ri.fp)
	b = binary.AppendUvarint(b, stamp)
	b = binary.AppendVarint(b, s.seen)
	b = binary.AppendVarint(b, d.requests(s))
	b = binary.AppendVarint(b, d.blocked(s))
	b = appendFloat(b, s.cpu)
	lims := ri.lims
	b = binary.AppendUvarint(b, uint64(len(lims)))
	for j := range lims {
		b = appendWindow(b, d.win(s, j), &lims[j], &d.rings, d.peakValue(i, j, &lims[j]))
	}
	if x == nil {
		return b
	}
	b = binary.AppendVarint(b, x.until)
	b = appendTime(b, x.untilT)
	b = binary.AppendVarint(b, int64(x.delay))
	b = binary.AppendVarint(b, x.last)
	b = binary.AppendVarint(b, int64(x.violations))
	b = binary.AppendVarint(b, x.firstOver)
	b = binary.AppendUvarint(b, x.banSeq)
	b = binary.AppendUvarint(b, uint64(len(x.bans)))
	prev := int64(0)
	for _, t := range x.bans {
		b = binary.AppendVarint(b, t-prev)
		prev = t
	}
	b = binary.AppendUvarint(b, uint64(len(addrs)))
	for _, a := range addrs {
		b = appendAddr(b, a.addr())
		b = binary.AppendVarint(b, a.seen)
	}
	b = binary.AppendUvarint(b, uint64(len(x.banAddrs)))
	for _, a := range x.banAddrs {
		b = appendAddr(b, a)
	}
	return b
}

// appendWindow encodes a window (limits.AppendWindow) and its peak.
func appendWindow(b []byte, w *window, li *limitInfo, a *pool.Pool[uint64], peak float64) []byte {
	return appendFloat(limits.AppendWindow(b, w, li, a), peak)
}

func appendStatic(b []byte, sb rules.StaticBan) []byte {
	b = append(b, snapshotVersion, tagStatic)
	b = appendAddr(b, sb.Key.Addr())
	b = binary.AppendVarint(b, int64(sb.Key.Bits()))
	b = appendString(b, sb.Origin)
	return appendString(b, sb.Reason)
}

// appendFloat writes a float as limits.AppendFloat does (decoder.float
// reads it).
func appendFloat(b []byte, f float64) []byte { return limits.AppendFloat(b, f) }

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendTime writes a time as seconds, nanoseconds and zone offset, or a
// single 0 for the zero time.
func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	_, off := t.Zone()
	b = append(b, 1)
	b = binary.AppendVarint(b, t.Unix())
	b = binary.AppendUvarint(b, uint64(t.Nanosecond()))
	return binary.AppendVarint(b, int64(off))
}

// Address encodings: a tag, then the bytes.
const (
	addrInvalid byte = 0
	addr4       byte = 4
	addr6       byte = 6
	addr6Zone   byte = 7 // 16 bytes, then the zone as a string
)

func appendAddr(b []byte, a netip.Addr) []byte {
	switch {
	case a.Is4():
		a4 := a.As4()
		return append(append(b, addr4), a4[:]...)
	case a.Is6():
		a16 := a.As16()
		if z := a.Zone(); z != "" {
			return appendString(append(append(b, addr6Zone), a16[:]...), z)
		}
		return append(append(b, addr6), a16[:]...)
	}
	return append(b, addrInvalid)
}

// decoder reads what the append functions wrote. After the first error it
// reads zeros and keeps that error; it never panics.
type decoder struct {
	b    []byte
	err  error
	locs map[int]*time.Location // zones by offset, shared by one Restore
}

func (r *decoder) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrCorrupt, what)
	}
	r.b = nil
}

func (r *decoder) u8() byte {
	if len(r.b) == 0 {
		r.fail("truncated")
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *decoder) uvarint() uint64 {
	x, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("truncated or bad varint")
		return 0
	}
	r.b = r.b[n:]
	return x
}

func (r *decoder) varint() int64 {
	x, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("truncated or bad varint")
		return 0
	}
	r.b = r.b[n:]
	return x
}

func (r *decoder) u64() uint64 {
	if p := r.bytes(8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

func (r *decoder) float() float64 {
	return math.Float64frombits(bits.ReverseBytes64(r.uvarint()))
}

// count reads a length of at most limit, which cannot be more than the
// bytes left (every element takes at least one).
func (r *decoder) count(limit int) int {
	n := r.uvarint()
	if n > uint64(limit) || n > uint64(len(r.b)) {
		r.fail(fmt.Sprintf("count %d out of range", n))
		return 0
	}
	return int(n)
}

func (r *decoder) bytes(n int) []byte {
	if n > len(r.b) {
		r.fail("truncated")
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *decoder) str() string {
	n := r.count(len(r.b))
	return string(r.bytes(n))
}

func (r *decoder) time() time.Time {
	switch r.u8() {
	case 0:
		return time.Time{}
	case 1:
		sec, ns, off := r.varint(), r.uvarint(), r.varint()
		if ns >= 1e9 || off <= -24*3600 || off >= 24*3600 {
			r.fail("bad time")
			return time.Time{}
		}
		return time.Unix(sec, int64(ns)).In(r.loc(int(off)))
	}
	r.fail("bad time")
	return time.Time{}
}

// loc returns the zone of a UTC offset, named as the parser names it.
func (r *decoder) loc(off int) *time.Location {
	if off == 0 {
		return time.UTC
	}
	l := r.locs[off]
	if l == nil {
		l = time.FixedZone(parser.ZoneName(off), off)
		r.locs[off] = l
	}
	return l
}

func (r *decoder) addr() netip.Addr {
	switch r.u8() {
	case addrInvalid:
		return netip.Addr{}
	case addr4:
		if p := r.bytes(4); p != nil {
			return netip.AddrFrom4([4]byte(p))
		}
	case addr6:
		if p := r.bytes(16); p != nil {
			return netip.AddrFrom16([16]byte(p))
		}
	case addr6Zone:
		if p := r.bytes(16); p != nil {
			z := r.str()
			if z == "" {
				r.fail("empty zone")
				return netip.Addr{}
			}
			return netip.AddrFrom16([16]byte(p)).WithZone(z)
		}
	default:
		r.fail("bad address")
	}
	return netip.Addr{}
}

func (r *decoder) static() rules.StaticBan {
	a := r.addr()
	n := r.varint()
	p := netip.PrefixFrom(a, int(max(min(n, 1<<10), -1)))
	if r.err == nil && !p.IsValid() {
		r.fail("bad prefix")
	}
	origin := r.str()
	reason := r.str()
	return rules.StaticBan{Key: p, Origin: origin, Reason: reason}
}

// decodeGlobal reads what SaveGlobal wrote into d (empty).
func (d *Detector) decodeGlobal(r *decoder) {
	if v := r.u8(); v != snapshotVersion && r.err == nil {
		r.fail(fmt.Sprintf("format version %d, want %d", v, snapshotVersion))
	}
	fl := r.u8()
	if fl&^15 != 0 {
		r.fail("bad flags")
	}
	newest := r.varint()
	newestT := r.time()
	seq := r.uvarint()
	lruStamp := r.uvarint()
	var st Stats
	for _, p := range [...]*int64{&st.Charges, &st.Late, &st.Blocked, &st.Evictions, &st.Throttles, &st.Bans, &st.Unbans} {
		*p = r.varint()
	}
	trips := r.varint()
	n := r.count(len(r.b))
	times := make([]int64, n)
	prev := int64(0)
	for i := range times {
		prev += r.varint()
		times[i] = prev
	}
	var last breakerTrip
	if fl&8 != 0 {
		last = r.breakerTrip()
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes")
	}
	if r.err != nil {
		return
	}
	d.started = fl&1 != 0
	d.newest, d.newestT = newest, newestT
	d.seq, d.lruStamp = seq, lruStamp
	d.stats = st
	// The ring oldest first (head 0), cut to the newest maxBans times if
	// the limit is lower now.
	if d.maxBans < 0 {
		times = nil
	} else if len(times) > d.maxBans {
		times = times[len(times)-d.maxBans:]
	}
	if len(times) == 0 {
		times = nil
	}
	d.brk = breaker{times: times, open: fl&2 != 0, justTripped: fl&4 != 0, trips: trips, last: last}
}

// ruleState reads a rule's state into s (ri set, everything else zero) and
// returns its LRU stamp and whether its windows were reset because the
// limits they were built for are not ri's.
func (d *Detector) ruleState(r *decoder, i int32, s *state, ri *ruleInfo) (stamp uint64, reset bool) {
	phase := r.u8()
	fl := r.u8()
	if phase > phaseBanned || fl&^(encMulti|encExtra|encBanLogOnly|encNoLadder) != 0 || fl&(encExtra|encNoLadder) == encNoLadder {
		r.fail("bad phase or flags")
	}
	fp := r.u64()
	stamp = r.uvarint()
	s.seen = r.varint()
	requests := r.varint()
	blocked := r.varint()
	s.cpu = r.float()
	s.phase = phase
	s.setFlag(flagMulti, fl&encMulti != 0)
	nw := r.count(len(r.b))
	same := fp == ri.fp
	if same && nw != len(ri.lims) {
		r.fail("windows do not match the limits")
		return 0, false
	}
	d.initWindows(i, s)
	for j := 0; j < nw && r.err == nil; j++ {
		if same {
			p := r.window(d.win(s, j), &ri.lims[j], &d.rings)
			if pp := d.peak(i, j); pp != nil {
				*pp = p
			}
		} else {
			r.window(nil, nil, nil)
		}
	}
	var addrs []addrSeen
	switch {
	case fl&encNoLadder != 0:
		var x extra
		addrs = r.extra(&x)
		if phase != phaseAllowed || fl&encBanLogOnly != 0 || !x.zero() {
			r.fail("a ladder where none was written")
		}
	case fl&encExtra != 0:
		x := d.ext(s)
		x.banLogOnly = fl&encBanLogOnly != 0
		addrs = r.extra(x)
	case phase != phaseAllowed:
		r.fail("throttle or ban without its state")
	}
	d.setAddrs(s, addrs)
	if blocked != 0 {
		// Only a state banned once has blocked entries, and its extra.
		d.ext(s).blocked = blocked
	}
	if requests < 0 {
		r.fail("bad requests")
	}
	d.setRequests(s, requests)
	return stamp, !same
}

// window reads a window into w, checked against li, and returns its peak;
// with w nil it only skips it.
func (r *decoder) window(w *window, li *limitInfo, a *pool.Pool[uint64]) (peak float64) {
	limits.DecodeWindow(windowReader{r}, w, li, a)
	return r.float()
}

// windowReader is the decoder as limits.DecodeWindow reads it.
type windowReader struct{ r *decoder }

func (x windowReader) U8() byte            { return x.r.u8() }
func (x windowReader) Uvarint() uint64     { return x.r.uvarint() }
func (x windowReader) Float() float64      { return x.r.float() }
func (x windowReader) Count(limit int) int { return x.r.count(limit) }
func (x windowReader) Fail(what string)    { x.r.fail(what) }
func (x windowReader) Failed() bool        { return x.r.err != nil }

// extra reads a state's extra block into x and returns the addresses seen
// that it carries (nil: none).
func (r *decoder) extra(x *extra) []addrSeen {
	x.until = r.varint()
	x.untilT = r.time()
	x.delay = time.Duration(r.varint())
	x.last = r.varint()
	v := r.varint()
	if v < 0 || v > math.MaxInt32 {
		r.fail("bad violations")
	}
	x.violations = int(v)
	x.firstOver = r.varint()
	x.banSeq = r.uvarint()
	if n := r.count(maxBans); n > 0 {
		x.bans = make([]int64, n)
		prev := int64(0)
		for i := range x.bans {
			prev += r.varint()
			x.bans[i] = prev
		}
	}
	var as []addrSeen
	if n := r.count(maxAddrs); n > 0 {
		as = make([]addrSeen, n)
		for i := range as {
			a := r.addr()
			as[i] = makeAddrSeen(a, r.varint())
		}
	}
	if n := r.count(maxAddrs); n > 0 {
		x.banAddrs = make([]netip.Addr, n)
		for i := range x.banAddrs {
			x.banAddrs[i] = r.addr()
		}
	}
	return as
}
