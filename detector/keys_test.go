package detector

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/logjail/logjail/rules"
)

// TestKeyTableAgainstMap drives the key table with random inserts and
// removes (through growth, shrinking and the backward shift of removes)
// and checks it against a map after every step: each key found with its
// head, each removed key gone, texts intact.
func TestKeyTableAgainstMap(t *testing.T) {
	kt := newKeyTable()
	model := map[string]int32{} // key -> head
	ids := map[string]uint32{}
	rng := rand.New(rand.NewPCG(1, 2))
	long := strings.Repeat("x", keyMaxRun+10)
	key := func(i int) string {
		switch i % 97 {
		case 0:
			return long + fmt.Sprint(i) // kept apart, in long
		case 1:
			return ""
		}
		return fmt.Sprintf("2001:db8:%x::%x", i%5000, i)
	}
	check := func(step int) {
		t.Helper()
		if kt.n != len(model) {
			t.Fatalf("step %d: %d keys, want %d", step, kt.n, len(model))
		}
		for k, head := range model {
			id := kt.find(k, kt.hash(k))
			if id == 0 || id != ids[k] {
				t.Fatalf("step %d: %q: id %d, want %d", step, k, id, ids[k])
			}
			if r := kt.rec(id); r.head != head || kt.textOf(id) != k {
				t.Fatalf("step %d: %q: head %d text %q", step, k, r.head, kt.textOf(id))
			}
		}
	}
	for step := range 60_000 {
		k := key(rng.IntN(20_000))
		if _, ok := model[k]; ok && rng.IntN(3) > 0 {
			kt.remove(ids[k])
			delete(model, k)
			delete(ids, k)
			if kt.find(k, kt.hash(k)) != 0 {
				t.Fatalf("step %d: %q found after its removal", step, k)
			}
		} else if !ok {
			head := int32(step)
			ids[k] = kt.insert(k, kt.hash(k), head)
			model[k] = head
		}
		if step%5000 == 0 {
			check(step)
		}
	}
	check(-1)
	for k, id := range ids {
		kt.remove(id)
		delete(model, k)
	}
	check(-2)
	if len(kt.slots) != keyMinSlots || kt.text.InUse() != 0 || kt.recs.InUse() != 0 || len(kt.long) != 0 {
		t.Errorf("empty table: %d slots, %d text bytes, %d records, %d long keys in use", len(kt.slots), kt.text.InUse(), kt.recs.InUse(), len(kt.long))
	}
}

// TestRequestsPast32Bits: a state's requests go on past 4 billion (the
// high bits live in its ladder) and survive a checkpoint.
func TestRequestsPast32Bits(t *testing.T) {
	cfg := parseConfig(t, memConfig)
	d := New(Options{})
	c := rules.Charge{Rule: cfg.Rules[2], Key: "198.51.100.7", CPU: 0.001}
	d.Charge(at(0), &c, nil)
	_, s := d.find(c.Rule, c.Key)
	d.setRequests(s, 1<<32-1)
	d.Charge(at(1), &c, nil)
	d.Charge(at(2), &c, nil)
	if got, want := d.requests(s), int64(1<<32+1); got != want {
		t.Fatalf("requests %d, want %d", got, want)
	}
	var saved []*KeyState
	d.Changes(func(ks *KeyState) {
		k := *ks
		k.Data = bytes.Clone(ks.Data)
		saved = append(saved, &k)
	})
	r := New(Options{})
	if _, err := r.Restore(cfg, d.SaveGlobal(), slices.Values(saved)); err != nil {
		t.Fatal(err)
	}
	ri, rs := r.find(c.Rule, c.Key)
	if got := r.keyPeak(ri, rs).Requests; got != 1<<32+1 {
		t.Errorf("restored: requests %d, want %d", got, int64(1<<32+1))
	}
}

// TestReloadsReuseCompiledRules: every reload compiles its rules afresh
// (new *rules.Rule values); a compile that no state names any more gives
// its place back, so that a daemon reloaded 70,000 times (more than the
// 65,535 places states can name) goes on, and its states keep their
// windows while the limits stay the same.
func TestReloadsReuseCompiledRules(t *testing.T) {
	cfg := parseConfig(t, memConfig)
	d := New(Options{})
	r := cfg.Rules[2] // scanners: 30 per 10s
	var out []Decision
	for i := range 70_000 {
		ri := *r // a reload: the same rule, a new value
		c := rules.Charge{Rule: &ri, Key: "198.51.100.7"}
		out = d.Charge(at(float64(i)/1000), &c, out[:0])
		if len(out) > 0 {
			t.Fatalf("reload %d: %v (the window must survive reloads: 1 request a millisecond is 30 in 30 ms)", i, out)
		}
		if i == 28 {
			if q, ok := d.Query(&ri, c.Key, at(float64(i)/1000)); !ok || q.Limits[0].Count != 29 {
				t.Fatalf("after 29 reloads: %+v, want 29 requests in the window", q)
			}
			break
		}
	}
	for i := range 70_000 {
		ri := *r
		c := rules.Charge{Rule: &ri, Key: "198.51.100.8"}
		d.Charge(at(100+float64(i)), &c, nil)
	}
	if n := len(d.infos); n > 8 {
		t.Errorf("%d compiled rules kept after 70,000 reloads, want a handful", n)
	}
}
