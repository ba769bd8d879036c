package daemon

import (
	"github.com/logjail/logjail/follow"
	"github.com/logjail/logjail/rules"
)

// spares is the free list of the parsed batches' memory (issue 23: the
// garbage ingest makes sets how often the collector runs, and a cycle
// over a large live heap is what /auth waits behind). Once the decider is
// done with a batch (run, after batch), its entries and the index of
// their lines, and a file batch's slice of lines (follow.Options.Spare),
// are used again for a later batch instead of being left to the
// collector.
//
// The contract that makes this safe: nothing keeps a pointer into a
// batch's entries or its slice of lines once the decider is done with it.
// The guard copies the entry it holds (pipeline.Guard.Step); the
// pipeline keeps no *parser.Entry after Process returns (pipeline's
// retain_test.go); the decider reads the batch's positions as values
// (follow.Batch.After). The lines' text is not reused: a held entry's
// strings point into it across batches, and so may a decision's key.
// put clears what it keeps, so that a broken contract shows as zero
// entries (and lines without text) rather than as another batch's.
type spares struct {
	parsed chan *parsed
	lines  chan []follow.Line // follow.Options.Spare of every file source
}

// newSpares keeps up to n batches' memory: as many as can be in flight
// between the followers and the decider, so that in a steady state no
// batch is allocated.
func newSpares(n int) *spares {
	return &spares{parsed: make(chan *parsed, n), lines: make(chan []follow.Line, n)}
}

// get returns an empty batch, one put back or a new one.
func (s *spares) get() *parsed {
	select {
	case p := <-s.parsed:
		return p
	default:
		return &parsed{}
	}
}

// put takes back p, which nothing reads any more: its entries, its lines'
// index and, for a file's batch, its slice of lines (follow.Recycle); a
// stream's batches (package stream) are left to the collector.
func (s *spares) put(p *parsed) {
	if p.src != nil && p.src.Type == rules.SourceFile {
		follow.Recycle(s.lines, p.batch)
	}
	clear(p.entries)
	*p = parsed{entries: p.entries[:0], lines: p.lines[:0]}
	select {
	case s.parsed <- p:
	default:
	}
}
