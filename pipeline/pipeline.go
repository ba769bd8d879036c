// Package pipeline is the one code path from parsed entries to decisions,
// shared by `logjail replay` and the daemon: the rules classify each entry
// (allow, deny, ranges, match, key), the detector charges it to its windows
// and ladders on the entry's own time, and decisions come out in log-time
// order.
//
// A Pipeline is used by one goroutine. It never reads the wall clock.
//
// # One line cannot move the clock
//
// The detector runs on the entries' own times, and its clock only moves
// forward: an entry more than skew older than the newest one seen is
// charged in the oldest bucket still open. So one line with a wrong time
// ahead of the others (a clock that jumped, a corrupt line, a proxy that
// logs the upstream's date) would move the clock for everyone: one line
// dated 2099 ends every ban at once and turns every later line into a late
// one; one line 60 s ahead bunches the next minute of every key into one
// bucket and bans keys that were under their limits. Two rules keep that
// from happening, and both hold in replay, in the daemon's catch-up after
// downtime and live, so that a catch-up decides what a replay of the same
// lines decides.
//
// The neighbour rule (Guard, one per file, before the files are merged by
// time: a line dated 2099 at a file's head would otherwise put that whole
// file last in the merge). A line at least `future` (default 1m) ahead of
// the newest line before it in its file is held, not yet charged; the next
// line of the same file decides:
//
//   - it is at or after the held line's time minus `skew`: the jump is
//     real (a log that resumes after three quiet hours), and both are
//     charged, in order;
//   - it is older: the held line is an outlier. It is counted (the replay
//     report's Outliers, the daemon's logjail_lines_outliers_total metric,
//     `status`), not charged, and it makes no decision and moves no clock.
//
// A file's first line has no line before it: it is held too, and is an
// outlier when the next line is more than `future` older (a first line
// out of order by less than that is charged as usual). A held line that
// ends its file is charged: nothing contradicts it (replay: the end of the
// input; the daemon: the end of what has been written so far, once the
// wall clock has reached the line's time, so that a quiet site's real
// resumption is not delayed until its next request). Two wrong lines in a
// row agree with each other and are followed, as a real jump is: the
// neighbour rule catches an isolated line, the wall-clock rule the rest.
// Skew, not future, judges the next line because a file's lines are out of
// order by at most the skew the detector already accepts.
//
// The wall-clock rule (live only; a replay has no wall clock to go by): a
// line more than `future` ahead of the daemon's wall clock is not charged;
// it is counted (logjail_lines_future_total, `status`) and logged at most
// once a minute per source. It is applied before the neighbour rule, so
// such a line is neither charged nor the file's newest time.
//
// Boundaries: It owns the one path from entries to decisions
// (rules.Classify, then the detector) that replay and the daemon share. It
// must not read logs, write state or act: its callers do.
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
	// ipKeys and prefixKeys: some rule is keyed by address, by prefix
	// (Prefetch).
	ipKeys, prefixKeys bool
}

// New returns a pipeline for cfg with a fresh detector.
func New(cfg *rules.Config) *Pipeline {
	return NewWithDetector(cfg, NewDetector(cfg))
}

// NewDetector returns an empty detector configured as cfg says (skew,
// max_keys, max_bans_per_minute), for a pipeline restored from a checkpoint.
func NewDetector(cfg *rules.Config) *detector.Detector { return detector.New(detectorOptions(cfg)) }

// NewLiveDetector is NewDetector for a daemon: tripped, if not nil, is
// called when the circuit breaker trips (detector.Options.BreakerTripped),
// and it keeps no peaks (detector.Options.NoPeaks: a daemon reads none,
// and a million keys take 8 bytes a limit less).
func NewLiveDetector(cfg *rules.Config, tripped func(detector.BreakerState)) *detector.Detector {
	o := detectorOptions(cfg)
	o.BreakerTripped = tripped
	o.NoPeaks = true
	// A fleet's node journals the charges of its `scope: fleet` rules for
	// the exchange (daemon/fleet.go); a replay never does: there, a fleet
	// rule is an ordinary rule over the logs given (all nodes' merged
	// give the fleet's decisions).
	o.Fleet = cfg.Fleet != nil
	return detector.New(o)
}

func detectorOptions(cfg *rules.Config) detector.Options {
	return detector.Options{Skew: cfg.Skew, MaxKeys: cfg.MaxKeys, MaxBansPerMinute: cfg.MaxBansPerMinute}
}

// NewWithDetector returns a pipeline for cfg that feeds det, e.g. a detector
// restored from a checkpoint. The static bans are applied at the first entry
// as always; the detector applies only what changed since its checkpoint.
func NewWithDetector(cfg *rules.Config, det *detector.Detector) *Pipeline {
	p := &Pipeline{cfg: cfg, det: det}
	for _, r := range cfg.Rules {
		switch r.Key {
		case rules.KeyIP:
			p.ipKeys = true
		case rules.KeyPrefix:
			p.prefixKeys = true
		}
	}
	return p
}

// Prefetching reports whether Prefetch does anything now (the detector's
// key table is large enough for its lookups to miss the caches).
func (p *Pipeline) Prefetching() bool { return (p.ipKeys || p.prefixKeys) && p.det.Prefetching() }

// Prefetch is a hint that e will be processed a few entries from now:
// the detector starts loading the key records and states of e's address
// and prefix keys (detector.Detector.Prefetch), which at a million keys are
// cache misses, the loads of stage ahead (2: the key's index slot, 1: its
// record, 0: its first state). It changes nothing, classifies nothing (a
// rule e will not match costs a useless load) and may be given any entry.
// Callers give it the entries ahead through PrefetchNext.
func (p *Pipeline) Prefetch(e *parser.Entry, ahead int) {
	if !e.IP.IsValid() {
		return
	}
	if p.ipKeys {
		p.det.Prefetch(p.cfg.IPFixed(e.IP), ahead)
	}
	if p.prefixKeys {
		p.det.Prefetch(p.cfg.PrefixFixed(e.IP), ahead)
	}
}

// prefetchAt is how many entries ahead of the one processed PrefetchNext
// gives Prefetch each stage of an entry's loads: its first state 1 ahead,
// its record 4, its index slot 8. Each stage reads what the one before
// loaded, and at a million keys each load misses the caches and the TLB
// for longer than one entry's processing: with the stages 1, 2 and 3
// ahead, the read of the slot loaded one entry before was a third of
// Prefetch's samples in replay (issue 23, docs/performance.md, "Row 1:
// hash bits in the key index").
var prefetchAt = [3]int{1, 4, 8}

// PrefetchNext gives Prefetch the entries of es ahead of es[i], each at
// its stage (prefetchAt), while es[i] is processed: a caller that
// processes es in order calls it for each entry, when Prefetching.
func (p *Pipeline) PrefetchNext(es []parser.Entry, i int) {
	for stage, d := range prefetchAt {
		if j := i + d; j < len(es) {
			p.Prefetch(&es[j], stage)
		}
	}
}

// Detector returns the pipeline's detector, for reports and checkpoints.
func (p *Pipeline) Detector() *detector.Detector { return p.det }

// Counts returns what the pipeline has seen so far.
func (p *Pipeline) Counts() Counts { return p.counts }

// Process runs one entry of source src through the rules and the detector
// and appends the decisions it causes to out. The first entry also brings
// the configuration's static bans (deny list, banned ranges), at its time.
// Process keeps no pointer to e once it returns: the caller may use e's
// memory again (TestProcessRetainsNoEntry).
func (p *Pipeline) Process(src *rules.Source, e *parser.Entry, out []detector.Decision) []detector.Decision {
	return p.ProcessClaimed(src, e, nil, out)
}

// ProcessClaimed is Process with e's claim found ahead
// (rules.Config.ClaimOf under the pipeline's configuration, e.g. by
// replay's parse workers; nil: none found): the same decisions.
func (p *Pipeline) ProcessClaimed(src *rules.Source, e *parser.Entry, cl *rules.Claim, out []detector.Decision) []detector.Decision {
	if !p.started {
		p.started = true
		out = p.det.Static(e.Time, p.cfg.StaticBans(), out)
	}
	p.counts.Entries++
	var v rules.Verdict
	p.charges, v = p.cfg.ClassifyClaimed(&p.keys, src, e, cl, p.charges[:0])
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
	return p.det.ChargeAll(e.Time, p.charges, out)
}
