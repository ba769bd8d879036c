package follow

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// textLine is line n of TestTextsNeverInUse: of 8 to 300 bytes, so that
// reads end inside lines and a chunk begins with a held part.
func textLine(n int64) string {
	return fmt.Sprintf("line %d %s", n, strings.Repeat(string(rune('a'+n%26)), int(n*7919%292)))
}

// TestTextsNeverInUse: with Options.Texts, the buffer a line's text is in
// is used again only once every batch with a line in it is recycled, and
// never once a batch with a line in it is pinned. The consumer keeps the
// last three batches it received (as the daemon keeps batches in flight)
// and checks every line of them on each new batch; the buffers that come
// back are overwritten with garbage (poison), so that one handed out again
// while a held batch still reads it shows as a line changed. One batch is
// pinned and kept to the end, when it must read as it did. The buffers
// must be used again at all: the chunks (a 64 KiB read each) share a
// handful of buffers.
func TestTextsNeverInUse(t *testing.T) {
	const lines, maxBatch = 40_000, 100
	var file strings.Builder
	for n := int64(1); n <= lines; n++ {
		file.WriteString(textLine(n))
		if n%3 == 0 {
			file.WriteString("\r\n")
		} else {
			file.WriteString("\n")
		}
	}
	name := filepath.Join(t.TempDir(), "access.log")
	appendFile(t, name, file.String())
	var mu sync.Mutex // poison runs where the last reference goes: Recycle, or the follower
	buffers := map[*byte]bool{}
	poisoned := 0
	texts := NewTexts(8, func(b []byte) {
		mu.Lock()
		defer mu.Unlock()
		buffers[&b[0]] = true
		poisoned++
		copy(b, bytes.Repeat([]byte{0xff}, len(b)))
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := make(chan Batch)
	done := make(chan error, 1)
	go func() {
		done <- Follow(ctx, Options{Paths: []string{name}, FromStart: true, MaxBatch: maxBatch, Spare: make(chan []Line, 4), Texts: texts}, out)
	}()
	type held struct {
		b     Batch
		first int64
		texts []string // the lines' texts, copied when received
	}
	check := func(h held, what string) {
		t.Helper()
		for i, l := range h.b.Lines {
			if l.Text != h.texts[i] || l.Text != textLine(h.first+int64(i)) {
				t.Fatalf("%s: line %d (of the batch from %d) reads %.40q", what, h.first+int64(i), h.first, l.Text)
			}
		}
	}
	var window []held
	var pinned *held
	next := int64(1)
	for next <= lines {
		b := nextBatch(t, out, done, next)
		h := held{b: b, first: next}
		for _, l := range b.Lines {
			h.texts = append(h.texts, strings.Clone(l.Text))
		}
		check(h, "a new batch")
		next += int64(len(b.Lines))
		if pinned == nil && h.first > lines/3 {
			Pin(b)
			pinned = &h
			Recycle(nil, b) // its buffers are never used again: its texts stay
			continue
		}
		window = append(window, h)
		for _, h := range window {
			check(h, "a batch still held")
		}
		if len(window) == 3 {
			Recycle(nil, window[0].b)
			window = window[1:]
		}
	}
	check(*pinned, "the pinned batch, at the end")
	mu.Lock()
	defer mu.Unlock()
	chunks := len(file.String()) / readBuf
	if poisoned < chunks/2 || len(buffers) > 16 {
		t.Errorf("%d chunks: %d buffers came back, %d distinct; want about one a chunk, in a few buffers", chunks, poisoned, len(buffers))
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Follow: %v", err)
	}
}
