// Package pipeline is the one code path from parsed entries to decisions,
// shared by `logjail replay` and the daemon: the rules classify each entry
// (allow, deny, ranges, match, key), the detector charges it to its windows
// and ladders on the entry's own time, and decisions come out in log-time
// order.
//
// A Pipeline is used by one goroutine. It never reads the wall clock.
package pipeline

import (
	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/rules"
)

// Counts says what the lists and ranges did with the entries.
type Counts struct {
	Entries int64 // entries processed
	Charged int64 // entries charged to at least one rule
	Allowed int64 // allow list, the host's own addresses, trusted proxies
	Exempt  int64 // ranges with limits: none
	Denied  int64 // deny list or banned ranges
}

// Pipeline charges entries to keys and feeds the detector.
type Pipeline struct {
	cfg     *rules.Config
	det     *detector.Detector
	charges []rules.Charge
	keys    rules.KeyCache
	started bool
	counts  Counts
}

// New returns a pipeline for cfg with a fresh detector.
func New(cfg *rules.Config) *Pipeline {
	return NewWithDetector(cfg, NewDetector(cfg))
}

// NewDetector returns an empty detector configured as cfg says (skew,
// max_keys, max_bans_per_minute), for a pipeline restored from a checkpoint.
func NewDetector(cfg *rules.Config) *detector.Detector { return NewDetectorTripped(cfg, nil) }

// NewDetectorTripped is NewDetector with tripped, if not nil, called when
// the circuit breaker trips (detector.Options.BreakerTripped).
func NewDetectorTripped(cfg *rules.Config, tripped func(detector.BreakerState)) *detector.Detector {
	return detector.New(detector.Options{
		Skew:             cfg.Skew,
		MaxKeys:          cfg.MaxKeys,
		MaxBansPerMinute: cfg.MaxBansPerMinute,
		BreakerTripped:   tripped,
	})
}

// NewWithDetector returns a pipeline for cfg that feeds det, e.g. a detector
// restored from a checkpoint. The static bans are applied at the first entry
// as always; the detector applies only what changed since its checkpoint.
func NewWithDetector(cfg *rules.Config, det *detector.Detector) *Pipeline {
	return &Pipeline{cfg: cfg, det: det}
}

// Detector returns the pipeline's detector, for reports and checkpoints.
func (p *Pipeline) Detector() *detector.Detector { return p.det }

// Counts returns what the pipeline has seen so far.
func (p *Pipeline) Counts() Counts { return p.counts }

// Process runs one entry of source src through the rules and the detector
// and appends the decisions it causes to out. The first entry also brings
// the configuration's static bans (deny list, banned ranges), at its time.
func (p *Pipeline) Process(src *rules.Source, e *parser.Entry, out []detector.Decision) []detector.Decision {
	if !p.started {
		p.started = true
		out = p.det.Static(e.Time, p.cfg.StaticBans(), out)
	}
	p.counts.Entries++
	var v rules.Verdict
	p.charges, v = p.cfg.ClassifyCached(&p.keys, src, e, p.charges[:0])
	switch v {
	case rules.VerdictAllowed:
		p.counts.Allowed++
	case rules.VerdictExempt:
		p.counts.Exempt++
	case rules.VerdictDenied:
		p.counts.Denied++
	}
	if len(p.charges) == 0 {
		return p.det.Advance(e.Time, out)
	}
	p.counts.Charged++
	for i := range p.charges {
		out = p.det.Charge(e.Time, &p.charges[i], out)
	}
	return out
}
