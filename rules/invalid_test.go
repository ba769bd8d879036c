package rules

import (
	"bufio"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// testOptions fixes what Load would otherwise discover about the machine.
var testOptions = Options{HostAddrs: []netip.Addr{}, Cores: 4}

// TestInvalid loads every testdata/rules/invalid/*.yaml. Each opens with
//
//	# wantErr: SUBSTRING
//	# wantAt: [FILE:]LINE PATH
//
// and must fail with an *Error whose message contains SUBSTRING, on that line
// of that file (default: the config itself), at that path.
func TestInvalid(t *testing.T) {
	files, err := filepath.Glob("../testdata/rules/invalid/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 25 {
		t.Fatalf("only %d invalid configs", len(files))
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
			wantErr, wantFile, wantLine, wantPath := readWant(t, file)
			_, err := Load(file, testOptions)
			if err == nil {
				t.Fatalf("Load succeeded, want error %q", wantErr)
			}
			var found *Error
			for _, e := range flatten(err) {
				var ce *Error
				if !errors.As(e, &ce) {
					t.Errorf("error %v (%T) is not an *Error", e, e)
					continue
				}
				if strings.Contains(ce.Msg, wantErr) {
					found = ce
					break
				}
			}
			if found == nil {
				t.Fatalf("no error contains %q; got:\n%v", wantErr, err)
			}
			if found.File != wantFile || found.Line != wantLine || found.Path != wantPath {
				t.Errorf("error at %s:%d %q, want %s:%d %q", found.File, found.Line, found.Path, wantFile, wantLine, wantPath)
			}
			// The whole message carries file, line and path.
			prefix := wantFile + ":" + strconv.Itoa(wantLine) + ": "
			if wantPath != "" {
				prefix += wantPath + ": "
			}
			if !strings.Contains(err.Error(), prefix+found.Msg) {
				t.Errorf("message %q lacks %q", err.Error(), prefix+found.Msg)
			}
		})
	}
}

func readWant(t *testing.T, file string) (wantErr, wantFile string, wantLine int, wantPath string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		t.Fatal("empty file")
	}
	wantErr, ok := strings.CutPrefix(sc.Text(), "# wantErr: ")
	if !ok {
		t.Fatalf("first line %q is not # wantErr:", sc.Text())
	}
	if !sc.Scan() {
		t.Fatal("no # wantAt: line")
	}
	at, ok := strings.CutPrefix(sc.Text(), "# wantAt: ")
	if !ok {
		t.Fatalf("second line %q is not # wantAt:", sc.Text())
	}
	loc, wantPath, _ := strings.Cut(at, " ")
	wantFile = file
	if name, line, ok := strings.Cut(loc, ":"); ok {
		wantFile, loc = filepath.Join(filepath.Dir(file), name), line
	}
	wantLine, err = strconv.Atoi(loc)
	if err != nil {
		t.Fatalf("wantAt %q: %v", at, err)
	}
	return wantErr, wantFile, wantLine, strings.TrimSpace(wantPath)
}

// flatten returns the errors joined in err.
func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}
