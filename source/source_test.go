package source

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/zstd"
	"github.com/logjail/logjail/internal/testenv"
	"github.com/logjail/logjail/parser"
	"github.com/ulikunitz/xz"
)

func readAll(t *testing.T, r io.Reader) (lines []string, truncated []int) {
	t.Helper()
	lr := NewLineReader(r)
	for {
		l, n, ok := lr.Next()
		if !ok {
			break
		}
		if n != len(lines)+1 {
			t.Fatalf("line number %d, want %d", n, len(lines)+1)
		}
		lines = append(lines, l)
		if lr.Truncated() {
			truncated = append(truncated, n)
		}
	}
	if err := lr.Err(); err != nil {
		t.Fatal(err)
	}
	return lines, truncated
}

func TestLineReader(t *testing.T) {
	long := strings.Repeat("x", 16<<10)
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"empty", "", nil},
		{"lf", "a\nb\n", []string{"a", "b"}},
		{"crlf", "a\r\nb\r\n", []string{"a", "b"}},
		{"no final newline", "a\nb", []string{"a", "b"}},
		{"empty lines kept", "a\n\nb\n", []string{"a", "", "b"}},
		{"16 KiB line", "a\n" + long + "\nb\n", []string{"a", long, "b"}},
		{"lone cr stays", "a\rb\n", []string{"a\rb"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, r := range map[string]io.Reader{
				"whole":    strings.NewReader(tt.in),
				"one byte": iotest.OneByteReader(strings.NewReader(tt.in)),
			} {
				got, trunc := readAll(t, r)
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("lines (-want +got):\n%s", diff)
				}
				if len(trunc) != 0 {
					t.Errorf("truncated lines %v, want none", trunc)
				}
			}
		})
	}
}

func TestLineReaderOverlong(t *testing.T) {
	huge := strings.Repeat("y", 3*MaxLine)
	in := "first\n" + huge + "\nlast\n"
	got, trunc := readAll(t, strings.NewReader(in))
	if len(got) != 3 || got[0] != "first" || got[2] != "last" {
		t.Fatalf("got %d lines, first %q, last %q; want first, the long one, last", len(got), got[0], got[len(got)-1])
	}
	if len(got[1]) != MaxLine {
		t.Errorf("long line cut to %d bytes, want %d", len(got[1]), MaxLine)
	}
	if diff := cmp.Diff([]int{2}, trunc); diff != "" {
		t.Errorf("truncated (-want +got):\n%s", diff)
	}
}

func TestOpenGzipAndStdin(t *testing.T) {
	dir := t.TempDir()
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	zw.Write([]byte("one\ntwo\n"))
	zw.Close()
	// The name does not end in .gz: gzip is recognised by its content.
	gz := filepath.Join(dir, "access.log.2")
	if err := os.WriteFile(gz, zb.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, in := range map[string]struct {
		file  string
		stdin io.Reader
	}{
		"gzip file":   {gz, nil},
		"gzip stdin":  {Stdin, bytes.NewReader(zb.Bytes())},
		"plain stdin": {Stdin, strings.NewReader("one\ntwo")},
	} {
		t.Run(name, func(t *testing.T) {
			rc, err := Open(in.file, in.stdin)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			got, _ := readAll(t, rc)
			if diff := cmp.Diff([]string{"one", "two"}, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if _, err := Open(filepath.Join(dir, "missing"), nil); err == nil {
		t.Error("opening a missing file: no error")
	}
}

func TestExpand(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"b.log", "a.log", "c.txt"} {
		os.WriteFile(filepath.Join(dir, n), nil, 0o600)
	}
	got, err := Expand([]string{filepath.Join(dir, "*.log"), "-", filepath.Join(dir, "c.txt")})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log"), "-", filepath.Join(dir, "c.txt")}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := Expand([]string{filepath.Join(dir, "*.gz")}); err == nil {
		t.Error("a glob matching nothing: no error")
	}
	if _, err := Expand([]string{filepath.Join(dir, "nope.log")}); err == nil {
		t.Error("a missing file: no error")
	}
	// A directory named outright is refused with a hint; a glob leaves
	// directories out.
	os.Mkdir(filepath.Join(dir, "old.log"), 0o700)
	if _, err := Expand([]string{dir}); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("a directory: error %v, want one saying it is a directory", err)
	}
	got, err = Expand([]string{filepath.Join(dir, "*.log")})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log")}; !slices.Equal(got, want) {
		t.Errorf("glob with a directory: got %v, want %v", got, want)
	}
}

// TestLineReaderOffsetAndResume: after every line, Offset is where the next
// line starts in the input, whatever the chunking of the reads, and a reader
// started there with NewLineReaderAt goes on with the same lines and numbers.
func TestLineReaderOffsetAndResume(t *testing.T) {
	var in strings.Builder
	var ends []int64 // offset after each line
	add := func(l, nl string) {
		in.WriteString(l + nl)
		ends = append(ends, int64(in.Len()))
	}
	add("first", "\n")
	add("", "\n")
	add("crlf", "\r\n")
	add(strings.Repeat("x", 100_000), "\n")
	add(strings.Repeat("y", 3*MaxLine), "\n") // skipped past its newline
	add(strings.Repeat("z", MaxLine+10), "\n")
	add("after the long ones", "\n")
	add("no newline at the end", "")
	text := in.String()

	type reader func(string) io.Reader
	for name, mk := range map[string]reader{
		"whole":    func(s string) io.Reader { return strings.NewReader(s) },
		"one byte": func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
		"half":     func(s string) io.Reader { return iotest.HalfReader(strings.NewReader(s)) },
	} {
		if name == "one byte" {
			// Byte by byte through 5 MB is slow under -race; the other
			// readers cover the long lines.
			text := text[:ends[3]]
			lr := NewLineReader(mk(text))
			for i := 0; ; i++ {
				if _, _, ok := lr.Next(); !ok {
					break
				}
				if lr.Offset() != ends[i] {
					t.Fatalf("%s: after line %d, Offset %d, want %d", name, i+1, lr.Offset(), ends[i])
				}
			}
			continue
		}
		lr := NewLineReader(mk(text))
		var lines []string
		for i := 0; ; i++ {
			l, n, ok := lr.Next()
			if !ok {
				break
			}
			lines = append(lines, l)
			if n != i+1 || lr.Line() != i+1 {
				t.Fatalf("%s: line number %d (Line %d), want %d", name, n, lr.Line(), i+1)
			}
			if lr.Offset() != ends[i] {
				t.Fatalf("%s: after line %d, Offset %d, want %d", name, i+1, lr.Offset(), ends[i])
			}
		}
		if len(lines) != len(ends) {
			t.Fatalf("%s: %d lines, want %d", name, len(lines), len(ends))
		}
		for k := range ends {
			off := ends[k]
			r := NewLineReaderAt(mk(text[off:]), off, k+1)
			for j := k + 1; j < len(ends); j++ {
				l, n, ok := r.Next()
				if !ok || l != lines[j] || n != j+1 || r.Offset() != ends[j] {
					t.Fatalf("%s: resumed after line %d: line %d is %.20q (n %d, ok %v, offset %d), want %.20q (offset %d)",
						name, k+1, j+1, l, n, ok, r.Offset(), lines[j], ends[j])
				}
			}
			if _, _, ok := r.Next(); ok {
				t.Fatalf("%s: resumed after line %d: a line after the last", name, k+1)
			}
		}
	}
}

// TestOpenLogAtAndIdentify: a plain and a gzipped log opened at a saved
// offset go on with the next line and its number; Identify tells the same
// file from a rotated (another inode) or truncated one.
func TestOpenLogAtAndIdentify(t *testing.T) {
	dir := t.TempDir()
	lines := []string{
		`203.0.113.1 - - [22/Nov/2026:10:00:01 +0000] "GET /a HTTP/1.1" 200 1 "-" "t"`,
		`203.0.113.2 - - [22/Nov/2026:10:00:02 +0000] "GET /b HTTP/1.1" 200 1 "-" "t"`,
		`203.0.113.3 - - [22/Nov/2026:10:00:03 +0000] "GET /c HTTP/1.1" 200 1 "-" "t"`,
	}
	text := strings.Join(lines, "\n") + "\n"
	plain := filepath.Join(dir, "access.log")
	os.WriteFile(plain, []byte(text), 0o600)
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	zw.Write([]byte(text))
	zw.Close()
	gz := filepath.Join(dir, "access.log.1.gz")
	os.WriteFile(gz, zb.Bytes(), 0o600)

	off := int64(len(lines[0]) + 1)
	for _, name := range []string{plain, gz} {
		lg, err := OpenLogAt(name, parser.Options{Format: "combined"}, nil, off, 1)
		if err != nil {
			t.Fatal(err)
		}
		l, n, ok := lg.Lines.Next()
		if !ok || l != lines[1] || n != 2 || lg.Lines.Offset() != off+int64(len(lines[1])+1) {
			t.Errorf("%s at %d: line %d %q offset %d, want line 2 %q", name, off, n, l, lg.Lines.Offset(), lines[1])
		}
		lg.Close()
	}

	id, err := Identify(plain)
	if err != nil {
		t.Fatal(err)
	}
	if id.Inode == 0 || id.HeadHash == "" || id.Size != int64(len(text)) {
		t.Fatalf("Identify = %+v", id)
	}
	if !id.Continues(id, int64(len(text))) {
		t.Error("the same file does not continue its own position")
	}
	// Rotated: the path now holds a new file with the same first line.
	os.Rename(plain, plain+".1")
	os.WriteFile(plain, []byte(lines[0]+"\n"), 0o600)
	now, _ := Identify(plain)
	if now.Continues(id, off) {
		t.Error("a rotated file (another inode) continues the old position")
	}
	// Truncated in place and written again: shorter than the offset.
	f, _ := os.OpenFile(plain+".1", os.O_WRONLY|os.O_TRUNC, 0)
	f.WriteString(lines[2] + "\n")
	f.Close()
	tr, _ := Identify(plain + ".1")
	if tr.Continues(id, int64(len(text))) {
		t.Error("a truncated file continues the old position")
	}
}

// TestExpandRotationOrder: a glob over a log and its rotated siblings gives
// them in the order they were rotated, the log last.
func TestExpandRotationOrder(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"access.log", "access.log.1", "access.log.2.gz", "access.log.10.bz2", "access.log.3.zst", "error.log", "error.log-20261124", "error.log-20261123.xz"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Expand([]string{filepath.Join(dir, "*.log*")})
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		got[i] = filepath.Base(got[i])
	}
	want := []string{"access.log.10.bz2", "access.log.3.zst", "access.log.2.gz", "access.log.1", "access.log", "error.log-20261123.xz", "error.log-20261124", "error.log"}
	if !slices.Equal(got, want) {
		t.Errorf("Expand = %q, want %q", got, want)
	}
}

// TestOpenCompressed: logrotate's gzip, bzip2, xz and zstd archives read
// as their text, whatever their name, and from an offset in that text.
func TestOpenCompressed(t *testing.T) {
	text := "203.0.113.1 - - [24/Nov/2026:10:00:00 +0000] \"GET /a HTTP/1.1\" 200 1 \"-\" \"t\"\n" +
		"203.0.113.2 - - [24/Nov/2026:10:00:01 +0000] \"GET /b HTTP/1.1\" 200 1 \"-\" \"t\"\n"
	dir := t.TempDir()
	archives := map[string][]byte{}
	var gz, zs, x bytes.Buffer
	gw := gzip.NewWriter(&gz)
	gw.Write([]byte(text))
	gw.Close()
	zw, _ := zstd.NewWriter(&zs)
	zw.Write([]byte(text))
	zw.Close()
	xw, _ := xz.NewWriter(&x)
	xw.Write([]byte(text))
	xw.Close()
	archives["a.log.1.gz"], archives["a.log.2.zst"], archives["a.log.3"] = gz.Bytes(), zs.Bytes(), x.Bytes()
	cmd := exec.Command("bzip2", "-c")
	cmd.Stdin = strings.NewReader(text)
	if out, err := cmd.Output(); err == nil {
		archives["a.log.4.bz2"] = out
	} else if testenv.CI() {
		t.Errorf("bzip2: %v (CI=true: scripts/deps.sh installs it)", err)
	}
	first := int64(strings.IndexByte(text, '\n') + 1)
	for name, data := range archives {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		lg, err := OpenLogAt(path, parser.Options{Format: "combined", Location: time.UTC}, nil, first, 1)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		l, n, ok := lg.Lines.Next()
		if !ok || n != 2 || !strings.Contains(l, "/b ") {
			t.Errorf("%s: line %d %q, want line 2 of the text", name, n, l)
		}
		if _, _, ok := lg.Lines.Next(); ok {
			t.Errorf("%s: more than the text", name)
		}
		lg.Close()
	}
}
