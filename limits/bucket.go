package limits

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Bucket is "RATE/UNIT [burst B]", a token bucket as nginx's limit_req: N
// tokens a second (Limit.N, from RATE per UNIT: s, m, h or d), Burst at
// most (1 unless given); over when a request finds less than one token.
// Its Limit.Window is the time the bucket takes to fill, Burst/N.
type Bucket struct{}

var _ Kind = Bucket{}

// Traits implements Kind.
func (Bucket) Traits() Traits {
	return Traits{Code: 3, Weighs: Requests, Unit: "tokens", Layout: Tokens}
}

// Parse implements Kind: "RATE/UNIT [burst N]".
func (Bucket) Parse(f []string, _ int) (Limit, bool, error) {
	var l Limit
	if !strings.Contains(f[0], "/") {
		return l, false, nil
	}
	num, unit, _ := strings.Cut(f[0], "/")
	per, ok := unitOf(unit)
	for _, name := range []string{"second", "minute", "hour", "day"} {
		if unit == name[:1] { // s, m, h, d
			per, ok = unitOf(name)
		}
	}
	if !ok {
		return l, true, fmt.Errorf("unknown rate unit %q: want s, m, h or d", unit)
	}
	r, err := number(num)
	if err != nil {
		return l, true, fmt.Errorf("rate %q: %w", num, err)
	}
	if r <= 0 {
		return l, true, errors.New("rate must be positive")
	}
	burst := 1.0
	switch {
	case len(f) == 1:
	case len(f) == 3 && f[1] == "burst":
		burst, err = number(f[2])
		if err != nil {
			return l, true, fmt.Errorf("burst %q: %w", f[2], err)
		}
		if burst < 1 {
			return l, true, errors.New("burst must be at least 1")
		}
	default:
		return l, true, errors.New(`want "RATE/UNIT [burst N]"`)
	}
	l.Kind, l.N, l.Burst = Bucket{}, r/per.Seconds(), burst
	// The time the bucket takes to fill its burst.
	l.Window = time.Duration(burst / l.N * float64(time.Second))
	return l, true, nil
}

// Renumber implements Kind.
func (Bucket) Renumber(f []string, n float64) {
	_, unit, _ := strings.Cut(f[0], "/")
	f[0] = strconv.FormatFloat(n, 'f', -1, 64) + "/" + unit
}

// FormatPeak implements Kind.
func (Bucket) FormatPeak(v float64) string { return fmt.Sprintf("%.1f", v) }

// Compile implements Kind.
func (Bucket) Compile(l *Limit, c Compiled) Compiled {
	c.burst = max(l.Burst, 1)
	return c
}

// tokensAt is the tokens the bucket holds at ns, refilled since its last
// request, without changing it.
func (w *Window) tokensAt(c *Compiled, ns int64) float64 {
	tokens := w.tokens()
	if t := uint64(max(ns, 0)); t > w.acc {
		tokens = min(c.burst, tokens+float64(t-w.acc)/1e9*c.N)
	}
	return tokens
}

// Charge implements Kind: it takes one token at ns; the value is the
// bucket's level before it, in requests, counting this one, over when
// above the burst.
func (Bucket) Charge(w *Window, _ *Rings, c *Compiled, ns int64, _ Cost) (float64, bool) {
	t := uint64(max(ns, 0))
	if w.n == 0 {
		w.n, w.acc = 1, t
		w.setTokens(c.burst)
	}
	tokens := w.tokens()
	if t > w.acc {
		tokens = min(c.burst, tokens+float64(t-w.acc)/1e9*c.N)
		w.acc = t
	}
	level := c.burst - tokens + 1
	w.setTokens(tokens - 1)
	return level, level > c.burst+1e-9
}

// Query implements Kind.
func (Bucket) Query(w *Window, _ *Rings, c *Compiled, ns int64) State {
	var s State
	if w.n == 0 {
		return s
	}
	tokens := w.tokensAt(c, ns)
	s.Value = c.burst - tokens
	// The next request is over while fewer than one token is left.
	if tokens < 1-1e-9 {
		s.Over = true
		s.Sleep = time.Duration(math.Ceil((1 - tokens) / c.N * 1e9))
	}
	return s
}

// Now implements Kind.
func (Bucket) Now(w *Window, _ *Rings, c *Compiled, ns int64) (float64, float64) {
	if w.n == 0 {
		return 0, 0
	}
	v := c.burst - w.tokensAt(c, ns)
	return v, v / c.burst
}

// Explain implements Kind: "bucket 21 > burst 20 at 10/s".
func (Bucket) Explain(b *strings.Builder, c *Compiled, v float64) {
	fmt.Fprintf(b, "bucket %s > burst %s at %s/s", fmtNum(math.Round(v*10)/10), fmtNum(c.burst), fmtNum(c.N))
}
