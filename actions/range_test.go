package actions

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/internal/nstest"
	"github.com/logjail/logjail/state"
)

// rangeTestRanges are the group ranges of the range tests: bots has an
// IPv4 and an IPv6 CIDR. No address in them but 198.51.100.9 and
// 2001:db8::9 is ever "seen": every other address the tests try is one the
// logs never showed.
func rangeTestRanges() map[string][]netip.Prefix {
	return map[string][]netip.Prefix{
		"range:bots":  {netip.MustParsePrefix("198.51.100.0/25"), netip.MustParsePrefix("2001:db8::/120")},
		"range:other": {netip.MustParsePrefix("203.0.113.0/24")},
	}
}

// rangeTestBan is the detector's ban of range:bots, with the addresses it
// saw.
func rangeTestBan(until time.Time) detector.Decision {
	return banDecision("range:bots", "range:bots", until, "198.51.100.9", "2001:db8::9")
}

func TestResolve(t *testing.T) {
	ranges := rangeTestRanges()
	ranges["range:mapped"] = []netip.Prefix{netip.MustParsePrefix("::ffff:198.51.100.0/120"), netip.MustParsePrefix("203.0.113.7/24")}
	for _, c := range []struct {
		key   string
		addrs []string
		want  []string
	}{
		{"range:bots", []string{"198.51.100.9"}, []string{"198.51.100.0/25", "2001:db8::/120"}},
		{"range:bots", nil, []string{"198.51.100.0/25", "2001:db8::/120"}},    // an operator's ban: no address seen
		{"range:mapped", nil, []string{"198.51.100.0/24", "203.0.113.0/24"}},  // unmapped, masked
		{"range:gone", []string{"198.51.100.9"}, []string{"198.51.100.9/32"}}, // not configured: the recorded addresses
		{"range:gone", nil, nil}, // nor any address: nothing
		{"user:bob", []string{"198.51.100.9"}, []string{"198.51.100.9/32"}},        // no range
		{"198.51.100.0/24", []string{"198.51.100.9"}, []string{"198.51.100.0/24"}}, // a prefix key
	} {
		var addrs []netip.Addr
		for _, a := range c.addrs {
			addrs = append(addrs, netip.MustParseAddr(a))
		}
		var got []string
		for _, p := range resolve(c.key, addrs, ranges) {
			got = append(got, p.String())
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("resolve(%q, %v) = %v, want %v", c.key, c.addrs, got, c.want)
		}
	}
}

// TestManagerRangeBans: a ban of range:NAME, decided or loaded from the
// store, blocks the range's CIDRs whatever addresses were seen; a reload
// that changes the CIDRs moves the block; a range gone from the
// configuration falls back to the recorded addresses, and comes back; an
// allowed address inside a CIDR is an exemption.
func TestManagerRangeBans(t *testing.T) {
	r := &allowRecorder{recorder: newRecorder("rec")}
	m := NewManager([]Configured{{Backend: r, Kinds: []Kind{KindBan}}}, ManagerOptions{Sweep: time.Hour, Ranges: rangeTestRanges()})
	allowed := netip.MustParsePrefix("198.51.100.7/32")
	m.Load([]state.Ban{{Rule: "operator", Key: "range:other", Kind: "ban", Until: time.Now().Add(time.Hour)}}, []netip.Prefix{allowed})
	m.Start(context.Background())
	defer m.Close()
	wait(t, m)
	held := func(what string, want ...string) {
		t.Helper()
		wait(t, m)
		if diff := cmp.Diff(want, r.holding()); diff != "" {
			t.Errorf("%s: held (-want +got):\n%s", what, diff)
		}
	}
	held("an operator's ban of range:other loaded from the store", "203.0.113.0/24")

	m.Decisions([]detector.Decision{rangeTestBan(time.Now().Add(time.Hour))})
	held("range:bots banned", "198.51.100.0/25", "2001:db8::/120", "203.0.113.0/24")
	if e, ok := r.entry("198.51.100.0/25"); !ok || e.Key != "range:bots" || e.Rule != "range:bots" || e.Kind != KindBan {
		t.Errorf("the CIDR's entry is %+v, want the ban of range:bots", e)
	}
	r.recorder.mu.Lock()
	exempt := r.allows[len(r.allows)-1]
	r.recorder.mu.Unlock()
	if !slices.Equal(exempt, []netip.Prefix{allowed}) {
		t.Errorf("exemptions %v, want the allowed %s inside the range", exempt, allowed)
	}

	// A reload narrows bots' IPv4 CIDR and adds one.
	ranges := rangeTestRanges()
	ranges["range:bots"] = []netip.Prefix{netip.MustParsePrefix("198.51.100.0/26"), netip.MustParsePrefix("2001:db8::/120"), netip.MustParsePrefix("198.51.100.128/28")}
	m.SetRanges(ranges)
	held("bots' CIDRs changed", "198.51.100.0/26", "198.51.100.128/28", "2001:db8::/120", "203.0.113.0/24")

	// bots leaves the configuration: its ban blocks what was seen.
	delete(ranges, "range:bots")
	m.SetRanges(ranges)
	held("bots no longer configured", "198.51.100.9/32", "2001:db8::9/128", "203.0.113.0/24")

	// It comes back.
	m.SetRanges(rangeTestRanges())
	held("bots configured again", "198.51.100.0/25", "2001:db8::/120", "203.0.113.0/24")

	m.Decisions([]detector.Decision{unban("range:bots", "range:bots"), unban("operator", "range:other")})
	held("both lifted")
}

// TestRangeBanListFiles: a range ban through the manager reaches a real
// nginx (deny file and geo map) and every other list format as the
// range's CIDRs: an address of the range that no log ever showed is
// refused, an allowed one inside is not, one outside is not. The block
// file action writes one file per CIDR.
func TestRangeBanListFiles(t *testing.T) {
	ctx := context.Background()
	prefix := t.TempDir() + "/"
	deny, geo := prefix+"deny.conf", prefix+"geo.conf"
	for _, o := range []map[string]any{{"file": deny}, {"file": geo, "style": "geo"}} {
		if err := lfBuild(t, "nginx", o).Sync(ctx, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	s := ngStart(t, prefix)
	cs := []Configured{
		{Backend: lfBuild(t, "nginx", map[string]any{"file": deny, "check": s.checkArgv(), "reload": s.reloadArgv(prefix + "deny.runs")}), Kinds: []Kind{KindBan}},
		{Backend: lfBuild(t, "nginx", map[string]any{"name": "geo", "file": geo, "style": "geo", "check": s.checkArgv(), "reload": s.reloadArgv(prefix + "geo.runs")}), Kinds: []Kind{KindBan}},
		{Backend: lfBuild(t, "apache", map[string]any{"file": prefix + "apache.conf"}), Kinds: []Kind{KindBan}},
		{Backend: lfBuild(t, "haproxy", map[string]any{"file": prefix + "haproxy.acl", "allow_file": prefix + "haproxy-allow.acl"}), Kinds: []Kind{KindBan}},
		{Backend: lfBuild(t, "list", map[string]any{"file": prefix + "list.txt"}), Kinds: []Kind{KindBan}},
		{Backend: bfBuild(t, prefix+"blocked"), Kinds: []Kind{KindBan}},
	}
	m := NewManager(cs, ManagerOptions{Sweep: time.Hour, Ranges: rangeTestRanges()})
	m.Load(nil, []netip.Prefix{netip.MustParsePrefix("198.51.100.7/32")})
	m.Start(ctx)
	defer m.Close()
	wait(t, m)

	clients := map[string]int{
		"198.51.100.77":  200, // in range:bots, never seen
		"198.51.100.7":   200, // in it, allowed
		"198.51.100.200": 200, // outside it
		"2001:db8::ab":   200, // in range:bots' IPv6 CIDR, never seen
		"2001:db8::1:1":  200, // outside it
	}
	s.expect(t, "before the ban", clients)
	m.Decisions([]detector.Decision{rangeTestBan(time.Now().Add(time.Hour))})
	wait(t, m)
	clients["198.51.100.77"], clients["2001:db8::ab"] = 403, 403
	s.expect(t, "range:bots banned", clients)

	for _, c := range []struct{ file, want string }{
		{"apache.conf", "Require not ip 198.51.100.0/25\nRequire not ip 2001:db8::/120\n"},
		{"haproxy.acl", "\n198.51.100.0/25\n2001:db8::/120\n"},
		{"haproxy-allow.acl", "\n198.51.100.7\n"},
		{"list.txt", "\n198.51.100.0/25\n2001:db8::/120\n"},
	} {
		if got := lfRead(t, prefix+c.file); !strings.HasSuffix(got, c.want) {
			t.Errorf("%s:\n%s\nwant it to end with\n%s", c.file, got, c.want)
		}
	}
	if got, want := bfList(t, prefix+"blocked"), []string{"198.51.100.0_25", "2001:db8::_120"}; !slices.Equal(got, want) {
		t.Errorf("block files %v, want %v", got, want)
	}

	m.Decisions([]detector.Decision{unban("range:bots", "range:bots")})
	wait(t, m)
	clients["198.51.100.77"], clients["2001:db8::ab"] = 200, 200
	s.expect(t, "range:bots unbanned", clients)
}

// TestRangeBanFirewall: a range ban through the manager, in each firewall
// backend, refuses a TCP connection from an address of the range that was
// never seen (the peer's: the ban saw only .9 and ::9), over IPv4 and
// IPv6, and lets it through again after the unban.
func TestRangeBanFirewall(t *testing.T) {
	for _, c := range []struct {
		name string
		opts map[string]any
		need []string
	}{
		{"iptables-rules", map[string]any{"target": "REJECT"}, []string{"iptables", "ip6tables"}},
		{"iptables-ipset", map[string]any{"target": "REJECT", "mode": "ipset"}, []string{"iptables", "ip6tables", "ipset"}},
		{"nftables", map[string]any{"target": "reject"}, []string{"nft"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !nstest.Enter(t, append(c.need, "ip")...) {
				return
			}
			peer := nstest.NewPeer(t)
			l4 := nstest.Listen(t, netip.AddrPortFrom(peer.Local4, 0))
			l6 := nstest.Listen(t, netip.AddrPortFrom(peer.Local6, 0))
			opts := map[string]any{"ports": []any{int(l4.Port()), int(l6.Port())}}
			for k, v := range c.opts {
				opts[k] = v
			}
			var be Backend
			if strings.HasPrefix(c.name, "iptables") {
				be = iptTestBuild(t, opts)
			} else {
				be = nftTestBuild(t, opts)
			}
			m := NewManager([]Configured{{Backend: be, Kinds: []Kind{KindBan}}}, ManagerOptions{Sweep: time.Hour, Ranges: rangeTestRanges()})
			m.Load(nil, nil)
			m.Start(context.Background())
			defer func() {
				m.Close()
				if f, ok := be.(Flusher); ok {
					f.Flush(context.Background())
				}
			}()
			wait(t, m)
			for _, a := range []netip.Addr{peer.Remote4, peer.Remote6} {
				if a == netip.MustParseAddr("198.51.100.9") || a == netip.MustParseAddr("2001:db8::9") {
					t.Fatalf("the peer %s is an address the ban saw: the test would prove nothing", a)
				}
			}
			dial := func(a netip.AddrPort) error { return peer.Dial(a, 3*time.Second) }
			// The link may take a moment to carry packets.
			deadline := time.Now().Add(10 * time.Second)
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for _, a := range []netip.AddrPort{l4, l6} {
				for err := dial(a); err != nil; err = dial(a) {
					if time.Now().After(deadline) {
						t.Fatalf("%s before the ban: %v", a, err)
					}
					<-tick.C
				}
			}
			m.Decisions([]detector.Decision{rangeTestBan(time.Now().Add(time.Hour))})
			wait(t, m)
			for _, a := range []netip.AddrPort{l4, l6} {
				// REJECT answers with an ICMP error (or a reset), which the
				// kernel rate limits: refused or timed out both say blocked.
				if err := dial(a); err == nil {
					t.Errorf("%s from %s, in the banned range but never seen: accepted", a, peer.Name)
				} else if !errors.Is(err, syscall.ECONNREFUSED) && !strings.Contains(err.Error(), "timeout") {
					t.Errorf("%s while the range is banned: %v, want refused", a, err)
				}
			}
			m.Decisions([]detector.Decision{unban("range:bots", "range:bots")})
			wait(t, m)
			for _, a := range []netip.AddrPort{l4, l6} {
				if err := dial(a); err != nil {
					t.Errorf("%s after the unban: %v", a, err)
				}
			}
		})
	}
}
