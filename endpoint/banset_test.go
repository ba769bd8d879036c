package endpoint

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/gaissmai/bart"
	"github.com/logjail/logjail/actions"
)

// refBans is the endpoint's view as it was before its tables went
// pointer-free: one bart table of the entries, changed in place. It is
// the reference TestBansAnswerAsBefore compares the view with.
type refBans struct {
	bans  *bart.Table[actions.Entry]
	allow *bart.Table[struct{}]
}

func (r *refBans) sync(entries []actions.Entry, allow []netip.Prefix) {
	r.bans, r.allow = new(bart.Table[actions.Entry]), new(bart.Table[struct{}])
	for _, e := range entries {
		r.bans.Insert(e.Prefix, e)
	}
	for _, p := range allow {
		r.allow.Insert(p, struct{}{})
	}
}

func (r *refBans) apply(changes []actions.Change) {
	for _, c := range changes {
		if c.Delete {
			r.bans.Delete(c.Prefix)
		} else {
			r.bans.Insert(c.Prefix, c.Entry)
		}
	}
}

// lookup is Bans.Lookup as it was.
func (r *refBans) lookup(a netip.Addr, now time.Time) (actions.Entry, bool) {
	pfx := netip.PrefixFrom(a, a.BitLen())
	allowed, _, isAllowed := r.allow.LookupPrefixLPM(pfx)
	valid := func(e actions.Entry) bool {
		if !e.Until.IsZero() && !e.Until.After(now) {
			return false
		}
		return !isAllowed || e.Prefix.Bits() >= allowed.Bits()
	}
	e, ok := r.bans.Lookup(a)
	if !ok {
		return actions.Entry{}, false
	}
	if valid(e) && e.Kind == actions.KindBan {
		return e, true
	}
	best, found := actions.Entry{}, false
	for _, e := range r.bans.Supernets(pfx) {
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

// sameEntry reports whether two answers are the same (Until by Equal: the
// view keeps the instant, not the time's location).
func sameEntry(a, b actions.Entry) bool {
	return a.Prefix == b.Prefix && a.Kind == b.Kind && a.Until.Equal(b.Until) && a.Delay == b.Delay &&
		a.Rule == b.Rule && a.Key == b.Key && a.Reason == b.Reason
}

// TestBansAnswerAsBefore: the pointer-free view answers every lookup
// exactly as the bart view before it did, on a mix of IPv4 and IPv6
// addresses (IPv4-mapped ones too) and prefixes of many lengths (nested:
// a /128 in a /64 in a /48; a /32 in a /24 in a /16), bans and throttles
// with and without an end, an allow list, through a Sync, then rounds of
// changes few (the overlay) and many (a new base), bans set again with
// another end, lifted, and ended as the clock moves on; the number of
// prefixes too.
func TestBansAnswerAsBefore(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(23, 15))
	t0 := time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)
	v4 := func() netip.Addr {
		return netip.AddrFrom4([4]byte{[]byte{198, 203}[rng.IntN(2)], []byte{51, 0}[rng.IntN(2)], byte(100 + rng.IntN(14)), byte(rng.IntN(8))})
	}
	v6 := func() netip.Addr {
		return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, byte(rng.IntN(3)), 0, byte(rng.IntN(3)), 15: byte(rng.IntN(6))})
	}
	prefix := func() netip.Prefix {
		if rng.IntN(2) == 0 {
			return netip.PrefixFrom(v4(), []int{32, 32, 32, 24, 16, 8}[rng.IntN(6)]).Masked()
		}
		return netip.PrefixFrom(v6(), []int{128, 128, 128, 64, 48, 40, 32}[rng.IntN(7)]).Masked()
	}
	entry := func(p netip.Prefix) actions.Entry {
		e := actions.Entry{Prefix: p, Kind: actions.KindBan, Rule: fmt.Sprintf("rule%d", rng.IntN(3)), Key: p.String(),
			Reason: fmt.Sprintf("reason %d", rng.IntN(4))}
		if rng.IntN(3) == 0 {
			e.Kind, e.Delay = actions.KindThrottle, time.Duration(1+rng.IntN(9))*time.Second
		}
		if rng.IntN(5) != 0 { // a fifth until lifted
			e.Until = t0.Add(time.Duration(rng.IntN(600)) * time.Second).In(time.Local)
		}
		return e
	}
	allow := []netip.Prefix{netip.MustParsePrefix("198.51.100.3/32"), netip.MustParsePrefix("2001:db8:0:1::/64"),
		netip.MustParsePrefix("203.0.113.0/28")}
	var entries []actions.Entry
	for range 300 {
		entries = append(entries, entry(prefix()))
	}
	b, ref := NewBans("endpoint"), &refBans{}
	if err := b.Sync(ctx, entries, allow); err != nil {
		t.Fatal(err)
	}
	ref.sync(entries, allow)
	check := func(round string, now time.Time) {
		t.Helper()
		if got, want := b.Len(), ref.bans.Size(); got != want {
			t.Fatalf("%s: Len %d, want %d", round, got, want)
		}
		addrs := []netip.Addr{{}, netip.MustParseAddr("::ffff:198.51.100.3"), netip.MustParseAddr("::ffff:203.0.113.1")}
		for range 600 {
			addrs = append(addrs, v4(), v6())
		}
		answered := 0
		for _, a := range addrs {
			got, gok := b.Lookup(a, now)
			want, wok := ref.lookup(a, now)
			if gok != wok || !sameEntry(got, want) {
				t.Fatalf("%s: Lookup(%v) = %+v %v, want %+v %v", round, a, got, gok, want, wok)
			}
			if gok {
				answered++
			}
		}
		if answered == 0 || answered == len(addrs) {
			t.Fatalf("%s: %d of %d lookups blocked: the mix tests nothing", round, answered, len(addrs))
		}
	}
	check("after Sync", t0)
	for round := range 120 {
		n := 1 + rng.IntN(40)
		if round%7 == 6 {
			n = persistChanges + 1 + rng.IntN(200) // many: a new base
		}
		var changes []actions.Change
		for range n {
			p := prefix()
			if rng.IntN(3) == 0 {
				changes = append(changes, actions.Change{Entry: actions.Entry{Prefix: p}, Delete: true})
			} else {
				changes = append(changes, actions.Change{Entry: entry(p)})
			}
		}
		if err := b.Apply(ctx, changes); err != nil {
			t.Fatal(err)
		}
		ref.apply(changes)
		check(fmt.Sprintf("round %d (%d changes)", round, n), t0.Add(time.Duration(round*15)*time.Second))
	}
}
