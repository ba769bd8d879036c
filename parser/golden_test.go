package parser

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/logs")

// goldenOptions is a format directory's options.json (absent for presets,
// whose directory is named after them).
type goldenOptions struct {
	Format         string            `json:"format"`
	LogFormat      string            `json:"log_format"`
	ApacheFormat   string            `json:"apache_format"`
	FPMFormat      string            `json:"fpm_format"`
	JSONFields     map[string]string `json:"json_fields"`
	CPUField       string            `json:"cpu_field"`
	Timezone       string            `json:"timezone"`
	TrustedProxies []string          `json:"trusted_proxies"`
}

// goldenLine is one line's reading, shaped like `logjail parse --output json`
// plus the other named fields.
type goldenLine struct {
	Line      int        `json:"line"`
	IP        *string    `json:"ip,omitempty"`
	Time      *string    `json:"time,omitempty"`
	Method    *string    `json:"method"`
	Path      *string    `json:"path"`
	Query     *string    `json:"query"`
	Protocol  *string    `json:"protocol"`
	Status    *int       `json:"status"`
	Bytes     *int64     `json:"bytes"`
	Referer   *string    `json:"referer"`
	UserAgent *string    `json:"user_agent"`
	User      *string    `json:"user"`
	Host      *string    `json:"host"`
	Duration  *float64   `json:"duration"`
	CPU       *float64   `json:"cpu"`
	Fields    [][]string `json:"fields,omitempty"`
}

func ptr[T any](v T, ok bool) *T {
	if !ok {
		return nil
	}
	return &v
}

func goldenOf(n int, e Entry, err error) goldenLine {
	if err != nil {
		return goldenLine{Line: n}
	}
	g := goldenLine{
		Line:      n,
		IP:        ptr(e.IP.String(), true),
		Time:      ptr(e.Time.Format(time.RFC3339Nano), true),
		Method:    ptr(e.Method, e.Has&HasMethod != 0),
		Path:      ptr(e.Path, e.Has&HasPath != 0),
		Query:     ptr(e.Query, e.Has&HasQuery != 0),
		Protocol:  ptr(e.Protocol, e.Has&HasProtocol != 0),
		Status:    ptr(e.Status, e.Has&HasStatus != 0),
		Bytes:     ptr(e.Bytes, e.Has&HasBytes != 0),
		Referer:   ptr(e.Referer, e.Has&HasReferer != 0),
		UserAgent: ptr(e.UserAgent, e.Has&HasUserAgent != 0),
		User:      ptr(e.User, e.Has&HasUser != 0),
		Host:      ptr(e.Host, e.Has&HasHost != 0),
		Duration:  ptr(e.Duration, e.Has&HasDuration != 0),
		CPU:       ptr(e.CPU, e.Has&HasCPU != 0),
	}
	for _, f := range e.Fields {
		g.Fields = append(g.Fields, []string{f.Name, f.Value})
	}
	return g
}

// TestGolden reads testdata/logs/<format>/*.log and compares the reading with
// the .golden file beside it (go test -run Golden -update rewrites them).
func TestGolden(t *testing.T) {
	dirs, err := filepath.Glob("../testdata/logs/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		name := filepath.Base(dir)
		t.Run(name, func(t *testing.T) {
			var g goldenOptions
			if b, err := os.ReadFile(filepath.Join(dir, "options.json")); err == nil {
				dec := json.NewDecoder(bytes.NewReader(b))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&g); err != nil {
					t.Fatalf("options.json: %v", err)
				}
			} else if name == "sample" {
				g.Format = "combined"
			} else {
				g.Format = name
			}
			o := Options{Format: g.Format, LogFormat: g.LogFormat, ApacheFormat: g.ApacheFormat, FPMFormat: g.FPMFormat,
				JSONFields: g.JSONFields, CPUField: g.CPUField, Location: time.UTC}
			if g.Timezone != "" {
				if o.Location, err = time.LoadLocation(g.Timezone); err != nil {
					t.Fatal(err)
				}
			}
			for _, s := range g.TrustedProxies {
				o.TrustedProxies = append(o.TrustedProxies, netip.MustParsePrefix(s))
			}
			p := mustParser(t, o)
			inputs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
			// sample/shop.fpm.log is a PHP-FPM log that internal/samplelog
			// writes (and checks against its own golden): not combined.
			inputs = slices.DeleteFunc(inputs, func(f string) bool { return strings.HasSuffix(f, ".fpm.log") })
			if len(inputs) == 0 {
				t.Fatal("no .log file")
			}
			goldenFiles(t, p, inputs, *update)
		})
	}
}

// goldenFiles compares each input's reading with the .golden file beside
// it or, with update, rewrites every one of them.
func goldenFiles(t *testing.T, p *Parser, inputs []string, update bool) {
	t.Helper()
	for _, in := range inputs {
		raw, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		lines := bytes.Split(raw, []byte("\n"))
		if len(lines[len(lines)-1]) == 0 {
			lines = lines[:len(lines)-1]
		}
		var out bytes.Buffer
		enc := json.NewEncoder(&out)
		enc.SetEscapeHTML(false)
		for i, l := range lines {
			e, err := p.Parse(l, i+1)
			var v any = goldenOf(i+1, e, err)
			if err != nil {
				v = struct {
					Line  int    `json:"line"`
					Error string `json:"error"`
				}{i + 1, err.Error()}
			}
			if err := enc.Encode(v); err != nil {
				t.Fatal(err)
			}
		}
		golden := strings.TrimSuffix(in, ".log") + ".golden"
		if update {
			if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue // and the next input: -update rewrites every file
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run go test -run Golden -update)", err)
		}
		if diff := cmp.Diff(strings.Split(string(want), "\n"), strings.Split(out.String(), "\n")); diff != "" {
			t.Errorf("%s (-want +got):\n%s", golden, diff)
		}
	}
}

// TestGoldenUpdateWritesEvery: -update rewrites the golden file of every
// input of a directory, not the first alone, and what it writes is what the
// comparison then accepts.
func TestGoldenUpdateWritesEvery(t *testing.T) {
	src, err := os.ReadFile("../testdata/logs/combined/input.log")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../testdata/logs/combined/input.golden")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var inputs []string
	for _, name := range []string{"a", "b", "c"} {
		in := filepath.Join(dir, name+".log")
		if err := os.WriteFile(in, src, 0o644); err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, in)
	}
	p := mustParser(t, Options{Format: "combined", Location: time.UTC})
	goldenFiles(t, p, inputs, true)
	for _, in := range inputs {
		golden := strings.TrimSuffix(in, ".log") + ".golden"
		got, err := os.ReadFile(golden)
		if err != nil {
			t.Errorf("after -update: %v", err)
			continue
		}
		if diff := cmp.Diff(string(want), string(got)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", golden, diff)
		}
	}
	goldenFiles(t, p, inputs, false)
}
