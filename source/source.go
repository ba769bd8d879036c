// Package source opens access logs and reads them line by line: plain files,
// compressed files (gzip, bzip2, xz, zstd, recognised by their magic bytes,
// whatever their name), standard input and globs. Which names are rotated
// siblings of a log, and how a rotated file is recognised, is package
// rotation's model, which this package uses.
//
// Lines are handed out as strings that share one allocation per read chunk
// (64 KiB and more): they stay valid, but keeping a small piece of a line
// keeps its whole chunk in memory, so a caller that keeps pieces for long
// (keys, the daemon's state) clones them (strings.Clone). A reader told to
// recycle its chunks (LineReader.RecycleChunks: replay) reads into the
// buffers of chunks its caller is done with instead: no new memory per
// chunk, and its lines valid only until the caller says so. A caller
// cutting a log into blocks takes a block's lines at once
// (LineReader.AppendLines) rather than calling Next for each. Nothing here
// parses; nothing here keeps global state.
//
// Boundaries: It owns opening a log (plain, compressed, stdin, globs) and
// cutting it into lines. It must not decide what a line means (parser) nor
// remember where it stopped (follow, store).
package source

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/rotation"
)

// Stdin is the name that stands for standard input.
const Stdin = "-"

// Open opens name for reading, transparently decompressing gzip, bzip2, xz
// and zstd content (rotation.Decompress).
// Name "-" reads stdin (which Open does not close).
func Open(name string, stdin io.Reader) (io.ReadCloser, error) {
	rc, _, err := open(name, stdin, new(atomic.Int64), 0)
	return rc, err
}

// open is Open, counting the bytes read from the file in read and returning
// the file's size (0 when not a regular file). With offset > 0 the stream
// (decompressed, for a gzip file) is positioned there: a plain file by a
// seek, anything else by reading and discarding.
func open(name string, stdin io.Reader, read *atomic.Int64, offset int64) (io.ReadCloser, int64, error) {
	var rc io.ReadCloser
	var size int64
	var seeker *os.File
	if name == Stdin {
		rc = io.NopCloser(countingReader{stdin, read})
	} else {
		f, err := os.Open(name)
		if err != nil {
			return nil, 0, err
		}
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			size, seeker = fi.Size(), f
		}
		rc = struct {
			io.Reader
			io.Closer
		}{countingReader{f, read}, f}
	}
	if seeker != nil && offset > 0 {
		var magic [6]byte
		if n, _ := seeker.ReadAt(magic[:], 0); rotation.Magic(magic[:n]) == rotation.None {
			if _, err := seeker.Seek(offset, io.SeekStart); err != nil {
				rc.Close()
				return nil, 0, fmt.Errorf("%s: seek to %d: %w", name, offset, err)
			}
			read.Store(offset)
			offset = 0
		}
	}
	zr, format, err := rotation.Decompress(rc)
	if err != nil {
		rc.Close()
		return nil, 0, fmt.Errorf("%s: %w", name, err)
	}
	var out io.ReadCloser = &compressedFile{Reader: zr, z: zr, under: rc}
	if format == rotation.None {
		out = &compressedFile{Reader: zr, under: rc}
	}
	if offset > 0 {
		if n, err := io.CopyN(io.Discard, out, offset); err != nil {
			out.Close()
			return nil, 0, fmt.Errorf("%s: skipping to %d: only %d bytes: %w", name, offset, n, err)
		}
	}
	return out, size, nil
}

// compressedFile is a file read through its decompressor (z nil: none).
type compressedFile struct {
	io.Reader
	z     io.Closer
	under io.Closer
}

func (c *compressedFile) Close() error {
	var err error
	if c.z != nil {
		err = c.z.Close()
	}
	return errors.Join(err, c.under.Close())
}

// Expand turns the command line's arguments into file names: "-" stays as it
// is, a glob is expanded (sorted by name, a log's rotated siblings oldest
// first and the log after them: RotationOrder; directories left out), and a
// plain name
// must exist and not be a directory. A glob that matches no file is an
// error: an operator who typed it expected files.
func Expand(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		if a == Stdin {
			out = append(out, a)
			continue
		}
		if !strings.ContainsAny(a, "*?[") {
			fi, err := os.Stat(a)
			if err != nil {
				return nil, err
			}
			if fi.IsDir() {
				return nil, fmt.Errorf("%s is a directory: name its logs, e.g. '%s'", a, filepath.Join(a, "*.log"))
			}
			out = append(out, a)
			continue
		}
		m, err := filepath.Glob(a)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", a, err)
		}
		m = slices.DeleteFunc(m, func(name string) bool {
			fi, err := os.Stat(name)
			return err == nil && fi.IsDir()
		})
		if len(m) == 0 {
			return nil, fmt.Errorf("%s: no file matches", a)
		}
		sort.Strings(m)
		RotationOrder(m)
		out = append(out, m...)
	}
	return out, nil
}

// RotationOrder sorts names (sorted by name) in place so that the rotated
// siblings of a log among them (package rotation) come in the order they
// were rotated, oldest first, then the log itself: access.log.3.gz,
// access.log.2.gz, access.log.1, access.log. Other names keep their order.
func RotationOrder(names []string) {
	in := make(map[string]bool, len(names))
	for _, n := range names {
		in[filepath.Clean(n)] = true
	}
	type item struct {
		root string
		name rotation.Name
		log  bool
	}
	items := make(map[string]item, len(names))
	for _, n := range names {
		it := item{root: filepath.Clean(n), log: true}
		for _, b := range rotation.Bases(n, "", "") {
			if in[b] && len(b) < len(it.root) {
				it.root, it.log = b, false
			}
		}
		if !it.log {
			it.name, _ = rotation.Parse(n, it.root, "")
			if fi, err := os.Stat(n); err == nil {
				it.name.ModTime = fi.ModTime()
			}
		}
		items[n] = it
	}
	slices.SortStableFunc(names, func(a, b string) int {
		x, y := items[a], items[b]
		if c := strings.Compare(x.root, y.root); c != 0 {
			return c
		}
		switch {
		case x.log && y.log:
			return 0
		case x.log:
			return 1
		case y.log:
			return -1
		}
		return rotation.Compare(x.name, y.name)
	})
}

// MaxLine is the longest line a LineReader hands out whole; a longer line is
// cut there and reported by Truncated (the rest of it is skipped).
const MaxLine = 1 << 20

// TooLong is the error of line number n, cut at MaxLine: a line that long is
// no access-log line, and is rejected whatever its head reads as.
func TooLong(n int) *parser.Error {
	return &parser.Error{Line: n, Field: "line", Reason: fmt.Sprintf("longer than %d bytes", MaxLine)}
}

// LineReader reads lines from r in large chunks. The zero value is not
// usable; call NewLineReader.
//
// Offset says where the lines returned so far end in the stream, exactly,
// so that a reader that stops after any line can start again there
// (NewLineReaderAt) without losing or repeating one.
type LineReader struct {
	r         io.Reader
	buf       []byte
	chunk     string // the current chunk, one allocation shared by its lines
	pos       int
	n         int   // lines handed out
	bytes     int64 // offset in the stream just after the bytes read from r
	start     int64 // offset in the stream of chunk[0]
	long      bool  // chunk is the head of one over-long line, plus "\n"
	longEnd   int64 // for a long chunk: the offset just after the line's newline
	err       error
	eof       bool
	truncated bool

	// Recycling (RecycleChunks): seq numbers the chunks; inUse says
	// which are still read; retired are the buffers of the chunks handed
	// out, oldest first, and free those no line is read from any more.
	seq     uint64
	inUse   func() uint64
	size    int
	retired []retiredChunk
	free    [][]byte
	reused  int // buffers read into again
}

// retiredChunk is a buffer whose chunk (number seq) was handed out.
type retiredChunk struct {
	seq uint64
	buf []byte
}

// NewLineReader returns a reader of the lines of r.
func NewLineReader(r io.Reader) *LineReader {
	return NewLineReaderAt(r, 0, 0)
}

// NewLineReaderAt returns a reader of the lines of r, which is positioned at
// offset in its stream after line lines: Offset and the line numbers go on
// from there.
func NewLineReaderAt(r io.Reader, offset int64, line int) *LineReader {
	return &LineReader{r: r, buf: make([]byte, 0, 64<<10), n: line, bytes: offset, start: offset}
}

// Next returns the next line without its line ending ("\n" or "\r\n") and
// its 1-based number. It returns ok false at the end of input or on a read
// error (see Err). A last line without a newline is returned too.
func (lr *LineReader) Next() (line string, n int, ok bool) {
	for {
		if lr.pos < len(lr.chunk) {
			rest := lr.chunk[lr.pos:]
			i := strings.IndexByte(rest, '\n')
			var l string
			if i < 0 { // only at EOF: the chunk always ends in a newline otherwise
				l = rest
				lr.pos = len(lr.chunk)
			} else {
				l = rest[:i]
				lr.pos += i + 1
			}
			lr.truncated = lr.long
			if len(l) > MaxLine {
				l = l[:MaxLine]
				lr.truncated = true
			}
			l = strings.TrimSuffix(l, "\r")
			lr.n++
			return l, lr.n, true
		}
		if !lr.fill() {
			return "", lr.n, false
		}
	}
}

// AppendLines appends the next lines to dst, at most n (n > 0), as Next
// returns them, and returns dst and the number of the first line appended;
// ok false at the end of input (nothing appended) or on a read error (see
// Err). It stops after a line Truncated reports (so that the caller knows
// which), and Truncated and Chunk are then those of the last line
// appended. A reader cutting a log into blocks of lines calls it once a
// block, not Next once a line: the lines of the chunk read are cut in one
// loop.
func (lr *LineReader) AppendLines(dst []string, n int) (out []string, first int, ok bool) {
	first = lr.n + 1
	for k := 0; k < n; {
		if lr.pos < len(lr.chunk) && !lr.long {
			// Next's own steps for the lines of the chunk read, with the
			// position and count in registers; a line over MaxLine (which
			// Next cuts) goes to Next.
			chunk, pos, ln := lr.chunk, lr.pos, lr.n
			for ; k < n && pos < len(chunk); k++ {
				start := pos
				l := chunk[pos:]
				if i := strings.IndexByte(l, '\n'); i < 0 {
					pos = len(chunk)
				} else {
					l = l[:i]
					pos += i + 1
				}
				if len(l) > MaxLine {
					pos = start // Next cuts it
					break
				}
				if len(l) > 0 && l[len(l)-1] == '\r' {
					l = l[:len(l)-1]
				}
				ln++
				dst = append(dst, l)
			}
			lr.pos, lr.n, lr.truncated = pos, ln, false
			if k == n {
				break
			}
		}
		l, _, more := lr.Next()
		if !more {
			break
		}
		dst = append(dst, l)
		k++
		if lr.truncated {
			break
		}
	}
	return dst, first, lr.n >= first
}

// RecycleChunks makes lr read into buffers it uses again, instead of a new
// chunk of memory for every read (each new chunk's pages fault in, and
// become garbage): a line it hands out is a view of such a buffer, valid
// only until inUse tells that no line of its chunk is read any more. The
// chunks are numbered from 1 in reading order (Chunk); inUse, called from
// the goroutine that calls Next, returns the oldest chunk whose lines may
// still be read (0: all may), and the buffers of the chunks before it are
// read into again. size is a buffer's size (0: 64 KiB), at least the
// longest line plus one for a chunk of one line (a longer one gets a
// buffer of its own, which is not used again). The caller must copy any
// piece of a line it keeps past that point (strings.Clone). Call it before
// the first Next.
func (lr *LineReader) RecycleChunks(inUse func() uint64, size int) {
	if size <= 0 {
		size = 64 << 10
	}
	lr.inUse, lr.size = inUse, size
	lr.buf = make([]byte, 0, size)
}

// Chunk returns the number of the chunk the line last returned is in (from
// 1 in reading order), for RecycleChunks' inUse.
func (lr *LineReader) Chunk() uint64 { return lr.seq }

// reclaim moves the buffers of the chunks no longer read to the free list.
func (lr *LineReader) reclaim() {
	if len(lr.retired) == 0 {
		return
	}
	bound := lr.inUse()
	k := 0
	for k < len(lr.retired) && lr.retired[k].seq < bound {
		lr.free = append(lr.free, lr.retired[k].buf)
		lr.retired[k] = retiredChunk{}
		k++
	}
	if k > 0 {
		lr.retired = lr.retired[:copy(lr.retired, lr.retired[k:])]
	}
}

// newBuf returns an empty buffer of lr.size: a free one, or a new one.
func (lr *LineReader) newBuf() []byte {
	lr.reclaim()
	if n := len(lr.free); n > 0 {
		b := lr.free[n-1]
		lr.free[n-1] = nil
		lr.free = lr.free[:n-1]
		lr.reused++
		return b[:0]
	}
	return make([]byte, 0, lr.size)
}

// handOut makes buf[:end] the current chunk and keeps buf[end:] (the
// head of the next line) as what the next read appends to. Without
// recycling the chunk is a copy; with it, the chunk is buf itself (a view,
// see RecycleChunks), retired with its number, and the rest moves into
// another buffer.
func (lr *LineReader) handOut(buf []byte, end int) {
	lr.seq++
	lr.start = lr.bytes - int64(len(buf))
	lr.pos, lr.long = 0, false
	if lr.inUse == nil {
		lr.chunk = string(buf[:end])
		lr.buf = buf[:copy(buf, buf[end:])]
		return
	}
	nb := lr.newBuf()
	lr.buf = append(nb, buf[end:]...)
	// A view, not a copy: the buffer is not written again until inUse
	// says no line of this chunk is read any more (RecycleChunks), which
	// is the caller's promise. The only way to hand out strings of memory
	// used again; TestRecycledLinesAsPlain checks every line against a
	// plain reader's while the buffers go round.
	lr.chunk = unsafe.String(unsafe.SliceData(buf), end)
	if cap(buf) == lr.size {
		lr.retired = append(lr.retired, retiredChunk{lr.seq, buf})
	}
}

// Truncated reports whether the line last returned was longer than MaxLine.
func (lr *LineReader) Truncated() bool { return lr.truncated }

// Offset returns the offset in the stream just after the last line returned
// and its line ending: where the next line starts.
func (lr *LineReader) Offset() int64 {
	if lr.long && lr.pos == len(lr.chunk) {
		return lr.longEnd
	}
	return lr.start + int64(lr.pos)
}

// Line returns the number of the last line returned (0 before the first).
func (lr *LineReader) Line() int { return lr.n }

// Err returns the first read error other than io.EOF.
func (lr *LineReader) Err() error { return lr.err }

// read reads into buf's spare capacity.
func (lr *LineReader) read(buf []byte) ([]byte, error) {
	m, err := lr.r.Read(buf[len(buf):cap(buf)])
	lr.bytes += int64(m)
	if err != nil && !errors.Is(err, io.EOF) {
		lr.err = err
	}
	return buf[:len(buf)+m], err
}

// fill reads the next chunk: whole lines only, except at the end of input.
func (lr *LineReader) fill() bool {
	if lr.eof {
		return false
	}
	buf := lr.buf
	for {
		if len(buf) == cap(buf) {
			if len(buf) > MaxLine {
				// An over-long line: hand out its head (Next cuts it to
				// MaxLine) and read on to its newline now, so that Offset
				// after it is exact.
				lr.seq++
				lr.chunk, lr.pos, lr.long = string(buf[:MaxLine+1])+"\n", 0, true
				lr.start = lr.bytes - int64(len(buf))
				lr.buf, lr.longEnd = lr.skipLine(buf[:0])
				return true
			}
			nb := make([]byte, len(buf), 2*cap(buf))
			copy(nb, buf)
			if lr.inUse != nil && cap(buf) == lr.size {
				lr.free = append(lr.free, buf) // nothing of it was handed out
			}
			buf = nb
		}
		var err error
		old := len(buf) // buf[:old] holds no newline: search only what is new
		buf, err = lr.read(buf)
		if err != nil {
			lr.eof = true
			if len(buf) == 0 {
				lr.buf = buf
				return false
			}
			lr.handOut(buf, len(buf))
			return true
		}
		if i := bytes.LastIndexByte(buf[old:], '\n'); i >= 0 {
			lr.handOut(buf, old+i+1)
			return true
		}
	}
}

// skipLine discards input up to and including the next newline. It returns
// the bytes read after the newline (in buf) and the offset just after it.
func (lr *LineReader) skipLine(buf []byte) ([]byte, int64) {
	for {
		var err error
		buf, err = lr.read(buf[:0])
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			rest := buf[:copy(buf, buf[i+1:])]
			return rest, lr.bytes - int64(len(rest))
		}
		if err != nil {
			lr.eof = true
			return buf[:0], lr.bytes
		}
	}
}

// FileID identifies a log file across restarts: the device and inode it
// lives on, its size, and a hash of its first line, so that a file rotated
// away (another inode), or truncated and written again (a size below the
// saved offset, another first line), is told apart from the file a position
// was saved for.
type FileID struct {
	Dev, Inode uint64
	Size       int64
	HeadHash   string // hex SHA-256 of the first line (at most 4 KiB of it); "" for an empty file
}

// Identify returns the FileID of the file at name.
func Identify(name string) (FileID, error) {
	f, err := os.Open(name)
	if err != nil {
		return FileID{}, err
	}
	defer f.Close()
	id, _, err := IdentifyFile(f)
	return id, err
}

// HeadSize is how much of a file's first line its FileID hashes.
const HeadSize = rotation.HeadSize

// IdentifyFile returns the FileID of an open file (whatever name it has
// now), without moving its offset. complete says whether the hash covers a
// whole first line (or HeadSize bytes): a first line still being written
// hashes differently once its newline arrives.
func IdentifyFile(f *os.File) (id FileID, complete bool, err error) {
	fi, err := f.Stat()
	if err != nil {
		return FileID{}, false, err
	}
	id = FileID{Size: fi.Size()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.Dev, id.Inode = uint64(st.Dev), st.Ino
	}
	id.HeadHash, complete, err = HeadHash(f)
	return id, complete, err
}

// HeadHash returns the hash a FileID holds of f's first line (at most
// HeadSize bytes of it, "" for an empty file) and whether that line is
// complete.
func HeadHash(f *os.File) (string, bool, error) {
	var buf [HeadSize]byte
	n, err := f.ReadAt(buf[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", false, fmt.Errorf("%s: %w", f.Name(), err)
	}
	h, complete := rotation.Head(buf[:n])
	return h, complete, nil
}

// Continues reports whether a position saved at offset for the file saved
// still applies to the file id: the same file, not truncated below offset.
// A first line still being written when the position was saved (no newline
// yet) counts as changed; the file is then read again from the start.
func (id FileID) Continues(saved FileID, offset int64) bool {
	return id.Dev == saved.Dev && id.Inode == saved.Inode && id.HeadHash == saved.HeadHash && id.Size >= offset
}

// Log is an opened access log with the parser that reads it.
type Log struct {
	Name   string
	Parser *parser.Parser
	Lines  *LineReader
	// Size is the file's size in bytes, 0 when unknown (stdin, a pipe).
	Size   int64
	read   *atomic.Int64
	closer io.Closer
}

// Read returns how many bytes of the file itself (compressed, for a gzip
// file) have been read so far, for a progress bar. Safe from any goroutine.
func (l *Log) Read() int64 { return l.read.Load() }

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// OpenLog opens name (a file, a .gz file or "-") and compiles the parser
// for po. For Format "auto" it reads up to the first 50 lines and picks the
// preset parser.Detect chooses (Log.Parser.Name says which).
func OpenLog(name string, po parser.Options, stdin io.Reader) (*Log, error) {
	return OpenLogAt(name, po, stdin, 0, 0)
}

// OpenLogAt is OpenLog for a log already read up to offset (bytes of the
// stream, decompressed for a gzip file) and line lines: reading goes on from
// there, and Lines numbers and offsets go on from there too. Format "auto"
// then looks at the lines after offset.
func OpenLogAt(name string, po parser.Options, stdin io.Reader, offset int64, line int) (*Log, error) {
	read := new(atomic.Int64)
	rc, size, err := open(name, stdin, read, offset)
	if err != nil {
		return nil, err
	}
	var r io.Reader = rc
	if po.Format == "auto" {
		br := bufio.NewReaderSize(rc, 64<<10)
		head, _ := br.Peek(64 << 10)
		var sample [][]byte
		for len(head) > 0 && len(sample) < 50 {
			i := bytes.IndexByte(head, '\n')
			if i < 0 {
				break
			}
			sample = append(sample, head[:i])
			head = head[i+1:]
		}
		preset, err := parser.Detect(sample, po)
		if err != nil {
			rc.Close()
			return nil, fmt.Errorf("%s: format auto: %w", name, err)
		}
		po.Format = preset
		r = br
	}
	p, err := parser.New(po)
	if err != nil {
		rc.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &Log{Name: name, Parser: p, Lines: NewLineReaderAt(r, offset, line), Size: size, read: read, closer: rc}, nil
}

// Close closes the log's file.
func (l *Log) Close() error { return l.closer.Close() }
