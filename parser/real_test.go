package parser

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/logjail/logjail/internal/testenv"
)

// corpusDir is the shared corpus, a sibling of the repository.
const corpusDir = "../../shared/corpus"

// needCorpus skips a test when the shared corpus is not there (fails it
// under CI=true).
func needCorpus(t testing.TB) string {
	t.Helper()
	return filepath.Join(testenv.Shared(t), "corpus")
}

// readLines returns a file's lines without their line ends.
func readLines(t testing.TB, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRealLogs reads every line of every file in corpus/real: each yields an
// IP and a time, or is rejected for a reason a person would agree with. The
// only acceptable reason here is a line that is not an access-log line at
// all (empty, or not starting with an address); the counts are logged.
func TestRealLogs(t *testing.T) {
	dir := filepath.Join(needCorpus(t), "real")
	var files []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && !strings.HasSuffix(path, ".txt") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	p, err := New(Options{Format: "combined"})
	if err != nil {
		t.Fatal(err)
	}
	total, totalOK := 0, 0
	for _, f := range files {
		rel, _ := filepath.Rel(dir, f)
		t.Run(rel, func(t *testing.T) {
			lines := readLines(t, f)
			ok := 0
			reasons := map[string]int{}
			for i, l := range lines {
				e, err := p.ParseString(l, i+1)
				if err != nil {
					var pe *Error
					if !errors.As(err, &pe) {
						t.Fatalf("line %d: error %v is not a *parser.Error", i+1, err)
					}
					reasons[pe.Field+": "+rejectKind(pe.Reason)]++
					if !acceptableReject(l) {
						t.Errorf("%s line %d rejected: %v\n%q", rel, i+1, err, l)
					}
					continue
				}
				if !e.IP.IsValid() || e.Time.IsZero() {
					t.Errorf("%s line %d: accepted without IP or time: %+v", rel, i+1, e)
				}
				ok++
			}
			t.Logf("%s: %d lines, %d parsed, %d rejected %v", rel, len(lines), ok, len(lines)-ok, reasons)
			total += len(lines)
			totalOK += ok
		})
	}
	t.Logf("corpus/real: %d lines, %d parsed, %d rejected", total, totalOK, total-totalOK)
	atLeast(t, "corpus/real lines parsed", totalOK, 65389)
}

// rejectKind shortens a reason to its kind, for counting.
func rejectKind(r string) string {
	if i := strings.Index(r, ": "); i >= 0 && strings.HasPrefix(r, `"`) {
		return r[i+2:]
	}
	if i := strings.Index(r, " ("); i >= 0 {
		return r[:i]
	}
	return r
}

// acceptableReject says whether a person would agree a line is no access-log
// line: empty, or not starting with something shaped like an address.
func acceptableReject(l string) bool {
	l = strings.TrimSpace(l)
	if l == "" {
		return true
	}
	first, _, _ := strings.Cut(l, " ")
	if _, ok := parseAddr(first); ok {
		return false
	}
	return true
}
