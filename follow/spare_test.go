package follow

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// checkBatch fails unless b holds the consecutive lines from first on.
func checkBatch(t *testing.T, b Batch, first int64, what string) {
	t.Helper()
	for i, l := range b.Lines {
		if want := first + int64(i); l.Line != want || l.Text != fmt.Sprintf("line %d", want) {
			t.Fatalf("%s: line %d of the batch from %d is %d %q", what, i, first, l.Line, l.Text)
		}
	}
}

// TestSpareNeverInUse: with Options.Spare, a batch's slice of lines is
// used again only once the consumer has recycled it. The consumer keeps
// the last three batches it received (as the daemon keeps batches in
// flight between its stages) and checks them on every new batch: a slice
// handed out again while still held shows as lines overwritten. It also
// checks that the slices are used again at all, and that a recycled
// slice holds no text.
func TestSpareNeverInUse(t *testing.T) {
	const lines, maxBatch = 20_000, 64
	name := filepath.Join(t.TempDir(), "access.log")
	appendFile(t, name, numbered("line", 1, lines))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := make(chan Batch)
	spare := make(chan []Line, 4)
	done := make(chan error, 1)
	go func() {
		done <- Follow(ctx, Options{Paths: []string{name}, FromStart: true, MaxBatch: maxBatch, Spare: spare}, out)
	}()
	type held struct {
		b     Batch
		first int64
	}
	var window []held
	recycled := map[*Line]bool{} // the first element of every slice recycled
	reused := 0
	next := int64(1)
	for next <= lines {
		b := nextBatch(t, out, done, next)
		if len(b.Lines) == 0 || len(b.Lines) > maxBatch {
			t.Fatalf("batch of %d lines", len(b.Lines))
		}
		if recycled[&b.Lines[:1][0]] {
			reused++
		}
		checkBatch(t, b, next, "new batch")
		window = append(window, held{b, next})
		next += int64(len(b.Lines))
		for _, h := range window {
			checkBatch(t, h.b, h.first, "a batch still held")
		}
		if len(window) == 3 {
			old := window[0].b
			window = window[1:]
			// Recycled through a channel of the test's own, and looked at
			// before it goes on to spare: once there, the follower may
			// write to it (reading it after was a race).
			mid := make(chan []Line, 1)
			Recycle(mid, old)
			recycled[&old.Lines[:1][0]] = true
			for i, l := range old.Lines {
				if l != (Line{}) {
					t.Fatalf("recycled batch: line %d still %+v", i, l)
				}
			}
			select {
			case spare <- <-mid:
			default:
			}
		}
	}
	if reused == 0 {
		t.Errorf("%d batches, none in a recycled slice", (lines+maxBatch-1)/maxBatch)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Follow: %v", err)
	}
}

// BenchmarkFollowBatches: following a file of 100,000 lines in batches
// of 512, with and without Options.Spare, and with Options.Texts (the
// chunks' text, one a 64 KiB read, in buffers used again: no text
// garbage).
func BenchmarkFollowBatches(b *testing.B) {
	const lines = 100_000
	name := filepath.Join(b.TempDir(), "access.log")
	line := `2001:db8::1 - - [26/Nov/2026:02:00:00 +0000] "GET /x HTTP/1.1" 200 1 "-" "bench"` + "\n"
	if err := os.WriteFile(name, []byte(strings.Repeat(line, lines)), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ spare, texts bool }{{false, false}, {true, false}, {true, true}} {
		spare := c.spare
		var texts *Texts
		if c.texts {
			texts = NewTexts(8, nil)
		}
		b.Run(fmt.Sprintf("spare=%v/texts=%v", spare, c.texts), func(b *testing.B) {
			b.ReportAllocs()
			var batches int
			for b.Loop() {
				ctx, cancel := context.WithCancel(context.Background())
				out := make(chan Batch)
				var sp chan []Line
				if spare {
					sp = make(chan []Line, 4)
				}
				done := make(chan error, 1)
				go func() {
					done <- Follow(ctx, Options{Paths: []string{name}, FromStart: true, Poll: true, Spare: sp, Texts: texts}, out)
				}()
				for n := 0; n < lines; {
					bt := <-out
					n += len(bt.Lines)
					batches++
					Recycle(sp, bt)
				}
				cancel()
				<-done
			}
			b.ReportMetric(float64(batches)/float64(b.N), "batches/op")
		})
	}
}

// nextBatch is the next batch Follow sends on out (its lines from line
// next on), or the test's end: Follow returned (done), or nothing came.
func nextBatch(t *testing.T, out <-chan Batch, done <-chan error, next int64) Batch {
	t.Helper()
	select {
	case b := <-out:
		return b
	case err := <-done:
		t.Fatalf("Follow returned: %v", err)
	case <-time.After(wait):
		t.Fatalf("waiting for line %d", next)
	}
	return Batch{}
}
