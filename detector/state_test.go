package detector

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/logjail/logjail/limits"
	"github.com/logjail/logjail/rules"
)

func peakKeys(d *Detector) []string {
	var ks []string
	d.Peaks(func(kp KeyPeak) { ks = append(ks, kp.Rule.Name+"/"+kp.Key) })
	return ks
}

func TestEviction(t *testing.T) {
	r := banRule("r", rate(2, 10*time.Second))
	var evicted []string
	d := New(Options{MaxKeys: 3, Evicted: func(kp KeyPeak) { evicted = append(evicted, strings.Clone(kp.Key)) }})
	run(d, r, keys("a", 0))
	run(d, r, keys("b", 1))
	run(d, r, keys("c", 2))
	run(d, r, keys("a", 3)) // a is the most recent now: b is the least
	run(d, r, keys("d", 4)) // evicts b
	run(d, r, keys("b", 5)) // evicts c, and b starts afresh
	run(d, r, keys("e", 6)) // evicts a
	if diff := cmp.Diff([]string{"b", "c", "a"}, evicted); diff != "" {
		t.Errorf("evicted (-want +got):\n%s", diff)
	}
	st := d.Stats()
	if st.Evictions != 3 || st.Keys != 3 {
		t.Errorf("evictions, keys = %d, %d; want 3, 3", st.Evictions, st.Keys)
	}
	// Slots are reused: b took c's, e took a's.
	if diff := cmp.Diff([]string{"r/e", "r/d", "r/b"}, peakKeys(d)); diff != "" {
		t.Errorf("tracked (-want +got):\n%s", diff)
	}
	// b's window was forgotten: with one more entry, b has two, not three.
	if got := run(d, r, keys("b", 7)); len(got) != 0 {
		t.Errorf("b after eviction: %+v", got)
	}
}

func TestEvictionSparesBanned(t *testing.T) {
	r := banRule("r", rate(1, 10*time.Second))
	d := New(Options{MaxKeys: 2})
	got := run(d, r, keys("x", 0, 1)) // banned until 61
	got = append(got, run(d, r, keys("a", 2))...)
	got = append(got, run(d, r, keys("b", 3))...) // evicts a, not x
	got = append(got, run(d, r, keys("c", 4))...) // evicts b
	got = append(got, run(d, r, keys("x", 5))...) // blocked, still banned
	want := []Decision{ban("r", "x", 1, 61, 0, "rate 2 per 10s > 1 (rule r)")}
	if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
		t.Errorf("decisions (-want +got):\n%s", diff)
	}
	if k, until := d.Status(r, "x", at(5)); k != Ban || !until.Equal(at(61)) {
		t.Errorf("status of x = %q %v; want ban until %v", k, until, at(61))
	}
	st := d.Stats()
	if st.Evictions != 2 || st.Keys != 2 || st.Banned != 1 || st.Blocked != 1 {
		t.Errorf("stats = %+v; want 2 evictions, 2 keys, 1 banned, 1 blocked", st)
	}
	// Every other state banned: a new key goes past the cap.
	d = New(Options{MaxKeys: 1})
	run(d, r, keys("x", 0, 1))
	run(d, r, keys("y", 2, 3))
	if st := d.Stats(); st.Keys != 2 || st.Banned != 2 || st.Evictions != 0 {
		t.Errorf("all banned: stats = %+v; want 2 keys, 2 banned, no eviction", st)
	}
	// When the bans end the states rejoin the list and the cap holds again.
	got = d.Advance(at(100), nil)
	if len(got) != 2 {
		t.Errorf("unbans = %+v", got)
	}
	if st := d.Stats(); st.Keys != 1 || st.Banned != 0 || st.Evictions != 1 {
		t.Errorf("after unbans: stats = %+v; want 1 key, 1 eviction", st)
	}
}

func TestAddresses(t *testing.T) {
	v6 := &rules.Rule{Name: "r", Key: rules.KeyIP, Limits: []rules.Limit{rate(3, 10*time.Second)}, Ban: rules.Ban{For: time.Minute}}
	const p = "2001:db8:1:2::/64"
	d := New(Options{})
	got := run(d, v6, []ev{
		{at: 0, key: p, addr: "2001:db8:1:2::9"}, // out of the window at the ban
		{at: 20, key: p, addr: "2001:db8:1:2::2"},
		{at: 21, key: p, addr: "2001:db8:1:2::1"},
		{at: 22, key: p, addr: "2001:db8:1:2::2"},
		{at: 23, key: p, addr: "2001:db8:1:2::3"},
		{at: 24, key: p, addr: "2001:db8:1:2::4"}, // banned: not seen
		{at: 100, advance: true},
	})
	as := []netip.Addr{netip.MustParseAddr("2001:db8:1:2::1"), netip.MustParseAddr("2001:db8:1:2::2"), netip.MustParseAddr("2001:db8:1:2::3")}
	b := ban("r", p, 23, 83, 0, "rate 4 per 10s > 3 (rule r)")
	b.Addresses = as
	u := unban("r", p, 83)
	u.Addresses = as
	if diff := cmp.Diff([]Decision{b, u}, got, cmpOpts...); diff != "" {
		t.Errorf("prefix key (-want +got):\n%s", diff)
	}

	user := &rules.Rule{Name: "u", Key: rules.KeyUser, Limits: []rules.Limit{rate(1, 10*time.Second)},
		Throttle: &rules.Throttle{InitialDelay: 5 * time.Second, MaxDelay: 5 * time.Second}}
	got = run(New(Options{}), user, []ev{{at: 0, key: "user:bob", addr: "192.0.2.7"}, {at: 1, key: "user:bob", addr: "198.51.100.1"}})
	th := throttle("u", "user:bob", 1, 5*time.Second, 0, "rate 2 per 10s > 1 (rule u)")
	th.Addresses = []netip.Addr{netip.MustParseAddr("192.0.2.7"), netip.MustParseAddr("198.51.100.1")}
	if diff := cmp.Diff([]Decision{th}, got, cmpOpts...); diff != "" {
		t.Errorf("user key (-want +got):\n%s", diff)
	}

	// A single address is its own key: no list.
	single := banRule("s", rate(0, time.Second))
	got = run(New(Options{}), single, []ev{{at: 0, key: "203.0.113.7", addr: "203.0.113.7"}})
	if len(got) != 1 || got[0].Addresses != nil {
		t.Errorf("single address key: %+v", got)
	}

	// At most maxAddrs, the most recently seen.
	d = New(Options{})
	var evs []ev
	for i := range maxAddrs + 10 {
		evs = append(evs, ev{at: float64(i) / 100, key: "ua:x", addr: netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}).String()})
	}
	ua := &rules.Rule{Name: "ua", Key: rules.KeyUserAgent, Limits: []rules.Limit{rate(float64(len(evs)-1), 10*time.Second)}, Ban: rules.Ban{For: time.Minute}}
	got = run(d, ua, evs)
	if len(got) != 1 || len(got[0].Addresses) != maxAddrs || got[0].Addresses[0] != netip.AddrFrom4([4]byte{10, 0, 0, 10}) {
		t.Errorf("many addresses: %d decisions, %v", len(got), got)
	}
}

func TestStatic(t *testing.T) {
	d := New(Options{})
	deny := func(cidr string) rules.StaticBan {
		return rules.StaticBan{Key: netip.MustParsePrefix(cidr), Origin: "deny", Reason: "deny list"}
	}
	rng := rules.StaticBan{Key: netip.MustParsePrefix("198.51.100.0/24"), Origin: "range", Reason: "range bad banned"}
	got := d.Static(at(0), []rules.StaticBan{deny("192.0.2.7/32"), deny("2001:db8::/32"), deny("192.0.2.7/32"), rng, deny("203.0.113.9/24")}, nil)
	want := []Decision{
		{Rule: "deny", Key: "192.0.2.7", Kind: Ban, Time: at(0), Reason: "deny list", Origin: "deny"},
		{Rule: "deny", Key: "2001:db8::/32", Kind: Ban, Time: at(0), Reason: "deny list", Origin: "deny"},
		{Rule: "deny", Key: "198.51.100.0/24", Kind: Ban, Time: at(0), Reason: "range bad banned", Origin: "range"},
		{Rule: "deny", Key: "203.0.113.0/24", Kind: Ban, Time: at(0), Reason: "deny list", Origin: "deny"},
	}
	if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
		t.Errorf("first (-want +got):\n%s", diff)
	}
	// A reload: one new, two removed, the rest unchanged.
	got = d.Static(at(50), []rules.StaticBan{deny("192.0.2.7/32"), deny("192.0.2.8/32")}, nil)
	want = []Decision{
		{Rule: "deny", Key: "192.0.2.8", Kind: Ban, Time: at(50), Reason: "deny list", Origin: "deny"},
		{Rule: "deny", Key: "198.51.100.0/24", Kind: Unban, Time: at(50), Reason: "removed from config", Origin: "range"},
		{Rule: "deny", Key: "2001:db8::/32", Kind: Unban, Time: at(50), Reason: "removed from config", Origin: "deny"},
		{Rule: "deny", Key: "203.0.113.0/24", Kind: Unban, Time: at(50), Reason: "removed from config", Origin: "deny"},
	}
	if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
		t.Errorf("reload (-want +got):\n%s", diff)
	}
}

func TestAdvanceOrder(t *testing.T) {
	long := &rules.Rule{Name: "long", Limits: []rules.Limit{rate(0, time.Second)}, Ban: rules.Ban{For: time.Minute}}
	short := &rules.Rule{Name: "short", Limits: []rules.Limit{rate(0, time.Second)}, Ban: rules.Ban{For: 10 * time.Second}}
	d := New(Options{})
	got := run(d, long, []ev{
		{at: 0, key: "a"},
		{at: 1, key: "b", rule: short},
		{at: 2, key: "c", rule: short},
		{at: 5, advance: true},
		{at: 3, advance: true}, // backwards: nothing
		{at: 11, advance: true},
		{at: 12, key: "z", rule: short}, // its charge first lifts c's ban
		{at: 100, advance: true},
	})
	r := "rate 1 per 1s > 0 (rule "
	want := []Decision{
		ban("long", "a", 0, 60, 0, r+"long)"),
		ban("short", "b", 1, 11, 0, r+"short)"),
		ban("short", "c", 2, 12, 0, r+"short)"),
		unban("short", "b", 11),
		unban("short", "c", 12),
		ban("short", "z", 12, 22, 0, r+"short)"),
		unban("short", "z", 22),
		unban("long", "a", 60),
	}
	if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
		t.Errorf("decisions (-want +got):\n%s", diff)
	}
}

func TestLift(t *testing.T) {
	r := floodRule(0, time.Hour)
	d := New(Options{})
	got := run(d, r, keys("k", 0, 1, 2)) // throttle, ban at 2 until 62
	got = d.Lift(at(10), r, "k", got)
	got = append(got, run(d, r, []ev{{at: 30, key: "k"}, {at: 31, key: "k"}, {at: 32, key: "k"}, {at: 200, advance: true}})...)
	want := []Decision{
		throttle("flood", "k", 1, 10*time.Second, 0, "rate 2 per 10s > 1 (rule flood)"),
		ban("flood", "k", 2, 62, 1, "1 violation > after 0 (rule flood)"),
		{Rule: "flood", Key: "k", Kind: Unban, Time: at(10), Reason: "lifted", Origin: "detector"},
		throttle("flood", "k", 31, 10*time.Second, 0, "rate 2 per 10s > 1 (rule flood)"),
		ban("flood", "k", 32, 152, 1, "1 violation > after 0 (rule flood)"), // the lifted ban still counts
		unban("flood", "k", 152),
	}
	if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
		t.Errorf("decisions (-want +got):\n%s", diff)
	}
}

func TestPeaks(t *testing.T) {
	r := &rules.Rule{Name: "p", Limits: []rules.Limit{
		rate(100, 10*time.Second),
		share(limits.Share{Weight: limits.CPU}, 0.9, 10*time.Second),
		share(limits.Share{Weight: limits.Duration}, 0.9, 10*time.Second),
		{Kind: limits.Bucket{}, N: 1, Burst: 10, Window: 10 * time.Second},
		{Kind: limits.LastN{}, N: 3, Window: time.Second},
	}}
	d := New(Options{})
	run(d, r, []ev{
		{at: 0, key: "a", cpu: 1, dur: 2},
		{at: 1, key: "a", cpu: 2, dur: 1},
		{at: 1.5, key: "a", cpu: 0.5},
		{at: 30, key: "a", cpu: 0.25},
		{at: 0, key: "b"},
	})
	type peak struct {
		Key      string
		Requests int64
		CPU      float64
		Peak     []float64
	}
	var got []peak
	d.Peaks(func(kp KeyPeak) {
		got = append(got, peak{strings.Clone(kp.Key), kp.Requests, kp.CPU, append([]float64(nil), kp.Peak...)})
	})
	want := []peak{
		{"a", 4, 3.75, []float64{3, 0.35, 0.3, 1.5, 1.5}},
		{"b", 1, 0, []float64{1, 0, 0, 1, math.Inf(1)}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("peaks (-want +got):\n%s", diff)
	}
}

func TestReload(t *testing.T) {
	r1 := banRule("r", rate(2, 10*time.Second))
	r2 := banRule("r", rate(2, 10*time.Second)) // the same rule, reloaded
	r3 := banRule("r", rate(2, 20*time.Second)) // changed limits: windows restart
	d := New(Options{})
	got := run(d, r1, keys("k", 0, 1))
	got = append(got, run(d, r2, keys("k", 2))...)
	want := []Decision{ban("r", "k", 2, 62, 0, "rate 3 per 10s > 2 (rule r)")}
	if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
		t.Errorf("same limits (-want +got):\n%s", diff)
	}
	d = New(Options{})
	got = run(d, r1, keys("k", 0, 1))
	got = append(got, run(d, r3, keys("k", 2))...)
	if len(got) != 0 {
		t.Errorf("changed limits: %+v", got)
	}
	if d.Stats().Keys != 1 {
		t.Errorf("keys = %d, want 1", d.Stats().Keys)
	}
}

func TestKeysAreCopied(t *testing.T) {
	r := banRule("r", rate(1, 10*time.Second))
	d := New(Options{})
	// The key points into a buffer that is then overwritten, as a reader's.
	buf := []byte("203.0.113.7")
	c := rules.Charge{Rule: r, Key: unsafe.String(&buf[0], len(buf))}
	d.Charge(at(0), &c, nil)
	copy(buf, "198.51.100.")
	if diff := cmp.Diff([]string{"r/203.0.113.7"}, peakKeys(d)); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
	// The key the buffer now holds is another key, not the one the
	// detector looked up last.
	c2 := rules.Charge{Rule: r, Key: "198.51.100."}
	d.Charge(at(1), &c2, nil)
	if diff := cmp.Diff([]string{"r/203.0.113.7", "r/198.51.100."}, peakKeys(d)); diff != "" {
		t.Errorf("after a charge of the buffer's new text, keys (-want +got):\n%s", diff)
	}
}

func TestNoAllocsInSteadyState(t *testing.T) {
	rs := benchRules()
	d := New(Options{Skew: 5 * time.Second})
	cs := make([]rules.Charge, len(rs))
	for i, r := range rs {
		cs[i] = rules.Charge{Rule: r, Key: "203.0.113.7", CPU: 0.001, Duration: 0.002}
	}
	now := at(0)
	var out []Decision
	step := func() {
		now = now.Add(200 * time.Millisecond)
		for i := range cs {
			out = d.Charge(now, &cs[i], out[:0])
		}
	}
	for range 1000 { // rings grow to a full window
		step()
	}
	if n := testing.AllocsPerRun(1000, step); n != 0 {
		t.Errorf("allocs per entry = %v, want 0", n)
	}
}

func TestEvictionWithinAKey(t *testing.T) {
	// States of one key under several rules are chained; evicting any of
	// them leaves the others.
	r1 := banRule("r1", rate(2, 10*time.Second))
	r2 := banRule("r2", rate(2, 10*time.Second))
	r3 := banRule("r3", rate(2, 10*time.Second))
	var evicted []string
	d := New(Options{MaxKeys: 3, Evicted: func(kp KeyPeak) { evicted = append(evicted, kp.Rule.Name+"/"+kp.Key) }})
	run(d, r1, []ev{
		{at: 0, key: "k"}, {at: 0, key: "k", rule: r2}, {at: 0, key: "k", rule: r3},
		{at: 1, key: "k", rule: r2}, // r1/k is the least recent
		{at: 2, key: "j"},           // evicts r1/k, the head of k's chain
		{at: 3, key: "k", rule: r3},
		{at: 4, key: "j", rule: r2}, // evicts r2/k, in the middle
		{at: 4.5, key: "j"},
		{at: 5, key: "k"}, // evicts r3/k, the last of k
		{at: 6, key: "k"},
	})
	if diff := cmp.Diff([]string{"r1/k", "r2/k", "r3/k"}, evicted); diff != "" {
		t.Errorf("evicted (-want +got):\n%s", diff)
	}
	// r1/k was made afresh at 5 and charged at 6: two, not over; one more is.
	got := run(d, r1, keys("k", 7))
	want := []Decision{ban("r1", "k", 7, 67, 0, "rate 3 per 10s > 2 (rule r1)")}
	if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
		t.Errorf("decisions (-want +got):\n%s", diff)
	}
	if k, _ := d.Status(r1, "k", at(8)); k != Ban {
		t.Errorf("status r1/k = %q, want ban", k)
	}
	if k, _ := d.Status(r2, "k", at(8)); k != "" {
		t.Errorf("status r2/k = %q, want none", k)
	}
	if diff := cmp.Diff([]string{"r1/j", "r2/j", "r1/k"}, peakKeys(d)); diff != "" {
		t.Errorf("tracked (-want +got):\n%s", diff)
	}
}

// lruOrder is the slots of both LRU lists, front to back, and their tails.
func lruOrder(d *Detector) [2][]int32 {
	var out [2][]int32
	for l := range d.lru {
		last := int32(-1)
		for i := d.lru[l].head; i >= 0; i = d.at(i).next {
			if d.at(i).prev != last {
				panic("a list's prev and next disagree")
			}
			out[l] = append(out[l], i)
			last = i
		}
		if d.lru[l].tail != last {
			panic("a list's tail is not its last state")
		}
	}
	return out
}

// TestTouchAsRelink charges random keys under three rules (a throttle
// ladder, bans, a CPU share) with more keys than MaxKeys, into a detector
// whose charges move a state to its list's front by touchS's own steps and
// into one that unlinks and links it again (Detector.relink): the same
// decisions, the same LRU lists after every charge, the same evictions and
// the same changes for a checkpoint.
func TestTouchAsRelink(t *testing.T) {
	rs := benchRules()
	rnd := rand.New(rand.NewPCG(23, 5))
	var ev [2][]string
	mk := func(k int) *Detector {
		d := New(Options{Skew: 5 * time.Second, MaxKeys: 300, Evicted: func(kp KeyPeak) { ev[k] = append(ev[k], kp.Rule.Name+"/"+kp.Key) }})
		d.Changes(func(*KeyState) {}) // tracking: touches mark the states moved
		return d
	}
	fast, slow := mk(0), mk(1)
	slow.relink = true
	now := at(0)
	moved, decided := 0, 0
	for n := range 40000 {
		now = now.Add(time.Duration(rnd.IntN(4)) * time.Millisecond)
		key := fmt.Sprintf("10.0.%d.%d", rnd.IntN(3), rnd.IntN(150))
		if rnd.IntN(3) == 0 {
			key = "10.9.9." + fmt.Sprint(rnd.IntN(2)) // two busy keys: throttled, banned
		}
		c := rules.Charge{Rule: rs[rnd.IntN(len(rs))], Key: key, CPU: rnd.Float64() * 0.3}
		a, b := fast.Charge(now, &c, nil), slow.Charge(now, &c, nil)
		if len(a) > 0 || len(b) > 0 {
			if diff := cmp.Diff(b, a); diff != "" {
				t.Fatalf("charge %d: decisions (-relink +touch):\n%s", n, diff)
			}
			decided += len(a)
		}
		fa, sa := lruOrder(fast), lruOrder(slow)
		if !slices.Equal(fa[0], sa[0]) || !slices.Equal(fa[1], sa[1]) {
			t.Fatalf("charge %d: LRU lists (-relink +touch):\n%s", n, cmp.Diff(sa, fa))
		}
		if n%1000 == 999 {
			changes := func(d *Detector) (out []string) {
				d.Changes(func(ks *KeyState) { out = append(out, fmt.Sprintf("%+v", *ks)) })
				return out
			}
			ca, cb := changes(fast), changes(slow)
			if len(ca) == 0 {
				t.Fatalf("charge %d: no change for a checkpoint", n)
			}
			if diff := cmp.Diff(cb, ca); diff != "" {
				t.Fatalf("charge %d: changes (-relink +touch):\n%s", n, diff)
			}
		}
		moved += len(fa[listHot])
	}
	if diff := cmp.Diff(ev[1], ev[0]); diff != "" || len(ev[0]) == 0 || moved == 0 || decided == 0 {
		t.Fatalf("evictions (-relink +touch), %d hot, %d decisions:\n%s", moved, decided, diff)
	}
}

// TestChainOrderChangesNothing charges the same random entries (address
// keys as fixed keys and as text, text keys; the rules in random orders, so
// that keys' chains are made in every order; two busy keys throttled and
// banned; lifts; a cap of 300 states, so evictions drop states from the
// middle, head and end of chains) to a detector that puts a key's new state
// at its chain's end and to one that puts it first, as before: the same
// decisions, LRU lists, evictions, checkpoint changes and statuses, and
// each key's chain the other's reversed.
func TestChainOrderChangesNothing(t *testing.T) {
	rs := benchRules()
	rnd := rand.New(rand.NewPCG(27, 5))
	var ev [2][]string
	mk := func(k int) *Detector {
		d := New(Options{Skew: 5 * time.Second, MaxKeys: 300, Evicted: func(kp KeyPeak) { ev[k] = append(ev[k], kp.Rule.Name+"/"+kp.Key) }})
		d.Changes(func(*KeyState) {})
		return d
	}
	end, front := mk(0), mk(1)
	front.chainFront = true
	chains := func(d *Detector, keys []string) (out []string) {
		for _, k := range keys {
			var ids []string
			for i := d.chain(k); i >= 0; i = d.at(i).sib {
				ids = append(ids, fmt.Sprint(i, d.ri(d.at(i)).rule.Name))
			}
			out = append(out, k+":"+strings.Join(ids, ","))
		}
		return out
	}
	reversed := func(in []string) []string {
		out := make([]string, len(in))
		for j, c := range in {
			k, ids, _ := strings.Cut(c, ":")
			parts := strings.Split(ids, ",")
			slices.Reverse(parts)
			out[j] = k + ":" + strings.Join(parts, ",")
		}
		return out
	}
	seen := map[string]bool{}
	var keys []string
	now := at(0)
	decided, lifted, long := 0, 0, 0
	for n := range 40000 {
		now = now.Add(time.Duration(rnd.IntN(4)) * time.Millisecond)
		var key string
		switch rnd.IntN(6) {
		case 0, 1:
			key = "10.9.9." + fmt.Sprint(rnd.IntN(2)) // two busy keys: throttled, banned
		case 2:
			key = "user-" + fmt.Sprint(rnd.IntN(60))
		default:
			key = fmt.Sprintf("10.0.%d.%d", rnd.IntN(3), rnd.IntN(150))
		}
		if !seen[key] {
			seen[key] = true
			keys = append(keys, key)
		}
		c := rules.Charge{Rule: rs[rnd.IntN(len(rs))], Key: key, CPU: rnd.Float64() * 0.3}
		if f, ok := rules.ParseFixedKey(key); ok && rnd.IntN(2) == 0 {
			c.Fixed = f
		}
		var a, b []Decision
		if rnd.IntN(500) == 0 {
			r := rs[rnd.IntN(len(rs))]
			a, b = end.Lift(now, r, key, nil), front.Lift(now, r, key, nil)
			lifted += len(a)
		} else {
			a, b = end.Charge(now, &c, nil), front.Charge(now, &c, nil)
		}
		if diff := cmp.Diff(b, a); diff != "" {
			t.Fatalf("charge %d: decisions (-front +end):\n%s", n, diff)
		}
		decided += len(a)
		ea, fa := lruOrder(end), lruOrder(front)
		if !slices.Equal(ea[0], fa[0]) || !slices.Equal(ea[1], fa[1]) {
			t.Fatalf("charge %d: LRU lists (-front +end):\n%s", n, cmp.Diff(fa, ea))
		}
		if n%1000 == 999 {
			ce, cf := chains(end, keys), chains(front, keys)
			if diff := cmp.Diff(reversed(cf), ce); diff != "" {
				t.Fatalf("charge %d: chains (-front reversed +end):\n%s", n, diff)
			}
			for _, c := range ce {
				if strings.Count(c, ",") >= 1 {
					long++
				}
			}
			changes := func(d *Detector) (out []string) {
				d.Changes(func(ks *KeyState) { out = append(out, fmt.Sprintf("%+v", *ks)) })
				return out
			}
			if diff := cmp.Diff(changes(front), changes(end)); diff != "" {
				t.Fatalf("charge %d: changes (-front +end):\n%s", n, diff)
			}
			for _, k := range keys {
				for _, r := range rs {
					ka, ta := end.Status(r, k, now)
					kb, tb := front.Status(r, k, now)
					if ka != kb || !ta.Equal(tb) {
						t.Fatalf("charge %d: status of %s/%s: end %v %v, front %v %v", n, r.Name, k, ka, ta, kb, tb)
					}
				}
			}
		}
	}
	if diff := cmp.Diff(ev[1], ev[0]); diff != "" || len(ev[0]) == 0 || decided == 0 || lifted == 0 || long == 0 {
		t.Fatalf("evictions (-front +end), %d decisions, %d lifted, %d chains of 2 or more:\n%s", decided, lifted, long, diff)
	}
}

// TestChargeAllAsCharge charges random entries of one to three charges
// (the rules in random orders, keys of one address or of several, two busy
// keys throttled and banned and their bans ending, times that move on,
// stay, or fall more than the skew behind: late) to one detector with
// ChargeAll and to another with Charge for each: the same decisions, stats
// (late charges counted once a charge), LRU lists, evictions and
// checkpoint changes.
func TestChargeAllAsCharge(t *testing.T) {
	rs := benchRules()
	rnd := rand.New(rand.NewPCG(29, 7))
	var ev [2][]string
	mk := func(k int) *Detector {
		d := New(Options{Skew: 5 * time.Second, MaxKeys: 300, Evicted: func(kp KeyPeak) { ev[k] = append(ev[k], kp.Rule.Name+"/"+kp.Key) }})
		d.Changes(func(*KeyState) {})
		return d
	}
	all, each := mk(0), mk(1)
	now := at(0)
	var cs []rules.Charge
	decided := 0
	for n := range 40000 {
		tm := now
		switch r := rnd.IntN(100); {
		case r < 60:
			now = now.Add(time.Duration(rnd.IntN(30)) * time.Millisecond)
			tm = now
		case r < 70:
			tm = now.Add(-time.Duration(6+rnd.IntN(20)) * time.Second) // late
		case r < 72:
			now = now.Add(time.Duration(rnd.IntN(3000)) * time.Second) // bans end
			tm = now
		}
		cs = cs[:0]
		key := fmt.Sprintf("10.0.%d.%d", rnd.IntN(3), rnd.IntN(150))
		if rnd.IntN(3) == 0 {
			key = "10.9.9." + fmt.Sprint(rnd.IntN(2))
		}
		for _, j := range rnd.Perm(len(rs))[:1+rnd.IntN(len(rs))] {
			k := key
			if rnd.IntN(4) == 0 {
				k = fmt.Sprintf("10.1.%d.0/24", rnd.IntN(20))
			}
			cs = append(cs, rules.Charge{Rule: rs[j], Key: k, CPU: rnd.Float64() * 0.3})
		}
		a := all.ChargeAll(tm, cs, nil)
		var b []Decision
		for i := range cs {
			b = each.Charge(tm, &cs[i], b)
		}
		if diff := cmp.Diff(b, a); diff != "" {
			t.Fatalf("entry %d: decisions (-Charge +ChargeAll):\n%s", n, diff)
		}
		decided += len(a)
		if all.Stats() != each.Stats() {
			t.Fatalf("entry %d: stats %+v, want %+v", n, all.Stats(), each.Stats())
		}
		if n%1000 == 999 {
			fa, sa := lruOrder(all), lruOrder(each)
			if diff := cmp.Diff(sa, fa); diff != "" {
				t.Fatalf("entry %d: LRU lists (-Charge +ChargeAll):\n%s", n, diff)
			}
			changes := func(d *Detector) (out []string) {
				d.Changes(func(ks *KeyState) { out = append(out, fmt.Sprintf("%+v", *ks)) })
				return out
			}
			if diff := cmp.Diff(changes(each), changes(all)); diff != "" {
				t.Fatalf("entry %d: changes (-Charge +ChargeAll):\n%s", n, diff)
			}
		}
	}
	st := all.Stats()
	if diff := cmp.Diff(ev[1], ev[0]); diff != "" || len(ev[0]) == 0 || decided == 0 || st.Late == 0 || st.Unbans == 0 {
		t.Fatalf("evictions (-Charge +ChargeAll), %d decisions, stats %+v:\n%s", decided, st, diff)
	}
}
