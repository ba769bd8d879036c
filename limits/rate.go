package limits

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Rate is "N per PERIOD": over when the count of requests in (t−P, t] is
// above N. The period is second, minute, hour, day, month (30 days) or a
// duration of at least a second ("5 per 10s", "50 per 2d").
type Rate struct{}

var _ Kind = Rate{}

// Traits implements Kind.
func (Rate) Traits() Traits {
	return Traits{Code: 0, Weighs: Requests, Unit: "requests", Layout: Buckets}
}

// Parse implements Kind: "N per PERIOD".
func (Rate) Parse(f []string, _ int) (Limit, bool, error) {
	var l Limit
	if len(f) != 3 || f[1] != "per" {
		return l, false, nil
	}
	n, err := number(f[0])
	if err != nil {
		return l, true, fmt.Errorf("count %q: %w", f[0], err)
	}
	p, ok := unitOf(f[2])
	if f[2] == "month" {
		p, ok = 30*24*time.Hour, true
	}
	if !ok {
		if _, err := ParseDuration(f[2]); err != nil {
			return l, true, errors.New("unknown period")
		}
		if p, err = window(f[2]); err != nil {
			return l, true, err
		}
	}
	l.Kind, l.N, l.Window = Rate{}, n, p
	return l, true, nil
}

// Renumber implements Kind.
func (Rate) Renumber(f []string, n float64) { f[0] = strconv.FormatFloat(n, 'f', -1, 64) }

// FormatPeak implements Kind.
func (Rate) FormatPeak(v float64) string { return fmt.Sprintf("%.0f", v) }

// Compile implements Kind.
func (Rate) Compile(l *Limit, c Compiled) Compiled {
	compileBuckets(&c)
	c.thr = uint64(math.Floor(max(l.N, 0) + 1e-9))
	return c
}

// Charge implements Kind.
func (Rate) Charge(w *Window, a *Rings, c *Compiled, ns int64, _ Cost) (float64, bool) {
	return rateCharge(w, a, c, ns)
}

// rateCharge is Rate.Charge (Compiled.Charge calls it without the Kind).
func rateCharge(w *Window, a *Rings, c *Compiled, ns int64) (float64, bool) {
	sum := w.addBucket(a, bucket(ns, c.width), 1, c)
	return float64(sum), sum > c.thr
}

// Query implements Kind.
func (Rate) Query(w *Window, a *Rings, c *Compiled, ns int64) State {
	sum, over, sleep := w.bucketQuery(a, c, ns)
	return State{Count: int64(sum), Value: float64(sum), Over: over, Sleep: time.Duration(sleep)}
}

// Now implements Kind.
func (Rate) Now(w *Window, a *Rings, c *Compiled, ns int64) (float64, float64) {
	sum := w.bucketSum(a, c, ns)
	return ratio(float64(sum), sum, c)
}

// ratio is the ratio to the limit of a Buckets window of value v (sum
// stored).
func ratio(v float64, sum uint64, c *Compiled) (float64, float64) {
	switch {
	case c.N > 0:
		return v, v / c.N
	case sum > 0:
		return v, math.Inf(1)
	}
	return v, 0
}

// Explain implements Kind: "rate 31 per 10s > 30".
func (Rate) Explain(b *strings.Builder, c *Compiled, v float64) {
	fmt.Fprintf(b, "rate %d per %s > %s", int64(v), fmtDur(c.Window), fmtNum(c.N))
}
