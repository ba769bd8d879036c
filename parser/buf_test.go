package parser

import (
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// sameAsParseString checks that ParseStringBuf, appending into buf, reads
// line as ParseString does: the same Entry field for field (Fields nil
// where ParseString's is nil) and the same error. It returns buf grown.
func sameAsParseString(t *testing.T, p *Parser, line string, buf []Field) (Entry, []Field) {
	t.Helper()
	want, werr := p.ParseString(line, 7)
	n := len(buf)
	got, buf, gerr := p.ParseStringBuf(line, 7, buf)
	if (werr == nil) != (gerr == nil) || werr != nil && werr.Error() != gerr.Error() {
		t.Fatalf("%s: %q: ParseString error %v, ParseStringBuf error %v", p.Name(), line, werr, gerr)
	}
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("%s: %q:\nParseString    %+v\nParseStringBuf %+v", p.Name(), line, want, got)
	}
	if len(buf) < n || len(buf) > n+len(got.Fields) {
		t.Fatalf("%s: %q: buffer grew from %d to %d for %d fields", p.Name(), line, n, len(buf), len(got.Fields))
	}
	// ParseStringTo, into an Entry that holds another line's values (as a
	// reused block's does), reads the same and writes the same room.
	dirty := Entry{IP: netip.MustParseAddr("203.0.113.9"), Time: time.Unix(1, 2), Method: "M", Path: "/p", Query: "q",
		Protocol: "P", Status: 500, Bytes: 9, Referer: "r", UserAgent: "u", User: "x", Host: "h", Duration: 1, CPU: 2,
		Has: ^Has(0), Fields: []Field{{Name: "n", Value: "v"}}}
	tbuf, terr := p.ParseStringTo(line, 7, buf[:n], &dirty)
	if (werr == nil) != (terr == nil) || werr != nil && werr.Error() != terr.Error() {
		t.Fatalf("%s: %q: ParseString error %v, ParseStringTo error %v", p.Name(), line, werr, terr)
	}
	if !reflect.DeepEqual(want, dirty) {
		t.Fatalf("%s: %q:\nParseString   %+v\nParseStringTo %+v", p.Name(), line, want, dirty)
	}
	if len(tbuf) != len(buf) {
		t.Fatalf("%s: %q: ParseStringTo took %d of the buffer, ParseStringBuf %d", p.Name(), line, len(tbuf)-n, len(buf)-n)
	}
	return got, buf
}

// TestParseStringBufSameEntry reads every line it has (the benchmark
// lines, the dirty lines, the repository's test logs and the shared
// corpus's) with every format of the benchmarks, through ParseString and
// through ParseStringBuf into one buffer shared by all the lines of a
// format (small, so that lines take both the buffer's room and slices of
// their own): each gives the same Entry, and no line's fields are written
// over by a later line's.
func TestParseStringBufSameEntry(t *testing.T) {
	lines := []string{"", "-", `"`}
	for _, bc := range benchCases {
		lines = append(lines, bc.line)
	}
	for _, l := range dirtyLines {
		lines = append(lines, l.line)
	}
	logs, _ := filepath.Glob("../testdata/logs/*/*.log")
	for _, path := range logs {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.Split(string(b), "\n")...)
	}
	corpus := needCorpus(t)
	err := filepath.WalkDir(corpus, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch filepath.Ext(path) {
		case ".log", ".txt", "":
		default:
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, l := range strings.Split(string(b), "\n") {
			if i < 200 && len(l) < 8192 {
				lines = append(lines, strings.TrimSuffix(l, "\r"))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, bc := range benchCases {
		if seen[bc.name] {
			continue
		}
		seen[bc.name] = true
		t.Run(bc.name, func(t *testing.T) {
			p := mustParser(t, bc.opts)
			buf := make([]Field, 0, 3*p.FieldsPerLine()+1)
			var entries []Entry
			var fields [][]Field
			for _, l := range lines {
				e, grown := sameAsParseString(t, p, l, buf)
				buf = grown
				if cap(buf)-len(buf) < p.FieldsPerLine() {
					buf = make([]Field, 0, 3*p.FieldsPerLine()+1)
				}
				entries = append(entries, e)
				fields = append(fields, append([]Field(nil), e.Fields...))
			}
			accepted := 0
			for i, e := range entries {
				if !reflect.DeepEqual(e.Fields, fields[i]) && len(e.Fields)+len(fields[i]) > 0 {
					t.Fatalf("line %q: its fields were written over: %+v, were %+v", lines[i], e.Fields, fields[i])
				}
				if e.IP.IsValid() {
					accepted++
				}
			}
			if accepted == 0 {
				t.Errorf("no line of %d read as %s", len(lines), bc.name)
			}
		})
	}
}
