package actions_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/logjail/logjail/actions"
	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/endpoint"
	"github.com/logjail/logjail/state"
)

// TestRangeBanEndpointView: the decision endpoint's view of the bans
// (endpoint.Bans, an actions backend) driven by the manager answers a ban
// for an address of a banned range that no log showed, from the store at
// start and from a decision, and none for an allowed address inside the
// range or one outside it; after a reload that drops the range, only the
// addresses recorded with the ban stay blocked.
func TestRangeBanEndpointView(t *testing.T) {
	ranges := map[string][]netip.Prefix{
		"range:bots":  {netip.MustParsePrefix("198.51.100.0/25"), netip.MustParsePrefix("2001:db8::/120")},
		"range:cloud": {netip.MustParsePrefix("203.0.113.0/24")},
	}
	now := time.Now()
	view := endpoint.NewBans("endpoint")
	m := actions.NewManager([]actions.Configured{{Backend: view, Type: "endpoint", Kinds: []actions.Kind{actions.KindThrottle, actions.KindBan}}},
		actions.ManagerOptions{Sweep: time.Hour, Ranges: ranges})
	// range:cloud was banned before the restart; the detector saw one
	// address of it.
	m.Load([]state.Ban{{Rule: "range:cloud", Key: "range:cloud", Kind: "ban", Until: now.Add(time.Hour),
		Addresses: []netip.Addr{netip.MustParseAddr("203.0.113.1")}}}, []netip.Prefix{netip.MustParsePrefix("198.51.100.7/32")})
	m.Start(context.Background())
	defer m.Close()
	wait := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, want map[string]string) {
		t.Helper()
		wait()
		for a, key := range want {
			e, ok := view.Lookup(netip.MustParseAddr(a), time.Now())
			switch {
			case key == "" && ok:
				t.Errorf("%s: %s is blocked by %s (%s), want it let through", what, a, e.Key, e.Kind)
			case key != "" && (!ok || e.Kind != actions.KindBan || e.Key != key):
				t.Errorf("%s: %s: %+v %v, want banned by %s", what, a, e, ok, key)
			}
		}
	}
	check("range:cloud loaded from the store", map[string]string{
		"203.0.113.200": "range:cloud", // never seen
		"198.51.100.77": "",
	})

	d := detector.Decision{Rule: "range:bots", Key: "range:bots", Kind: detector.Ban, Time: now, Until: now.Add(time.Hour),
		Reason: "rate 6 per 10s > 5 (rule range:bots)", Addresses: []netip.Addr{netip.MustParseAddr("198.51.100.9")}}
	m.Decisions([]detector.Decision{d})
	want := map[string]string{
		"198.51.100.9":   "range:bots", // seen
		"198.51.100.77":  "range:bots", // never seen
		"2001:db8::ab":   "range:bots", // never seen, the range's IPv6 CIDR
		"198.51.100.7":   "",           // allowed, inside the range
		"198.51.100.200": "",           // outside
		"2001:db8::1:1":  "",           // outside
		"203.0.113.200":  "range:cloud",
	}
	check("range:bots banned", want)

	// A reload removes range:cloud: its ban keeps the address it saw.
	m.SetRanges(map[string][]netip.Prefix{"range:bots": ranges["range:bots"]})
	want["203.0.113.200"], want["203.0.113.1"] = "", "range:cloud"
	check("range:cloud gone from the configuration", want)

	m.Decisions([]detector.Decision{{Rule: "range:bots", Key: "range:bots", Kind: detector.Unban, Time: now}})
	for a := range want {
		want[a] = ""
	}
	want["203.0.113.1"] = "range:cloud"
	check("range:bots lifted", want)
}
