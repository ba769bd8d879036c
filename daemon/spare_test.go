package daemon

import (
	"fmt"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/logjail/logjail/follow"
	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/rules"
)

// fill gives p a batch of n lines of file source src, each entry and line
// marked with id, as a source's parsing goroutine would.
func fill(p *parsed, src *rules.Source, id, n int) {
	p.src = src
	for i := range n {
		p.batch.Lines = append(p.batch.Lines, follow.Line{Text: fmt.Sprint(id), Line: int64(i + 1)})
		p.entries = append(p.entries, parser.Entry{Status: id, Bytes: int64(i)})
		p.lines = append(p.lines, int32(i))
	}
}

// intact fails unless p still holds what fill(p, _, id, n) put in it.
func intact(t *testing.T, p *parsed, id, n int) {
	t.Helper()
	if len(p.entries) != n || len(p.batch.Lines) != n || len(p.lines) != n {
		t.Fatalf("batch %d: %d entries, %d lines, %d indexes; want %d", id, len(p.entries), len(p.batch.Lines), len(p.lines), n)
	}
	for i := range n {
		if e := p.entries[i]; e.Status != id || e.Bytes != int64(i) || p.batch.Lines[i].Text != fmt.Sprint(id) || p.lines[i] != int32(i) {
			t.Fatalf("batch %d, entry %d: %+v, line %+v: overwritten by another batch", id, i, e, p.batch.Lines[i])
		}
	}
}

// TestSparesNeverInUse: the free list hands out a batch's memory again
// only once the decider has put it back. A parsing goroutine takes batches from
// it and fills them; a decider keeps the last few (as the daemon's
// channels hold batches in flight), checks every batch it holds on each
// new one, and puts back the oldest: memory handed out while still held
// shows as a batch overwritten. Put clears what it keeps (no entry's
// strings, no line's text held), and the memory is used again.
func TestSparesNeverInUse(t *testing.T) {
	const batches, inFlight, size = 2000, 6, 40
	src := &rules.Source{Name: "web", Type: rules.SourceFile}
	s := newSpares(inFlight, false)
	ch := make(chan *parsed, inFlight)
	go func() {
		defer close(ch)
		for id := range batches {
			p := s.get()
			// A batch's lines come from the follower's spares, as
			// follow.Follow takes them (follower.lines).
			select {
			case l := <-s.lines:
				p.batch.Lines = l[:0]
			default:
			}
			fill(p, src, id+1, size)
			ch <- p
		}
	}()
	type held struct {
		p  *parsed
		id int
	}
	var window []held
	seen := map[*parsed]bool{}
	reused, id := 0, 0
	for p := range ch {
		id++
		if seen[p] {
			reused++
		}
		seen[p] = true
		window = append(window, held{p, id})
		for _, h := range window {
			intact(t, h.p, h.id, size)
		}
		if len(window) == 3 {
			s.put(window[0].p)
			window = window[1:]
		}
	}
	if id != batches {
		t.Fatalf("%d batches, want %d", id, batches)
	}
	if reused < batches/2 {
		t.Errorf("%d of %d batches in memory used again", reused, batches)
	}
}

// TestSparesPutClears: put clears what it keeps (no entry's strings, no
// line's text held for the collector to keep alive); a stream's batch
// (package stream) is taken back but its lines are not handed to the
// file followers: only Follow's own slices are known to be a batch's
// alone.
func TestSparesPutClears(t *testing.T) {
	s := newSpares(4, false)
	f := s.get()
	fill(f, &rules.Source{Name: "web", Type: rules.SourceFile}, 7, 3)
	entries, lines := f.entries, f.batch.Lines
	s.put(f)
	for i := range entries {
		if !reflect.ValueOf(entries[i]).IsZero() || lines[i] != (follow.Line{}) {
			t.Fatalf("batch put back: entry %d %+v, line %+v not cleared", i, entries[i], lines[i])
		}
	}
	if l := <-s.lines; cap(l) != cap(lines) || len(l) != 0 {
		t.Fatalf("a file batch's lines back as %d of %d, want 0 of %d", len(l), cap(l), cap(lines))
	}
	s.get()
	p := s.get()
	fill(p, &rules.Source{Name: "j", Type: rules.SourceJournald}, 1, 3)
	s.put(p)
	select {
	case l := <-s.lines:
		t.Fatalf("a journald batch's lines went to the followers' spares (%d of capacity)", cap(l))
	default:
	}
	if q := s.get(); q != p || len(q.entries) != 0 || cap(q.entries) < 3 || q.src != nil || q.batch.Lines != nil {
		t.Fatalf("put back and taken again: %+v", q)
	}
}

// BenchmarkParseBatch: a batch of 512 combined lines parsed as the
// daemon's parsing goroutine parses it (with the goroutine's TimeMemo), its
// memory new for each batch (spare=false, as before spares) or put back
// after it (spare=true); allocs/op and B/op are a batch's.
func BenchmarkParseBatch(b *testing.B) {
	pr, err := parser.New(parser.Options{Format: "combined"})
	if err != nil {
		b.Fatal(err)
	}
	src := &rules.Source{Name: "web", Type: rules.SourceFile}
	t0 := time.Date(2026, 11, 26, 2, 0, 0, 0, time.UTC)
	lines := make([]follow.Line, 512)
	for i := range lines {
		ip := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(i)})
		lines[i] = follow.Line{Line: int64(i + 1), Text: fmt.Sprintf(`%s - - [%s] "GET /x?i=%d HTTP/1.1" 200 1 "-" "bench"`,
			ip, t0.Format("02/Jan/2006:15:04:05 -0700"), i)}
	}
	for _, spare := range []bool{false, true} {
		b.Run(fmt.Sprintf("spare=%v", spare), func(b *testing.B) {
			s := newSpares(4, false)
			var memo parser.TimeMemo // the source's goroutine's (decider.follow)
			b.ReportAllocs()
			for b.Loop() {
				p := &parsed{}
				if spare {
					p = s.get()
				}
				p.src, p.parser, p.batch, p.memo = src, pr, follow.Batch{Lines: lines}, &memo
				p.parse()
				if len(p.entries) != len(lines) {
					b.Fatalf("%d entries: %v", len(p.entries), p.firstErr)
				}
				if spare {
					p.src = nil // the lines are the benchmark's: not recycled
					s.put(p)
				}
			}
		})
	}
}
