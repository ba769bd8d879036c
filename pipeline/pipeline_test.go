package pipeline

import (
	"net/netip"
	"testing"
	"time"

	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/rules"
)

// TestProcessCountsAndStaticBans: the first entry brings the deny list's
// bans at its time; allowed, denied, exempt and charged entries are counted
// apart; a host address is never charged.
func TestProcessCountsAndStaticBans(t *testing.T) {
	cfg, err := rules.Parse("t.yaml", []byte(`
sources: [{name: web, paths: [/var/log/access.log], format: combined}]
allow: [198.51.100.1]
deny: [198.51.100.2]
ranges:
  office: {cidrs: [198.51.100.128/25], limits: none}
rules: [{name: flood, limits: ["2 per 10s"], ban: {for: 1m}}]
`), rules.Options{HostAddrs: []netip.Addr{netip.MustParseAddr("203.0.113.250")}})
	if err != nil {
		t.Fatal(err)
	}
	p := New(cfg)
	t0 := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	var all []detector.Decision
	for i, ip := range []string{"198.51.100.1", "198.51.100.2", "198.51.100.200", "203.0.113.250", "203.0.113.7", "203.0.113.7", "203.0.113.7",
		"198.51.100.1", "198.51.100.1", "198.51.100.200", "198.51.100.200", "203.0.113.250", "203.0.113.250"} {
		e := parser.Entry{IP: netip.MustParseAddr(ip), Time: t0.Add(time.Duration(i) * 100 * time.Millisecond)}
		all = p.Process(cfg.Sources[0], &e, all)
	}
	want := Counts{Entries: 13, Charged: 3, Allowed: 6, Exempt: 3, Denied: 1}
	if got := p.Counts(); got != want {
		t.Errorf("counts = %+v, want %+v", got, want)
	}
	var got []string
	for _, d := range all {
		got = append(got, string(d.Kind)+" "+d.Key+" "+d.Time.Format("05.0"))
	}
	wantD := []string{"ban 198.51.100.2 00.0", "ban 203.0.113.7 00.6"}
	if len(got) != len(wantD) || got[0] != wantD[0] || got[1] != wantD[1] {
		t.Errorf("decisions = %q, want %q", got, wantD)
	}
}
