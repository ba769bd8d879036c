// Package feedtest is the tests' reading loop: Feed reads one file through
// the pipeline into a store, checkpointing between lines as the daemon does,
// without following the file. The checkpoint tests (crash recovery), the
// cleaner's and the `clean` command's tests fill their databases with it;
// no non-test code uses it (the daemon has its own loop, which follows).
//
// Boundaries: test code only; it takes a state.Store, never opens one, and
// must not grow into a second daemon loop.
package feedtest

import (
	"context"
	"fmt"
	"time"

	"github.com/logjail/logjail/checkpoint"
	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/pipeline"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/source"
	"github.com/logjail/logjail/state"
)

// Options tune Feed.
type Options struct {
	Source *rules.Source // the source whose format reads the file
	// A checkpoint is taken every Every lines (0: never by count) and
	// whenever cfg.Checkpoint has passed on the wall clock since the last.
	Every int
	// Now is the wall clock at start: bans of the checkpoint that ended by
	// then are recorded as expired. Zero: none (a test, a replay).
	Now time.Time
}

// Result says what Feed read.
type Result struct {
	From     int64 // offset it started at (0: the file from its start)
	Lines    int64 // lines read this time
	Rejected int64
	Outliers int64 // lines far ahead of their neighbours (pipeline.Guard): not charged
	Restored detector.RestoreStats
}

// Feed reads the file at path through the pipeline into db, from where the
// last checkpoint left it (or from its start when the file at path is not
// the one the position was saved for), checkpointing every o.Every lines
// and at the end. It is the daemon's reading loop for one file without the
// following, and what the crash test kills and restarts.
func Feed(ctx context.Context, cfg *rules.Config, db state.Store, path string, o Options) (Result, error) {
	var res Result
	src := o.Source
	if src == nil {
		if src = cfg.SourceFor(path); src == nil {
			return res, fmt.Errorf("%s: no source reads it", path)
		}
	}
	det := pipeline.NewDetector(cfg)
	positions, st, err := checkpoint.Restore(db, cfg, det)
	if err != nil {
		return res, err
	}
	res.Restored = st
	id, err := source.Identify(path)
	if err != nil {
		return res, err
	}
	var offset int64
	var line int
	if p, ok := positions[path]; ok {
		if id.Continues(p.File(), p.Offset) {
			offset, line = p.Offset, int(p.Line)
		}
	}
	res.From = offset
	lg, err := source.OpenLogAt(path, src.Parser, nil, offset, line)
	if err != nil {
		return res, err
	}
	defer lg.Close()

	p := pipeline.NewWithDetector(cfg, det)
	w := checkpoint.NewAsyncWriter(db)
	defer w.Close()
	if err := w.Resume(cfg, det, o.Now); err != nil {
		return res, err
	}
	// The file's lines pass its guard, as in the daemon: while a line is
	// held, the position saved is the one before it.
	g := pipeline.NewGuard(cfg)
	if err := checkpoint.RestoreGuard(db, path, g); err != nil {
		return res, err
	}
	var heldAt, heldLine int64
	position := func() state.Position {
		if _, held := g.Held(); held {
			return state.PositionAt(path, id, heldAt, heldLine)
		}
		return state.PositionAt(path, id, lg.Lines.Offset(), int64(lg.Lines.Line()))
	}
	var out []detector.Decision
	var last time.Time
	charge := func(e *parser.Entry) {
		if e == nil {
			return
		}
		out = p.Process(src, e, out[:0])
		w.Decisions(out)
		last = e.Time
	}
	flushed := time.Now()
	for n := 1; ; n++ {
		at, atLine := lg.Lines.Offset(), int64(lg.Lines.Line())
		l, no, ok := lg.Lines.Next()
		if !ok {
			break
		}
		res.Lines++
		e, err := lg.Parser.ParseString(l, no)
		if err == nil && lg.Lines.Truncated() {
			err = source.TooLong(no)
		}
		if err != nil {
			res.Rejected++
		} else {
			released, now := g.Step(&e)
			charge(released)
			if now {
				charge(&e)
			} else {
				heldAt, heldLine = at, atLine
			}
		}
		if (o.Every > 0 && n%o.Every == 0) || (n%1024 == 0 && time.Since(flushed) >= cfg.Checkpoint) {
			if err := ctx.Err(); err != nil {
				return res, err
			}
			w.Position(position())
			w.SaveGuard(path, g)
			if err := w.Flush(det, last); err != nil {
				return res, err
			}
			flushed = time.Now()
		}
	}
	if err := lg.Lines.Err(); err != nil {
		return res, fmt.Errorf("%s: %w", path, err)
	}
	charge(g.ReleaseHeld()) // the end of the file: nothing contradicts it
	res.Outliers, _ = g.Outliers()
	w.Position(position())
	w.SaveGuard(path, g)
	if err := w.Flush(det, last); err != nil {
		return res, err
	}
	return res, w.Close()
}
