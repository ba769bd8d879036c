package actions

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/state"
)

// refBan and refManager are the manager's semantics written plainly, as
// the manager kept them before its bans became slots (issue 23): every
// ban a map value, a prefix's holders in the order they last were set,
// the winning entry found by outlasts.
type refBan struct {
	kind   Kind
	until  time.Time
	delay  time.Duration
	reason string
	addrs  []netip.Addr
	ps     []netip.Prefix
	seq    int // when it was last set: a prefix's holders in this order
}

type refManager struct {
	bans   map[banKey]*refBan
	seq    int
	ranges map[string][]netip.Prefix
}

func (r *refManager) set(k banKey, b *refBan) {
	delete(r.bans, k)
	if b != nil && len(b.ps) > 0 {
		r.seq++
		b.seq = r.seq
		r.bans[k] = b
	}
}

func (r *refManager) decide(d detector.Decision) {
	k := banKey{d.Rule, d.Key}
	switch {
	case d.Kind == detector.Unban:
		r.set(k, nil)
	case d.LogOnly:
	default:
		r.set(k, &refBan{kind: Kind(d.Kind), until: d.Until, delay: d.Delay, reason: d.Reason,
			addrs: d.Addresses, ps: resolve(d.Key, d.Addresses, r.ranges)})
	}
}

func (r *refManager) expire(now time.Time) {
	for k, b := range r.bans {
		if !b.until.IsZero() && !b.until.After(now) {
			delete(r.bans, k)
		}
	}
}

func (r *refManager) setRanges(ranges map[string][]netip.Prefix) {
	r.ranges = ranges
	keys := slices.SortedFunc(maps.Keys(r.bans), func(a, b banKey) int {
		return cmp.Or(strings.Compare(a.rule, b.rule), strings.Compare(a.key, b.key))
	})
	for _, k := range keys {
		if !strings.HasPrefix(k.key, rangeKeyPrefix) {
			continue
		}
		b := r.bans[k]
		ps := resolve(k.key, b.addrs, ranges)
		if !slices.Equal(ps, b.ps) {
			nb := *b
			nb.ps = ps
			r.set(k, &nb)
		}
	}
}

// entries are what an action acting on kinds should hold.
func (r *refManager) entries(kinds []Kind) map[netip.Prefix]Entry {
	keys := slices.SortedFunc(maps.Keys(r.bans), func(a, b banKey) int { return r.bans[a].seq - r.bans[b].seq })
	out := map[netip.Prefix]Entry{}
	for _, k := range keys {
		b := r.bans[k]
		if !slices.Contains(kinds, b.kind) {
			continue
		}
		for _, p := range b.ps {
			e, found := out[p]
			asBan := &ban{kind: b.kind, until: b.until}
			if !found || outlasts(asBan, &e) {
				e = Entry{Prefix: p, Kind: b.kind, Until: b.until, Rule: k.rule, Key: k.key, Reason: b.reason, Delay: e.Delay}
			}
			if b.kind == KindThrottle {
				e.Delay = max(e.Delay, b.delay)
			}
			out[p] = e
		}
	}
	for p, e := range out {
		if e.Kind == KindBan {
			e.Delay = 0
			out[p] = e
		}
	}
	return out
}

// TestManagerAsModel: on a random mix of bans, throttles, unbans, range
// bans, ranges reloaded, shared prefixes, an allowed address inside a
// banned prefix and expiries, the manager's slots answer as the plain
// model does: Entries and Status of each action, and what each backend
// holds once it has applied everything.
func TestManagerAsModel(t *testing.T) {
	rangesA := map[string][]netip.Prefix{
		"range:r1": {netip.MustParsePrefix("198.51.100.0/30"), netip.MustParsePrefix("203.0.113.5/32")},
		"range:r2": {netip.MustParsePrefix("2001:db8::/64")},
	}
	rangesB := map[string][]netip.Prefix{
		"range:r1": {netip.MustParsePrefix("198.51.100.2/32")},
	}
	keys := []string{"198.51.100.1", "198.51.100.2", "198.51.100.3", "198.51.100.7", "198.51.100.0/29",
		"203.0.113.0/24", "203.0.113.5", "2001:db8::1", "2001:db8::/64", "user:alice", "range:r1", "range:r2"}
	addrs := []netip.Addr{netip.MustParseAddr("198.51.100.3"), netip.MustParseAddr("2001:db8::1")}
	rules := []string{"flood", "deny", "slow"}

	var mu sync.Mutex
	now := t0
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	bansOnly, both := newRecorder("bans"), newRecorder("both")
	actions := []Configured{
		{Backend: bansOnly, Kinds: []Kind{KindBan}},
		{Backend: both, Kinds: []Kind{KindBan, KindThrottle}},
	}
	m := NewManager(actions, ManagerOptions{Now: clock, Backoff: 10 * time.Millisecond, Sweep: time.Hour, Ranges: rangesA})
	ref := &refManager{bans: map[banKey]*refBan{}, ranges: rangesA}
	loaded := []state.Ban{
		{Rule: "deny", Key: "203.0.113.0/24", Kind: string(KindBan), Reason: "loaded"},
		{Rule: "flood", Key: "range:r1", Kind: string(KindBan), Until: t0.Add(3 * time.Minute), Reason: "loaded range"},
		{Rule: "slow", Key: "user:bob", Kind: string(KindThrottle), Until: t0.Add(time.Minute), Reason: "loaded user",
			Addresses: []netip.Addr{netip.MustParseAddr("198.51.100.9")}},
		{Rule: "flood", Key: "198.51.100.4", Kind: string(KindBan), Until: t0.Add(-time.Minute), Reason: "ended"},
		{Rule: "flood", Key: "198.51.100.5", Kind: string(KindBan), Reason: "log only", LogOnly: true},
	}
	allow := []netip.Prefix{netip.MustParsePrefix("198.51.100.7/32")}
	m.Load(loaded, allow)
	for _, b := range loaded {
		if b.LogOnly || (!b.Until.IsZero() && !b.Until.After(now)) {
			continue
		}
		ref.set(banKey{b.Rule, b.Key}, &refBan{kind: Kind(b.Kind), until: b.Until, reason: b.Reason,
			addrs: b.Addresses, ps: resolve(b.Key, b.Addresses, ref.ranges)})
	}
	m.Start(t.Context())
	t.Cleanup(func() { m.Close() })

	rng := rand.New(rand.NewPCG(23, 1))
	check := func(step int, op string) {
		t.Helper()
		wait(t, m)
		st := m.Status()
		for i, c := range actions {
			want := ref.entries(c.Kinds)
			got := m.Entries(c.Name())
			gotMap := map[netip.Prefix]Entry{}
			for _, e := range got {
				gotMap[e.Prefix] = e
			}
			if len(gotMap) != len(got) || !maps.Equal(gotMap, want) {
				t.Fatalf("step %d (%s): action %s: Entries %v, want %v", step, op, c.Name(), got, want)
			}
			if st[i].Entries != len(want) {
				t.Fatalf("step %d (%s): action %s: Status.Entries %d, want %d", step, op, c.Name(), st[i].Entries, len(want))
			}
			r := c.Backend.(*recorder)
			r.mu.Lock()
			held := maps.Clone(r.held)
			r.mu.Unlock()
			if !maps.Equal(held, want) {
				t.Fatalf("step %d (%s): backend %s holds %v, want %v", step, op, c.Name(), held, want)
			}
		}
	}
	check(0, "load")
	for step := 1; step <= 400; step++ {
		var op string
		switch n := rng.IntN(20); {
		case n < 12:
			d := detector.Decision{Rule: rules[rng.IntN(len(rules))], Key: keys[rng.IntN(len(keys))], Kind: detector.Ban, Time: now}
			if rng.IntN(3) == 0 {
				d.Kind, d.Delay = detector.Throttle, time.Duration(1+rng.IntN(5))*time.Second
			}
			if rng.IntN(4) > 0 {
				d.Until = now.Add(time.Duration(rng.IntN(6)) * time.Minute) // some end now: expired at the next sweep
			}
			if strings.HasPrefix(d.Key, "user:") || strings.HasPrefix(d.Key, "range:") {
				d.Addresses = addrs[:rng.IntN(len(addrs)+1)]
			}
			d.LogOnly = rng.IntN(10) == 0
			d.Reason = fmt.Sprintf("%s: %d > 3", d.Rule, rng.IntN(4))
			op = fmt.Sprintf("%s %s %s until %s", d.Kind, d.Rule, d.Key, d.Until.Sub(t0))
			if d.Until.IsZero() {
				op = fmt.Sprintf("%s %s %s until lifted", d.Kind, d.Rule, d.Key)
			}
			m.Decisions([]detector.Decision{d})
			ref.decide(d)
		case n < 15:
			d := detector.Decision{Rule: rules[rng.IntN(len(rules))], Key: keys[rng.IntN(len(keys))], Kind: detector.Unban, Time: now}
			op = "unban " + d.Rule + " " + d.Key
			m.Decisions([]detector.Decision{d})
			ref.decide(d)
		case n < 19:
			mu.Lock()
			now = now.Add(time.Duration(rng.IntN(90)) * time.Second)
			mu.Unlock()
			op = "expire at " + now.Sub(t0).String()
			m.expire(now)
			ref.expire(now)
		default:
			r := rangesA
			if rng.IntN(2) == 0 {
				r = rangesB
			}
			op = fmt.Sprintf("ranges %v", r)
			m.SetRanges(r)
			ref.setRanges(r)
		}
		check(step, op)
	}
}
