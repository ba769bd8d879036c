package follow

import (
	"sync/atomic"
	"unsafe"
)

// Texts is a free list of the buffers that followed lines' text is read
// into (Options.Texts): once every batch with a line in a buffer is
// recycled (Recycle), the buffer is used again for later lines, so that
// following makes no garbage a line (issue 23: the text was the daemon's
// largest garbage, and every collection of its large heap delays the
// decision endpoint on a loaded core).
//
// The contract is the caller's: nothing may read a line's Text, nor any
// string cut from it (a parsed entry's fields), once its batch is
// recycled, unless the batch was pinned first (Pin): its buffers are then
// never used again. A string kept longer must be copied (strings.Clone).
// Texts is safe for use by several followers at once.
type Texts struct {
	free chan *text
	// poison, when set, overwrites a buffer as it comes back: a string
	// still read after its batch was recycled then reads garbage (tests).
	poison func([]byte)
}

// textSize is a buffer's size: a read (readBuf) and a held partial line
// of up to 4 KiB before it. A chunk that needs more (a longer partial
// line) gets a string of its own.
const textSize = readBuf + 4<<10

// NewTexts keeps up to n buffers (n × 68 KiB) for reuse. poison, when
// not nil, is handed each buffer as it comes back, before it is used
// again (tests: it overwrites the buffer with garbage).
func NewTexts(n int, poison func([]byte)) *Texts {
	return &Texts{free: make(chan *text, n), poison: poison}
}

// text is one buffer: refs counts the batches that hold lines of it, and
// the reader while it hands them out.
type text struct {
	b      []byte
	refs   atomic.Int32
	pinned atomic.Bool
	ts     *Texts
}

// get returns a buffer of at least n bytes with one reference (the
// reader's), or nil when n is more than a buffer holds.
func (ts *Texts) get(n int) *text {
	if ts == nil || n > textSize {
		return nil
	}
	var t *text
	select {
	case t = <-ts.free:
	default:
		t = &text{b: make([]byte, textSize), ts: ts}
	}
	t.refs.Store(1)
	return t
}

// release drops one reference to t; the last one gives it back to its
// free list, unless it was pinned (then the collector takes it, once the
// strings into it are gone).
func (t *text) release() {
	if t.refs.Add(-1) != 0 || t.pinned.Load() {
		return
	}
	if t.ts.poison != nil {
		t.ts.poison(t.b)
	}
	select {
	case t.ts.free <- t:
	default:
	}
}

// str is b, n bytes of t's buffer, as a string without a copy.
//
// unsafe: a Go string cannot be made over memory that is written again
// without package unsafe, and reusing the memory is the point (a string
// conversion copies, and each copy is garbage). What makes it safe is
// the contract of Texts (no string of a batch's lines read after Recycle
// unless pinned) and the reference counts; TestTextsNeverInUse and the
// daemon's TestTextReuseChangesNothing (buffers poisoned as they come
// back) hold them to it.
func str(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// Pin keeps the buffers of b's lines from ever being used again: a string
// of one of them may be read after b is recycled (the daemon's guard holds
// a line past its batch).
func Pin(b Batch) {
	for _, t := range b.texts {
		t.pinned.Store(true)
	}
}
