package limits

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// LastN is "last N within D" (the Apache snippet): over when the last N
// requests span less than D. A smaller span is the more severe (Lower).
type LastN struct{}

var _ Kind = LastN{}

// MaxLastN is the largest N of a "last N within D" limit: each key keeps
// the times of its last N requests (8 bytes each).
const MaxLastN = 10_000

// Traits implements Kind: a smaller span is the more severe.
func (LastN) Traits() Traits {
	return Traits{Code: 4, Weighs: Requests, Unit: "seconds", Lower: true, Layout: Times}
}

// Parse implements Kind: "last N within DURATION".
func (LastN) Parse(f []string, _ int) (Limit, bool, error) {
	var l Limit
	if f[0] != "last" {
		return l, false, nil
	}
	if len(f) != 4 || f[2] != "within" {
		return l, true, errors.New(`want "last N within DURATION"`)
	}
	n, err := strconv.Atoi(f[1])
	if err != nil || n < 2 {
		return l, true, fmt.Errorf("count %q: want a whole number of at least 2", f[1])
	}
	if n > MaxLastN {
		return l, true, fmt.Errorf("count %d: at most %d (each key keeps the times of its last N requests)", n, MaxLastN)
	}
	d, err := ParseDuration(f[3])
	if err != nil {
		return l, true, err
	}
	if d <= 0 {
		return l, true, errors.New("span must be positive")
	}
	l.Kind, l.N, l.Window = LastN{}, float64(n), d
	return l, true, nil
}

// Renumber implements Kind: N is whole.
func (LastN) Renumber(f []string, n float64) {
	f[1] = strconv.FormatFloat(math.Round(n), 'f', -1, 64)
}

// FormatPeak implements Kind.
func (LastN) FormatPeak(v float64) string { return fmt.Sprintf("%.2fs", v) }

// Compile implements Kind.
func (LastN) Compile(l *Limit, c Compiled) Compiled {
	c.lastN = min(max(int(l.N), 1), MaxRing)
	return c
}

// Charge implements Kind: it records a request at ns; the value is the
// span of the last N requests in seconds (+Inf while there have been
// fewer).
func (LastN) Charge(w *Window, a *Rings, c *Compiled, ns int64, _ Cost) (float64, bool) {
	t := uint64(max(ns, 0))
	r := w.ring(a)
	switch {
	case int(w.n) < c.lastN:
		r = w.push(a, t, c.lastN)
		w.sinkNewest(r, identity)
	case t > *w.at(r, 0):
		w.popOldest(r)
		r = w.push(a, t, c.lastN)
		w.sinkNewest(r, identity)
	}
	if int(w.n) < c.lastN {
		return math.Inf(1), false
	}
	span := int64(*w.at(r, w.n-1) - *w.at(r, 0))
	return float64(span) / 1e9, span < c.Window
}

func identity(x uint64) uint64 { return x }

// Query implements Kind.
func (LastN) Query(w *Window, a *Rings, c *Compiled, ns int64) State {
	r := w.ring(a)
	s := State{Count: int64(w.n)}
	if int(w.n) < c.lastN {
		s.Value = math.Inf(1)
		return s
	}
	// The next request is over while the oldest of the last N but one
	// is within the window of it.
	oldest := int64(*w.at(r, 1%w.n))
	if c.lastN == 1 {
		oldest = int64(*w.at(r, 0))
	}
	s.Value = float64(int64(*w.at(r, w.n-1))-int64(*w.at(r, 0))) / 1e9
	if ns-oldest < c.Window {
		s.Over = true
		s.Sleep = time.Duration(oldest + c.Window - ns)
	}
	return s
}

// Now implements Kind: the span of the last N requests if one came at ns
// (the newest N−1 recorded and this one), and D over it.
func (LastN) Now(w *Window, a *Rings, c *Compiled, ns int64) (float64, float64) {
	if c.lastN < 2 {
		return 0, math.Inf(1)
	}
	if int(w.n) < c.lastN-1 {
		return math.Inf(1), 0
	}
	r := w.ring(a)
	oldest := *w.at(r, w.n-uint16(c.lastN-1))
	span := float64(max(ns-int64(oldest), 0)) / 1e9
	if span == 0 {
		return 0, math.Inf(1)
	}
	return span, float64(c.Window) / 1e9 / span
}

// Explain implements Kind: "last 10 within 1.5s < 2s".
func (LastN) Explain(b *strings.Builder, c *Compiled, v float64) {
	fmt.Fprintf(b, "last %d within %s < %s", c.lastN, time.Duration(v*1e9).Round(time.Millisecond), fmtDur(c.Window))
}
