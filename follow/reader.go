package follow

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/logjail/logjail/rotation"
	"github.com/logjail/logjail/source"
)

// reader is one open file and how far it was read. off and line are past
// the last line handed out; pos = off + partLen is where reading goes on.
type reader struct {
	name string // the file's name when opened
	f    *os.File
	// z is a compressed rotated file's decompressed stream, read in order
	// (pos counts its bytes); nil for a plain file, read with pread.
	z  io.Reader
	zc io.Closer
	// done says the file is finished once read to its end: a rotated
	// copy, a compressed file, a file that a newer rotated file follows.
	done       bool
	id         source.FileID
	headFinal  bool // id.HeadHash covers a whole first line (or source.HeadSize bytes)
	off, line  int64
	pos        int64
	part       []byte // the held partial line (at most source.MaxLine+1 bytes of it)
	partLen    int64  // its whole length
	lastSize   int64  // the size at the last read
	lastGrowth time.Time
	text       *text // the buffer of the lines being emitted, if a Texts one
}

// Errors of files that are not followed.
var (
	ErrNotRegular = errors.New("not a regular file: not followed")
	ErrBinary     = errors.New("binary or compressed content, not a text log: not followed")
)

// openReader opens name, the file at a followed path, at its start. It
// never blocks (a FIFO or a device is refused, not opened for reading),
// and refuses a binary or compressed file.
func openReader(name string, now time.Time) (*reader, error) {
	r, err := openFile(name, now, false)
	if err != nil {
		return nil, err
	}
	var head [512]byte
	n, _ := r.f.ReadAt(head[:], 0)
	if rotation.Binary(head[:n]) {
		r.close()
		return nil, fmt.Errorf("%s: %w", name, ErrBinary)
	}
	return r, nil
}

// openSibling opens name, a rotated file, at its start, decompressing a
// compressed one (its FileID's HeadHash is then the fingerprint of the
// decompressed stream).
func openSibling(name string, now time.Time) (*reader, error) {
	return openFile(name, now, true)
}

func openFile(name string, now time.Time, decompress bool) (*reader, error) {
	// A special file is not even opened (opening a device may act on it,
	// opening a FIFO wakes its writer); O_NONBLOCK covers the race with a
	// file replaced by one between the stat and the open: opening a FIFO
	// without a writer would wait for one.
	if fi, err := os.Stat(name); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s (%s): %w", name, kind(fi.Mode()), ErrNotRegular)
	}
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s (%s): %w", name, kind(fi.Mode()), ErrNotRegular)
	}
	r := &reader{name: name, f: f, lastGrowth: now}
	if decompress {
		var magic [6]byte
		n, _ := f.ReadAt(magic[:], 0)
		if rotation.Magic(magic[:n]) != rotation.None {
			zr, _, err := rotation.Decompress(f)
			if err != nil {
				f.Close()
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			head := make([]byte, rotation.HeadSize)
			m, err := io.ReadFull(zr, head)
			if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				zr.Close()
				f.Close()
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			r.z, r.zc, r.done = io.MultiReader(bytes.NewReader(head[:m]), zr), zr, true
			st, _ := fi.Sys().(*syscall.Stat_t)
			r.id = source.FileID{Size: fi.Size()}
			if st != nil {
				r.id.Dev, r.id.Inode = uint64(st.Dev), st.Ino
			}
			r.id.HeadHash, _ = rotation.Head(head[:m])
			r.headFinal = true
			return r, nil
		}
	}
	if err := r.identify(); err != nil {
		f.Close()
		return nil, err
	}
	return r, nil
}

// kind names a file type for a log line.
func kind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&os.ModeNamedPipe != 0:
		return "fifo"
	case m&os.ModeDevice != 0:
		return "device"
	case m&os.ModeSocket != 0:
		return "socket"
	}
	return m.Type().String()
}

// skipTo places a reader opened at its start at offset off after line
// lines; it fails when the file holds fewer than off bytes.
func (r *reader) skipTo(off, line int64) error {
	if r.z == nil {
		if r.id.Size < off {
			return fmt.Errorf("%s: %d bytes, not %d", r.name, r.id.Size, off)
		}
		r.seek(off, line)
		return nil
	}
	if n, err := io.CopyN(io.Discard, r.z, off); err != nil {
		return fmt.Errorf("%s: %d bytes decompressed, not %d: %w", r.name, n, off, err)
	}
	r.seek(off, line)
	return nil
}

// identify computes r's FileID from the open file (the name may now be
// another file's).
func (r *reader) identify() (err error) {
	r.id, r.headFinal, err = source.IdentifyFile(r.f)
	return err
}

// head returns the hash of the file's first line and whether that line is
// complete.
func (r *reader) head() (string, bool, error) { return source.HeadHash(r.f) }

// sameFile reports whether fi is the file id identifies.
func sameFile(fi os.FileInfo, id source.FileID) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && uint64(st.Dev) == id.Dev && st.Ino == id.Inode
}

// seek places r after line lines, at offset off.
func (r *reader) seek(off, line int64) {
	r.off, r.line, r.pos = off, line, off
	r.part, r.partLen = r.part[:0], 0
}

// toEnd places r at the end of the file's last whole line, counting lines
// on the way (a file never seen before, read "from end").
func (r *reader) toEnd(buf []byte) error {
	var pos, off, line int64
	for {
		n, err := r.f.ReadAt(buf, pos)
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			off = pos + int64(i) + 1
			line += int64(bytes.Count(buf[:n], []byte{'\n'}))
		}
		pos += int64(n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
	}
	r.seek(off, line)
	return nil
}

// hold keeps p as (more of) the partial last line.
func (r *reader) hold(p []byte) {
	r.partLen += int64(len(p))
	if room := source.MaxLine + 1 - len(r.part); room > 0 {
		r.part = append(r.part, p[:min(room, len(p))]...)
	}
}

// lines splits data, just read at pos, into whole lines and holds the rest.
// The lines' text is one chunk: a buffer of ts when it can give one
// (r.text while the lines are emitted), else a string of its own.
func (r *reader) lines(data []byte, ts *Texts, emit func(Line) error) error {
	last := bytes.LastIndexByte(data, '\n')
	if last < 0 {
		r.hold(data)
		return nil
	}
	kept, held := len(r.part), r.partLen
	var chunk string // one allocation for the chunk's lines
	if t := ts.get(kept + last + 1); t != nil {
		// The held part and the new bytes, into a buffer used again
		// once the batches of its lines are recycled (Texts).
		copy(t.b, r.part)
		copy(t.b[kept:], data[:last+1])
		chunk = str(t.b[:kept+last+1])
		r.text = t
		defer func() {
			r.text = nil
			t.release() // the reader's reference: the batches hold theirs
		}()
	} else if kept == 0 {
		chunk = string(data[:last+1])
	} else {
		// The held part and the new bytes copied once, into the chunk
		// (appending them to r.part first made a second chunk of
		// garbage on nearly every read: a read ends inside a line).
		var b strings.Builder
		b.Grow(kept + last + 1)
		b.Write(r.part)
		b.Write(data[:last+1])
		chunk = b.String()
	}
	r.part, r.partLen = r.part[:0], 0
	for start := 0; start < len(chunk); {
		i := start + strings.IndexByte(chunk[start:], '\n')
		text := chunk[start:i]
		n := int64(i + 1 - start)
		if start == 0 {
			n += held - int64(kept) // bytes of an over-long line not kept
		}
		long := len(text) > source.MaxLine
		if long {
			text = text[:source.MaxLine]
		}
		r.off += n
		r.line++
		if err := emit(Line{Text: strings.TrimSuffix(text, "\r"), Line: r.line, Offset: r.off, Truncated: long}); err != nil {
			return err
		}
		start = i + 1
	}
	r.hold(data[last+1:])
	return nil
}

// close closes the file.
func (r *reader) close() {
	if r.zc != nil {
		r.zc.Close()
	}
	r.f.Close()
}

// drain reads what r's file holds past r.pos and sends its whole lines
// under path. A file that shrank below what was read, or whose first line
// changed, was truncated: it is read again from its start. more says that
// reading stopped before the end of the file (readSlice).
func (f *follower) drain(ctx context.Context, path string, r *reader) (more bool, err error) {
	if r.z != nil {
		return f.drainStream(ctx, path, r)
	}
	fi, err := r.f.Stat()
	if err != nil {
		f.log.Warn("stat", "path", path, "file", r.name, "err", err)
		return false, nil
	}
	size := fi.Size()
	if size < r.pos || (size != r.lastSize && r.headChanged()) {
		f.log.Info("truncated: reading from the start", "path", path, "file", r.name, "size", size, "offset", r.pos)
		r.seek(0, 0)
		if err := r.identify(); err != nil {
			f.log.Warn("identify", "path", path, "file", r.name, "err", err)
		}
	}
	r.lastSize = size
	send, emit := f.batcher(ctx, path, r, func() int64 { return max(size, r.pos) })
	read := 0
	for {
		n, rerr := r.f.ReadAt(f.buf, r.pos)
		if n > 0 {
			read += n
			if err := f.consume(r, n, emit); err != nil {
				return false, err
			}
		}
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			f.log.Warn("read", "path", path, "file", r.name, "err", rerr)
		}
		if rerr != nil || n < len(f.buf) {
			break
		}
		if read >= readSlice {
			more = true
			break
		}
	}
	return more, send()
}

// consume takes the n bytes just read into f.buf as r's, past r.pos, and
// emits their whole lines.
func (f *follower) consume(r *reader, n int, emit func(Line) error) error {
	r.pos += int64(n)
	r.lastGrowth = f.now()
	return r.lines(f.buf[:n], f.o.Texts, emit)
}

// batcher returns the functions that collect r's lines into batches for
// path (emit) and send the last one (send); size gives the file's size for
// the batch's FileID.
func (f *follower) batcher(ctx context.Context, path string, r *reader, size func() int64) (send func() error, emit func(Line) error) {
	var lines []Line
	var texts []*text // the buffers lines' texts are in, one reference each
	send = func() error {
		if len(lines) == 0 {
			return nil
		}
		if !r.headFinal {
			r.id.HeadHash, r.headFinal, _ = r.head()
		}
		id := r.id
		id.Size = size()
		select {
		case f.out <- Batch{Path: path, File: id, Lines: lines, texts: texts}:
		case <-ctx.Done():
			return ctx.Err()
		}
		lines, texts = nil, nil
		return nil
	}
	emit = func(l Line) error {
		if lines == nil {
			lines = f.lines()
		}
		if t := r.text; t != nil && (len(texts) == 0 || texts[len(texts)-1] != t) {
			t.refs.Add(1)
			texts = append(texts, t)
		}
		lines = append(lines, l)
		if len(lines) >= f.o.MaxBatch {
			return send()
		}
		return nil
	}
	return send, emit
}

// lines returns an empty slice for a batch's lines: a spare one
// (Options.Spare) of MaxBatch lines, or a new one.
func (f *follower) lines() []Line {
	select {
	case l := <-f.o.Spare:
		if cap(l) >= f.o.MaxBatch {
			return l[:0]
		}
	default:
	}
	if f.o.Spare != nil {
		return make([]Line, 0, f.o.MaxBatch) // recycled: sized once, never grown
	}
	return make([]Line, 0, min(f.o.MaxBatch, 64))
}

// drainStream reads a compressed file's decompressed stream on from r.pos
// (at most readSlice bytes a call) and sends its whole lines under path.
func (f *follower) drainStream(ctx context.Context, path string, r *reader) (more bool, err error) {
	send, emit := f.batcher(ctx, path, r, func() int64 { return r.pos })
	read := 0
	for {
		n, rerr := r.z.Read(f.buf)
		if n > 0 {
			read += n
			if err := f.consume(r, n, emit); err != nil {
				return false, err
			}
		}
		if rerr != nil {
			if !errors.Is(rerr, io.EOF) {
				f.log.Warn("read compressed file: the rest of it is skipped", "path", path, "file", r.name, "offset", r.pos, "err", rerr)
			}
			r.z = eofReader{}
			break
		}
		if read >= readSlice {
			more = true
			break
		}
	}
	return more, send()
}

// eofReader is a stream at its end.
type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// truncated reports whether the file shrank below what was read, or its
// first line changed (a truncated file written again past the offset).
func (r *reader) truncated() bool {
	if r.z != nil {
		return false
	}
	fi, err := r.f.Stat()
	if err != nil {
		return false
	}
	size := fi.Size()
	if size < r.pos || (size != r.lastSize && r.headChanged()) {
		return true
	}
	r.lastSize = size // drain need not look at the first line again
	return false
}

// headChanged reports whether the file's first line is no longer the one
// identified (a truncated file written again past the offset read).
func (r *reader) headChanged() bool {
	if !r.headFinal {
		return false
	}
	h, _, err := r.head()
	return err == nil && h != r.id.HeadHash
}
