package rules

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestGroupRanges: a group range's addresses are its CIDRs less the ranges
// nested in them (whatever their mode), with a CIDR inside another of the
// same range counted once; ranges without group: true have no key. An
// address lies in the pieces of its most specific range alone.
func TestGroupRanges(t *testing.T) {
	cfg, err := Parse("test.yaml", []byte(`sources:
  - name: web
    paths: [/x.log]
    format: combined
good_bots: {verify: off}            # the operator's ranges alone (TestGoodBotsGroupRanges has the crawlers')
ranges:
  bots:
    cidrs: [198.51.100.0/24, 198.51.100.64/26, 2001:db8::/112, 198.51.100.20/32]
    group: true
    limits: ["100 per second"]
  partners:
    cidrs: [198.51.100.16/28]
    limits: none
  crawler:
    cidrs: [2001:db8::/120]
    group: true
    limits: ["100 per second"]
  office:
    cidrs: [203.0.113.0/24]
    limits: ["100 per second"]
rules:
  - name: flood
    limits: ["5 per 10s"]
    ban: {for: 1h}
`), Options{HostAddrs: []netip.Addr{}})
	if err != nil {
		t.Fatal(err)
	}
	pfx := func(ss ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range ss {
			out = append(out, netip.MustParsePrefix(s))
		}
		return out
	}
	want := map[string][]netip.Prefix{
		// .16/28 is the partners' but for .20, which is bots' again.
		"range:bots": pfx("198.51.100.0/28", "198.51.100.20/32", "198.51.100.32/27", "198.51.100.64/26", "198.51.100.128/25",
			"2001:db8::100/120", "2001:db8::200/119", "2001:db8::400/118", "2001:db8::800/117", "2001:db8::1000/116",
			"2001:db8::2000/115", "2001:db8::4000/114", "2001:db8::8000/113"),
		"range:crawler": pfx("2001:db8::/120"),
	}
	got := cfg.GroupRanges()
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("GroupRanges (-want +got):\n%s", diff)
	}
	for _, c := range []struct{ addr, key string }{
		{"198.51.100.1", "range:bots"},
		{"198.51.100.17", ""},
		{"198.51.100.20", "range:bots"},
		{"198.51.100.200", "range:bots"},
		{"2001:db8::5", "range:crawler"},
		{"2001:db8::ffff", "range:bots"},
		{"2001:db8::1:5", ""},
		{"203.0.113.5", ""},
	} {
		a := netip.MustParseAddr(c.addr)
		var in string
		for k, ps := range got {
			for _, p := range ps {
				if p.Contains(a) {
					if in != "" {
						t.Errorf("%s is in %s and in %s", a, in, k)
					}
					in = k
				}
			}
		}
		if in != c.key {
			t.Errorf("%s is in %q, want %q", a, in, c.key)
		}
	}
}
