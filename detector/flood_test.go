package detector

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/logjail/logjail/rules"
)

// TestKeyFloodSparesViolators sprays 5M distinct /64 keys, 1000 a second of
// log time, at a detector that tracks 10,000 states, while one client goes
// over its limit and keeps violating its throttle, one entry every 15 s:
// 15,000 new keys between two of its entries, so that the least recently
// charged state is often the violator's. Eviction takes the allowed states
// first (the cold list), so the violator keeps its violations and is banned
// when they exceed ban.after, as it would be without the flood. (With one
// LRU list it was evicted, its violations forgotten, and never banned.)
func TestKeyFloodSparesViolators(t *testing.T) {
	const (
		sprayed  = 5_000_000
		perSec   = 1000
		every    = 15 // seconds between the violator's entries
		maxKeys  = 10_000
		after    = 300
		violator = "203.0.113.7"
	)
	r := &rules.Rule{
		Name: "flood", Limits: []rules.Limit{rate(20, 10*time.Second)},
		Throttle: &rules.Throttle{InitialDelay: 10 * time.Second, MaxDelay: 60 * time.Second, Quiet: 30 * time.Second},
		Ban:      rules.Ban{After: after, For: time.Hour},
	}
	d := New(Options{MaxKeys: maxKeys})
	var out []Decision
	c := rules.Charge{Rule: r, Key: violator, Addr: netip.MustParseAddr(violator)}
	// Over the limit at 0: throttled until 10; a violation at 5.
	for range 21 {
		out = d.Charge(at(0), &c, out)
	}
	out = d.Charge(at(5), &c, out)
	if len(out) != 2 || out[0].Kind != Throttle || out[1].Kind != Throttle || out[1].Violations != 1 {
		t.Fatalf("setup: %+v", out)
	}
	var ban *Decision
	buf := []byte("2001:db8:")
	spray := rules.Charge{Rule: r}
	for i := range sprayed {
		sec := 10 + float64(i)/perSec
		if i%(every*perSec) == 0 {
			out = d.Charge(at(sec), &c, out[:0])
			for j := range out {
				if out[j].Key == violator && out[j].Kind == Ban {
					ban = &out[j]
				}
			}
			if ban != nil {
				break
			}
		}
		b := strconv.AppendUint(buf[:9], uint64(i>>16), 16)
		b = append(b, ':')
		b = strconv.AppendUint(b, uint64(i&0xffff), 16)
		b = append(b, "::/64"...)
		spray.Key = string(b)
		out = d.Charge(at(sec), &spray, out[:0])
		if len(out) != 0 {
			t.Fatalf("a sprayed key made a decision: %+v", out)
		}
	}
	if ban == nil {
		t.Fatalf("the violator was never banned (forgotten by eviction); stats %+v", d.Stats())
	}
	if ban.Violations != after+1 {
		t.Errorf("ban after %d violations, want %d", ban.Violations, after+1)
	}
	st := d.Stats()
	if st.Keys > maxKeys || st.Evictions < 4_000_000 {
		t.Errorf("stats %+v: want at most %d keys and millions of evictions", st, maxKeys)
	}
}

// TestEvictionColdFirst: a throttled state is evicted only when no allowed
// state is left to evict, least recent first; once allowed again it is as
// any other.
func TestEvictionColdFirst(t *testing.T) {
	r := floodRule(100, 0) // throttles over 2 per 10s; bans after 100 violations
	var evicted []string
	d := New(Options{MaxKeys: 2, Evicted: func(kp KeyPeak) { evicted = append(evicted, strings.Clone(kp.Key)) }})
	run(d, r, keys("x", 0, 0, 0)) // throttled
	run(d, r, keys("a", 1))
	run(d, r, keys("b", 2))       // evicts a, not x (less recent, but throttled)
	run(d, r, keys("y", 3, 3, 3)) // evicts b, the only allowed one; y is throttled
	run(d, r, keys("c", 4))       // only throttled states left: evicts x, the least recent
	run(d, r, keys("z", 5))       // evicts c, not y
	if want := []string{"a", "b", "x", "c"}; !slices.Equal(evicted, want) {
		t.Errorf("evicted %q, want %q", evicted, want)
	}
	if k, _ := d.Status(r, "y", at(5)); k != Throttle {
		t.Errorf("y: %q, want throttled", k)
	}
}
