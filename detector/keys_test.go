package detector

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/rules"
)

// TestKeyTableAgainstMap drives the key table with random inserts and
// removes (through growth, shrinking and the backward shift of removes)
// and checks it against a map after every step: each key found with its
// head, each removed key gone, texts intact. Its "bare" run takes the hash
// bits off every other slot now and then, as slotOf leaves the slot of an
// id past slotIDMask (a table that once held 67 million keys, which a test
// cannot make): lookups, removes and growth must read such slots too.
func TestKeyTableAgainstMap(t *testing.T) {
	for _, bare := range []bool{false, true} {
		t.Run(fmt.Sprintf("bare=%v", bare), func(t *testing.T) { testKeyTableAgainstMap(t, bare) })
	}
}

func testKeyTableAgainstMap(t *testing.T, bare bool) {
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
			id := kt.findK(keyOf(k), kt.hashK(keyOf(k)))
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
			if kt.findK(keyOf(k), kt.hashK(keyOf(k))) != 0 {
				t.Fatalf("step %d: %q found after its removal", step, k)
			}
		} else if !ok {
			head := int32(step)
			ids[k] = kt.insertK(keyOf(k), kt.hashK(keyOf(k)), head)
			model[k] = head
		}
		if bare && step%1000 == 0 {
			for i, s := range kt.slots {
				if s != 0 && i%2 == 0 {
					kt.slots[i] = slotID(s)
				}
			}
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

// TestSlotOf: a slot gives its id back, tagged or bare; a tagged slot
// passes over the keys whose hash bits differ and no other; a bare one (an
// id past slotIDMask) passes over none.
func TestSlotOf(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 100_000 {
		h, g := rng.Uint64(), rng.Uint64()
		id := 1 + rng.Uint32N(slotIDMask)
		s := slotOf(id, h)
		if s == 0 || slotID(s) != id {
			t.Fatalf("slotOf(%d, %#x) = %#x: id %d", id, h, s, slotID(s))
		}
		if !slotMay(s, slotTag(h)) {
			t.Fatalf("slot %#x passes over its own key (hash %#x)", s, h)
		}
		if slotMay(s, slotTag(g)) != (h>>59 == g>>59) {
			t.Fatalf("slot %#x of hash %#x, key of hash %#x: may %v", s, h, g, slotMay(s, slotTag(g)))
		}
		big := slotIDMask + 1 + rng.Uint32N(slotTagged-slotIDMask-1)
		if s := slotOf(big, h); s != big || slotID(s) != big || !slotMay(s, slotTag(g)) {
			t.Fatalf("slotOf(%d) = %#x: id %d, may %v", big, s, slotID(s), slotMay(s, slotTag(g)))
		}
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

// TestFixedKeysDecideAsText feeds the same events (v4 and IPv6 clients,
// ip keys, /24 and /64 prefix keys, a range with limits keyed by prefix, a
// grouped range, users) to three detectors: charges with the key's text
// only (the path before fixed keys), with the fixed key only (ClassifyKeys,
// the pipeline's) and with both (ClassifyCached). Under several
// ipv4_prefix and ipv6_prefix settings, every decision, key text, peak,
// Status, Banned answer, checkpoint record and internal state is the same,
// and so is what is restored from either's checkpoint.
func TestFixedKeysDecideAsText(t *testing.T) {
	for _, prefixes := range []string{"ipv6_prefix: 64", "ipv6_prefix: 128\nipv4_prefix: 16", "ipv6_prefix: 56\nipv4_prefix: 32", "ipv6_prefix: 64\nipv4_prefix: 24"} {
		t.Run(strings.ReplaceAll(prefixes, "\n", ","), func(t *testing.T) {
			cfg := parseConfig(t, strings.Replace(snapConfigWith(100_000), "ipv6_prefix: 64", prefixes, 1))
			evs := snapEvents(cfg, 6000)
			modes := []struct {
				name     string
				classify func(*rules.KeyCache, *parser.Entry, []rules.Charge) []rules.Charge
			}{
				{"text", func(_ *rules.KeyCache, e *parser.Entry, dst []rules.Charge) []rules.Charge {
					dst, _ = cfg.Classify(cfg.Sources[0], e, dst)
					for i := range dst {
						if dst[i].Key == "" {
							t.Fatalf("Classify made no key text: %+v", dst[i])
						}
						dst[i].Fixed = rules.FixedKey{}
					}
					return dst
				}},
				{"fixed", func(kc *rules.KeyCache, e *parser.Entry, dst []rules.Charge) []rules.Charge {
					dst, _ = cfg.ClassifyKeys(kc, cfg.Sources[0], e, dst)
					return dst
				}},
				{"both", func(kc *rules.KeyCache, e *parser.Entry, dst []rules.Charge) []rules.Charge {
					dst, _ = cfg.ClassifyCached(kc, cfg.Sources[0], e, dst)
					return dst
				}},
			}
			type result struct {
				out    []Decision
				dump   detectorDump
				peaks  []peakDump
				answer []string
				saved  keyStore
				global []byte
			}
			var res []result
			fixedCharges := 0
			for _, m := range modes {
				d := detectorFor(cfg)
				var kc rules.KeyCache
				var out []Decision
				var charges []rules.Charge
				started := false
				for i := range evs {
					ev := &evs[i]
					switch ev.kind {
					case evReset:
						d.ResetBreaker()
					case evLift:
						out = d.Lift(ev.e.Time, cfg.Rule(ev.rule), ev.key, out)
					default:
						e := &ev.e
						if !started {
							started = true
							out = d.Static(e.Time, cfg.StaticBans(), out)
						}
						charges = m.classify(&kc, e, charges[:0])
						if len(charges) == 0 {
							out = d.Advance(e.Time, out)
						}
						for j := range charges {
							if m.name == "fixed" && charges[j].Key == "" {
								fixedCharges++
							}
							out = d.Charge(e.Time, &charges[j], out)
						}
					}
				}
				r := result{out: out, dump: dump(d), peaks: peaks(d), saved: keyStore{}}
				r.answer = answers(d, cfg, r.peaks, evs[len(evs)-1].e.Time)
				r.saved.checkpoint(t, d)
				r.global = d.SaveGlobal()
				res = append(res, r)
			}
			if fixedCharges == 0 {
				t.Fatal("no charge carried a fixed key alone")
			}
			if len(res[0].out) < 50 {
				t.Fatalf("%d decisions: the events decide too little to compare", len(res[0].out))
			}
			for _, r := range res[1:] {
				if diff := gocmp.Diff(res[0].out, r.out, strictOpts...); diff != "" {
					t.Errorf("decisions (-text +fixed):\n%s", diff)
				}
				if diff := gocmp.Diff(res[0].dump, r.dump, strictOpts...); diff != "" {
					t.Errorf("state (-text +fixed):\n%s", diff)
				}
				if diff := gocmp.Diff(res[0].peaks, r.peaks, strictOpts...); diff != "" {
					t.Errorf("peaks (-text +fixed):\n%s", diff)
				}
				if diff := gocmp.Diff(res[0].answer, r.answer); diff != "" {
					t.Errorf("Status and Banned (-text +fixed):\n%s", diff)
				}
				if diff := gocmp.Diff(res[0].saved, r.saved); diff != "" {
					t.Errorf("checkpoint (-text +fixed):\n%s", diff)
				}
			}
			// A checkpoint of the fixed keys restores the same state.
			back := detectorFor(cfg)
			states := make([]*KeyState, 0, len(res[1].saved))
			for _, ks := range res[1].saved {
				states = append(states, ks)
			}
			slices.SortFunc(states, func(a, b *KeyState) int { return strings.Compare(a.Rule+"\x00"+a.Key, b.Rule+"\x00"+b.Key) })
			if _, err := back.Restore(cfg, res[1].global, slices.Values(states)); err != nil {
				t.Fatal(err)
			}
			if diff := gocmp.Diff(res[0].peaks, peaks(back), strictOpts...); diff != "" {
				t.Errorf("restored peaks (-text +restored):\n%s", diff)
			}
		})
	}
}

// TestLookupFixedAsLookupK looks random fixed keys up (addresses and
// prefixes of both families, a few hot ones so that the previous lookup's
// key is often the one asked, three rules a key in random orders, a cap
// of 500 states so that evictions drop keys the previous lookup named)
// through lookupFixed in one detector and lookupK in another: the same
// slot at every lookup, as many keys and the same LRU lists at the end
// (the tables' seeds differ: their slots do).
func TestLookupFixedAsLookupK(t *testing.T) {
	rs := benchRules()
	a, b := New(Options{MaxKeys: 500}), New(Options{MaxKeys: 500})
	rnd := rand.New(rand.NewPCG(3, 4))
	key := func() rules.FixedKey {
		n := rnd.IntN(2000)
		if rnd.IntN(3) == 0 {
			n = rnd.IntN(4) // hot keys
		}
		switch n % 3 {
		case 0:
			return rules.FixedKey{Lo: uint64(0x0a000000 + n), Bits: 32, Fam: 4}
		case 1:
			return rules.FixedKey{Lo: uint64(0x0a000000+n) &^ 0xff, Bits: 24, Fam: 4}
		}
		return rules.FixedKey{Hi: 0x20010db800000000 | uint64(n)<<16, Bits: 64, Fam: 6}
	}
	for n := range 50000 {
		f := key()
		for range 1 + rnd.IntN(3) {
			r := rs[rnd.IntN(len(rs))]
			ia, sa := a.lookupFixed(a.rule(r), &f)
			ib, sb := b.lookupK(b.rule(r), akey{f: f})
			if ia != ib || sa.kid != sb.kid || sa.sib != sb.sib {
				t.Fatalf("lookup %d of %+v (rule %s): lookupFixed slot %d (key %d, sib %d), lookupK slot %d (key %d, sib %d)",
					n, f, r.Name, ia, sa.kid, sa.sib, ib, sb.kid, sb.sib)
			}
			a.touchS(ia, sa)
			b.touchS(ib, sb)
		}
	}
	if a.stats.Evictions == 0 {
		t.Errorf("no evictions: the cap was never reached")
	}
	if a.keys.n != b.keys.n || a.lru != b.lru || a.lastHead != b.lastHead || a.lastFixed != b.lastFixed {
		t.Errorf("the detectors differ at the end: %d and %d keys, lists %v and %v", a.keys.n, b.keys.n, a.lru, b.lru)
	}
}
