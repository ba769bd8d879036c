package actions

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/logjail/logjail/internal/nstest"
	"github.com/logjail/logjail/rules"
)

// iptTestBuild builds an iptables action from options, as the configuration
// logjail.yaml would at line 7.
func iptTestBuild(t testing.TB, opts map[string]any) *IPTables {
	t.Helper()
	cs, err := Builtin(nil).Build(&rules.Config{File: "logjail.yaml", Actions: []rules.Action{{Type: "iptables", Line: 7, Options: opts}}}, Env{})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return cs[0].Backend.(*IPTables)
}

// iptTestRun runs a command and returns its output, failing the test on an
// error.
func iptTestRun(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// iptTestRules is `cmd -S chain` without the -N line; nil when the chain
// does not exist.
func iptTestRules(t testing.TB, cmd, chain string) []string {
	t.Helper()
	out, err := exec.Command(cmd, "-S", chain).Output()
	if err != nil {
		return nil
	}
	rs := []string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.HasPrefix(l, "-A ") {
			rs = append(rs, l)
		}
	}
	return rs
}

// iptTestSet is a set's members as `ipset save` prints them, with their
// timeouts; nil when the set does not exist.
func iptTestSet(t testing.TB, set string) map[string]int64 {
	t.Helper()
	out, err := exec.Command("ipset", "save", set).Output()
	if err != nil {
		return nil
	}
	m := map[string]int64{}
	for p, n := range iptParseSave(set, bytes.NewBuffer(out)) {
		m[PrefixString(p)] = n
	}
	return m
}

// iptTestCount counts the lines of `cmd -S chain` equal to line.
func iptTestCount(t testing.TB, cmd, chain, line string) int {
	t.Helper()
	out, err := exec.Command(cmd, "-S", chain).Output()
	if err != nil {
		t.Fatalf("%s -S %s: %v", cmd, chain, err)
	}
	n := 0
	for _, l := range strings.Split(string(out), "\n") {
		if l == line {
			n++
		}
	}
	return n
}

// iptTestSortTail sorts the lines after the first n.
func iptTestSortTail(lines []string, n int) []string {
	if len(lines) > n {
		slices.Sort(lines[n:])
	}
	return lines
}

func iptTestEntry(s string, until time.Time) Entry {
	p := netip.MustParsePrefix(s)
	return Entry{Prefix: p, Kind: KindBan, Until: until, Key: s}
}

func iptTestSetChange(s string, until time.Time) Change { return Change{Entry: iptTestEntry(s, until)} }

func iptTestDelChange(s string) Change {
	return Change{Entry: Entry{Prefix: netip.MustParsePrefix(s)}, Delete: true}
}

// iptTestNeed is what a test of mode needs: mode rules runs iptables and
// ip6tables alone, so a machine without ipset still tests it.
func iptTestNeed(mode string) []string {
	if mode == "ipset" {
		return []string{"iptables", "ip6tables", "ipset"}
	}
	return []string{"iptables", "ip6tables"}
}

// iptTestTimeout checks that the set holds elem with a timeout within a
// minute below want.
func iptTestTimeout(t *testing.T, set, elem string, want time.Duration) {
	t.Helper()
	got, ok := iptTestSet(t, set)[elem]
	w := int64(want / time.Second)
	if !ok || got > w || got < w-60 {
		t.Errorf("ipset %s: %s has timeout %d (present: %v), want about %d", set, elem, got, ok, w)
	}
}

// TestIptablesModes syncs and applies bans in both modes and reads back
// what iptables, ip6tables and ipset hold.
func TestIptablesModes(t *testing.T) {
	for _, mode := range []string{"rules", "ipset"} {
		t.Run(mode, func(t *testing.T) {
			if !nstest.Enter(t, iptTestNeed(mode)...) {
				return
			}
			ctx := context.Background()
			b := iptTestBuild(t, map[string]any{"mode": mode})
			now := time.Now()
			hour := now.Add(time.Hour)
			entries := []Entry{
				iptTestEntry("198.51.100.0/24", time.Time{}),
				iptTestEntry("203.0.113.5/32", hour),
				iptTestEntry("2001:db8:1::/64", time.Time{}),
				iptTestEntry("2001:db8::5/128", hour),
			}
			allow := []netip.Prefix{
				netip.MustParsePrefix("198.51.100.7/32"),   // inside 198.51.100.0/24: exempted
				netip.MustParsePrefix("203.0.113.200/32"),  // inside no ban
				netip.MustParsePrefix("2001:db8:1::7/128"), // inside 2001:db8:1::/64
			}
			if err := b.Sync(ctx, entries, allow); err != nil {
				t.Fatalf("Sync: %v", err)
			}
			// want4 and want6 are the rules-mode chains, or the sets'
			// members.
			check := func(step string, v4, v6, allow4, allow6 []string) {
				t.Helper()
				if mode == "rules" {
					var w4, w6 []string
					for _, a := range allow4 {
						w4 = append(w4, "-A LOGJAIL -s "+a+" -j RETURN")
					}
					for _, p := range v4 {
						w4 = append(w4, "-A LOGJAIL -s "+p+" -j DROP")
					}
					for _, a := range allow6 {
						w6 = append(w6, "-A LOGJAIL -s "+a+" -j RETURN")
					}
					for _, p := range v6 {
						w6 = append(w6, "-A LOGJAIL -s "+p+" -j DROP")
					}
					// The RETURN rules come first; the order of the
					// blocking rules is free.
					if d := cmp.Diff(iptTestSortTail(w4, len(allow4)), iptTestSortTail(iptTestRules(t, "iptables", "LOGJAIL"), len(allow4))); d != "" {
						t.Errorf("%s: iptables -S LOGJAIL (-want +got):\n%s", step, d)
					}
					if d := cmp.Diff(iptTestSortTail(w6, len(allow6)), iptTestSortTail(iptTestRules(t, "ip6tables", "LOGJAIL"), len(allow6))); d != "" {
						t.Errorf("%s: ip6tables -S LOGJAIL (-want +got):\n%s", step, d)
					}
					return
				}
				for set, want := range map[string][]string{"logjail-v4": v4, "logjail-v6": v6, "logjail-allow-v4": allow4, "logjail-allow-v6": allow6} {
					var got []string
					for e := range iptTestSet(t, set) {
						got = append(got, e)
					}
					slices.Sort(got)
					var w []string
					for _, p := range want {
						w = append(w, strings.TrimSuffix(strings.TrimSuffix(p, "/32"), "/128"))
					}
					slices.Sort(w)
					if d := cmp.Diff(w, got); d != "" {
						t.Errorf("%s: ipset %s (-want +got):\n%s", step, set, d)
					}
				}
				for _, c := range []string{"iptables", "ip6tables"} {
					fam := "v4"
					if c == "ip6tables" {
						fam = "v6"
					}
					want := []string{
						"-A LOGJAIL -m set --match-set logjail-allow-" + fam + " src -j RETURN",
						"-A LOGJAIL -m set --match-set logjail-" + fam + " src -j DROP",
					}
					if d := cmp.Diff(want, iptTestRules(t, c, "LOGJAIL")); d != "" {
						t.Errorf("%s: %s -S LOGJAIL (-want +got):\n%s", step, c, d)
					}
				}
			}
			check("Sync",
				[]string{"198.51.100.0/24", "203.0.113.5/32"},
				[]string{"2001:db8:1::/64", "2001:db8::5/128"},
				[]string{"198.51.100.7/32"}, []string{"2001:db8:1::7/128"})
			if mode == "ipset" {
				iptTestTimeout(t, "logjail-v4", "203.0.113.5", time.Hour)
				iptTestTimeout(t, "logjail-v4", "198.51.100.0/24", 0)
				iptTestTimeout(t, "logjail-v6", "2001:db8::5", time.Hour)
			}

			// Adds and deletes; the same add twice, a delete of what is
			// not there.
			changes := []Change{
				iptTestSetChange("203.0.113.9/32", hour),
				iptTestDelChange("203.0.113.5/32"),
				iptTestSetChange("2001:db8:2::/48", hour),
				iptTestDelChange("2001:db8::5/128"),
			}
			for i := range 2 {
				if err := b.Apply(ctx, changes); err != nil {
					t.Fatalf("Apply #%d: %v", i+1, err)
				}
			}
			if err := b.Apply(ctx, []Change{iptTestDelChange("203.0.113.77/32"), iptTestDelChange("2001:db8::77/128")}); err != nil {
				t.Fatalf("Apply deleting what is not there: %v", err)
			}
			check("Apply",
				[]string{"198.51.100.0/24", "203.0.113.9/32"},
				[]string{"2001:db8:1::/64", "2001:db8:2::/48"},
				[]string{"198.51.100.7/32"}, []string{"2001:db8:1::7/128"})

			// A longer ban of the same prefix retimes it.
			if err := b.Apply(ctx, []Change{iptTestSetChange("203.0.113.9/32", now.Add(5*time.Hour))}); err != nil {
				t.Fatalf("Apply a longer ban: %v", err)
			}
			if mode == "ipset" {
				iptTestTimeout(t, "logjail-v4", "203.0.113.9", 5*time.Hour)
			}

			// Lifting the ban that held the allowed address lifts its
			// exemption; banning it again brings the exemption back,
			// before the ban.
			if err := b.Apply(ctx, []Change{iptTestDelChange("198.51.100.0/24")}); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			check("unban 198.51.100.0/24",
				[]string{"203.0.113.9/32"},
				[]string{"2001:db8:1::/64", "2001:db8:2::/48"},
				nil, []string{"2001:db8:1::7/128"})
			if err := b.Apply(ctx, []Change{iptTestSetChange("198.51.100.0/24", time.Time{})}); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			check("ban 198.51.100.0/24 again",
				[]string{"203.0.113.9/32", "198.51.100.0/24"},
				[]string{"2001:db8:1::/64", "2001:db8:2::/48"},
				[]string{"198.51.100.7/32"}, []string{"2001:db8:1::7/128"})

			// Every address is refused; the rest of the Apply happens.
			err := b.Apply(ctx, []Change{iptTestSetChange("0.0.0.0/0", hour), iptTestSetChange("203.0.113.10/32", hour)})
			if err == nil || !strings.Contains(err.Error(), "every address") {
				t.Errorf("Apply 0.0.0.0/0: error %v, want one saying it blocks every address", err)
			}
			check("Apply 0.0.0.0/0",
				[]string{"203.0.113.9/32", "198.51.100.0/24", "203.0.113.10/32"},
				[]string{"2001:db8:1::/64", "2001:db8:2::/48"},
				[]string{"198.51.100.7/32"}, []string{"2001:db8:1::7/128"})
		})
	}
}

// TestIptablesReconcile starts from state an earlier run (or an operator)
// left: Sync removes the stale and adds the missing, and a new backend's
// Apply before any Sync works on what is there.
func TestIptablesReconcile(t *testing.T) {
	for _, mode := range []string{"rules", "ipset"} {
		t.Run(mode, func(t *testing.T) {
			if !nstest.Enter(t, iptTestNeed(mode)...) {
				return
			}
			ctx := context.Background()
			now := time.Now()
			if mode == "rules" {
				iptTestRun(t, "iptables", "-N", "LOGJAIL")
				iptTestRun(t, "iptables", "-A", "LOGJAIL", "-s", "203.0.113.9", "-j", "DROP")
				iptTestRun(t, "iptables", "-A", "LOGJAIL", "-s", "198.51.100.0/24", "-j", "DROP")
				iptTestRun(t, "iptables", "-A", "LOGJAIL", "-p", "udp", "-j", "ACCEPT")
				iptTestRun(t, "ip6tables", "-N", "LOGJAIL")
				iptTestRun(t, "ip6tables", "-A", "LOGJAIL", "-s", "2001:db8::9", "-j", "DROP")
			} else {
				iptTestRun(t, "ipset", "create", "logjail-v4", "hash:net", "family", "inet", "timeout", "0", "maxelem", "1048576")
				iptTestRun(t, "ipset", "add", "logjail-v4", "203.0.113.9", "timeout", "0")
				iptTestRun(t, "ipset", "add", "logjail-v4", "198.51.100.0/24", "timeout", "0") // wanted, but for an hour
				iptTestRun(t, "iptables", "-N", "LOGJAIL")
				iptTestRun(t, "iptables", "-A", "LOGJAIL", "-s", "203.0.113.9", "-j", "DROP")
			}
			b := iptTestBuild(t, map[string]any{"mode": mode})
			entries := []Entry{
				iptTestEntry("198.51.100.0/24", now.Add(time.Hour)),
				iptTestEntry("203.0.113.5/32", time.Time{}),
				iptTestEntry("2001:db8::5/128", time.Time{}),
			}
			if err := b.Sync(ctx, entries, nil); err != nil {
				t.Fatalf("Sync: %v", err)
			}
			if mode == "rules" {
				// The order of the rules is free; the rules are not.
				got := iptTestRules(t, "iptables", "LOGJAIL")
				slices.Sort(got)
				want := []string{"-A LOGJAIL -s 198.51.100.0/24 -j DROP", "-A LOGJAIL -s 203.0.113.5/32 -j DROP"}
				if d := cmp.Diff(want, got); d != "" {
					t.Errorf("iptables -S LOGJAIL (-want +got):\n%s", d)
				}
				if d := cmp.Diff([]string{"-A LOGJAIL -s 2001:db8::5/128 -j DROP"}, iptTestRules(t, "ip6tables", "LOGJAIL")); d != "" {
					t.Errorf("ip6tables -S LOGJAIL (-want +got):\n%s", d)
				}
			} else {
				got := iptTestSet(t, "logjail-v4")
				if _, stale := got["203.0.113.9"]; stale || len(got) != 2 {
					t.Errorf("ipset logjail-v4 = %v, want 198.51.100.0/24 and 203.0.113.5", got)
				}
				iptTestTimeout(t, "logjail-v4", "198.51.100.0/24", time.Hour)
				iptTestTimeout(t, "logjail-v4", "203.0.113.5", 0)
				if got := iptTestSet(t, "logjail-v6"); len(got) != 1 || got["2001:db8::5"] != 0 {
					t.Errorf("ipset logjail-v6 = %v, want 2001:db8::5 with no timeout", got)
				}
				if got := iptTestRules(t, "iptables", "LOGJAIL"); len(got) != 2 || strings.Contains(strings.Join(got, "\n"), "203.0.113.9") {
					t.Errorf("iptables -S LOGJAIL = %q, want the two set rules", got)
				}
			}

			// A restart: a new backend's first call is an Apply.
			b2 := iptTestBuild(t, map[string]any{"mode": mode})
			if err := b2.Apply(ctx, []Change{iptTestDelChange("203.0.113.5/32"), iptTestSetChange("203.0.113.6/32", time.Time{})}); err != nil {
				t.Fatalf("Apply before Sync: %v", err)
			}
			if mode == "rules" {
				got := iptTestRules(t, "iptables", "LOGJAIL")
				slices.Sort(got)
				want := []string{"-A LOGJAIL -s 198.51.100.0/24 -j DROP", "-A LOGJAIL -s 203.0.113.6/32 -j DROP"}
				if d := cmp.Diff(want, got); d != "" {
					t.Errorf("after Apply: iptables -S LOGJAIL (-want +got):\n%s", d)
				}
			} else {
				got := iptTestSet(t, "logjail-v4")
				_, has5 := got["203.0.113.5"]
				_, has6 := got["203.0.113.6"]
				if has5 || !has6 || len(got) != 2 {
					t.Errorf("after Apply: ipset logjail-v4 = %v, want 198.51.100.0/24 and 203.0.113.6", got)
				}
			}
		})
	}
}

// TestIptablesJumpsAndFlush checks that the jumps are made once whatever
// the number of Syncs, that Close leaves everything and Flush removes it.
func TestIptablesJumpsAndFlush(t *testing.T) {
	if !nstest.Enter(t, "iptables", "ip6tables", "ipset") {
		return
	}
	ctx := context.Background()
	b := iptTestBuild(t, map[string]any{"mode": "ipset", "chain": "lj-test", "from": []any{"INPUT", "FORWARD", "DOCKER-USER"}, "target": "REJECT"})
	entries := []Entry{iptTestEntry("198.51.100.9/32", time.Time{}), iptTestEntry("2001:db8::9/128", time.Time{})}

	// No Docker: the bans are in place, the missing chain is reported.
	err := b.Sync(ctx, entries, nil)
	if err == nil || !strings.Contains(err.Error(), "DOCKER-USER") {
		t.Errorf("Sync without DOCKER-USER: error %v, want one naming DOCKER-USER", err)
	}
	if _, ok := iptTestSet(t, "lj-test-v4")["198.51.100.9"]; !ok {
		t.Errorf("Sync without DOCKER-USER: 198.51.100.9 not in lj-test-v4")
	}
	iptTestRun(t, "iptables", "-N", "DOCKER-USER")
	for i := range 2 {
		if err := b.Sync(ctx, entries, nil); err != nil {
			t.Fatalf("Sync #%d: %v", i+1, err)
		}
	}
	for _, c := range []string{"iptables", "ip6tables"} {
		for _, from := range []string{"INPUT", "FORWARD", "DOCKER-USER"} {
			if c == "ip6tables" && from == "DOCKER-USER" {
				continue
			}
			if n := iptTestCount(t, c, from, "-A "+from+" -j lj-test"); n != 1 {
				t.Errorf("%s -S %s: %d jumps to lj-test, want 1", c, from, n)
			}
		}
	}
	// The jump is first.
	if got := iptTestRules(t, "iptables", "INPUT"); len(got) == 0 || got[0] != "-A INPUT -j lj-test" {
		t.Errorf("iptables -S INPUT = %q, want the jump first", got)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if iptTestRules(t, "iptables", "lj-test") == nil || iptTestRules(t, "ip6tables", "lj-test") == nil || iptTestSet(t, "lj-test-v4") == nil {
		t.Errorf("Close removed the chain or the set")
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	for _, c := range []string{"iptables", "ip6tables"} {
		if iptTestRules(t, c, "lj-test") != nil {
			t.Errorf("%s: chain lj-test left after Flush", c)
		}
		out := iptTestRun(t, c, "-S")
		if strings.Contains(out, "lj-test") {
			t.Errorf("%s -S after Flush still names lj-test:\n%s", c, out)
		}
	}
	if out := iptTestRun(t, "ipset", "list", "-name"); strings.TrimSpace(out) != "" {
		t.Errorf("ipset list -name after Flush: %q, want no sets", out)
	}
	if err := b.Flush(ctx); err != nil {
		t.Errorf("a second Flush: %v", err)
	}
}

// TestIptablesTraffic connects from a second namespace over a veth pair:
// the connection works before the ban, is refused (target REJECT, for the
// listener's port only) while it holds and works
// again once it is lifted, over IPv4 and IPv6, in both modes.
func TestIptablesTraffic(t *testing.T) {
	for _, mode := range []string{"rules", "ipset"} {
		t.Run(mode, func(t *testing.T) {
			if !nstest.Enter(t, append(iptTestNeed(mode), "ip")...) {
				return
			}
			peer := nstest.NewPeer(t)
			ctx := context.Background()
			for _, fam := range []struct{ server, client string }{
				{"198.51.100.1", "198.51.100.2"},
				{"2001:db8::1", "2001:db8::2"},
			} {
				ap := nstest.Listen(t, netip.AddrPortFrom(netip.MustParseAddr(fam.server), 0))
				port, addr := int(ap.Port()), ap.String()
				dial := func() string {
					switch err := peer.Dial(ap, 3*time.Second); {
					case err == nil:
						return "ok"
					case errors.Is(err, syscall.ECONNREFUSED):
						return "refused"
					default:
						return "fail: " + err.Error()
					}
				}
				b := iptTestBuild(t, map[string]any{"mode": mode, "target": "REJECT", "ports": []any{port}})
				client := netip.MustParseAddr(fam.client)
				ban := netip.PrefixFrom(client, client.BitLen()).String()
				if err := b.Sync(ctx, nil, nil); err != nil {
					t.Fatalf("Sync: %v", err)
				}
				if got := dial(); got != "ok" {
					t.Fatalf("%s before the ban: dial %s", addr, got)
				}
				if err := b.Apply(ctx, []Change{iptTestSetChange(ban, time.Now().Add(time.Hour))}); err != nil {
					t.Fatalf("Apply: %v", err)
				}
				if got := dial(); got != "refused" {
					t.Errorf("%s while %s is banned: dial %s", addr, ban, got)
				}
				if err := b.Apply(ctx, []Change{iptTestDelChange(ban)}); err != nil {
					t.Fatalf("Apply: %v", err)
				}
				if got := dial(); got != "ok" {
					t.Errorf("%s after the ban is lifted: dial %s", addr, got)
				}
				if err := b.Flush(ctx); err != nil {
					t.Fatalf("Flush: %v", err)
				}
			}
		})
	}
}

// TestIptablesOptions checks the builder's errors: each names the file,
// the action's line and the option.
func TestIptablesOptions(t *testing.T) {
	many := make([]any, 16)
	for i := range many {
		many[i] = 8000 + i
	}
	for _, c := range []struct {
		name string
		opts map[string]any
		key  string
	}{
		{"builtin chain", map[string]any{"chain": "INPUT"}, "chain"},
		{"chain with a space", map[string]any{"chain": "log jail"}, "chain"},
		{"chain too long", map[string]any{"chain": strings.Repeat("L", 29)}, "chain"},
		{"chain too long for ipset", map[string]any{"chain": strings.Repeat("L", 23), "mode": "ipset"}, "chain"},
		{"empty chain", map[string]any{"chain": ""}, "chain"},
		{"bad mode", map[string]any{"mode": "nft"}, "mode"},
		{"bad target", map[string]any{"target": "ACCEPT"}, "target"},
		{"bad from", map[string]any{"from": []any{"OUTPUT"}}, "from"},
		{"too many ports", map[string]any{"ports": many}, "ports"},
		{"port 0", map[string]any{"ports": []any{0}}, "ports"},
		{"bad protocol", map[string]any{"ports": []any{80}, "protocol": "sctp"}, "protocol"},
		{"protocol without ports", map[string]any{"protocol": "udp"}, "protocol"},
		{"unknown option", map[string]any{"chian": "LOGJAIL"}, "chian"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Builtin(nil).Build(&rules.Config{File: "logjail.yaml", Actions: []rules.Action{{Type: "iptables", Line: 7, Options: c.opts}}}, Env{})
			want := "logjail.yaml:7: actions[0]." + c.key + ":"
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Build(%v): error %v, want one with %q", c.opts, err, want)
			}
		})
	}
	b := iptTestBuild(t, map[string]any{"name": "fw", "chain": "LJ-web_1", "from": []any{"INPUT", "FORWARD"}, "target": "REJECT", "ports": []any{443, "80"}, "protocol": "tcp", "mode": "ipset"})
	if b.Name() != "fw" || b.ports != "80,443" || b.setName(true, true) != "lj-web_1-allow-v6" {
		t.Errorf("built %q with ports %q, allow set %q", b.Name(), b.ports, b.setName(true, true))
	}
	if b.fams[0] != nil {
		t.Errorf("the builder made the iptables clients: it must touch nothing")
	}
}
