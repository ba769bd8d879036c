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
// same state the other actions enforce, without a database read. Lookups
// run concurrently with updates.
type Bans struct {
	name  string
	mu    sync.RWMutex
	bans  *bart.Table[actions.Entry]
	allow *bart.Table[struct{}]
	ready atomic.Bool
}

var _ actions.Backend = (*Bans)(nil)

// NewBans makes an empty view; Ready is false until the first Sync.
func NewBans(name string) *Bans {
	return &Bans{name: name, bans: new(bart.Table[actions.Entry]), allow: new(bart.Table[struct{}])}
}

// Name names the action.
func (b *Bans) Name() string { return b.name }

// Sync replaces the whole view.
func (b *Bans) Sync(_ context.Context, entries []actions.Entry, allow []netip.Prefix) error {
	bans, al := new(bart.Table[actions.Entry]), new(bart.Table[struct{}])
	for _, e := range entries {
		bans.Insert(e.Prefix, e)
	}
	for _, p := range allow {
		al.Insert(p, struct{}{})
	}
	b.mu.Lock()
	b.bans, b.allow = bans, al
	b.mu.Unlock()
	b.ready.Store(true)
	return nil
}

// Apply applies changes.
func (b *Bans) Apply(_ context.Context, changes []actions.Change) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range changes {
		if c.Delete {
			b.bans.Delete(c.Prefix)
		} else {
			b.bans.Insert(c.Prefix, c.Entry)
		}
	}
	return nil
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
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.bans.Size()
}

// Lookup returns what blocks a at now: a ban before a throttle, among the
// prefixes containing a whose end has not passed. An allowed address is
// exempt from a prefix that is wider than its allowed prefix (a prefix ban
// that happens to contain it); a ban of the allowed key itself or of a part
// of it (an operator's ban --force) still holds.
func (b *Bans) Lookup(a netip.Addr, now time.Time) (actions.Entry, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	pfx := netip.PrefixFrom(a, a.BitLen())
	allowed, _, isAllowed := b.allow.LookupPrefixLPM(pfx)
	valid := func(e actions.Entry) bool {
		if !e.Until.IsZero() && !e.Until.After(now) {
			return false
		}
		return !isAllowed || e.Prefix.Bits() >= allowed.Bits()
	}
	e, ok := b.bans.Lookup(a)
	if !ok {
		return actions.Entry{}, false // no prefix contains a
	}
	if valid(e) && e.Kind == actions.KindBan {
		return e, true
	}
	// A wider prefix may hold a ban where the narrowest holds a throttle
	// or has ended: look at every prefix containing a (rare: a few).
	best, found := actions.Entry{}, false
	for _, e := range b.bans.Supernets(pfx) {
		if !valid(e) {
			continue
		}
		if e.Kind == actions.KindBan {
			return e, true
		}
		if !found {
			best, found = e, true
		}
	}
	return best, found
}
