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

	"github.com/logjail/logjail/source"
)

// reader is one open file and how far it was read. off and line are past
// the last line handed out; pos = off + partLen is where reading goes on.
type reader struct {
	name       string // the file's name when opened
	f          *os.File
	id         source.FileID
	headFinal  bool // id.HeadHash covers a whole first line (or source.HeadSize bytes)
	off, line  int64
	pos        int64
	part       []byte // the held partial line (at most source.MaxLine+1 bytes of it)
	partLen    int64  // its whole length
	lastSize   int64  // the size at the last read
	lastGrowth time.Time
}

// openReader opens name at its start.
func openReader(name string, now time.Time) (*reader, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	r := &reader{name: name, f: f, lastGrowth: now}
	if err := r.identify(); err != nil {
		f.Close()
		return nil, err
	}
	return r, nil
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
func (r *reader) lines(data []byte, emit func(Line) error) error {
	last := bytes.LastIndexByte(data, '\n')
	if last < 0 {
		r.hold(data)
		return nil
	}
	kept, held := len(r.part), r.partLen
	var chunk string // one allocation for the chunk's lines
	if kept == 0 {
		chunk = string(data[:last+1])
	} else {
		chunk = string(append(r.part, data[:last+1]...))
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
func (r *reader) close() { r.f.Close() }

// drain reads what r's file holds past r.pos and sends its whole lines
// under path. A file that shrank below what was read, or whose first line
// changed, was truncated: it is read again from its start. more says that
// reading stopped before the end of the file (readSlice).
func (f *follower) drain(ctx context.Context, path string, r *reader) (more bool, err error) {
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
	var lines []Line
	send := func() error {
		if len(lines) == 0 {
			return nil
		}
		if !r.headFinal {
			r.id.HeadHash, r.headFinal, _ = r.head()
		}
		id := r.id
		id.Size = max(size, r.pos)
		select {
		case f.out <- Batch{Path: path, File: id, Lines: lines}:
		case <-ctx.Done():
			return ctx.Err()
		}
		lines = nil
		return nil
	}
	emit := func(l Line) error {
		if lines == nil {
			lines = make([]Line, 0, min(f.o.MaxBatch, 64))
		}
		lines = append(lines, l)
		if len(lines) >= f.o.MaxBatch {
			return send()
		}
		return nil
	}
	read := 0
	for {
		n, rerr := r.f.ReadAt(f.buf, r.pos)
		if n > 0 {
			r.pos += int64(n)
			read += n
			r.lastGrowth = f.now()
			if err := r.lines(f.buf[:n], emit); err != nil {
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

// headChanged reports whether the file's first line is no longer the one
// identified (a truncated file written again past the offset read).
func (r *reader) headChanged() bool {
	if !r.headFinal {
		return false
	}
	h, _, err := r.head()
	return err == nil && h != r.id.HeadHash
}
