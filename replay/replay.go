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
	"runtime"
	"sync"
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

// blockLines is how many lines a reader hands to a parsing worker at once:
// large enough to make the channel cost vanish, small enough to stay in cache.
const blockLines = 512

// block is a run of consecutive lines of one input, parsed by a worker.
type block struct {
	lines   []string
	trunc   []int // indices of lines longer than source.MaxLine
	first   int   // 1-based number of lines[0]
	entries []parser.Entry
	rejects []rejectAt
	done    chan struct{} // closed when entries and rejects are ready
}

type rejectAt struct {
	n   int
	err error
}

// parse parses every line of b with p.
func (b *block) parse(p *parser.Parser) {
	t := 0
	for i, line := range b.lines {
		n := b.first + i
		e, err := p.ParseString(line, n)
		if err == nil && t < len(b.trunc) && b.trunc[t] == i {
			err = &parser.Error{Line: n, Field: "line", Reason: fmt.Sprintf("longer than %d bytes", source.MaxLine)}
		}
		if t < len(b.trunc) && b.trunc[t] == i {
			t++
		}
		if err != nil {
			b.rejects = append(b.rejects, rejectAt{n, err})
			continue
		}
		b.entries = append(b.entries, e)
	}
	close(b.done)
}

// reader reads one input: its own goroutine splits the input into blocks
// of lines, in file order, and a few workers parse the blocks in parallel;
// the merger takes the blocks in file order (each when its worker is done),
// so a file's entries keep their order whatever the workers' timing.
type reader struct {
	in      Input
	workers int
	order   chan *block // every block, in file order
	free    chan *block // blocks the merger is done with, for reuse

	// Written by the goroutine of run before it sends its first block.
	format string

	// Written by the merger only (account), read after the replay.
	lines    int64
	rejected []RejectedLine // the first samples
	reasons  map[string]int64
	nrej     int64
}

func newReader(in Input, workers int) *reader {
	return &reader{
		in:      in,
		workers: workers,
		reasons: map[string]int64{},
		order:   make(chan *block, 2*workers+2),
		free:    make(chan *block, 2*workers+4),
	}
}

func (r *reader) run(ctx context.Context, stdin io.Reader) error {
	defer close(r.order)
	lg, err := source.OpenLog(r.in.Name, r.in.Source.Parser, stdin)
	if err != nil {
		return err
	}
	defer lg.Close()
	r.format = lg.Parser.Name()

	work := make(chan *block, r.workers)
	var wg sync.WaitGroup
	for range r.workers {
		wg.Go(func() {
			for b := range work {
				b.parse(lg.Parser)
			}
		})
	}
	defer wg.Wait()
	defer close(work)

	send := func(b *block) error {
		select {
		case r.order <- b:
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case work <- b:
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	}
	b := r.newBlock()
	for {
		line, n, ok := lg.Lines.Next()
		if !ok {
			break
		}
		if len(b.lines) == 0 {
			b.first = n
		}
		if lg.Lines.Truncated() {
			b.trunc = append(b.trunc, len(b.lines))
		}
		b.lines = append(b.lines, line)
		if len(b.lines) == blockLines {
			if err := send(b); err != nil {
				return err
			}
			b = r.newBlock()
		}
	}
	if err := lg.Lines.Err(); err != nil {
		return fmt.Errorf("%s: %w", r.in.Name, err)
	}
	if len(b.lines) > 0 {
		return send(b)
	}
	return nil
}

func (r *reader) newBlock() *block {
	select {
	case b := <-r.free:
		clear(b.lines) // let the previous chunk's strings go
		b.lines, b.trunc, b.entries, b.rejects = b.lines[:0], b.trunc[:0], b.entries[:0], b.rejects[:0]
		b.done = make(chan struct{})
		return b
	default:
		return &block{
			lines:   make([]string, 0, blockLines),
			entries: make([]parser.Entry, 0, blockLines),
			done:    make(chan struct{}),
		}
	}
}

// account adds a parsed block's counts and rejected lines, in file order.
func (r *reader) account(b *block, samples int) {
	r.lines += int64(len(b.lines))
	for _, rj := range b.rejects {
		r.nrej++
		reason := rj.err.Error()
		var pe *parser.Error
		if errors.As(rj.err, &pe) {
			reason = pe.Field + ": " + pe.Reason
		}
		r.reasons[reason]++
		if len(r.rejected) < samples {
			r.rejected = append(r.rejected, RejectedLine{File: r.in.Name, Line: rj.n, Error: rj.err.Error()})
		}
	}
}

// cursor is a reader's position in the k-way merge.
type cursor struct {
	r       *reader
	b       *block
	i       int
	samples int
}

func (c *cursor) head() *parser.Entry { return &c.b.entries[c.i] }

// next moves to the next entry, waiting for the next parsed block when
// needed; it reports false at the end of the reader's input.
func (c *cursor) next(ctx context.Context) (bool, error) {
	c.i++
	for c.b == nil || c.i >= len(c.b.entries) {
		if c.b != nil {
			clear(c.b.entries) // let the previous chunk's strings go
			select {
			case c.r.free <- c.b:
			default:
			}
			c.b = nil
		}
		var b *block
		var ok bool
		select {
		case b, ok = <-c.r.order:
			if !ok {
				return false, nil
			}
		case <-ctx.Done():
			return false, ctx.Err()
		}
		select {
		case <-b.done:
		case <-ctx.Done():
			return false, ctx.Err()
		}
		c.r.account(b, c.samples)
		c.b, c.i = b, 0
	}
	return true, nil
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
	workers := max(1, runtime.GOMAXPROCS(0))
	for i, in := range inputs {
		r := newReader(in, workers)
		readers[i] = r
		g.Go(func() error { return r.run(gctx, o.Stdin) })
	}

	rep := newReport(cfg, o.RejectSamples)
	g.Go(func() error {
		// Drain every reader even after an error elsewhere, so none blocks.
		defer func() {
			for _, r := range readers {
				for range r.order {
				}
			}
		}()
		h := make(cursorHeap, 0, len(readers))
		for _, r := range readers {
			c := &cursor{r: r, i: -1, samples: o.RejectSamples}
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
