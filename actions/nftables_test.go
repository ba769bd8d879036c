//go:build linux

package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/nftables"

	"github.com/logjail/logjail/internal/nstest"
)

func nftTestBuild(t testing.TB, opts map[string]any) *Nftables {
	t.Helper()
	if opts == nil {
		opts = map[string]any{}
	}
	be, err := buildNftables(NewOptions("logjail.yaml", 0, "nftables", opts), Env{Now: time.Now})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	b := be.(*Nftables)
	t.Cleanup(func() { b.Close() })
	return b
}

func nftTestRun(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// nftTestSet is what `nft -j list set inet logjail NAME` shows: each
// element (an address alone, or a CIDR) with its timeout in seconds (0:
// none).
func nftTestSet(t testing.TB, name string) map[string]int {
	t.Helper()
	var doc struct {
		Nftables []struct {
			Set *struct {
				Elem []json.RawMessage `json:"elem"`
			} `json:"set"`
		} `json:"nftables"`
	}
	out := nftTestRun(t, "nft", "-j", "list", "set", "inet", "logjail", name)
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("nft -j list set %s: %v: %s", name, err, out)
	}
	got := map[string]int{}
	for _, x := range doc.Nftables {
		if x.Set == nil {
			continue
		}
		for _, raw := range x.Set.Elem {
			var wrapped struct {
				Elem *struct {
					Val     json.RawMessage `json:"val"`
					Timeout int             `json:"timeout"`
				} `json:"elem"`
			}
			val, timeout := raw, 0
			if json.Unmarshal(raw, &wrapped) == nil && wrapped.Elem != nil {
				val, timeout = wrapped.Elem.Val, wrapped.Elem.Timeout
			}
			var s string
			var pfx struct {
				Prefix struct {
					Addr string `json:"addr"`
					Len  int    `json:"len"`
				} `json:"prefix"`
			}
			if json.Unmarshal(val, &s) != nil {
				if err := json.Unmarshal(val, &pfx); err != nil || pfx.Prefix.Addr == "" {
					t.Fatalf("set %s: element %s is neither an address nor a prefix", name, val)
				}
				s = fmt.Sprintf("%s/%d", pfx.Prefix.Addr, pfx.Prefix.Len)
			}
			got[s] = timeout
		}
	}
	return got
}

// nftTestElems counts the set's elements as the kernel holds them, interval
// ends included.
func nftTestElems(t testing.TB, name string) int {
	t.Helper()
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	s := &nftables.Set{Table: &nftables.Table{Name: "logjail", Family: nftables.TableFamilyINet}, Name: name}
	els, err := c.GetSetElements(s)
	if err != nil {
		t.Fatalf("elements of %s: %v", name, err)
	}
	return len(els)
}

func nftTestEntry(s string, until time.Time) Entry {
	p := Prefixes(s, nil)[0]
	return Entry{Prefix: p, Kind: KindBan, Until: until, Rule: "flood", Key: s, Reason: "test"}
}

func nftTestSetChange(s string, until time.Time) Change {
	return Change{Entry: nftTestEntry(s, until)}
}

func nftTestDelChange(s string) Change {
	return Change{Entry: Entry{Prefix: Prefixes(s, nil)[0]}, Delete: true}
}

// nftTestWant compares a set's elements, allowing timeouts a few seconds
// short of the wanted ones (the time the test took).
func nftTestWant(t *testing.T, set string, want map[string]int) {
	t.Helper()
	got := nftTestSet(t, set)
	for k, w := range want {
		if g, ok := got[k]; ok && g <= w && g >= w-3 {
			got[k] = w
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("set %s (-want +got):\n%s", set, d)
	}
}

// nftTestRules is the chain's rules as `nft list chain` prints them,
// without handles or comments.
func nftTestRules(t *testing.T, chain string) []string {
	t.Helper()
	out := nftTestRun(t, "nft", "list", "chain", "inet", "logjail", chain)
	var rules []string
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if strings.Contains(l, "saddr") || l == "accept" {
			if i := strings.Index(l, " comment "); i >= 0 {
				l = l[:i]
			}
			rules = append(rules, l)
		}
	}
	return rules
}

func TestNftablesSync(t *testing.T) {
	if !nstest.Enter(t, "nft") {
		return
	}
	ctx := context.Background()
	now := time.Now()
	entries := []Entry{
		nftTestEntry("198.51.100.0/24", now.Add(time.Hour)),
		nftTestEntry("2001:db8:1::/64", now.Add(2*time.Hour)),
		nftTestEntry("203.0.113.5", time.Time{}),
		nftTestEntry("2001:db8::5", now.Add(time.Minute)),
	}
	allow := []netip.Prefix{netip.MustParsePrefix("198.51.100.7/32"), netip.MustParsePrefix("2001:db8:1::7/128")}
	b := nftTestBuild(t, nil)
	for i := range 2 {
		if err := b.Sync(ctx, entries, allow); err != nil {
			t.Fatalf("Sync %d: %v", i, err)
		}
		nftTestWant(t, "ban4", map[string]int{"198.51.100.0/24": 3600, "203.0.113.5": 0})
		nftTestWant(t, "ban6", map[string]int{"2001:db8:1::/64": 7200, "2001:db8::5": 60})
		nftTestWant(t, "allow4", map[string]int{"198.51.100.7": 0})
		nftTestWant(t, "allow6", map[string]int{"2001:db8:1::7": 0})
	}
	want := []string{
		"ip saddr @allow4 return",
		"ip6 saddr @allow6 return",
		"ip saddr @ban4 drop",
		"ip6 saddr @ban6 drop",
	}
	if d := cmp.Diff(want, nftTestRules(t, "input")); d != "" {
		t.Errorf("chain input (-want +got):\n%s", d)
	}
	out := nftTestRun(t, "nft", "list", "chain", "inet", "logjail", "input")
	if !strings.Contains(out, "type filter hook input priority filter - 10; policy accept;") {
		t.Errorf("chain input: want hook input priority -10:\n%s", out)
	}

	// A restart: another backend finds the table as it should be and
	// leaves the chain alone (the rules keep their handles).
	before := nftTestRun(t, "nft", "-a", "list", "chain", "inet", "logjail", "input")
	b2 := nftTestBuild(t, nil)
	if err := b2.Sync(ctx, entries, allow); err != nil {
		t.Fatalf("Sync after a restart: %v", err)
	}
	if after := nftTestRun(t, "nft", "-a", "list", "chain", "inet", "logjail", "input"); after != before {
		t.Errorf("Sync rebuilt a chain that was right:\n%s\nnow:\n%s", before, after)
	}
}

func TestNftablesApply(t *testing.T) {
	if !nstest.Enter(t, "nft") {
		return
	}
	ctx := context.Background()
	now := time.Now()
	b := nftTestBuild(t, nil)
	if err := b.Sync(ctx, nil, nil); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	steps := []struct {
		name    string
		changes []Change
		ban4    map[string]int
		ban6    map[string]int
	}{
		{
			name:    "add",
			changes: []Change{nftTestSetChange("203.0.113.5", now.Add(time.Hour)), nftTestSetChange("2001:db8::5", now.Add(time.Hour))},
			ban4:    map[string]int{"203.0.113.5": 3600},
			ban6:    map[string]int{"2001:db8::5": 3600},
		},
		{
			name:    "again",
			changes: []Change{nftTestSetChange("203.0.113.5", now.Add(time.Hour))},
			ban4:    map[string]int{"203.0.113.5": 3600},
			ban6:    map[string]int{"2001:db8::5": 3600},
		},
		{
			name:    "longer",
			changes: []Change{nftTestSetChange("203.0.113.5", now.Add(3*time.Hour)), nftTestSetChange("2001:db8::5", time.Time{})},
			ban4:    map[string]int{"203.0.113.5": 3 * 3600},
			ban6:    map[string]int{"2001:db8::5": 0},
		},
		{
			name:    "a prefix over an address",
			changes: []Change{nftTestSetChange("203.0.113.0/24", now.Add(time.Hour)), nftTestSetChange("2001:db8::/48", now.Add(time.Hour))},
			ban4:    map[string]int{"203.0.113.0/24": 3600},
			ban6:    map[string]int{"2001:db8::/48": 3600},
		},
		{
			name:    "the prefix lifted",
			changes: []Change{nftTestDelChange("203.0.113.0/24"), nftTestDelChange("2001:db8::/48")},
			ban4:    map[string]int{"203.0.113.5": 3 * 3600},
			ban6:    map[string]int{"2001:db8::5": 0},
		},
		{
			name:    "delete",
			changes: []Change{nftTestDelChange("203.0.113.5"), nftTestDelChange("2001:db8::5")},
			ban4:    map[string]int{},
			ban6:    map[string]int{},
		},
		{
			name:    "delete absent",
			changes: []Change{nftTestDelChange("203.0.113.5"), nftTestDelChange("198.51.100.0/24")},
			ban4:    map[string]int{},
			ban6:    map[string]int{},
		},
	}
	for _, s := range steps {
		if err := b.Apply(ctx, s.changes); err != nil {
			t.Fatalf("%s: Apply: %v", s.name, err)
		}
		t.Run(s.name, func(t *testing.T) {
			nftTestWant(t, "ban4", s.ban4)
			nftTestWant(t, "ban6", s.ban6)
		})
	}
	if n := nftTestElems(t, "ban4") + nftTestElems(t, "ban6"); n != 0 {
		t.Errorf("ban4 and ban6 hold %d elements (interval ends?), want none", n)
	}
}

func TestNftablesReconcile(t *testing.T) {
	if !nstest.Enter(t, "nft") {
		return
	}
	ctx := context.Background()
	now := time.Now()
	entries := []Entry{
		nftTestEntry("198.51.100.0/24", now.Add(time.Hour)),
		nftTestEntry("203.0.113.5", now.Add(time.Hour)),
		nftTestEntry("2001:db8:1::/64", now.Add(time.Hour)),
	}
	b := nftTestBuild(t, nil)
	if err := b.Sync(ctx, entries, nil); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	b.Close()

	// While the daemon is down an operator adds, removes and changes
	// elements and rules.
	nftTestRun(t, "nft", "add", "element", "inet", "logjail", "ban4", "{ 203.0.113.9 timeout 1h }")
	nftTestRun(t, "nft", "add", "element", "inet", "logjail", "ban6", "{ 2001:db8:2::1-2001:db8:2::9 }")
	nftTestRun(t, "nft", "delete", "element", "inet", "logjail", "ban4", "{ 198.51.100.0/24 }")
	nftTestRun(t, "nft", "delete", "element", "inet", "logjail", "ban4", "{ 203.0.113.5 }")
	nftTestRun(t, "nft", "add", "element", "inet", "logjail", "ban4", "{ 203.0.113.5 timeout 10s }")
	nftTestRun(t, "nft", "add", "element", "inet", "logjail", "allow4", "{ 203.0.113.0/24 }")
	nftTestRun(t, "nft", "add", "rule", "inet", "logjail", "input", "accept")

	b = nftTestBuild(t, nil)
	if err := b.Sync(ctx, entries, nil); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	nftTestWant(t, "ban4", map[string]int{"198.51.100.0/24": 3600, "203.0.113.5": 3600})
	nftTestWant(t, "ban6", map[string]int{"2001:db8:1::/64": 3600})
	nftTestWant(t, "allow4", map[string]int{})
	want := []string{
		"ip saddr @allow4 return",
		"ip6 saddr @allow6 return",
		"ip saddr @ban4 drop",
		"ip6 saddr @ban6 drop",
	}
	if d := cmp.Diff(want, nftTestRules(t, "input")); d != "" {
		t.Errorf("chain input (-want +got):\n%s", d)
	}

	// Another configuration: the rules follow it, the elements stay.
	b = nftTestBuild(t, map[string]any{"target": "reject", "ports": []any{80, 443}, "hook": "forward", "priority": 5})
	if err := b.Sync(ctx, entries, nil); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	want = []string{
		"ip saddr @allow4 return",
		"ip6 saddr @allow6 return",
		"tcp dport { 80, 443 } ip saddr @ban4 reject with tcp reset",
		"tcp dport { 80, 443 } ip6 saddr @ban6 reject with tcp reset",
	}
	if d := cmp.Diff(want, nftTestRules(t, "forward")); d != "" {
		t.Errorf("chain forward (-want +got):\n%s", d)
	}
	if out := nftTestRun(t, "nft", "list", "table", "inet", "logjail"); strings.Contains(out, "chain input") || !strings.Contains(out, "hook forward priority filter + 5") {
		t.Errorf("want chain forward alone, at priority 5:\n%s", out)
	}
	nftTestWant(t, "ban4", map[string]int{"198.51.100.0/24": 3600, "203.0.113.5": 3600})

	// A set of the wrong type: the table is made anew.
	nftTestRun(t, "nft", "delete", "table", "inet", "logjail")
	nftTestRun(t, "nft", "add", "table", "inet", "logjail")
	nftTestRun(t, "nft", "add", "set", "inet", "logjail", "ban4", "{ type ipv4_addr; }")
	b = nftTestBuild(t, nil)
	if err := b.Sync(ctx, entries, nil); err != nil {
		t.Fatalf("Sync over a wrong set: %v", err)
	}
	nftTestWant(t, "ban4", map[string]int{"198.51.100.0/24": 3600, "203.0.113.5": 3600})

	// Flush removes the table; a second Flush finds nothing to do.
	for i := range 2 {
		if err := b.Flush(ctx); err != nil {
			t.Fatalf("Flush %d: %v", i, err)
		}
	}
	if out, err := exec.Command("nft", "list", "table", "inet", "logjail").CombinedOutput(); err == nil {
		t.Errorf("the table is still there after Flush:\n%s", out)
	}
	// Apply after a Flush puts the table back.
	if err := b.Apply(ctx, []Change{nftTestSetChange("203.0.113.7", now.Add(time.Hour))}); err != nil {
		t.Fatalf("Apply after Flush: %v", err)
	}
	nftTestWant(t, "ban4", map[string]int{"198.51.100.0/24": 3600, "203.0.113.5": 3600, "203.0.113.7": 3600})
}

// TestNftablesKernelTimeout checks that the kernel lifts a ban on its own
// (the daemon may be dead), and that lifting it afterwards is no error.
func TestNftablesKernelTimeout(t *testing.T) {
	if !nstest.Enter(t, "nft") {
		return
	}
	ctx := context.Background()
	b := nftTestBuild(t, nil)
	if err := b.Sync(ctx, []Entry{nftTestEntry("198.51.100.0/24", time.Now().Add(2*time.Second))}, nil); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if got := nftTestSet(t, "ban4"); len(got) != 1 {
		t.Fatalf("ban4 = %v, want 198.51.100.0/24", got)
	}
	deadline := time.Now().Add(6 * time.Second)
	for len(nftTestSet(t, "ban4")) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("198.51.100.0/24 is still in ban4 6s after a 2s timeout")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := b.Apply(ctx, []Change{nftTestDelChange("198.51.100.0/24")}); err != nil {
		t.Fatalf("lifting a ban the kernel timed out: %v", err)
	}
	if n := nftTestElems(t, "ban4"); n != 0 {
		t.Errorf("ban4 holds %d elements, want none", n)
	}
}

// TestNftablesTraffic connects from a second namespace over a veth pair:
// the connection works before the ban, is refused while it holds and works
// again once it is lifted, over IPv4 and IPv6; an allowed address inside a
// banned prefix gets through.
func TestNftablesTraffic(t *testing.T) {
	if !nstest.Enter(t, "nft", "ip") {
		return
	}
	peer := nstest.NewPeer(t)
	ctx := context.Background()
	for _, fam := range []struct{ server, client, prefix string }{
		{"198.51.100.1", "198.51.100.2", "198.51.100.0/30"},
		{"2001:db8::1", "2001:db8::2", "2001:db8::/126"},
	} {
		ap := nstest.Listen(t, netip.AddrPortFrom(netip.MustParseAddr(fam.server), 0))
		port, addr := int(ap.Port()), ap.String()
		dial := func() string {
			if err := peer.Dial(ap, 3*time.Second); err != nil {
				return "fail: " + err.Error()
			}
			return "ok"
		}
		b := nftTestBuild(t, map[string]any{"target": "reject", "ports": []any{port}})
		client := netip.MustParseAddr(fam.client)
		single := netip.PrefixFrom(client, client.BitLen())
		if err := b.Sync(ctx, nil, nil); err != nil {
			t.Fatalf("Sync: %v", err)
		}
		if got := dial(); got != "ok" {
			t.Fatalf("%s before the ban: dial %s", addr, got)
		}
		if err := b.Apply(ctx, []Change{nftTestSetChange(single.String(), time.Now().Add(time.Hour))}); err != nil {
			t.Fatalf("Apply: %v", err)
		}
		if got := dial(); !strings.Contains(got, "refused") {
			t.Errorf("%s while %s is banned: dial %s, want refused", addr, single, got)
		}
		if err := b.Apply(ctx, []Change{nftTestDelChange(single.String())}); err != nil {
			t.Fatalf("Apply: %v", err)
		}
		if got := dial(); got != "ok" {
			t.Errorf("%s after the ban is lifted: dial %s", addr, got)
		}
		// The client allowed inside a banned prefix.
		entries := []Entry{nftTestEntry(fam.prefix, time.Now().Add(time.Hour))}
		if err := b.Sync(ctx, entries, []netip.Prefix{single}); err != nil {
			t.Fatalf("Sync: %v", err)
		}
		if got := dial(); got != "ok" {
			t.Errorf("%s allowed inside banned %s: dial %s", addr, fam.prefix, got)
		}
		if err := b.Sync(ctx, entries, nil); err != nil {
			t.Fatalf("Sync: %v", err)
		}
		if got := dial(); !strings.Contains(got, "refused") {
			t.Errorf("%s inside banned %s, no longer allowed: dial %s, want refused", addr, fam.prefix, got)
		}
		if err := b.Flush(ctx); err != nil {
			t.Fatalf("Flush: %v", err)
		}
		if got := dial(); got != "ok" {
			t.Errorf("%s after Flush: dial %s", addr, got)
		}
	}
}

// TestNftablesOptions checks the builder's errors: each names the file, the
// action's line and the option. The builder touches nothing.
func TestNftablesOptions(t *testing.T) {
	for _, tc := range []struct {
		opts map[string]any
		want string
	}{
		{map[string]any{"table": "log jail"}, "actions[0].table"},
		{map[string]any{"table": strings.Repeat("x", 33)}, "actions[0].table"},
		{map[string]any{"table": ""}, "actions[0].table"},
		{map[string]any{"hook": "output"}, "actions[0].hook"},
		{map[string]any{"target": "accept"}, "actions[0].target"},
		{map[string]any{"protocol": "tcp"}, "actions[0].protocol"},
		{map[string]any{"protocol": "sctp", "ports": []any{80}}, "actions[0].protocol"},
		{map[string]any{"ports": []any{0}}, "actions[0].ports"},
		{map[string]any{"priority": "first"}, "actions[0].priority"},
		{map[string]any{"chain": "x"}, "actions[0].chain"},
	} {
		_, err := buildNftables(NewOptions("logjail.yaml", 0, "nftables", tc.opts), Env{})
		if err == nil || !strings.Contains(err.Error(), "logjail.yaml") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want one naming %s", tc.opts, err, tc.want)
		}
	}
	b, err := buildNftables(NewOptions("logjail.yaml", 0, "nftables", map[string]any{
		"table": "lj_test-1", "hook": "forward", "priority": 0, "target": "reject", "ports": []any{80, 443}, "protocol": "udp", "name": "fw",
	}), Env{})
	if err != nil {
		t.Fatalf("valid options: %v", err)
	}
	if b.Name() != "fw" || b.(*Nftables).conn != nil {
		t.Errorf("name %q, conn %v: want fw and no connection before Sync", b.Name(), b.(*Nftables).conn)
	}
}

// nftBenchApply bans n addresses in one Apply and lifts them in another.
func nftBenchApply(b *testing.B, addrs []netip.Addr) {
	ctx := context.Background()
	be := nftTestBuild(b, nil)
	if err := be.Sync(ctx, nil, nil); err != nil {
		b.Fatal(err)
	}
	set := make([]Change, len(addrs))
	del := make([]Change, len(addrs))
	until := time.Now().Add(time.Hour)
	for i, a := range addrs {
		p := netip.PrefixFrom(a, a.BitLen())
		set[i] = Change{Entry: Entry{Prefix: p, Kind: KindBan, Until: until}}
		del[i] = Change{Entry: Entry{Prefix: p}, Delete: true}
	}
	benchApplyRemove(b, be, set, del)
}

// BenchmarkNftablesApply10k bans 10,000 IPv4 addresses of 198.18.0.0/15
// (RFC 2544's benchmarking range) in one Apply and lifts them in another.
func BenchmarkNftablesApply10k(b *testing.B) {
	if !nstest.Enter(b, "nft") {
		return
	}
	addrs := make([]netip.Addr, 10000)
	for i := range addrs {
		addrs[i] = netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)})
	}
	nftBenchApply(b, addrs)
}

// BenchmarkNftablesApply10kIPv6 is the same with 10,000 addresses of
// 2001:db8::/32.
func BenchmarkNftablesApply10kIPv6(b *testing.B) {
	if !nstest.Enter(b, "nft") {
		return
	}
	addrs := make([]netip.Addr, 10000)
	for i := range addrs {
		addrs[i] = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(i), 14: byte(i >> 8), 8: 1})
	}
	nftBenchApply(b, addrs)
}
