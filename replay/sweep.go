package replay

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/pipeline"
	"github.com/logjail/logjail/rules"
)

// Sweep varies the first number of one limit of one rule over Steps evenly
// spaced values from From to To, both included.
type Sweep struct {
	Rule     string
	Limit    int
	From, To float64
	Steps    int
}

// ParseSweep reads `RULE[I]=A..B:STEPS`, e.g. `flood[0]=10..50:5`.
func ParseSweep(s string) (Sweep, error) {
	var sw Sweep
	bad := func(why string) (Sweep, error) {
		return sw, fmt.Errorf("sweep %q: %s (want RULE[I]=A..B:STEPS)", s, why)
	}
	lhs, rhs, ok := strings.Cut(s, "=")
	if !ok {
		return bad("no '='")
	}
	open := strings.LastIndexByte(lhs, '[')
	if open <= 0 || !strings.HasSuffix(lhs, "]") {
		return bad("no [I] after the rule name")
	}
	sw.Rule = lhs[:open]
	i, err := strconv.Atoi(lhs[open+1 : len(lhs)-1])
	if err != nil || i < 0 {
		return bad("limit index is not a number ≥ 0")
	}
	sw.Limit = i
	rng, steps, ok := strings.Cut(rhs, ":")
	if !ok {
		return bad("no ':STEPS'")
	}
	if sw.Steps, err = strconv.Atoi(steps); err != nil || sw.Steps < 1 || sw.Steps > 100 {
		return bad("STEPS is not a number from 1 to 100")
	}
	a, b, ok := strings.Cut(rng, "..")
	if !ok {
		return bad("no 'A..B'")
	}
	if sw.From, err = strconv.ParseFloat(a, 64); err != nil {
		return bad("A is not a number")
	}
	if sw.To, err = strconv.ParseFloat(b, 64); err != nil {
		return bad("B is not a number")
	}
	if sw.Steps == 1 && sw.From != sw.To {
		return bad("one step needs A = B")
	}
	return sw, nil
}

// Values returns the swept values.
func (s Sweep) Values() []float64 {
	if s.Steps == 1 {
		return []float64{s.From}
	}
	v := make([]float64, s.Steps)
	for i := range v {
		v[i] = s.From + (s.To-s.From)*float64(i)/float64(s.Steps-1)
	}
	return v
}

// SweepResult says how many distinct keys each swept value would throttle
// and ban under the swept rule.
type SweepResult struct {
	Rule   string       `json:"rule"`
	Limit  int          `json:"limit"`
	Text   string       `json:"limit_text"`
	Values []SweepValue `json:"values"`
}

// SweepValue is one swept value and its outcome.
type SweepValue struct {
	N         float64 `json:"n"`
	Throttled int     `json:"throttled_keys"`
	Banned    int     `json:"banned_keys"`
}

// sweepRun is one Sweep: a pipeline per value, fed the same entries as the
// main one, so the whole sweep costs one pass over the input.
type sweepRun struct {
	sw        Sweep
	text      string
	values    []float64
	pipes     []*pipeline.Pipeline
	throttled []map[string]struct{}
	banned    []map[string]struct{}
	buf       []detector.Decision
}

func newSweepRuns(cfg *rules.Config, sweeps []Sweep) ([]*sweepRun, error) {
	var runs []*sweepRun
	for _, sw := range sweeps {
		r := cfg.Rule(sw.Rule)
		if r == nil {
			return nil, fmt.Errorf("sweep: no rule %q", sw.Rule)
		}
		if sw.Limit >= len(r.Limits) {
			return nil, fmt.Errorf("sweep: rule %q has %d limits, no limit %d", sw.Rule, len(r.Limits), sw.Limit)
		}
		run := &sweepRun{sw: sw, text: r.Limits[sw.Limit].Text, values: sw.Values()}
		for _, v := range run.values {
			c, err := cfg.WithLimitN(sw.Rule, sw.Limit, v)
			if err != nil {
				return nil, fmt.Errorf("sweep %s[%d]=%g: %w", sw.Rule, sw.Limit, v, err)
			}
			run.pipes = append(run.pipes, pipeline.New(c))
			run.throttled = append(run.throttled, map[string]struct{}{})
			run.banned = append(run.banned, map[string]struct{}{})
		}
		runs = append(runs, run)
	}
	return runs, nil
}

func (s *sweepRun) process(src *rules.Source, e *parser.Entry) {
	for i, p := range s.pipes {
		s.buf = p.Process(src, e, s.buf[:0])
		for _, d := range s.buf {
			if d.Rule != s.sw.Rule {
				continue
			}
			switch d.Kind {
			case detector.Throttle:
				s.throttled[i][d.Key] = struct{}{}
			case detector.Ban:
				s.banned[i][d.Key] = struct{}{}
			}
		}
	}
}

func (s *sweepRun) result() SweepResult {
	res := SweepResult{Rule: s.sw.Rule, Limit: s.sw.Limit, Text: s.text}
	for i, v := range s.values {
		res.Values = append(res.Values, SweepValue{N: v, Throttled: len(s.throttled[i]), Banned: len(s.banned[i])})
	}
	return res
}
