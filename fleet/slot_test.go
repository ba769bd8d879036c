package fleet

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/logjail/logjail/internal/redistest"
)

// TestKeySlot: keySlot gives the slot Redis gives. The slots are what
// `redis-cli CLUSTER KEYSLOT` answered on a redis-server 7.0.15 started
// with --cluster-enabled yes (a server outside cluster mode refuses the
// command): window and ban keys, hash tags at the edges of the
// specification (empty, doubled, unclosed, a second tag) and the
// specification's check value (CRC16-XMODEM of "123456789" is 0x31C3).
func TestKeySlot(t *testing.T) {
	for _, tc := range []struct {
		key  string
		slot uint16
	}{
		{"123456789", 12739},
		{"logjail:w:{flood|203.0.113.7}", 14614},
		{"logjail:ban:{flood|203.0.113.7}", 14614},
		{"logjail:w:{flood|2001:db8:1:2::/64}", 8929},
		{"logjail:w:{api|user:alice}", 7922},
		{"logjail:w:{flood|203.0.113.7|ua:curl/8.0 {x}}", 573},
		{"logjail:bans", 12902},
		{"foo{}{bar}", 8363},
		{"foo{{bar}}zap", 4015},
		{"foo{bar}{zap}", 5061},
		{"{user1000}.following", 3443},
		{"no-brace{", 247},
		{"", 0},
	} {
		if got := keySlot(tc.key); got != tc.slot {
			t.Errorf("keySlot(%q) = %d, CLUSTER KEYSLOT says %d", tc.key, got, tc.slot)
		}
	}
}

// TestBatchesOneSlot: with a Cluster client, every script call carries
// keys of one slot only, at most batchKeys of them, and every key once;
// the units all reach Redis (a plain server here: it runs a call of any
// keys).
func TestBatchesOneSlot(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	n, err := Open(context.Background(), cfg(srv, "web1"))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	n.cluster = true
	ctx := context.Background()
	const keys = 3000
	pending := map[dkey]pend{}
	for i := range keys {
		// "flood|k7" and the like: a few hundred keys share a slot with another.
		k := "k" + strconv.Itoa(i%1500) + "/" + strconv.Itoa(i/1500)
		pending[dkey{"flood", k, 0, 1000}] = pend{units: 2, ttl: time.Minute}
	}
	pipe := n.rdb.Pipeline()
	load := pipe.ScriptLoad(ctx, windowScript)
	st := n.stageWindows(ctx, pipe, pending)
	seen := map[rk]bool{}
	for _, b := range st.batches {
		if len(b.groups) == 0 || len(b.groups) > batchKeys {
			t.Errorf("a call of %d keys, want 1 to %d", len(b.groups), batchKeys)
		}
		slot := st.groups[b.groups[0]].ki.slot
		for _, gi := range b.groups {
			ki := st.groups[gi].ki
			if ki.slot != slot {
				t.Errorf("one call holds slots %d and %d (%s)", slot, ki.slot, windowKey(ki.rk))
			}
			if want := keySlot(windowKey(ki.rk)); ki.slot != want {
				t.Errorf("%s: slot %d, want %d", windowKey(ki.rk), ki.slot, want)
			}
			if seen[ki.rk] {
				t.Errorf("%v in two calls", ki.rk)
			}
			seen[ki.rk] = true
		}
	}
	if len(seen) != keys {
		t.Errorf("%d keys staged, want %d", len(seen), keys)
	}
	slots := map[uint16]bool{}
	for r := range seen {
		slots[keySlot(windowKey(r))] = true
	}
	if len(st.batches) != len(slots) {
		t.Errorf("%d calls for %d keys of %d slots, want one per slot", len(st.batches), keys, len(slots))
	}
	if _, err := pipe.Exec(ctx); err != nil || load.Err() != nil {
		t.Fatal(err, load.Err())
	}
	if _, err := n.absorb(st, n.now()); err != nil {
		t.Fatal(err)
	}
	c := srv.Client(t)
	for r := range seen {
		if v, err := c.HGet(ctx, windowKey(r), "0:1000").Int(); v != 2 {
			t.Fatalf("%s 0:1000 = %d (%v), want 2", windowKey(r), v, err)
		}
	}
}
