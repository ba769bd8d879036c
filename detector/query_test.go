package detector

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/logjail/logjail/limits"
	"github.com/logjail/logjail/rules"
)

// TestQuery: the windows a Cerberus query reads, and how long until each
// falls back within its limit, without changing the state.
func TestQuery(t *testing.T) {
	r := &rules.Rule{Name: "flood", Limits: []rules.Limit{
		{Kind: limits.Rate{}, N: 5, Window: 10 * time.Second, Text: "5 per 10s"},
		{Kind: limits.Rate{}, N: 100, Window: time.Minute, Text: "100 per minute"},
	}, Ban: rules.Ban{For: time.Minute, After: 3}, Throttle: &rules.Throttle{InitialDelay: 5 * time.Second, MaxDelay: time.Minute, Quiet: time.Second}}
	d := New(Options{})
	if _, ok := d.Query(r, "198.51.100.7", at(0)); ok {
		t.Fatal("an untracked key is reported")
	}
	// 3 requests at 0 s, 4 at 2 s: 7 in the 10 s window.
	run(d, r, append(keys("198.51.100.7", 0, 0, 0), keys("198.51.100.7", 2, 2, 2, 2)...))
	q, ok := d.Query(r, "198.51.100.7", at(2.5))
	if !ok || len(q.Limits) != 2 {
		t.Fatalf("Query = %+v, %v", q, ok)
	}
	l := q.Limits[0]
	if l.Count != 7 || !l.Over || l.Limit != "5 per 10s" || l.Window != 10*time.Second {
		t.Errorf("first limit %+v, want 7 over 5 per 10s", l)
	}
	// The 3 requests of second 0 leave the window at 10 s: 4 remain, within.
	if l.Sleep != 7500*time.Millisecond {
		t.Errorf("sleep %v, want 7.5s (the bucket of second 0 leaves at 10 s)", l.Sleep)
	}
	if m := q.Limits[1]; m.Count != 7 || m.Over || m.Sleep != 0 {
		t.Errorf("second limit %+v, want 7, within, no sleep", m)
	}
	if q.Kind != Throttle {
		t.Errorf("ladder %q, want a throttle", q.Kind)
	}
	// Reading changes nothing: the same answer again, and later the window
	// has slid.
	if q2, _ := d.Query(r, "198.51.100.7", at(2.5)); q2.Limits[0] != l {
		t.Errorf("a second query differs: %+v", q2.Limits[0])
	}
	if q3, _ := d.Query(r, "198.51.100.7", at(10)); q3.Limits[0].Count != 4 || q3.Limits[0].Over || q3.Limits[0].Sleep != 0 {
		t.Errorf("at 10 s: %+v, want 4 within", q3.Limits[0])
	}
	if q4, _ := d.Query(r, "198.51.100.7", at(12)); q4.Limits[0].Count != 0 {
		t.Errorf("at 12 s: %+v, want an empty window", q4.Limits[0])
	}
}

// TestCharged: the requests a ban came after are the entries charged to
// the (rule, key), the banning one included; entries seen while banned are
// not charged, and an untracked key or rule says so.
func TestCharged(t *testing.T) {
	r := &rules.Rule{Name: "flood", Limits: []rules.Limit{
		{Kind: limits.Rate{}, N: 5, Window: 10 * time.Second, Text: "5 per 10s"},
	}, Ban: rules.Ban{For: time.Minute}}
	d := New(Options{})
	if _, ok := d.Charged(r, "198.51.100.7"); ok {
		t.Fatal("an untracked key is reported")
	}
	// Banned at its 6th request (1.5 s), then 3 more while banned.
	out := run(d, r, keys("198.51.100.7", 0, 0.3, 0.6, 0.9, 1.2, 1.5, 1.8, 2.1, 2.4))
	if len(out) != 1 || out[0].Kind != Ban || !out[0].Time.Equal(at(1.5)) {
		t.Fatalf("decisions %+v, want one ban at 1.5 s", out)
	}
	if n, ok := d.Charged(r, "198.51.100.7"); !ok || n != 6 {
		t.Errorf("Charged = %d, %v; want 6 (the entries up to the ban)", n, ok)
	}
	if _, ok := d.Charged(&rules.Rule{Name: "other"}, "198.51.100.7"); ok {
		t.Error("a rule that charged nothing is reported")
	}
}

// TestQueryOfAsQuery: ChargedOf and QueryOf, by a charge's fixed key, read
// what Charged and Query read by the key's text, for address and /64 keys,
// tracked, throttled, banned and unknown.
func TestQueryOfAsQuery(t *testing.T) {
	cfg := &rules.Config{IPv4Prefix: 24, IPv6Prefix: 64}
	ip := &rules.Rule{Name: "ip", Key: rules.KeyIP, Limits: []rules.Limit{rate(5, 10*time.Second)},
		Throttle: &rules.Throttle{InitialDelay: time.Second, MaxDelay: 4 * time.Second, Quiet: 30 * time.Second},
		Ban:      rules.Ban{After: 1, For: time.Minute}}
	pfx := &rules.Rule{Name: "pfx", Key: rules.KeyPrefix, Limits: []rules.Limit{rate(12, 10*time.Second)}, Ban: rules.Ban{For: time.Minute}}
	d := New(Options{})
	var out []Decision
	addrs := []netip.Addr{netip.MustParseAddr("198.51.100.7"), netip.MustParseAddr("203.0.113.9"),
		netip.MustParseAddr("2001:db8:1:2::5"), netip.MustParseAddr("2001:db8:1:2::6")}
	seen := map[Kind]bool{}
	for i := range 60 {
		a := addrs[i%len(addrs)]
		if i%5 == 0 {
			a = addrs[0]
		}
		now := at(float64(i) / 4)
		for _, r := range []*rules.Rule{ip, pfx} {
			c := rules.Charge{Rule: r, Fixed: cfg.IPFixed(a), Addr: a}
			if r == pfx {
				c.Fixed = cfg.PrefixFixed(a)
			}
			out = d.Charge(now, &c, out[:0])
			for _, b := range append(addrs, netip.MustParseAddr("198.51.100.200")) {
				for _, r := range []*rules.Rule{ip, pfx} {
					byText := rules.Charge{Rule: r, Key: cfg.IPKey(b)}
					byFixed := rules.Charge{Rule: r, Fixed: cfg.IPFixed(b)}
					if r == pfx {
						byText.Key, byFixed.Fixed = cfg.PrefixKey(b), cfg.PrefixFixed(b)
					}
					n, ok := d.Charged(r, byText.Key)
					nf, okf := d.ChargedOf(&byFixed)
					if n != nf || ok != okf {
						t.Fatalf("at %d, %s %s: Charged %d %v, ChargedOf %d %v", i, r.Name, byText.Key, n, ok, nf, okf)
					}
					q, ok := d.Query(r, byText.Key, now)
					qf, okf := d.QueryOf(&byFixed, now)
					if fmt.Sprint(q) != fmt.Sprint(qf) || ok != okf {
						t.Fatalf("at %d, %s %s: Query %+v %v, QueryOf %+v %v", i, r.Name, byText.Key, q, ok, qf, okf)
					}
					seen[q.Kind] = true
				}
			}
		}
	}
	if !seen[Ban] || !seen[Throttle] {
		t.Fatalf("kinds seen %v: the test never read a throttled and a banned key", seen)
	}
}
