// Package replay runs the daemon's pipeline over old logs and acts on
// nothing: files (plain, .gz, stdin) are parsed on their own goroutines,
// merged by their lines' time (a k-way merge, so the order of the arguments
// does not matter and rotated siblings interleave), and fed to a
// pipeline.Pipeline. The result is a Report for a person tuning thresholds.
//
// A replay is deterministic: the same input and configuration give the same
// report, whatever the machine's clock or zone.
package replay

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/pipeline"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/source"
	"golang.org/x/sync/errgroup"
)

// Input is one log to replay and the source whose format reads it.
type Input struct {
	Name   string // file name, or "-" for stdin
	Source *rules.Source
}

// Options tune a replay.
type Options struct {
	From, To time.Time // entries outside [From, To) are skipped; zero: no bound
	Sweeps   []Sweep
	Stdin    io.Reader
	// Progress, when set, is called from the merging goroutine about every
	// 64k lines with the lines read so far.
	Progress func(lines int64)
	// RejectSamples is how many rejected lines the report quotes (default 5).
	RejectSamples int
	// Top is how many keys each top list holds (default 10).
	Top int
}

// batchSize is how many entries a reader hands to the merger at once: large
// enough to make the channel cost vanish, small enough to stay in cache.
const batchSize = 512

type batch struct {
	entries []parser.Entry
}

// reader parses one input on its own goroutine.
type reader struct {
	in       Input
	format   string
	lines    int64
	rejected []RejectedLine // the first samples
	reasons  map[string]int64
	nrej     int64
	ch       chan *batch
	free     chan *batch
}

func (r *reader) run(ctx context.Context, stdin io.Reader, samples int) error {
	defer close(r.ch)
	lg, err := source.OpenLog(r.in.Name, r.in.Source.Parser, stdin)
	if err != nil {
		return err
	}
	defer lg.Close()
	r.format = lg.Parser.Name()
	b := r.newBatch()
	for {
		line, n, ok := lg.Lines.Next()
		if !ok {
			break
		}
		r.lines++
		e, err := lg.Parser.ParseString(line, n)
		if err == nil && lg.Lines.Truncated() {
			err = &parser.Error{Line: n, Field: "line", Reason: fmt.Sprintf("longer than %d bytes", source.MaxLine)}
		}
		if err != nil {
			r.reject(n, err, samples)
			continue
		}
		b.entries = append(b.entries, e)
		if len(b.entries) == batchSize {
			select {
			case r.ch <- b:
			case <-ctx.Done():
				return ctx.Err()
			}
			b = r.newBatch()
		}
	}
	if err := lg.Lines.Err(); err != nil {
		return fmt.Errorf("%s: %w", r.in.Name, err)
	}
	if len(b.entries) > 0 {
		select {
		case r.ch <- b:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (r *reader) newBatch() *batch {
	select {
	case b := <-r.free:
		b.entries = b.entries[:0]
		return b
	default:
		return &batch{entries: make([]parser.Entry, 0, batchSize)}
	}
}

func (r *reader) reject(n int, err error, samples int) {
	r.nrej++
	reason := err.Error()
	var pe *parser.Error
	if errors.As(err, &pe) {
		reason = pe.Field + ": " + pe.Reason
	}
	r.reasons[reason]++
	if len(r.rejected) < samples {
		r.rejected = append(r.rejected, RejectedLine{File: r.in.Name, Line: n, Error: err.Error()})
	}
}

// cursor is a reader's position in the k-way merge.
type cursor struct {
	r *reader
	b *batch
	i int
}

func (c *cursor) head() *parser.Entry { return &c.b.entries[c.i] }

// next moves to the next entry, receiving the next batch when needed; it
// reports false at the end of the reader's input.
func (c *cursor) next(ctx context.Context) (bool, error) {
	c.i++
	if c.b != nil && c.i < len(c.b.entries) {
		return true, nil
	}
	if c.b != nil {
		select {
		case c.r.free <- c.b:
		default:
		}
	}
	select {
	case b, ok := <-c.r.ch:
		if !ok {
			c.b = nil
			return false, nil
		}
		c.b, c.i = b, 0
		return true, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// cursorHeap orders cursors by their head entry's time, then by input order,
// so that equal times come out in a stable order.
type cursorHeap []*cursor

func (h cursorHeap) Len() int { return len(h) }
func (h cursorHeap) Less(i, j int) bool {
	a, b := h[i].head().Time, h[j].head().Time
	if !a.Equal(b) {
		return a.Before(b)
	}
	return h[i].r.in.Source.Index < h[j].r.in.Source.Index || (h[i].r.in.Source.Index == h[j].r.in.Source.Index && h[i].r.in.Name < h[j].r.in.Name)
}
func (h cursorHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *cursorHeap) Push(x any)   { *h = append(*h, x.(*cursor)) }
func (h *cursorHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// Run replays inputs under cfg and returns the report.
func Run(ctx context.Context, cfg *rules.Config, inputs []Input, o Options) (*Report, error) {
	if o.RejectSamples == 0 {
		o.RejectSamples = 5
	}
	if o.Top == 0 {
		o.Top = 10
	}
	main := pipeline.New(cfg)
	sweeps, err := newSweepRuns(cfg, o.Sweeps)
	if err != nil {
		return nil, err
	}

	g, gctx := errgroup.WithContext(ctx)
	readers := make([]*reader, len(inputs))
	for i, in := range inputs {
		r := &reader{in: in, reasons: map[string]int64{}, ch: make(chan *batch, 4), free: make(chan *batch, 8)}
		readers[i] = r
		g.Go(func() error { return r.run(gctx, o.Stdin, o.RejectSamples) })
	}

	rep := newReport(cfg, o.RejectSamples)
	g.Go(func() error {
		// Drain every reader even after an error elsewhere, so none blocks.
		defer func() {
			for _, r := range readers {
				for range r.ch {
				}
			}
		}()
		h := make(cursorHeap, 0, len(readers))
		for _, r := range readers {
			c := &cursor{r: r, i: -1}
			ok, err := c.next(gctx)
			if err != nil {
				return err
			}
			if ok {
				h = append(h, c)
			}
		}
		heap.Init(&h)
		var decisions []detector.Decision
		var seen int64
		for len(h) > 0 {
			c := h[0]
			e := c.head()
			src := c.r.in.Source
			seen++
			if o.Progress != nil && seen&0xffff == 0 {
				o.Progress(seen)
			}
			if (o.From.IsZero() || !e.Time.Before(o.From)) && (o.To.IsZero() || e.Time.Before(o.To)) {
				rep.observe(e)
				decisions = main.Process(src, e, decisions[:0])
				rep.decide(decisions)
				for _, s := range sweeps {
					s.process(src, e)
				}
			} else {
				rep.Input.Skipped++
			}
			ok, err := c.next(gctx)
			if err != nil {
				return err
			}
			if ok {
				heap.Fix(&h, 0)
			} else {
				heap.Pop(&h)
			}
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for _, r := range readers {
		rep.addReader(r)
	}
	rep.finish(main, o.Top)
	for _, s := range sweeps {
		rep.Sweeps = append(rep.Sweeps, s.result())
	}
	return rep, nil
}
