package eval

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/logjail/logjail/rules"
)

// TestEvaluate scores a small log whose every outcome is known: a true ban
// after exactly 6 requests, a missed attacker, a false ban, a ban of an
// unlabelled client, a /64 ban that reaches an attacker and a good client
// beside it, and a log_only ban that counts for nothing.
func TestEvaluate(t *testing.T) {
	const cfgYAML = `
state_dir: /var/lib/logjail
sources:
  - name: web
    paths: [/var/log/nginx/access.log]
    format: combined
rules:
  - name: burst
    match: {path: '^/a'}
    limits: ["5 per 10s"]
    ban: {for: 1h}
  - name: wide
    match: {path: '^/p'}
    key: prefix
    limits: ["5 per 10s"]
    ban: {for: 1h}
  - name: watch
    match: {path: '^/l'}
    limits: ["5 per 10s"]
    ban: {for: 1h}
    log_only: true
`
	cfg, err := rules.Parse("test.yaml", []byte(cfgYAML), rules.Options{HostAddrs: []netip.Addr{}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	var log strings.Builder
	sec := 0
	req := func(ip, path string, n int) {
		for range n {
			fmt.Fprintf(&log, "%s - - [%s] \"GET %s HTTP/1.1\" 200 512 \"-\" \"Mozilla/5.0\"\n",
				ip, start.Add(time.Duration(sec)*time.Second).Format("02/Jan/2006:15:04:05 -0700"), path)
			sec++
		}
	}
	req("203.0.113.1", "/a", 8)     // attacker, banned at its 6th request
	req("203.0.113.2", "/a", 2)     // attacker, missed
	req("198.51.100.7", "/a", 7)    // good, banned: a false ban
	req("198.51.100.8", "/a", 6)    // unlabelled, banned: unreviewed
	req("198.51.100.9", "/l", 9)    // attacker, banned by a log_only rule only: missed
	req("2001:db8:1:2::1", "/p", 4) // attacker; the /64's 6th request is the good neighbour's
	req("2001:db8:1:2::2", "/p", 3) // good, inside the banned /64: a false ban
	path := filepath.Join(t.TempDir(), "access.log")
	if err := os.WriteFile(path, []byte(log.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	p := func(s string) netip.Prefix { return netip.MustParsePrefix(s) }
	lg := Log{Name: "small", Files: []string{path}, Truth: []Truth{
		{p("203.0.113.1/32"), true, "8 x /a"},
		{p("203.0.113.2/32"), true, "2 x /a"},
		{p("198.51.100.7/32"), false, "7 x /a"},
		{p("198.51.100.9/32"), true, "9 x /l"},
		{p("2001:db8:1:2::1/128"), true, "4 x /p"},
		{p("2001:db8:1:2::2/128"), false, "3 x /p"},
	}}
	got, err := Evaluate(context.Background(), cfg, lg)
	if err != nil {
		t.Fatal(err)
	}
	want := Row{
		Log: "small", Lines: 39, Attackers: 4, Good: 2,
		TrueBans: 2, FalseBans: 2, Missed: 2,
		Unreviewed: []string{"198.51.100.8"},
		// 203.0.113.1: its 6th request; 2001:db8:1:2::1: its 4 requests,
		// all before the neighbour's 2nd, the /64's 6th, banned it.
		Before: []int{4, 6},
		FalseBanned: []string{
			"198.51.100.7/32 by burst (198.51.100.7): 7 x /a",
			"2001:db8:1:2::2/128 by wide (2001:db8:1:2::/64): 3 x /p",
		},
		Outcomes: []string{
			"banned 203.0.113.1/32 by burst (203.0.113.1) after 6: 8 x /a",
			"missed 203.0.113.2/32: 2 x /a",
			"missed 198.51.100.9/32: 9 x /l",
			"banned 2001:db8:1:2::1/128 by wide (2001:db8:1:2::/64) after 4: 4 x /p",
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
}

// TestWriteTable: the table a person reads, with its total row, the good
// clients banned, the unreviewed bans and the goals' status.
func TestWriteTable(t *testing.T) {
	rows := []Row{
		{Log: "a.log", Lines: 100, Attackers: 4, Good: 3, TrueBans: 3, Missed: 1, Before: []int{2, 5, 40}},
		{Log: "scenario/b", Lines: 20, Rejected: 1, Attackers: 1, Good: 2, TrueBans: 1, FalseBans: 1, Before: []int{3},
			FalseBanned: []string{"198.51.100.7/32 by flood (198.51.100.7): browser"}, Unreviewed: []string{"203.0.113.0/24"}},
	}
	var b strings.Builder
	if err := WriteTable(&b, rows); err != nil {
		t.Fatal(err)
	}
	want := `log         lines  rejected  attackers  good  true bans  false bans   missed  unreviewed  before median  before max
a.log         100         0          4     3          3           0  1 (25%)           0              5          40
scenario/b     20         1          1     2          1           1   0 (0%)           1              3           3
total         120         1          5     5          4           1  1 (20%)           1              3          40

good clients banned:
  scenario/b: 198.51.100.7/32 by flood (198.51.100.7): browser
unlabelled keys banned (unreviewed):
  scenario/b: 203.0.113.0/24

goals, enforced:
  false bans <= 0                          1        NOT MET
  missed <= 10%                            20.0%    NOT MET
  median requests before a ban <= 20       3        MET

`
	if diff := cmp.Diff(strings.Split(want, "\n"), strings.Split(b.String(), "\n")); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
}
