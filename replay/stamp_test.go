package replay

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/logjail/logjail/parser"
)

// TestStampAsTime holds stamp's order to time.Time.Before's on random
// pairs: years 1 to 9999 (past UnixNano's range), equal seconds with
// other nanoseconds, the same instant in other zones, times with a
// monotonic reading; and observe's first and last to those Before and
// After find over random entries.
func TestStampAsTime(t *testing.T) {
	rnd := rand.New(rand.NewPCG(5, 6))
	zones := []*time.Location{time.UTC, time.FixedZone("x", 5*3600+1800), time.FixedZone("y", -11*3600)}
	rt := func() time.Time {
		var tm time.Time
		switch rnd.IntN(4) {
		case 0:
			tm = time.Date(1+rnd.IntN(9999), time.Month(1+rnd.IntN(12)), 1+rnd.IntN(28), rnd.IntN(24), rnd.IntN(60), rnd.IntN(60), rnd.IntN(1e9), time.UTC)
		case 1:
			tm = time.Unix(1_700_000_000+rnd.Int64N(4), rnd.Int64N(3))
		case 2:
			tm = time.Now().Add(time.Duration(rnd.Int64N(4)))
		default:
			tm = time.Unix(rnd.Int64N(1<<40)-1<<39, rnd.Int64N(1e9))
		}
		return tm.In(zones[rnd.IntN(len(zones))])
	}
	for range 200000 {
		a, b := rt(), rt()
		if got, want := stampOf(a).before(stampOf(b)), a.Before(b); got != want {
			t.Fatalf("%v before %v: stamps say %v, Before %v", a, b, got, want)
		}
	}
	var r Report
	var first, last time.Time
	for n := range 20000 {
		e := &parser.Entry{Time: rt()}
		if n == 0 || e.Time.Before(first) {
			first = e.Time
		}
		if n == 0 || e.Time.After(last) {
			last = e.Time
		}
		r.observe(e)
		if r.first != first || r.last != last {
			t.Fatalf("entry %d: observe's first and last %v, %v; want %v, %v", n, r.first, r.last, first, last)
		}
	}
}
