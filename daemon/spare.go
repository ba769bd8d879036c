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
// (follow.Batch.After). The lines' text is used again too (follow.Texts):
// nothing keeps a string of a line past its batch. The guard's held entry
// is the one exception, and its batch is pinned (put). A W3C #Fields:
// directive, which the parser keeps, is noted from a copy (stages.go,
// follow). A decision's strings are the detector's and rules' own (keys
// are built, as "ua:"+TEXT, or copied into the detector's pool; reasons
// are formatted): none points into a line. TestTextReuseChangesNothing
// reads logs with held lines, text keys and directives with the buffers
// overwritten as they come back, and wants what a run without the reuse
// decides. put clears what it keeps, so that a broken contract shows as zero
// entries (and lines without text) rather than as another batch's.
type spares struct {
	parsed chan *parsed
	lines  chan []follow.Line // follow.Options.Spare of every file source
	texts  *follow.Texts      // follow.Options.Texts of every file source
}

// newSpares keeps up to n batches' memory: as many as can be in flight
// between the followers and the decider, so that in a steady state no
// batch is allocated; and the buffers of their lines' texts (a batch's
// lines are in one to a few 64 KiB reads). poison, when set, overwrites
// each text buffer as it comes back (Options.poison).
func newSpares(n int, poison bool) *spares {
	var overwrite func([]byte)
	if poison {
		overwrite = poisonText
	}
	return &spares{parsed: make(chan *parsed, n), lines: make(chan []follow.Line, n), texts: follow.NewTexts(8*n, overwrite)}
}

// poisonTexts has every daemon overwrite its text buffers as they come
// back (as Options.poison does). The package's tests set it (texts_test.go),
// so that every test of the package, in CI too, runs with the buffers
// overwritten: a string of a line read after its batch was recycled
// changes what the test sees. It is false in the binary.
var poisonTexts = false

// poisonText overwrites b with bytes no log line holds in that place (a
// NUL, a quote, a digit, invalid UTF-8 in turn): a string read after its
// batch was recycled reads them, and the test sees its decisions change.
func poisonText(b []byte) {
	const garbage = "\x00\"9\xff"
	for i := range b {
		b[i] = garbage[i%len(garbage)]
	}
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
// index and, for a file's batch, its slice of lines and its references to
// the buffers of its lines' texts (follow.Recycle); a stream's batches
// (package stream) are left to the collector. A batch one of whose lines
// the guard holds past it (p.pin) is pinned first: the held entry's
// strings point into its texts, which are then never used again.
func (s *spares) put(p *parsed) {
	if p.src != nil && p.src.Type == rules.SourceFile {
		if p.pin {
			follow.Pin(p.batch)
		}
		follow.Recycle(s.lines, p.batch)
	}
	clear(p.entries)
	*p = parsed{entries: p.entries[:0], lines: p.lines[:0]}
	select {
	case s.parsed <- p:
	default:
	}
}
