package actions

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/state"
)

// recorder is a backend that records what the manager asks of it. It is the
// test's instrument for the manager's own logic (union of bans, queueing,
// retries, pacing); every real backend has its own tests against the real
// thing. failures makes the next calls fail.
type recorder struct {
	name     string
	settle   time.Duration
	interval time.Duration

	mu       sync.Mutex
	held     map[netip.Prefix]Entry
	syncs    int
	applies  [][]Change
	failures int
}

func newRecorder(name string) *recorder {
	return &recorder{name: name, held: map[netip.Prefix]Entry{}}
}

func (r *recorder) Name() string { return r.name }

func (r *recorder) fail() error {
	if r.failures > 0 {
		r.failures--
		return errors.New("injected failure")
	}
	return nil
}

func (r *recorder) Sync(_ context.Context, es []Entry, _ []netip.Prefix) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.syncs++
	if err := r.fail(); err != nil {
		return err
	}
	clear(r.held)
	for _, e := range es {
		r.held[e.Prefix] = e
	}
	return nil
}

func (r *recorder) Apply(_ context.Context, cs []Change) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.applies = append(r.applies, slices.Clone(cs))
	if err := r.fail(); err != nil {
		return err
	}
	for _, c := range cs {
		if c.Delete {
			delete(r.held, c.Prefix)
		} else {
			r.held[c.Prefix] = c.Entry
		}
	}
	return nil
}

func (r *recorder) Close() error { return nil }

func (r *recorder) Pace() (time.Duration, time.Duration) { return r.settle, r.interval }

// holding returns the prefixes held, sorted, as strings.
func (r *recorder) holding() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for p := range r.held {
		out = append(out, p.String())
	}
	slices.Sort(out)
	return out
}

func (r *recorder) entry(p string) (Entry, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.held[netip.MustParsePrefix(p)]
	return e, ok
}

func startManager(t *testing.T, now func() time.Time, bans []state.Ban, cs ...Configured) *Manager {
	t.Helper()
	m := NewManager(cs, ManagerOptions{Now: now, Backoff: 10 * time.Millisecond, Sweep: time.Hour})
	m.Load(bans, []netip.Prefix{netip.MustParsePrefix("198.51.100.7/32")})
	m.Start(context.Background())
	t.Cleanup(func() { m.Close() })
	wait(t, m)
	return m
}

func wait(t *testing.T, m *Manager) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.Wait(ctx); err != nil {
		t.Fatalf("Wait: %v", err)
	}
}

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func banDecision(rule, key string, until time.Time, addrs ...string) detector.Decision {
	d := detector.Decision{Rule: rule, Key: key, Kind: detector.Ban, Time: t0, Until: until, Reason: "test " + rule}
	for _, a := range addrs {
		d.Addresses = append(d.Addresses, netip.MustParseAddr(a))
	}
	return d
}

func unban(rule, key string) detector.Decision {
	return detector.Decision{Rule: rule, Key: key, Kind: detector.Unban, Time: t0}
}

// TestManagerUnion: an address is blocked while any ban of a key containing
// it is active; lifting one rule's ban leaves the others.
func TestManagerUnion(t *testing.T) {
	r := newRecorder("rec")
	m := startManager(t, func() time.Time { return t0 }, nil, Configured{Backend: r, Type: "list", Kinds: []Kind{KindBan}})

	m.Decisions([]detector.Decision{
		banDecision("flood", "198.51.100.20", t0.Add(10*time.Minute)),
		banDecision("heavy", "198.51.100.20", t0.Add(time.Hour)),
		banDecision("scanners", "203.0.113.0/24", t0.Add(time.Minute)),
		banDecision("bots", "user:mallory", t0.Add(time.Minute), "2001:db8::5", "203.0.113.9", "::ffff:198.51.100.30"),
	})
	wait(t, m)
	want := []string{"198.51.100.20/32", "198.51.100.30/32", "2001:db8::5/128", "203.0.113.0/24", "203.0.113.9/32"}
	if got := r.holding(); !slices.Equal(got, want) {
		t.Fatalf("held %v, want %v", got, want)
	}
	if e, _ := r.entry("198.51.100.20/32"); e.Rule != "heavy" || !e.Until.Equal(t0.Add(time.Hour)) {
		t.Errorf("entry of a doubly banned address = %+v, want the ban that ends last (heavy)", e)
	}

	m.Decisions([]detector.Decision{unban("heavy", "198.51.100.20")})
	wait(t, m)
	e, ok := r.entry("198.51.100.20/32")
	if !ok || e.Rule != "flood" || !e.Until.Equal(t0.Add(10*time.Minute)) {
		t.Fatalf("after heavy's unban the address is held as %+v (%v), want flood's ban", e, ok)
	}
	m.Decisions([]detector.Decision{unban("flood", "198.51.100.20"), unban("bots", "user:mallory")})
	wait(t, m)
	if got := r.holding(); !slices.Equal(got, []string{"203.0.113.0/24"}) {
		t.Fatalf("after the unbans held %v", got)
	}
}

// TestManagerKinds: throttles reach only actions that act on them; a log-only
// decision reaches none.
func TestManagerKinds(t *testing.T) {
	bans, both := newRecorder("bans"), newRecorder("both")
	m := startManager(t, func() time.Time { return t0 }, nil,
		Configured{Backend: bans, Kinds: []Kind{KindBan}},
		Configured{Backend: both, Kinds: []Kind{KindThrottle, KindBan}})
	th := detector.Decision{Rule: "flood", Key: "198.51.100.1", Kind: detector.Throttle, Time: t0, Until: t0.Add(time.Minute), Delay: 10 * time.Second}
	lo := banDecision("scanners", "198.51.100.2", t0.Add(time.Hour))
	lo.LogOnly = true
	m.Decisions([]detector.Decision{th, lo})
	wait(t, m)
	if got := bans.holding(); len(got) != 0 {
		t.Errorf("a ban-only action holds %v after a throttle and a log-only ban", got)
	}
	e, ok := both.entry("198.51.100.1/32")
	if !ok || e.Kind != KindThrottle || e.Delay != 10*time.Second || e.RetryAfter(t0) != 10 {
		t.Errorf("throttle entry = %+v (%v)", e, ok)
	}
	if _, ok := both.entry("198.51.100.2/32"); ok {
		t.Error("a log-only ban reached an action")
	}
	// The throttle becomes a ban: the entry says ban.
	m.Decisions([]detector.Decision{banDecision("flood", "198.51.100.1", t0.Add(3*time.Minute))})
	wait(t, m)
	if e, _ := both.entry("198.51.100.1/32"); e.Kind != KindBan || e.Delay != 0 {
		t.Errorf("after the ban the entry is %+v", e)
	}
	if got := bans.holding(); !slices.Equal(got, []string{"198.51.100.1/32"}) {
		t.Errorf("ban-only action holds %v", got)
	}
}

// TestManagerLoad: the store's active bans are where the backends start:
// one Sync with all of them; log-only and ended bans are left out.
func TestManagerLoad(t *testing.T) {
	r := newRecorder("rec")
	bans := []state.Ban{
		{Rule: "flood", Key: "198.51.100.1", Kind: "ban", Until: t0.Add(time.Hour)},
		{Rule: "deny", Key: "203.0.113.0/24", Kind: "ban"},
		{Rule: "scanners", Key: "198.51.100.2", Kind: "ban", Until: t0.Add(time.Hour), LogOnly: true},
		{Rule: "flood", Key: "198.51.100.3", Kind: "ban", Until: t0.Add(-time.Second)},
		{Rule: "bots", Key: "ua:curl", Kind: "ban", Until: t0.Add(time.Hour), Addresses: []netip.Addr{netip.MustParseAddr("2001:db8::9")}},
	}
	startManager(t, func() time.Time { return t0 }, bans, Configured{Backend: r, Kinds: []Kind{KindBan}})
	want := []string{"198.51.100.1/32", "2001:db8::9/128", "203.0.113.0/24"}
	if got := r.holding(); !slices.Equal(got, want) {
		t.Fatalf("held %v, want %v", got, want)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.syncs != 1 || len(r.applies) != 0 {
		t.Errorf("start took %d syncs and %d applies, want one sync", r.syncs, len(r.applies))
	}
}

// TestManagerRetry: a failing backend is retried, synced whole after the
// failure, and reported; the others go on.
func TestManagerRetry(t *testing.T) {
	bad, good := newRecorder("bad"), newRecorder("good")
	m := startManager(t, func() time.Time { return t0 }, nil,
		Configured{Backend: bad, Kinds: []Kind{KindBan}}, Configured{Backend: good, Kinds: []Kind{KindBan}})
	bad.mu.Lock()
	bad.failures = 2
	bad.mu.Unlock()
	m.Decisions([]detector.Decision{banDecision("flood", "198.51.100.1", t0.Add(time.Hour))})
	wait(t, m)
	if got := bad.holding(); !slices.Equal(got, []string{"198.51.100.1/32"}) {
		t.Fatalf("after retries the failing backend holds %v", got)
	}
	st := m.Status()
	if st[0].Errors != 2 || st[0].LastError != "" || st[0].LastErrorAt.IsZero() || st[1].Errors != 0 {
		t.Errorf("status = %+v", st)
	}
	bad.mu.Lock()
	defer bad.mu.Unlock()
	if bad.syncs != 3 { // the start, then the two retries after failures (the second failed too)
		t.Errorf("%d syncs, want 3 (each failure is followed by a whole sync)", bad.syncs)
	}
}

// TestManagerWaitReports: Wait gives up with the backend's error when the
// context ends first.
func TestManagerWaitReports(t *testing.T) {
	bad := newRecorder("bad")
	m := startManager(t, func() time.Time { return t0 }, nil, Configured{Backend: bad, Kinds: []Kind{KindBan}})
	bad.mu.Lock()
	bad.failures = 1 << 30
	bad.mu.Unlock()
	m.Decisions([]detector.Decision{banDecision("flood", "198.51.100.1", t0.Add(time.Hour))})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := m.Wait(ctx)
	if err == nil || !strings.Contains(err.Error(), "action bad: injected failure") {
		t.Fatalf("Wait = %v, want the backend's error", err)
	}
}

// TestManagerPacing: a burst of 1,000 bans reaches a paced backend (a list
// file and its server's reload) as one Apply.
func TestManagerPacing(t *testing.T) {
	r := newRecorder("paced")
	r.settle, r.interval = 300*time.Millisecond, time.Second
	m := startManager(t, func() time.Time { return t0 }, nil, Configured{Backend: r, Kinds: []Kind{KindBan}})
	for i := range 1000 {
		a := netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)})
		m.Decisions([]detector.Decision{banDecision("flood", a.String(), t0.Add(time.Hour))})
	}
	wait(t, m)
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.applies) != 1 || len(r.applies[0]) != 1000 {
		sizes := []int{}
		for _, a := range r.applies {
			sizes = append(sizes, len(a))
		}
		t.Fatalf("1,000 bans took %d applies of %v changes, want one of 1000", len(r.applies), sizes)
	}
}

// TestManagerExpire: a ban ends in the backends at its end, before the
// cleaner's next pass.
func TestManagerExpire(t *testing.T) {
	r := newRecorder("rec")
	var mu sync.Mutex
	now := t0
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	m := startManager(t, clock, nil, Configured{Backend: r, Kinds: []Kind{KindBan}})
	m.Decisions([]detector.Decision{
		banDecision("flood", "198.51.100.1", t0.Add(time.Minute)),
		banDecision("deny", "203.0.113.0/24", time.Time{}),
	})
	wait(t, m)
	mu.Lock()
	now = t0.Add(time.Minute)
	mu.Unlock()
	m.expire(clock())
	wait(t, m)
	if got := r.holding(); !slices.Equal(got, []string{"203.0.113.0/24"}) {
		t.Fatalf("after the end held %v", got)
	}
}

func TestPrefixes(t *testing.T) {
	for _, c := range []struct {
		key   string
		addrs []string
		want  []string
	}{
		{"198.51.100.7", nil, []string{"198.51.100.7/32"}},
		{"198.51.100.0/24", nil, []string{"198.51.100.0/24"}},
		{"2001:db8:1:2::/64", nil, []string{"2001:db8:1:2::/64"}},
		{"::ffff:198.51.100.7", nil, []string{"198.51.100.7/32"}},
		{"fe80::1%eth0", []string{"2001:db8::1"}, []string{"2001:db8::1/128"}},
		{"user:bob", []string{"203.0.113.9", "2001:db8::1", "203.0.113.9"}, []string{"203.0.113.9/32", "2001:db8::1/128"}},
		{"ua:$(reboot); rm -rf /", nil, nil},
		{"198.51.100.7|ua:curl", []string{"198.51.100.7"}, []string{"198.51.100.7/32"}},
	} {
		var addrs []netip.Addr
		for _, a := range c.addrs {
			addrs = append(addrs, netip.MustParseAddr(a))
		}
		var got []string
		for _, p := range Prefixes(c.key, addrs) {
			got = append(got, p.String())
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("Prefixes(%q, %v) = %v, want %v", c.key, c.addrs, got, c.want)
		}
	}
}

// allowRecorder records the exemptions each Sync gets.
type allowRecorder struct {
	*recorder
	allows [][]netip.Prefix
}

func (a *allowRecorder) Sync(ctx context.Context, es []Entry, allow []netip.Prefix) error {
	a.recorder.mu.Lock()
	a.allows = append(a.allows, slices.Clone(allow))
	a.recorder.mu.Unlock()
	return a.recorder.Sync(ctx, es, allow)
}

// TestManagerExemptions: the backends get as allowed only the allowed
// prefixes inside blocked ones, and a Sync whenever that set changes; an
// allowed address banned itself (an operator's --force) gets no exemption.
func TestManagerExemptions(t *testing.T) {
	r := &allowRecorder{recorder: newRecorder("rec")}
	m := NewManager([]Configured{{Backend: r, Kinds: []Kind{KindBan}}}, ManagerOptions{Sweep: time.Hour})
	m.Load(nil, []netip.Prefix{netip.MustParsePrefix("198.51.100.7/32"), netip.MustParsePrefix("127.0.0.0/8")})
	m.Start(context.Background())
	defer m.Close()
	wait(t, m)
	last := func() []netip.Prefix {
		r.recorder.mu.Lock()
		defer r.recorder.mu.Unlock()
		return r.allows[len(r.allows)-1]
	}
	if got := last(); len(got) != 0 {
		t.Errorf("with nothing blocked the exemptions are %v", got)
	}
	m.Decisions([]detector.Decision{banDecision("flood", "198.51.100.0/24", t0.Add(time.Hour)), banDecision("operator", "127.0.0.9", t0.Add(time.Hour))})
	wait(t, m)
	if got := last(); !slices.Equal(got, []netip.Prefix{netip.MustParsePrefix("198.51.100.7/32")}) {
		t.Errorf("exemptions %v, want the allowed address inside the banned /24 only", got)
	}
	m.Decisions([]detector.Decision{unban("flood", "198.51.100.0/24")})
	wait(t, m)
	if got := last(); len(got) != 0 {
		t.Errorf("after the /24's unban the exemptions are %v", got)
	}
	if got := r.holding(); !slices.Equal(got, []string{"127.0.0.9/32"}) {
		t.Errorf("held %v", got)
	}
}

// TestManagerNamesOnce: the bans' rule names and reasons, each a copy of
// its own as the store gives them, are held once each (Manager.name), up
// to maxNames texts; the entries keep every ban's own values, past the
// bound too.
func TestManagerNamesOnce(t *testing.T) {
	const n = 2*maxNames + 200
	long := strings.Repeat("r", maxNameLen+1)
	var bans []state.Ban
	for i := range n {
		reason := "rate 4 per 10s > 3 (rule flood)"
		switch {
		case i%2 == 1:
			reason = fmt.Sprintf("reason %d", i) // distinct: fills names
		case i%10 == 0:
			reason = long
		}
		bans = append(bans, state.Ban{Rule: strings.Clone("flood"), Key: fmt.Sprintf("2001:db8::%x", i+1), Kind: "ban",
			Until: t0.Add(time.Hour), Reason: strings.Clone(reason)})
	}
	r := newRecorder("rec")
	m := startManager(t, func() time.Time { return t0 }, bans, Configured{Backend: r, Kinds: []Kind{KindBan}})

	got := map[string]Entry{}
	for _, e := range m.Entries("rec") {
		got[e.Key] = e
	}
	for _, b := range bans {
		e, ok := got[b.Key]
		if !ok || e.Rule != b.Rule || e.Reason != b.Reason {
			t.Fatalf("%s: entry %+v (found %v), want rule %q reason %q", b.Key, e, ok, b.Rule, b.Reason)
		}
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.names) != maxNames {
		t.Errorf("names holds %d texts, want the bound %d", len(m.names), maxNames)
	}
	if _, ok := m.names[long]; ok {
		t.Errorf("names holds a text of %d bytes, over maxNameLen", len(long))
	}
	rules, reasons := map[*byte]bool{}, map[*byte]bool{}
	for k, i := range m.bans {
		s := &m.slots[i]
		if s.key != k {
			t.Fatalf("slot %d holds key %v, the map %v", i, s.key, k)
		}
		rules[unsafe.StringData(s.key.rule)] = true
		if s.reason == "rate 4 per 10s > 3 (rule flood)" {
			reasons[unsafe.StringData(s.reason)] = true
		}
	}
	if len(rules) != 1 || len(reasons) != 1 {
		t.Errorf("the bans point at %d copies of their rule name and %d of their common reason, want 1 and 1", len(rules), len(reasons))
	}
}

// TestPrefixKeyRoundTrip: a prefix's pkey gives back the same prefix, and
// two prefixes have the same pkey only when they are equal: v4, v6,
// v4-mapped, every length, unmasked, invalid and the zero Prefix.
func TestPrefixKeyRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 2))
	ps := []netip.Prefix{{}, netip.PrefixFrom(netip.MustParseAddr("198.51.100.1"), 33),
		netip.PrefixFrom(netip.MustParseAddr("2001:db8::1"), 129), netip.PrefixFrom(netip.IPv6Unspecified(), 0),
		netip.PrefixFrom(netip.IPv4Unspecified(), 0), netip.PrefixFrom(netip.AddrFrom16([16]byte{}), 0)}
	for range 20_000 {
		var b [16]byte
		for i := range b {
			b[i] = byte(rng.IntN(3)) // small values: prefixes that differ in little
		}
		var a netip.Addr
		switch rng.IntN(3) {
		case 0:
			a = netip.AddrFrom4([4]byte(b[12:]))
		case 1:
			a = netip.AddrFrom16(b)
		default:
			b[10], b[11] = 0xff, 0xff
			a = netip.AddrFrom16(b) // v4-mapped
		}
		ps = append(ps, netip.PrefixFrom(a, rng.IntN(a.BitLen()+2)-1))
	}
	seen := map[pkey]netip.Prefix{}
	for _, p := range ps {
		k := keyOf(p)
		if got := k.prefix(); got != p {
			t.Fatalf("%v (%#v): back from its key as %v (%#v)", p, p, got, got)
		}
		if q, ok := seen[k]; ok && q != p {
			t.Fatalf("%v and %v have the same key", p, q)
		}
		seen[k] = p
	}
}
