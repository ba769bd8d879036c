package limits

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/logjail/logjail/internal/pool"
)

// Kind is one form of limit: its grammar, its window arithmetic and how it
// explains itself. A kind is a small comparable value (a Limit carries it,
// and a reload compares compiled limits); its methods do not change it.
//
// The detector calls Charge for every limit of a charged rule (through
// Compiled.Charge, which calls a rate's and a share's arithmetic without
// the interface), Query for the
// decision endpoint and Now for `logjail top`; the rules package calls Parse
// through its table of kinds (rules.LimitKinds) and Renumber for a sweep;
// the replay report, control and endpoint read its Traits and FormatPeak.
type Kind interface {
	// Traits are what the kind is, as opposed to what it does.
	Traits() Traits
	// Parse reads the words of a limit (strings.Fields of it, at least
	// one). ok is false when the words are not this kind's grammar; then
	// the next kind of the table is tried. cores is the machine's core
	// count (at least 1), for "of machine". The Text of the limit is the
	// caller's.
	Parse(f []string, cores int) (l Limit, ok bool, err error)
	// Renumber replaces the first number of the words of a limit of this
	// kind with n (a replay's sweep of a threshold).
	Renumber(f []string, n float64)
	// FormatPeak writes a peak value in the kind's own terms (replay's
	// report).
	FormatPeak(v float64) string
	// Compile returns c (its Kind, Text, N and Window set from l) with
	// what the kind's window arithmetic needs.
	Compile(l *Limit, c Compiled) Compiled
	// Charge counts a request of cost at ns (unix ns, log time) in w and
	// returns the window's value and whether the limit is over.
	Charge(w *Window, a *Rings, c *Compiled, ns int64, cost Cost) (v float64, over bool)
	// Query reads w at ns without changing it (the decision endpoint).
	Query(w *Window, a *Rings, c *Compiled, ns int64) State
	// Now is w's value for a request at ns and its ratio to the limit (1
	// at the limit, above when over), without changing it (`logjail top`).
	Now(w *Window, a *Rings, c *Compiled, ns int64) (v, ratio float64)
	// Explain writes why the limit is over at value v, for a reason:
	// "rate 31 per 10s > 30".
	Explain(b *strings.Builder, c *Compiled, v float64)
}

// Traits are what a kind is.
type Traits struct {
	// Code is the kind's number in the fingerprint of a saved state's
	// limits (a reload and a restore compare it): fixed once a kind ships,
	// never reused.
	Code uint64
	// Weighs says what a request costs the kind: a request, or its CPU or
	// duration seconds.
	Weighs Weight
	// Unit names the unit of the window's value: "requests", "share",
	// "tokens" or "seconds" (the replay report's unit). "requests" says
	// the value, and State.Count, is the requests in the window: the
	// decision endpoint reports it as the request count.
	Unit string
	// Lower is true when a smaller value is the more severe (last N: the
	// span of the last N requests): peaks keep the smallest value, and
	// the replay report ranks from the bottom.
	Lower bool
	// Layout is the shape of the kind's window (window.go): how Charge
	// keeps it and how a snapshot writes it.
	Layout Layout
}

// Rings is the pool the rings of windows longer than two elements live in.
type Rings = pool.Pool[uint64]

// Weight is what a request costs a limit.
type Weight int

// Weights.
const (
	Requests Weight = iota // each request counts one
	CPU                    // its CPU seconds (or duration, under cpu_fallback: duration)
	Duration               // its duration seconds
)

// Cost is what one charged request weighs, in seconds.
type Cost struct {
	CPU      float64 // what `% cpu` limits weigh (the charge's CPU)
	Duration float64 // what `% duration` limits weigh
}

// Limit is one limit of a rule, as parsed (rules.Limit).
type Limit struct {
	Text      string // as written in the config, for reasons and reports
	Kind      Kind
	N         float64       // count (rate, last N), share as a fraction (cpu, duration) or tokens per second (bucket)
	Window    time.Duration // period (rate, share) or span (last N); for a token bucket, Burst/N
	Burst     float64       // token bucket capacity
	OfMachine bool          // "of machine": N was multiplied by the core count
	Cores     int           // for "of machine": the core count N was multiplied by; 0 otherwise
}

// Compiled is one limit compiled for the detector's windows. It is
// comparable, so that a reload can tell whether a state's windows still
// fit; Fingerprint hashes it for the states a snapshot saves.
type Compiled struct {
	Kind   Kind
	Text   string
	N      float64
	Window int64  // ns: period, or span for last N; at least 1
	Lower  bool   // Kind.Traits().Lower
	layout Layout // Kind.Traits().Layout
	width  int64  // bucket width, ns (rate, shares)
	nb     uint64
	unit   int64  // ns of cost per stored unit (shares)
	thr    uint64 // over when the window's sum is above (rate, shares)
	burst  float64
	lastN  int
	cores  int // "of machine": the reason divides by it (presentation only; N has it)
	op     op  // how Charge charges (from Kind: no more than it says)
}

// op is how Compiled.Charge charges a window: the arithmetic of a rate or
// a share called directly, or any other kind's Charge through the Kind
// interface. It is Kind's alone (Compile sets it), so a reload's
// comparison of compiled limits and Fingerprint need not read it.
type op uint8

const (
	opKind op = iota
	opRate
	opShareCPU
	opShareDuration
)

// Charge is c.Kind.Charge(w, a, c, ns, cost): for a rate or a share, the
// kind's own arithmetic called without the interface's dispatch (the
// detector calls it for every limit of every charge; TestCompiledChargeAsKind
// holds it to Kind.Charge).
func (c *Compiled) Charge(w *Window, a *Rings, ns int64, cost Cost) (float64, bool) {
	switch c.op {
	case opRate:
		return rateCharge(w, a, c, ns)
	case opShareCPU:
		return shareCharge(w, a, c, ns, cost.CPU)
	case opShareDuration:
		return shareCharge(w, a, c, ns, cost.Duration)
	}
	return c.Kind.Charge(w, a, c, ns, cost)
}

// Compile compiles l for the detector.
func Compile(l *Limit) Compiled {
	t := l.Kind.Traits()
	c := Compiled{Kind: l.Kind, Text: l.Text, N: l.N, Window: max(int64(l.Window), 1), Lower: t.Lower, layout: t.Layout, cores: l.Cores}
	c = l.Kind.Compile(l, c)
	switch k := l.Kind.(type) {
	case Rate:
		c.op = opRate
	case Share:
		c.op = opShareCPU
		if k.Weight == Duration {
			c.op = opShareDuration
		}
	default:
		c.op = opKind
	}
	return c
}

// InitialPeak is the peak of a window that saw nothing: +Inf where a
// smaller value is worse (the shortest span: none yet), 0 otherwise.
func (c *Compiled) InitialPeak() float64 {
	if c.Lower {
		return math.Inf(1)
	}
	return 0
}

// Worse returns the worse of a peak and a value.
func (c *Compiled) Worse(peak, v float64) float64 {
	if c.Lower {
		return min(peak, v)
	}
	return max(peak, v)
}

// Fingerprint hashes (FNV-1a) everything of the limits that decides
// whether a state's windows fit them: what a reload compares, and what a
// snapshot saves with each state.
func Fingerprint(cs []Compiled) uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	word := func(x uint64) {
		for range 8 {
			h = (h ^ x&0xff) * prime
			x >>= 8
		}
	}
	word(uint64(len(cs)))
	for i := range cs {
		c := &cs[i]
		word(c.Kind.Traits().Code)
		word(uint64(len(c.Text)))
		for j := 0; j < len(c.Text); j++ {
			h = (h ^ uint64(c.Text[j])) * prime
		}
		word(math.Float64bits(c.N))
		word(uint64(c.Window))
		word(uint64(c.width))
		word(c.nb)
		word(uint64(c.unit))
		word(c.thr)
		word(math.Float64bits(c.burst))
		word(uint64(c.lastN))
	}
	return h
}

// State is one limit's window of a key at a time, as the decision
// endpoint's Cerberus query reports it (detector.LimitState).
type State struct {
	// Count is the requests in the window (rate limits), or the requests
	// remembered (last N); 0 for shares and token buckets.
	Count int64
	Value float64 // the window's value as compared with the limit
	Over  bool    // the value is over the limit now
	// Sleep is how long until the window falls back within the limit when
	// no request comes meanwhile; 0 when it is within.
	Sleep time.Duration
}

// unitOf is the length of a unit of time named in full in a limit: second,
// minute, hour or day (a rate's period, a token bucket's unit).
func unitOf(name string) (time.Duration, bool) {
	switch name {
	case "second":
		return time.Second, true
	case "minute":
		return time.Minute, true
	case "hour":
		return time.Hour, true
	case "day":
		return 24 * time.Hour, true
	}
	return 0, false
}

// number parses a non-negative finite decimal number.
func number(s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, errors.New("not a number")
	}
	if v < 0 {
		return 0, errors.New("must not be negative")
	}
	return v, nil
}

// window parses the window of a rate or share limit: a duration of at least a
// second (log times have a resolution of a second).
func window(s string) (time.Duration, error) {
	d, err := ParseDuration(s)
	if err != nil {
		return 0, err
	}
	if d < time.Second {
		return 0, fmt.Errorf("window %s is shorter than 1s", s)
	}
	return d, nil
}

// maxDays keeps days+rest within a time.Duration (about 292 years).
const maxDays = 100000

// ParseDuration parses a Go duration ("90s", "1h30m") that may begin with a
// number of days ("90d", "1d12h"). Negative durations are refused.
func ParseDuration(s string) (time.Duration, error) {
	orig := s
	var days time.Duration
	if i := strings.IndexByte(s, 'd'); i > 0 {
		n, err := strconv.ParseUint(s[:i], 10, 32)
		if err == nil && n > maxDays {
			return 0, fmt.Errorf("bad duration %q: too long", orig)
		}
		if err == nil {
			days = time.Duration(n) * 24 * time.Hour
			s = s[i+1:]
			if s == "" {
				return days, nil
			}
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("bad duration %q: want e.g. 30s, 10m, 24h or 30d", orig)
	}
	if d < 0 {
		return 0, fmt.Errorf("bad duration %q: must not be negative", orig)
	}
	return days + d, nil
}

// fmtDur writes a window the way a config does: 10s, 1m, 1h, 30d.
func fmtDur(ns int64) string {
	d := time.Duration(ns)
	switch {
	case d <= 0:
		return "0s"
	case d%(24*time.Hour) == 0:
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return d.String()
}

// fmtNum writes a threshold without float noise: 7, 0.5, 12.5.
func fmtNum(x float64) string {
	return strconv.FormatFloat(math.Round(x*1e6)/1e6, 'f', -1, 64)
}
