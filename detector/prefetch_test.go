package detector

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/logjail/logjail/rules"
)

// TestPrefetchChangesNothing charges the same 400k events, over 100k keys
// (past prefetchSlots: Prefetch works) of an address rule and a /64 rule
// that throttle and ban, into two detectors, one with Prefetch called for
// the three events ahead of each charge as replay's merger calls it (and
// for keys never charged, and a zero key): the same decisions, in the same
// order, and the same counters.
func TestPrefetchChangesNothing(t *testing.T) {
	cfg := &rules.Config{IPv4Prefix: 24, IPv6Prefix: 64}
	ip := &rules.Rule{Name: "ip", Key: rules.KeyIP, Limits: []rules.Limit{rate(8, 10*time.Second)},
		Throttle: &rules.Throttle{InitialDelay: time.Second, MaxDelay: 8 * time.Second, Quiet: 30 * time.Second},
		Ban:      rules.Ban{After: 2, For: time.Minute}}
	pfx := &rules.Rule{Name: "pfx", Key: rules.KeyPrefix, Limits: []rules.Limit{rate(30, 10*time.Second)}, Ban: rules.Ban{For: 2 * time.Minute}}
	const keys, events = 100_000, 400_000
	addr := func(i int) netip.Addr {
		k := uint32(i*2654435761) % keys // every key, in a scattered order
		if k%7 == 0 {
			k %= 97 // some hot keys, to trip the limits
		}
		return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 4: byte(k >> 16), 5: byte(k >> 8), 6: byte(k), 9: byte(k % 3), 15: 1})
	}
	charges := func(i int) [2]rules.Charge {
		a := addr(i)
		return [2]rules.Charge{{Rule: ip, Fixed: cfg.IPFixed(a), Addr: a}, {Rule: pfx, Fixed: cfg.PrefixFixed(a), Addr: a}}
	}
	run := func(hint bool) ([]string, Stats, bool) {
		d := New(Options{MaxKeys: 3 * keys})
		var got []string
		var out []Decision
		prefetching := false
		for i := range events {
			if hint {
				prefetching = prefetching || d.Prefetching()
				for a := range 3 {
					for _, c := range charges(i + 1 + a) {
						d.Prefetch(c.Fixed, a)
					}
				}
				d.Prefetch(cfg.IPFixed(netip.MustParseAddr("2001:db8:ffff::1")), i%3)
				d.Prefetch(rules.FixedKey{}, i%3)
			}
			now := at(float64(i) / 2000)
			for _, c := range charges(i) {
				out = d.Charge(now, &c, out[:0])
				for _, dec := range out {
					got = append(got, fmt.Sprintf("%s %s %s %s %s %v %d %v %s", dec.Rule, dec.Key, dec.Kind, dec.Time, dec.Until, dec.Delay, dec.Violations, dec.Addresses, dec.Reason))
				}
			}
		}
		return got, d.Stats(), prefetching
	}
	plain, plainStats, _ := run(false)
	hinted, hintedStats, prefetching := run(true)
	if !prefetching {
		t.Fatalf("Prefetching never reported true at %d keys: the test did not prefetch", plainStats.Keys)
	}
	if plainStats.Bans == 0 || plainStats.Throttles == 0 {
		t.Fatalf("no ban or no throttle (%+v): the test decides nothing", plainStats)
	}
	if plainStats != hintedStats {
		t.Fatalf("stats with Prefetch %+v, without %+v", hintedStats, plainStats)
	}
	if len(plain) != len(hinted) {
		t.Fatalf("%d decisions with Prefetch, %d without", len(hinted), len(plain))
	}
	for i := range plain {
		if plain[i] != hinted[i] {
			t.Fatalf("decision %d with Prefetch: %s; without: %s", i, hinted[i], plain[i])
		}
	}
}
