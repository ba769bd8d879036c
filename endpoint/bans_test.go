package endpoint

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/logjail/logjail/actions"
)

// TestBansApplySnapshots: changes few (copy-on-write one by one) and many
// (one copy of the table) reach Lookup, while lookups run beside them
// without a lock (the race detector watches the tables).
func TestBansApplySnapshots(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	until := now.Add(time.Hour)
	ban := func(a netip.Addr) actions.Change {
		return actions.Change{Entry: actions.Entry{Prefix: netip.PrefixFrom(a, a.BitLen()), Kind: actions.KindBan, Until: until, Rule: "flood"}}
	}
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{203, 0, 113, byte(i)}) }
	b := NewBans("endpoint")
	if err := b.Sync(ctx, []actions.Entry{ban(netip.MustParseAddr("198.51.100.1")).Entry}, nil); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // a reader beside every change
		for {
			select {
			case <-stop:
				return
			default:
				b.Lookup(addr(7), now)
				b.Lookup(netip.MustParseAddr("198.51.100.1"), now)
			}
		}
	})
	for _, n := range []int{1, persistChanges, persistChanges + 1, 256} {
		var adds, dels []actions.Change
		for i := range n {
			a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(i), 14: byte(i >> 8)})
			adds = append(adds, ban(a))
			dels = append(dels, actions.Change{Entry: actions.Entry{Prefix: netip.PrefixFrom(a, 128)}, Delete: true})
		}
		adds = append(adds, ban(addr(7)))
		if err := b.Apply(ctx, adds); err != nil {
			t.Fatal(err)
		}
		if got, want := b.Len(), n+2; got != want {
			t.Errorf("%d changes: Len %d after the bans, want %d", n, got, want)
		}
		if e, ok := b.Lookup(addr(7), now); !ok || e.Kind != actions.KindBan {
			t.Errorf("%d changes: 203.0.113.7 not banned: %+v %v", n, e, ok)
		}
		dels = append(dels, actions.Change{Entry: actions.Entry{Prefix: netip.PrefixFrom(addr(7), 32)}, Delete: true})
		if err := b.Apply(ctx, dels); err != nil {
			t.Fatal(err)
		}
		if got := b.Len(); got != 1 {
			t.Errorf("%d changes: Len %d after the unbans, want 1", n, got)
		}
		if _, ok := b.Lookup(addr(7), now); ok {
			t.Errorf("%d changes: 203.0.113.7 still blocked after its unban", n)
		}
		if _, ok := b.Lookup(netip.MustParseAddr("198.51.100.1"), now); !ok {
			t.Errorf("%d changes: the synced ban of 198.51.100.1 was lost", n)
		}
	}
	close(stop)
	wg.Wait()
}
