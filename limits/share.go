package limits

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Share is "X% cpu over W" (Weight CPU) or "X% duration over W" (Weight
// Duration): over when the seconds of that cost in (t−W, t] divided by W
// are above N (0.07 for 7%: a share of one core). "of machine" after the
// window makes it a share of all the machine's cores: N is multiplied by
// the core count, and the reason divides by it again.
//
// The two are one type: they differ only in the cost they weigh and the
// word that names it.
type Share struct {
	Weight Weight // CPU or Duration
}

var _ Kind = Share{}

// Share buckets hold cost in units small enough for this many busy cores
// (or concurrent requests, for durations) within 32 bits.
const shareHeadroom = 128

// word is the share's word in a limit: cpu or duration.
func (s Share) word() string {
	if s.Weight == Duration {
		return "duration"
	}
	return "cpu"
}

// Traits implements Kind: a cpu share is number 1, a duration share 2.
func (s Share) Traits() Traits {
	code := uint64(1)
	if s.Weight == Duration {
		code = 2
	}
	return Traits{Code: code, Weighs: s.Weight, Unit: "share", Layout: Buckets}
}

// Parse implements Kind: "X% cpu|duration over DURATION [of machine]".
// Share{} reads both words (the table's one entry for shares).
func (Share) Parse(f []string, cores int) (Limit, bool, error) {
	var l Limit
	if !strings.HasSuffix(f[0], "%") {
		return l, false, nil
	}
	if len(f) != 4 && !(len(f) == 6 && f[4] == "of" && f[5] == "machine") {
		return l, true, errors.New(`want "X% cpu over DURATION [of machine]"`)
	}
	switch f[1] {
	case "cpu":
		l.Kind = Share{Weight: CPU}
	case "duration":
		l.Kind = Share{Weight: Duration}
	default:
		return l, true, fmt.Errorf("unknown share %q: want cpu or duration", f[1])
	}
	if f[2] != "over" {
		return l, true, errors.New(`want "X% cpu over DURATION [of machine]"`)
	}
	pct, err := number(strings.TrimSuffix(f[0], "%"))
	if err != nil {
		return l, true, fmt.Errorf("share %q: %w", f[0], err)
	}
	w, err := window(f[3])
	if err != nil {
		return l, true, err
	}
	l.N, l.Window = pct/100, w
	if len(f) == 6 {
		l.OfMachine, l.Cores = true, cores
		l.N *= float64(cores)
	}
	return l, true, nil
}

// Renumber implements Kind.
func (Share) Renumber(f []string, n float64) { f[0] = strconv.FormatFloat(n, 'f', -1, 64) + "%" }

// FormatPeak implements Kind.
func (Share) FormatPeak(v float64) string { return fmt.Sprintf("%.1f%%", v*100) }

// Compile implements Kind.
func (Share) Compile(l *Limit, c Compiled) Compiled {
	compileBuckets(&c)
	c.unit = max(int64(time.Microsecond), (c.width*shareHeadroom+maxUint32-1)/maxUint32)
	c.thr = uint64(math.Floor(max(l.N, 0)*float64(c.Window)/float64(c.unit) + 1e-6))
	return c
}

// Charge implements Kind.
func (s Share) Charge(w *Window, a *Rings, c *Compiled, ns int64, cost Cost) (float64, bool) {
	sec := cost.CPU
	if s.Weight == Duration {
		sec = cost.Duration
	}
	return shareCharge(w, a, c, ns, sec)
}

// shareCharge is Share.Charge of a request of sec seconds of the share's
// weight (Compiled.Charge calls it without the Kind).
func shareCharge(w *Window, a *Rings, c *Compiled, ns int64, sec float64) (float64, bool) {
	sum := w.addBucket(a, bucket(ns, c.width), units(sec, c.unit), c)
	return float64(sum) * float64(c.unit) / float64(c.Window), sum > c.thr
}

// units converts seconds of cost to stored units, rounding to the nearest.
func units(sec float64, unit int64) uint64 {
	if !(sec > 0) {
		return 0
	}
	return uint64(math.Min(sec*1e9/float64(unit)+0.5, maxUint32))
}

// Query implements Kind.
func (Share) Query(w *Window, a *Rings, c *Compiled, ns int64) State {
	sum, over, sleep := w.bucketQuery(a, c, ns)
	return State{Value: float64(sum) * float64(c.unit) / float64(c.Window), Over: over, Sleep: time.Duration(sleep)}
}

// Now implements Kind.
func (Share) Now(w *Window, a *Rings, c *Compiled, ns int64) (float64, float64) {
	sum := w.bucketSum(a, c, ns)
	return ratio(float64(sum)*float64(c.unit)/float64(c.Window), sum, c)
}

// Explain implements Kind: "cpu 12.4% over 15s > 7%". A share "of
// machine" reads as written: a share of all the cores, not of one.
func (s Share) Explain(b *strings.Builder, c *Compiled, v float64) {
	of, cores := "", 1.0
	if c.cores > 0 {
		of, cores = " of machine", float64(c.cores)
	}
	fmt.Fprintf(b, "%s %.1f%% over %s%s > %s%%", s.word(), v*100/cores, fmtDur(c.Window), of, fmtNum(c.N*100/cores))
}
