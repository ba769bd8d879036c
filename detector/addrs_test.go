package detector

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/logjail/logjail/rules"
)

// TestAddressesSeenPerRule: the addresses a state saw, with their times,
// are that (rule, key)'s own, whether it keeps its one address as its
// key's (flagOne) or in its own run: a stream of prefix keys charged under
// three rules (each from some entries only), from one to four addresses a
// key, late entries, entries without an address, blocked entries and
// operator bans, checked after every step against a model of what each
// (rule, key) saw (an address, the newest time it was charged from it),
// and after a checkpoint's restore.
func TestAddressesSeenPerRule(t *testing.T) {
	cfg := parseConfig(t, `
skew: 5s
sources:
  - {name: web, paths: [/var/log/nginx/access.log], format: combined}
rules:
  - name: flood
    limits: ["4 per 10s"]
    throttle: {initial_delay: 5s, max_delay: 20s, quiet: 3s}
    ban: {after: 2, for: 30s}
  - name: scanners
    limits: ["3 per 10s"]
    ban: {for: 20s}
  - name: quiet
    limits: ["100 per 10s"]
`)
	rs := cfg.Rules
	rnd := rand.New(rand.NewPCG(15, 64))
	keys := []string{"2001:db8:1::/64", "2001:db8:2::/64", "2001:db8:3::/64", "2001:db8:4::/64"}
	addrsOf := func(k int) []netip.Addr {
		var as []netip.Addr
		for j := range k + 1 { // key k has k+1 addresses
			as = append(as, netip.MustParseAddr(fmt.Sprintf("2001:db8:%d::%d", k+1, j+1)))
		}
		return as
	}
	type rk struct{ rule, key string }
	model := map[rk]map[netip.Addr]int64{}
	d := detectorFor(cfg)

	dump := func(d *Detector, r, key string) []string {
		_, s := d.find(cfg.Rule(r), key)
		if s == nil {
			return nil
		}
		var got []string
		for _, a := range d.seenAddrs(s) {
			got = append(got, fmt.Sprintf("%s@%d", a.addr(), a.seen))
		}
		slices.Sort(got)
		return got
	}
	want := func(k rk) []string {
		var w []string
		for a, ns := range model[k] {
			w = append(w, fmt.Sprintf("%s@%d", a, ns))
		}
		slices.Sort(w)
		return w
	}
	check := func(step int, d *Detector, what string) {
		t.Helper()
		for k := range model {
			if got, w := dump(d, k.rule, k.key), want(k); !slices.Equal(got, w) {
				t.Fatalf("step %d (%s): %s %s: addresses %v, want %v", step, what, k.rule, k.key, got, w)
			}
		}
	}

	var out []Decision
	newest := int64(0)
	sec := 0.0
	var ones, runs int
	for step := range 4000 {
		sec += float64(rnd.IntN(3)) / 2
		tm := at(sec)
		if rnd.IntN(6) == 0 {
			tm = at(sec - float64(rnd.IntN(16))/2) // late, up to 2.5s past the skew
		}
		k := rnd.IntN(len(keys))
		key := keys[k]
		if rnd.IntN(40) == 0 {
			r := rs[rnd.IntN(len(rs))]
			d.Impose(at(sec), r, key, at(sec+15), "operator")
			if _, ok := model[rk{r.Name, key}]; !ok {
				model[rk{r.Name, key}] = map[netip.Addr]int64{}
			}
			check(step, d, "impose")
			continue
		}
		as := addrsOf(k)
		addr := as[rnd.IntN(len(as))]
		if rnd.IntN(25) == 0 {
			addr = netip.Addr{} // an entry whose address the key does not keep
		}
		ns := tm.UnixNano()
		moves := newest == 0 || ns > newest // Charge first ends the bans due by ns
		if moves {
			newest = ns
		} else if ns < newest-int64(5*time.Second) {
			ns = newest - int64(5*time.Second)
		}
		for _, r := range rs {
			if r.Name != "flood" && rnd.IntN(3) == 0 {
				continue // this entry is not charged under r
			}
			id := rk{r.Name, key}
			if model[id] == nil {
				model[id] = map[netip.Addr]int64{}
			}
			_, s := d.find(r, key)
			banned := s != nil && s.phase == phaseBanned && !(moves && d.xOf(s).until <= ns)
			if !banned && addr.IsValid() {
				model[id][addr] = max(model[id][addr], ns)
			}
			c := rules.Charge{Rule: r, Key: key, Addr: addr}
			out = d.Charge(tm, &c, out[:0])
		}
		check(step, d, "charge")
		for i := int32(0); i < d.used; i++ {
			if s := d.at(i); s.kid != 0 && s.flags&flagOne != 0 {
				ones++
			} else if s.kid != 0 && len(d.seenAddrs(s)) > 0 {
				runs++
			}
		}
		if step%500 == 499 {
			r := New(Options{Skew: cfg.Skew, MaxKeys: cfg.MaxKeys, MaxBansPerMinute: cfg.MaxBansPerMinute})
			var states []*KeyState
			d.Changes(func(ks *KeyState) {
				c := *ks
				c.Data = slices.Clone(ks.Data)
				states = append(states, &c)
			})
			if _, err := r.Restore(cfg, d.SaveGlobal(), slices.Values(states)); err != nil {
				t.Fatal(err)
			}
			check(step, r, "restored")
		}
	}
	if ones == 0 || runs == 0 {
		t.Errorf("states seen with the key's one address %d times, with their own run %d times: want both", ones, runs)
	}
}
