package stream_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/logjail/logjail/follow"
)

// batches collects what a source under test hands out: its lines, their
// cursors (journald's), the paths they came under.
type batches struct {
	t      *testing.T
	mu     sync.Mutex
	lines  []follow.Line
	cursor []string
	paths  map[string]bool
}

// collect receives out's batches until ctx ends, in a goroutine of its
// own. With cursors, every line must come with its cursor.
func (c *batches) collect(ctx context.Context, out <-chan follow.Batch, cursors bool) {
	c.paths = map[string]bool{}
	go func() {
		for {
			select {
			case b := <-out:
				if cursors && len(b.Cursors) != len(b.Lines) {
					c.t.Errorf("a batch of %d lines has %d cursors", len(b.Lines), len(b.Cursors))
				}
				c.mu.Lock()
				c.lines = append(c.lines, b.Lines...)
				c.cursor = append(c.cursor, b.Cursors...)
				c.paths[b.Path] = true
				c.mu.Unlock()
			case <-ctx.Done():
				return
			}
		}
	}()
}

// texts are the lines' texts so far.
func (c *batches) texts() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.lines))
	for _, l := range c.lines {
		out = append(out, l.Text)
	}
	return out
}

// waitLines waits until n lines have come (or 10 s: then the test fails,
// saying what came and detail), and returns their texts.
func (c *batches) waitLines(n int, detail func() string) []string {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond) // a poll of the lines, not a pause
	defer tick.Stop()
	for {
		got := c.texts()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("got %d lines in 10 s, want %d: %q\n%s", len(got), n, got, detail())
		}
		<-tick.C
	}
}
