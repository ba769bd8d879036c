// Package rotation is logjail's one model of log rotation: which file names
// are rotated siblings of a log (and so belong to its source), in which order
// they were rotated, how a rotated file is opened whatever its compression,
// and how a file is recognised by the fingerprint of its first line. Live
// following (package follow), catch-up after downtime (follow's start
// positions, package checkpoint) and replay (package source) all ask here;
// no other package decides what a rotated name looks like.
//
// Names. A rotated sibling of BASE (a path) is named BASE, then one rotation
// part, then optionally one compression suffix, in BASE's directory or in
// the source's olddir:
//
//   - rotation part: ".N" (logrotate's default, Apache's rotatelogs -n, a
//     plain `mv access.log access.log.1`), or a date as logrotate's
//     `dateext` writes it: "-20261124" (the default dateformat), and any
//     dateformat made of digits and the separators "-", "_" and ".", such
//     as "-20261124-1764000000" (%Y%m%d-%s), "-2026112412" (hourly) or
//     ".2026-11-24", "_2026-11-24" (savelog and hand-made names). The part
//     starts with ".", "-" or "_", then a digit.
//   - compression suffix: ".gz", ".bz2", ".xz" or ".zst"; BASE.gz alone
//     (compressed without a rotation part) is a sibling too.
//
// Anything else (".old", "~", "access.logx") is not a sibling: it is another
// log, or no log.
//
// olddir. logrotate's `olddir DIR` moves rotated files to DIR; a relative
// DIR is relative to the log's directory, as logrotate reads it. A source
// names the same directory (rules: a source's `olddir:`), and its rotated
// siblings are looked for there as well as beside the log.
//
// Order. Siblings are ordered oldest first: numbered ones by their number,
// highest first (access.log.3 before access.log.2); dated ones by the digits
// of their date, lowest first; between the two kinds (a scheme changed in
// place), by modification time. A compressed file and its uncompressed twin
// (access.log.1 and access.log.1.gz, while logrotate compresses) are one
// rotated file: Siblings keeps the uncompressed one, which is complete,
// where the compressed one may still be being written.
//
// Identity. A file is known by its device and inode while it keeps them
// (rename); a copy (copytruncate, compression) is known by the fingerprint
// of its first line (Fingerprint: a hash of at most HeadSize bytes), taken
// from the decompressed stream for a compressed file. Open decompresses by
// magic bytes, whatever the name says.
//
// Nothing here keeps state; every function is safe for concurrent use.
//
// Boundaries: It owns what a log's rotated siblings are called and in what
// order they are read, and a file's identity (device, inode, fingerprint).
// It must not read lines nor keep positions: source reads, follow follows,
// store keeps the offsets.
package rotation

import (
	"bufio"
	"bytes"
	"cmp"
	"compress/bzip2"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// Compression suffixes, and the formats Open recognises by magic bytes.
const (
	None  = ""
	Gzip  = "gz"
	Bzip2 = "bz2"
	XZ    = "xz"
	Zstd  = "zst"
)

// compressions are the suffixes a rotated name may end in.
var compressions = []string{Gzip, Bzip2, XZ, Zstd}

// Name is what a rotated name says about its file.
type Name struct {
	Path string // the file
	// Index is N of a ".N" part; 0 for a dated name or for BASE itself.
	Index int
	// Date holds the digits of a dated part ("20261124" for "-20261124",
	// "202611241764000000" for "-20261124-1764000000"); "" otherwise.
	Date string
	// Compression is the suffix: None, Gzip, Bzip2, XZ or Zstd.
	Compression string
	// ModTime is the file's modification time (set by Siblings).
	ModTime time.Time
}

// Stem is the name without its compression suffix: the rotated file that a
// compressed name and its uncompressed twin both are.
func (n Name) Stem() string {
	if n.Compression == None {
		return n.Path
	}
	return strings.TrimSuffix(n.Path, "."+n.Compression)
}

// Parse reports whether name is base itself or one of its rotated siblings,
// in base's directory or in olddir (resolved with OldDir; "" for none), and
// what its name says. Both are compared as cleaned paths.
func Parse(name, base, olddir string) (Name, bool) {
	name, base = filepath.Clean(name), filepath.Clean(base)
	if name == base {
		return Name{Path: name}, true
	}
	dir, file := filepath.Split(name)
	bdir, bfile := filepath.Split(base)
	if filepath.Clean(dir) != filepath.Clean(bdir) && (olddir == "" || filepath.Clean(dir) != filepath.Clean(OldDir(base, olddir))) {
		return Name{}, false
	}
	if !strings.HasPrefix(file, bfile) {
		return Name{}, false
	}
	n := Name{Path: name}
	rest := file[len(bfile):]
	for _, c := range compressions {
		if strings.HasSuffix(rest, "."+c) {
			n.Compression, rest = c, strings.TrimSuffix(rest, "."+c)
			break
		}
	}
	if rest == "" {
		// BASE.gz; BASE itself in olddir is no sibling (another log).
		return n, n.Compression != None
	}
	if len(rest) < 2 || !strings.ContainsRune(".-_", rune(rest[0])) || rest[1] < '0' || rest[1] > '9' {
		return Name{}, false
	}
	part := rest[1:]
	digits := true
	for i := 0; i < len(part); i++ {
		c := part[i]
		switch {
		case c >= '0' && c <= '9':
		case c == '-' || c == '_' || c == '.':
			digits = false
		default:
			return Name{}, false
		}
	}
	if rest[0] == '.' && digits && len(part) < 8 {
		n.Index, _ = strconv.Atoi(part) // ".1" … ".9999999": a number
		return n, true
	}
	n.Date = strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, part)
	return n, true
}

// Rotated reports whether name is base itself or one of its rotated
// siblings (see Parse).
func Rotated(name, base, olddir string) bool {
	_, ok := Parse(name, base, olddir)
	return ok
}

// OldDir resolves a source's olddir for the log base: a relative one is
// relative to base's directory, as logrotate reads it. "" stays "".
func OldDir(base, olddir string) string {
	if olddir == "" || filepath.IsAbs(olddir) {
		return olddir
	}
	return filepath.Join(filepath.Dir(base), olddir)
}

// Siblings lists base's rotated siblings (base itself left out) beside it
// and in olddir, oldest first, one per rotated file (an uncompressed twin
// wins over its compressed copy). Only regular files are listed. A missing
// directory lists nothing; another error is returned with what was found.
func Siblings(base, olddir string) ([]Name, error) {
	base = filepath.Clean(base)
	dirs := []string{filepath.Dir(base)}
	if od := OldDir(base, olddir); od != "" && filepath.Clean(od) != dirs[0] {
		dirs = append(dirs, filepath.Clean(od))
	}
	var out []Name
	var errs []error
	for _, dir := range dirs {
		ents, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
		for _, e := range ents {
			name := filepath.Join(dir, e.Name())
			if name == base {
				continue
			}
			n, ok := Parse(name, base, olddir)
			if !ok {
				continue
			}
			fi, err := os.Stat(name)
			if err != nil || !fi.Mode().IsRegular() {
				continue
			}
			n.ModTime = fi.ModTime()
			out = append(out, n)
		}
	}
	// One per rotated file: drop a compressed name whose twin is there.
	stems := map[string]bool{}
	for _, n := range out {
		if n.Compression == None {
			stems[n.Path] = true
		}
	}
	out = slices.DeleteFunc(out, func(n Name) bool { return n.Compression != None && stems[n.Stem()] })
	slices.SortStableFunc(out, Compare)
	return out, errors.Join(errs...)
}

// Compare orders two siblings of one base, older first (see the package
// doc): -1 when a was rotated before b.
func Compare(a, b Name) int {
	switch {
	case a.Index > 0 && b.Index > 0:
		return -cmp.Compare(a.Index, b.Index)
	case a.Date != "" && b.Date != "":
		if len(a.Date) != len(b.Date) {
			// The same dateformat gives digits of one length; compare
			// the common head, then the longer (finer) one after.
			l := min(len(a.Date), len(b.Date))
			if c := strings.Compare(a.Date[:l], b.Date[:l]); c != 0 {
				return c
			}
			return cmp.Compare(len(a.Date), len(b.Date))
		}
		if c := strings.Compare(a.Date, b.Date); c != 0 {
			return c
		}
	}
	if c := a.ModTime.Compare(b.ModTime); c != 0 {
		return c
	}
	return strings.Compare(a.Path, b.Path)
}

// Magic returns the compression format whose magic bytes head starts with:
// Gzip, Bzip2, XZ, Zstd, or None.
func Magic(head []byte) string {
	switch {
	case bytes.HasPrefix(head, []byte{0x1f, 0x8b}):
		return Gzip
	case bytes.HasPrefix(head, []byte("BZh")) && len(head) >= 4 && head[3] >= '1' && head[3] <= '9':
		return Bzip2
	case bytes.HasPrefix(head, []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
		return XZ
	case bytes.HasPrefix(head, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		return Zstd
	}
	return None
}

// Decompress returns a reader of r's content, decompressed when r starts
// with the magic bytes of a format Magic knows, and that format. Closing
// the result releases the decompressor, not r.
func Decompress(r io.Reader) (io.ReadCloser, string, error) {
	br := bufio.NewReaderSize(r, 4<<10)
	head, _ := br.Peek(6)
	format := Magic(head)
	switch format {
	case Gzip:
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, format, fmt.Errorf("gzip: %w", err)
		}
		return zr, format, nil
	case Bzip2:
		return io.NopCloser(bzip2.NewReader(br)), format, nil
	case XZ:
		zr, err := xz.NewReader(br)
		if err != nil {
			return nil, format, fmt.Errorf("xz: %w", err)
		}
		return io.NopCloser(zr), format, nil
	case Zstd:
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
		if err != nil {
			return nil, format, fmt.Errorf("zstd: %w", err)
		}
		return zr.IOReadCloser(), format, nil
	}
	return io.NopCloser(br), None, nil
}

// HeadSize is how much of a file's first line its fingerprint covers.
const HeadSize = 4 << 10

// Head returns the fingerprint of a file whose content starts with p: a
// hash of its first line with its newline, or of HeadSize bytes when that
// line is longer; "" for an empty p. complete says whether p held the whole
// first line (or HeadSize bytes): a first line still being written
// fingerprints differently once its newline arrives.
func Head(p []byte) (fp string, complete bool) {
	h := p[:min(len(p), HeadSize)]
	complete = len(h) == HeadSize
	if i := bytes.IndexByte(h, '\n'); i >= 0 {
		h, complete = h[:i+1], true
	}
	if len(h) == 0 {
		return "", false
	}
	sum := sha256.Sum256(h)
	return hex.EncodeToString(sum[:16]), complete
}

// Fingerprint returns the fingerprint (Head) of what r holds, reading at
// most HeadSize bytes.
func Fingerprint(r io.Reader) (fp string, complete bool, err error) {
	buf := make([]byte, HeadSize)
	n, err := io.ReadFull(r, buf)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return "", false, err
	}
	fp, complete = Head(buf[:n])
	return fp, complete, nil
}

// Binary reports whether a file starting with head is no text log: a
// compressed archive, or a NUL byte among text. A file that starts with
// NUL bytes is taken for text: that is the hole a writer without O_APPEND
// leaves after copytruncate, followed by its lines.
func Binary(head []byte) bool {
	if Magic(head) != None {
		return true
	}
	return len(head) > 0 && head[0] != 0 && bytes.IndexByte(head, 0) >= 0
}

// Bases returns the logs that name may be a rotated sibling of, beside it
// (see Parse): "/l/a.log.2.gz" gives "/l/a.log", "/l/a.log.2". With olddir
// (as configured) a name in that directory gives bases in dir, the log's
// directory: for a relative olddir, the directory above it; for an
// absolute one, dir as the caller knows it ("" for none).
func Bases(name, olddir, dir string) []string {
	name = filepath.Clean(name)
	ndir, file := filepath.Split(name)
	ndir = filepath.Clean(ndir)
	dirs := []string{ndir}
	switch {
	case olddir == "":
	case !filepath.IsAbs(olddir) && strings.HasSuffix(ndir, string(filepath.Separator)+filepath.Clean(olddir)):
		dirs = append(dirs, filepath.Clean(strings.TrimSuffix(ndir, filepath.Clean(olddir))))
	case filepath.IsAbs(olddir) && filepath.Clean(olddir) == ndir && dir != "":
		dirs = append(dirs, filepath.Clean(dir))
	}
	var out []string
	for i := len(file) - 1; i > 0; i-- {
		if file[i] != '.' && file[i] != '-' && file[i] != '_' {
			continue
		}
		for _, d := range dirs {
			base := filepath.Join(d, file[:i])
			if Rotated(name, base, olddir) && name != base {
				out = append(out, base)
			}
		}
	}
	return out
}
