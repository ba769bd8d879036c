package endpoint

import (
	"context"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gaissmai/bart"
	"github.com/logjail/logjail/actions"
)

// Bans is the endpoint's view of the blocked prefixes, bans and throttles
// alike: an actions.Backend that the daemon's actions manager drives like
// any other action (on: [throttle, ban]), so the endpoint answers from the
// same state the other actions enforce, without a database read.
//
// Lookups take no lock (issue 23): they read an immutable snapshot that
// every update publishes with one atomic swap. The blocked prefixes are
// held without a pointer per prefix (banTable), so that the collector,
// which marks the whole live heap every cycle, has next to nothing to
// scan in them: a base table, rebuilt whole by Sync and by an Apply of
// more than persistChanges changes or one that would grow the overlay
// past overlayMax, and a small overlay of the prefixes set or lifted
// since, made anew by every other Apply (copy-on-write: the base is
// shared). Updates are serialized among themselves, and a lookup never
// waits for one, however many changes it carries.
type Bans struct {
	name  string
	mu    sync.Mutex // serializes the writers (Sync, Apply)
	view  atomic.Pointer[banView]
	ready atomic.Bool
}

// banView is one snapshot of the view: never changed once published. A
// prefix's entry is the overlay's, if the overlay holds it (gone: lifted),
// else the base's.
type banView struct {
	base, over   *banTable // over may be nil
	lens4, lens6 []uint8   // the prefix lengths of both, longest first
	n            int       // prefixes blocked
	allow        *bart.Table[struct{}]
}

// newView makes the snapshot of base and over.
func newView(base, over *banTable, allow *bart.Table[struct{}]) *banView {
	v := &banView{base: base, over: over, allow: allow, n: len(base.recs), lens4: base.lens4, lens6: base.lens6}
	if over != nil {
		v.lens4, v.lens6 = mergeLengths(base.lens4, over.lens4), mergeLengths(base.lens6, over.lens6)
		for i := range over.recs {
			r := &over.recs[i]
			_, inBase := base.index[r.k]
			switch {
			case r.gone && inBase:
				v.n--
			case !r.gone && !inBase:
				v.n++
			}
		}
	}
	return v
}

// find returns the entry of k.
func (v *banView) find(k pkey) (*banTable, *rec, bool) {
	if r, ok := v.over.get(k); ok {
		return v.over, r, !r.gone
	}
	r, ok := v.base.get(k)
	return v.base, r, ok
}

var _ actions.Backend = (*Bans)(nil)

// NewBans makes an empty view; Ready is false until the first Sync.
func NewBans(name string) *Bans {
	b := &Bans{name: name}
	b.view.Store(newView(newBuilder(0, false).done(), nil, new(bart.Table[struct{}])))
	return b
}

// Name names the action.
func (b *Bans) Name() string { return b.name }

// Sync replaces the whole view.
func (b *Bans) Sync(_ context.Context, entries []actions.Entry, allow []netip.Prefix) error {
	tb := newBuilder(len(entries), false)
	for i := range entries {
		tb.add(&entries[i], false)
	}
	al := new(bart.Table[struct{}])
	for _, p := range allow {
		al.Insert(p, struct{}{})
	}
	v := newView(tb.done(), nil, al)
	b.mu.Lock()
	b.view.Store(v)
	b.mu.Unlock()
	b.ready.Store(true)
	return nil
}

// persistChanges is the most changes Apply makes into a new overlay; more
// rebuild the base (tens of milliseconds at 100,000 prefixes; BenchmarkApply,
// one change at a time with a new base every overlayMax of them: 36 µs).
// overlayMax is the most prefixes an overlay holds: each Apply copies it,
// so it stays small; past it the base is rebuilt with it.
const (
	persistChanges = 256
	overlayMax     = 1024
)

// Apply applies changes.
func (b *Bans) Apply(_ context.Context, changes []actions.Change) error {
	if len(changes) == 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	v := b.view.Load()
	overLen := 0
	if v.over != nil {
		overLen = len(v.over.recs)
	}
	if len(changes) > persistChanges || overLen+len(changes) > overlayMax {
		// Many changes (a cleaner pass, a burst), or an overlay grown
		// large: a new base, the old one's copy with the overlay and the
		// changes applied.
		tb := fromTable(v.base, overLen+len(changes))
		v.addOverlay(tb)
		applyChanges(tb, changes)
		b.view.Store(newView(tb.done(), nil, v.allow))
		return nil
	}
	ob := newBuilder(overLen+len(changes), true)
	v.addOverlay(ob)
	applyChanges(ob, changes)
	b.view.Store(newView(v.base, ob.done(), v.allow))
	return nil
}

// addOverlay adds v's overlay, if any, to tb: its entries and its gone
// marks.
func (v *banView) addOverlay(tb *tableBuilder) {
	if v.over == nil {
		return
	}
	for i := range v.over.recs {
		r := &v.over.recs[i]
		e := v.over.entry(r)
		tb.add(&e, r.gone)
	}
}

// applyChanges adds changes to tb: a lifted prefix is marked gone.
func applyChanges(tb *tableBuilder, changes []actions.Change) {
	for i := range changes {
		c := &changes[i]
		if c.Delete {
			tb.add(&actions.Entry{Prefix: c.Prefix}, true)
		} else {
			tb.add(&c.Entry, false)
		}
	}
}

// InMemory tells the manager that nothing outside logjail changes the view:
// its periodic resync (a rebuild of the whole table) is not needed.
func (b *Bans) InMemory() bool { return true }

// Close does nothing: the view lives in memory.
func (b *Bans) Close() error { return nil }

// Ready reports whether the view has been loaded.
func (b *Bans) Ready() bool { return b.ready.Load() }

// Len is the number of blocked prefixes.
func (b *Bans) Len() int {
	return b.view.Load().n
}

// Lookup returns what blocks a at now: a ban before a throttle, among the
// prefixes containing a whose end has not passed, the narrowest first. An
// allowed address is exempt from a prefix that is wider than its allowed
// prefix (a prefix ban that happens to contain it); a ban of the allowed
// key itself or of a part of it (an operator's ban --force) still holds.
func (b *Bans) Lookup(a netip.Addr, now time.Time) (actions.Entry, bool) {
	if !a.IsValid() {
		return actions.Entry{}, false
	}
	v := b.view.Load()
	pfx := netip.PrefixFrom(a, a.BitLen())
	allowed, _, isAllowed := v.allow.LookupPrefixLPM(pfx)
	hi, lo, v4 := addrKey(a)
	lens := v.lens6
	if v4 {
		lens = v.lens4
	}
	var best *rec
	var bestT *banTable
	for _, n := range lens {
		if int(n) > a.BitLen() {
			continue
		}
		t, r, ok := v.find(masked(hi, lo, v4, n))
		if !ok {
			continue
		}
		if r.hasUntil && !time.Unix(r.sec, int64(r.nsec)).After(now) {
			continue // ended
		}
		if isAllowed && int(n) < allowed.Bits() {
			continue // wider than the allowed prefix
		}
		if kindOf(r.kind) == actions.KindBan {
			return t.entry(r), true
		}
		if best == nil {
			best, bestT = r, t
		}
	}
	if best == nil {
		return actions.Entry{}, false
	}
	return bestT.entry(best), true
}
