package actions

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/state"
)

// Back-off between retries of a failing backend: 1s, doubling, at most 1m.
const (
	minBackoff = time.Second
	maxBackoff = time.Minute
)

// callTimeout bounds one Sync or Apply: a hung command or netlink call is
// an error to retry, not a stuck backend.
const callTimeout = 2 * time.Minute

// ManagerOptions configure a Manager.
type ManagerOptions struct {
	Logger *slog.Logger
	Now    func() time.Time // the wall clock (default time.Now)
	// Sweep is how often bans and throttles past their end are lifted from
	// the backends (default 1s). The store's ban ends with the cleaner's next
	// pass; the block ends on time.
	Sweep time.Duration
	// Backoff is the first wait before a failed call is retried (default
	// 1s); it doubles up to a minute.
	Backoff time.Duration
	// Ranges are the CIDRs of the group ranges by key
	// (rules.Config.GroupRanges): a ban of range:NAME blocks them. A
	// reload passes the new ones to SetRanges.
	Ranges map[string][]netip.Prefix
}

// banKey names an active ban, as the store does.
type banKey struct{ rule, key string }

// ban is an active ban or throttle as the manager keeps it: a value in
// Manager.slots, so that 100,000 bans are no 100,000 objects for the
// collector to mark (issue 23).
type ban struct {
	key   banKey
	kind  Kind // KindBan or KindThrottle as the constants, not the store's copy
	until time.Time
	delay time.Duration
	// reason is its reason, for a person.
	reason string
	addrs  []netip.Addr // the addresses recorded with it: what a range ban falls back to
	// one is the prefix it blocks when it blocks one (a single-address
	// key: the common case); more holds them all, sorted, when it blocks
	// several, and is nil otherwise.
	one  netip.Prefix
	more []netip.Prefix
	gen  uint32 // counts the slot's releases: an end pushed before is stale
}

// newBan is a ban blocking ps (Prefixes' or resolve's answer).
func newBan(kind Kind, until time.Time, delay time.Duration, reason string, addrs []netip.Addr, ps []netip.Prefix) ban {
	b := ban{kind: canonKind(kind), until: until, delay: delay, reason: reason, addrs: addrs}
	b.setPrefixes(ps)
	return b
}

func (b *ban) setPrefixes(ps []netip.Prefix) {
	b.one, b.more = netip.Prefix{}, nil
	switch len(ps) {
	case 0:
	case 1:
		b.one = ps[0]
	default:
		b.more = ps
	}
}

// prefixes are what b blocks; buf holds the one of a single-prefix ban.
func (b *ban) prefixes(buf *[1]netip.Prefix) []netip.Prefix {
	if b.more != nil {
		return b.more
	}
	if !b.one.IsValid() {
		return nil
	}
	buf[0] = b.one
	return buf[:]
}

// canonKind is k, the package's constant for the two kinds: the store's
// rows each carry their own copy of the text.
func canonKind(k Kind) Kind {
	switch k {
	case KindBan:
		return KindBan
	case KindThrottle:
		return KindThrottle
	}
	return k
}

// Manager drives the backends: it keeps the active bans, turns them into
// the entries each backend should hold, and has one goroutine per backend
// apply the changes, retrying failures with back-off. Its methods are safe
// for concurrent use; none of them waits for a backend but Wait and Close.
type Manager struct {
	log   *slog.Logger
	now   func() time.Time
	sweep time.Duration
	back  time.Duration

	mu    sync.Mutex
	ends  endHeap          // the ends of bans, soonest first; stale ones are skipped
	slots []ban            // the active bans, by slot, and the free slots
	free  []int32          // the free slots
	bans  map[banKey]int32 // the slot of each active ban
	// holders is, for each blocked prefix, the slot of the ban holding
	// it, or -1 when several do: then shared has them, oldest first.
	// Its keys are pkeys, which hold no pointer: the map is not scanned.
	holders map[pkey]int32
	shared  map[netip.Prefix][]int32
	allow   []netip.Prefix
	ranges  map[string][]netip.Prefix // group ranges' CIDRs by key
	// names holds each rule name and reason once (the package doc, "What
	// the manager holds"): the store and the detector give every ban its
	// own copy of the same few texts.
	names   map[string]string
	workers []*worker

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Status is what an action has done, for `logjail status` and the metrics.
type Status struct {
	Name, Type  string
	Entries     int       // prefixes it should hold now
	Pending     int       // changes not yet applied
	Applied     time.Time // when it last succeeded; zero: not yet
	Errors      int64     // failed calls since start
	LastError   string    // the last failure; "" when the last call succeeded
	LastErrorAt time.Time
}

// worker is one backend and the queue in front of it; its fields are
// guarded by the manager's mu, but for what only its goroutine touches.
type worker struct {
	Configured
	entries  int                      // how many prefixes it should hold (Manager.entry finds them)
	pending  map[netip.Prefix]*Change // changes since the last call
	needSync bool                     // the next call is a whole Sync
	want     uint64                   // generation of the newest change
	done     uint64                   // generation applied
	wake     chan struct{}
	st       Status
	cond     *sync.Cond
	last     time.Time // when the last call ended (its goroutine only)
	settle   time.Duration
	interval time.Duration
}

// NewManager makes a manager of the configured backends. Nothing is applied
// before Start.
func NewManager(cs []Configured, o ManagerOptions) *Manager {
	m := &Manager{
		log: o.Logger, now: o.Now, sweep: o.Sweep, back: o.Backoff,
		bans: map[banKey]int32{}, holders: map[pkey]int32{}, shared: map[netip.Prefix][]int32{},
		ranges: cloneRanges(o.Ranges), names: map[string]string{},
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if m.now == nil {
		m.now = time.Now
	}
	if m.back <= 0 {
		m.back = minBackoff
	}
	if m.sweep <= 0 {
		m.sweep = time.Second
	}
	for _, c := range cs {
		w := &worker{
			Configured: c, pending: map[netip.Prefix]*Change{},
			needSync: true, want: 1, wake: make(chan struct{}, 1),
			st: Status{Name: c.Name(), Type: c.Type},
		}
		w.cond = sync.NewCond(&m.mu)
		if p, ok := c.Backend.(Pacer); ok {
			w.settle, w.interval = p.Pace()
		}
		m.workers = append(m.workers, w)
	}
	return m
}

// Load sets the active bans the backends start from: the store's, at start.
// Log-only bans, and bans whose end has passed, block nothing.
func (m *Manager) Load(bans []state.Ban, allow []netip.Prefix) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.allow = slices.Clone(allow)
	m.slots = slices.Grow(m.slots, len(bans))
	now := m.now()
	for _, b := range bans {
		if b.LogOnly || (!b.Until.IsZero() && !b.Until.After(now)) {
			continue
		}
		nb := newBan(Kind(b.Kind), b.Until, 0, b.Reason, b.Addresses, m.resolve(b.Key, b.Addresses))
		m.set(banKey{b.Rule, b.Key}, &nb)
	}
}

// Decisions applies the detector's (or an operator's) decisions: a ban or
// throttle blocks its prefixes, an unban lifts them where no other ban
// holds them. Log-only decisions act on nothing.
func (m *Manager) Decisions(ds []detector.Decision) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range ds {
		d := &ds[i]
		k := banKey{d.Rule, d.Key}
		switch {
		case d.Kind == detector.Unban:
			m.set(k, nil)
		case d.LogOnly:
		case d.Kind == detector.Ban || d.Kind == detector.Throttle:
			nb := newBan(Kind(d.Kind), d.Until, d.Delay, d.Reason, d.Addresses, m.resolve(d.Key, d.Addresses))
			m.set(k, &nb)
		}
	}
}

// SetAllow replaces the allowed prefixes (a reload): every backend syncs.
func (m *Manager) SetAllow(allow []netip.Prefix) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if slices.Equal(allow, m.allow) {
		return
	}
	m.allow = slices.Clone(allow)
	for _, w := range m.workers {
		m.resync(w)
	}
}

// SetRanges replaces the group ranges' CIDRs (a reload) and resolves the
// active bans of range keys again: a ban of a range whose CIDRs changed
// blocks the new ones from now on, and one of a range no longer in the
// configuration falls back to the addresses recorded with it (as a ban of
// a user does), as it would after a restart.
func (m *Manager) SetRanges(ranges map[string][]netip.Prefix) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if maps.EqualFunc(ranges, m.ranges, slices.Equal) {
		return
	}
	m.ranges = cloneRanges(ranges)
	var keys []banKey
	for k := range m.bans {
		if strings.HasPrefix(k.key, rangeKeyPrefix) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b banKey) int { return strings.Compare(a.rule+"\x00"+a.key, b.rule+"\x00"+b.key) })
	for _, k := range keys {
		b := &m.slots[m.bans[k]]
		var buf [1]netip.Prefix
		ps := m.resolve(k.key, b.addrs)
		if slices.Equal(ps, b.prefixes(&buf)) {
			continue
		}
		if _, ok := m.ranges[k.key]; ok {
			m.log.Info("range ban resolved again", "rule", k.rule, "key", k.key, "prefixes", len(ps))
		} else {
			m.log.Warn("range no longer configured: its ban blocks the addresses recorded with it", "rule", k.rule, "key", k.key, "addresses", len(ps))
		}
		nb := *b
		nb.setPrefixes(ps)
		m.set(k, &nb)
	}
}

// rangeKeyPrefix opens the key of a group range (range:NAME).
const rangeKeyPrefix = "range:"

// resolve is what a ban of key blocks: the range's CIDRs for the key of a
// configured group range, else Prefixes(key, addrs). m.mu is held.
func (m *Manager) resolve(key string, addrs []netip.Addr) []netip.Prefix {
	return resolve(key, addrs, m.ranges)
}

// resolve is what a ban of key blocks, given the group ranges' CIDRs by key.
func resolve(key string, addrs []netip.Addr, ranges map[string][]netip.Prefix) []netip.Prefix {
	cidrs, ok := ranges[key]
	if !ok {
		return Prefixes(key, addrs)
	}
	out := make([]netip.Prefix, 0, len(cidrs))
	for _, p := range cidrs {
		if p.IsValid() {
			out = append(out, unmapPrefix(p))
		}
	}
	slices.SortFunc(out, comparePrefix)
	return slices.Compact(out)
}

func cloneRanges(r map[string][]netip.Prefix) map[string][]netip.Prefix {
	out := make(map[string][]netip.Prefix, len(r))
	for k, ps := range r {
		out[k] = slices.Clone(ps)
	}
	return out
}

// Resync has every backend sync its whole state again, repairing anything
// changed behind logjail's back (an operator flushing a chain, a list file
// edited by hand). The cleaner calls it on its schedule.
func (m *Manager) Resync() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, w := range m.workers {
		if mem, ok := w.Backend.(Memory); ok && mem.InMemory() {
			continue
		}
		m.resync(w)
	}
}

func (m *Manager) resync(w *worker) {
	w.needSync = true
	clear(w.pending)
	w.want++
	w.kick()
}

// set replaces the ban of k (nil: lifts it) and passes the change of every
// prefix it touches to the backends. m.mu is held.
func (m *Manager) set(k banKey, b *ban) {
	var obuf, nbuf [1]netip.Prefix
	i, had := m.bans[k]
	var olds, news []netip.Prefix
	if had {
		olds = m.slots[i].prefixes(&obuf)
	}
	if b != nil {
		news = b.prefixes(&nbuf)
	}
	touched := olds
	switch {
	case len(olds) == 0:
		touched = news
	case len(news) > 0:
		touched = append(slices.Clone(olds), news...)
		slices.SortFunc(touched, comparePrefix)
		touched = slices.Compact(touched)
	}
	// What each backend should hold of the touched prefixes before.
	type was struct {
		e  Entry
		ok bool
	}
	var wbuf [2]was
	before := wbuf[:0]
	for _, p := range touched {
		for _, w := range m.workers {
			e, ok := m.entry(p, w.Kinds)
			before = append(before, was{e, ok})
		}
	}
	if had {
		for _, p := range olds {
			m.unhold(p, i)
		}
	}
	switch {
	case b != nil && len(news) > 0:
		if !had {
			k.rule = m.name(k.rule)
			i = m.alloc()
			m.bans[k] = i
		} else {
			k = m.slots[i].key
		}
		b.reason = m.name(b.reason)
		s := &m.slots[i]
		oldUntil, gen := s.until, s.gen
		*s = *b
		s.key, s.gen = k, gen
		if !b.until.IsZero() && (!had || !oldUntil.Equal(b.until)) {
			heap.Push(&m.ends, banEnd{b.until, i, gen})
		}
		for _, p := range news {
			m.hold(p, i)
		}
	case had:
		m.release(i)
		delete(m.bans, k)
	}
	for j, p := range touched {
		for n, w := range m.workers {
			bw := before[j*len(m.workers)+n]
			m.update(w, p, bw.e, bw.ok)
		}
	}
}

// Bounds of Manager.names: at most maxNames texts of at most maxNameLen
// bytes each are held (about 256 KiB); others are kept as given.
const (
	maxNames   = 1024
	maxNameLen = 256
)

// name returns the copy of s that m holds, holding s first if there is
// room: every ban of a rule then points at one rule name, and every ban
// with the same reason at one reason, not one object each for the
// collector to mark.
func (m *Manager) name(s string) string {
	if c, ok := m.names[s]; ok {
		return c
	}
	if len(m.names) < maxNames && len(s) <= maxNameLen {
		m.names[s] = s
	}
	return s
}

// alloc is a free slot for a ban.
func (m *Manager) alloc() int32 {
	if n := len(m.free); n > 0 {
		i := m.free[n-1]
		m.free = m.free[:n-1]
		return i
	}
	m.slots = append(m.slots, ban{})
	return int32(len(m.slots) - 1)
}

// release frees slot i: the ends pushed for it are stale from now on.
func (m *Manager) release(i int32) {
	m.slots[i] = ban{gen: m.slots[i].gen + 1}
	m.free = append(m.free, i)
}

// hold records that the ban in slot i holds p, after those holding it.
func (m *Manager) hold(p netip.Prefix, i int32) {
	k := keyOf(p)
	h, ok := m.holders[k]
	switch {
	case !ok:
		m.holders[k] = i
	case h >= 0:
		m.holders[k] = -1
		m.shared[p] = []int32{h, i}
	default:
		m.shared[p] = append(m.shared[p], i)
	}
}

// unhold records that the ban in slot i no longer holds p.
func (m *Manager) unhold(p netip.Prefix, i int32) {
	k := keyOf(p)
	h, ok := m.holders[k]
	switch {
	case !ok:
		return
	case h >= 0:
		if h == i {
			delete(m.holders, k)
		}
		return
	}
	hs := m.shared[p]
	if j := slices.Index(hs, i); j >= 0 {
		hs = slices.Delete(hs, j, j+1)
	}
	if len(hs) == 1 {
		m.holders[k] = hs[0]
		delete(m.shared, p)
	} else {
		m.shared[p] = hs
	}
}

// pkey is a prefix as a map key without a pointer (a netip.Addr holds
// one, for its family and zone): its address's 16 bytes, its bits (-1 for
// an invalid prefix) and its family (4, 6, or 0 for the zero Prefix). A
// prefix has no zone (netip.PrefixFrom drops it), so keyOf and prefix
// give back the same prefix (TestPrefixKeyRoundTrip).
type pkey struct {
	addr [16]byte
	bits int16
	fam  uint8
}

// keyOf is p's pkey.
func keyOf(p netip.Prefix) pkey {
	a := p.Addr()
	k := pkey{bits: int16(p.Bits())}
	switch {
	case a.Is4():
		k.addr, k.fam = a.As16(), 4
	case a.Is6():
		k.addr, k.fam = a.As16(), 6
	}
	return k
}

// prefix is the prefix k is the key of.
func (k pkey) prefix() netip.Prefix {
	switch k.fam {
	case 4:
		return netip.PrefixFrom(netip.AddrFrom4([4]byte(k.addr[12:])), int(k.bits))
	case 6:
		return netip.PrefixFrom(netip.AddrFrom16(k.addr), int(k.bits))
	}
	return netip.Prefix{}
}

// holding are the slots of the bans holding p, oldest first; buf holds
// the one of a prefix one ban holds.
func (m *Manager) holding(p netip.Prefix, buf *[1]int32) []int32 {
	h, ok := m.holders[keyOf(p)]
	switch {
	case !ok:
		return nil
	case h >= 0:
		buf[0] = h
		return buf[:]
	}
	return m.shared[p]
}

// update brings w's queue for p in line with the bans holding p, given
// what w should have held before (old, had).
func (m *Manager) update(w *worker, p netip.Prefix, old Entry, had bool) {
	e, ok := m.entry(p, w.Kinds)
	if ok != had {
		if ok {
			w.entries++
		} else {
			w.entries--
		}
		if len(Exempt(p, m.allow)) > 0 {
			// An allowed prefix inside p starts or stops being an
			// exemption: the backend learns its exemptions from a Sync.
			m.resync(w)
			return
		}
	}
	switch {
	case ok && had && old == e:
		return
	case ok:
		if !w.needSync {
			w.pending[p] = &Change{Entry: e}
		}
	case had:
		if !w.needSync {
			w.pending[p] = &Change{Entry: Entry{Prefix: p}, Delete: true}
		}
	default:
		return
	}
	w.want++
	w.kick()
}

// desired are the entries w should hold now, unsorted: the backends'
// wanted state is not kept apart but found again from the bans, so that
// it costs the collector nothing between syncs.
func (m *Manager) desired(w *worker) []Entry {
	out := make([]Entry, 0, w.entries)
	for k := range m.holders {
		if e, ok := m.entry(k.prefix(), w.Kinds); ok {
			out = append(out, e)
		}
	}
	return out
}

// entry is what blocks p for an action acting on kinds: the ban among
// those holding p that ends last (one without an end ends last of all).
func (m *Manager) entry(p netip.Prefix, kinds []Kind) (Entry, bool) {
	var e Entry
	found := false
	var buf [1]int32
	for _, i := range m.holding(p, &buf) {
		b := &m.slots[i]
		if !slices.Contains(kinds, b.kind) {
			continue
		}
		if !found || outlasts(b, &e) {
			delay := e.Delay
			e = Entry{Prefix: p, Kind: b.kind, Until: b.until, Rule: b.key.rule, Key: b.key.key, Reason: b.reason, Delay: delay}
		}
		if b.kind == KindThrottle {
			e.Delay = max(e.Delay, b.delay)
		}
		found = true
	}
	if e.Kind == KindBan {
		e.Delay = 0
	}
	return e, found
}

// outlasts reports whether b decides the entry rather than the ban e
// describes so far: a ban outranks a throttle; then the later end wins,
// and no end is the latest.
func outlasts(b *ban, e *Entry) bool {
	if b.kind != e.Kind {
		return b.kind == KindBan
	}
	if e.Until.IsZero() {
		return false
	}
	return b.until.IsZero() || b.until.After(e.Until)
}

// exemptions are the allowed prefixes inside the blocked ones: what the
// backends must let through. Only they are passed on, so that an
// operator's ban --force of an allowed address itself (which no exemption
// covers) is enforced like any other.
func exemptions(entries []Entry, allow []netip.Prefix) []netip.Prefix {
	if len(allow) == 0 {
		return nil
	}
	var out []netip.Prefix
	for i := range entries {
		out = append(out, Exempt(entries[i].Prefix, allow)...)
	}
	slices.SortFunc(out, comparePrefix)
	return slices.Compact(out)
}

func (w *worker) kick() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Start starts one goroutine per backend, each beginning with a whole Sync,
// and the sweep that lifts bans at their end. They run until Close.
func (m *Manager) Start(ctx context.Context) {
	ctx, m.cancel = context.WithCancel(ctx)
	for _, w := range m.workers {
		w.kick() // the first call is a whole Sync
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.run(ctx, w)
		}()
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		t := time.NewTicker(m.sweep)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				m.expire(m.now())
			case <-ctx.Done():
				return
			}
		}
	}()
}

// expire lifts the bans and throttles whose end has passed. It looks only
// at those: a second's sweep of 100,000 bans costs nothing.
func (m *Manager) expire(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for m.ends.Len() > 0 && !m.ends[0].until.After(now) {
		e := heap.Pop(&m.ends).(banEnd)
		// A slot released since the push has a newer generation: its
		// end is stale, as is one the ban's new end replaced.
		if b := &m.slots[e.slot]; b.gen == e.gen && b.until.Equal(e.until) {
			m.set(b.key, nil)
		}
	}
}

// banEnd is when the ban in a slot ends; gen is the slot's then.
type banEnd struct {
	until time.Time
	slot  int32
	gen   uint32
}

type endHeap []banEnd

func (h endHeap) Len() int           { return len(h) }
func (h endHeap) Less(i, j int) bool { return h[i].until.Before(h[j].until) }
func (h endHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *endHeap) Push(x any)        { *h = append(*h, x.(banEnd)) }
func (h *endHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// run is a backend's goroutine.
func (m *Manager) run(ctx context.Context, w *worker) {
	backoff := time.Duration(0)
	for {
		if backoff == 0 {
			select {
			case <-w.wake:
			case <-ctx.Done():
				return
			}
		} else if !sleep(ctx, backoff) {
			return
		}
		// Pacing: gather a burst, and keep the backend's minimum interval.
		if w.settle > 0 && !sleep(ctx, w.settle) {
			return
		}
		if wait := w.interval - time.Since(w.last); w.interval > 0 && !w.last.IsZero() && wait > 0 && !sleep(ctx, wait) {
			return
		}

		m.mu.Lock()
		gen, sync := w.want, w.needSync
		var entries []Entry
		var changes []Change
		var allow []netip.Prefix
		if sync {
			entries = m.desired(w)
			allow = exemptions(entries, m.allow)
			w.needSync = false
		} else {
			changes = make([]Change, 0, len(w.pending))
			for _, c := range w.pending {
				changes = append(changes, *c)
			}
		}
		clear(w.pending)
		m.mu.Unlock()
		if !sync && len(changes) == 0 {
			m.mu.Lock()
			w.done = max(w.done, gen)
			w.cond.Broadcast()
			m.mu.Unlock()
			continue
		}
		SortEntries(entries)
		slices.SortFunc(changes, func(a, b Change) int { return comparePrefix(a.Prefix, b.Prefix) })

		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		var err error
		if sync {
			err = w.Sync(cctx, entries, allow)
		} else {
			err = w.Apply(cctx, changes)
		}
		cancel()
		w.last = time.Now()
		if ctx.Err() != nil {
			return // stopping: the next start syncs
		}

		m.mu.Lock()
		if err != nil {
			backoff = min(max(2*backoff, m.back), maxBackoff)
			w.needSync = true // what the failed call did is unknown: sync it all
			clear(w.pending)
			w.st.Errors++
			w.st.LastError, w.st.LastErrorAt = err.Error(), m.now()
			op := "apply"
			if sync {
				op = "sync"
			}
			m.log.Error("action failed: retrying", "action", w.st.Name, "op", op, "entries", len(entries), "changes", len(changes), "retry_in", backoff, "err", err)
			w.cond.Broadcast()
		} else {
			if backoff > 0 || w.st.LastError != "" {
				m.log.Info("action recovered", "action", w.st.Name)
			}
			backoff = 0
			w.st.LastError = ""
			w.st.Applied = m.now()
			w.done = max(w.done, gen)
			if w.want > w.done {
				w.kick()
			}
			w.cond.Broadcast()
		}
		m.mu.Unlock()
	}
}

// sleep waits d or until ctx is done; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Wait waits until every backend has applied every change made before the
// call, or ctx ends: then it returns an error naming the backends still
// behind, with their last errors. `logjail unban` returns after it, so
// that the unban has taken effect everywhere.
func (m *Manager) Wait(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	targets := make([]uint64, len(m.workers))
	for i, w := range m.workers {
		targets[i] = w.want
	}
	stop := context.AfterFunc(ctx, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, w := range m.workers {
			w.cond.Broadcast()
		}
	})
	defer stop()
	for i, w := range m.workers {
		for w.done < targets[i] && ctx.Err() == nil {
			w.cond.Wait()
		}
	}
	var errs []error
	for i, w := range m.workers {
		if w.done < targets[i] {
			msg := "not applied yet"
			if w.st.LastError != "" {
				msg = w.st.LastError
			}
			errs = append(errs, fmt.Errorf("action %s: %s", w.st.Name, msg))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return nil
}

// Status returns each backend's status, in configuration order.
func (m *Manager) Status() []Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Status, len(m.workers))
	for i, w := range m.workers {
		s := w.st
		s.Entries = w.entries
		s.Pending = len(w.pending)
		if w.needSync || w.want > w.done {
			s.Pending = max(s.Pending, 1)
		}
		out[i] = s
	}
	return out
}

// Entries returns the entries the named backend should hold now, sorted.
func (m *Manager) Entries(name string) []Entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, w := range m.workers {
		if w.st.Name == name {
			out := m.desired(w)
			SortEntries(out)
			return out
		}
	}
	return nil
}

// Close stops the goroutines (a call under way is cancelled: the next start
// syncs) and closes the backends. What they put in place stays.
func (m *Manager) Close() error {
	if m.cancel != nil {
		m.cancel()
	}
	m.wg.Wait()
	var errs []error
	for _, w := range m.workers {
		if err := w.Close(); err != nil {
			errs = append(errs, fmt.Errorf("action %s: %w", w.st.Name, err))
		}
	}
	return errors.Join(errs...)
}
