package parser

import (
	"bytes"
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logjail/logjail/internal/testenv"
)

// checkSane is what every fuzzer asserts of an accepted line.
func checkSane(t *testing.T, p *Parser, line string) {
	// A line format reads as main's scanner at 3ee57b3 did.
	sameAsReference(t, p, line)
	e, err := p.ParseString(line, 1)
	if err != nil {
		var pe *Error
		if !errors.As(err, &pe) {
			t.Fatalf("error %v is not a *parser.Error", err)
		}
		return
	}
	if !e.IP.IsValid() || e.IP.Zone() != "" || e.IP.Is4In6() {
		t.Fatalf("accepted with IP %v: %q", e.IP, line)
	}
	if e.Time.IsZero() {
		t.Fatalf("accepted with a zero time: %q", line)
	}
	if e.Has&HasStatus != 0 && (e.Status < 100 || e.Status > 599) {
		t.Fatalf("status %d: %q", e.Status, line)
	}
	if e.Has&HasStatus == 0 && e.Status != 0 || e.Has&HasBytes != 0 && e.Bytes < 0 ||
		e.Has&HasDuration != 0 && e.Duration < 0 || e.Has&HasCPU != 0 && e.CPU < 0 {
		t.Fatalf("bad numbers %+v: %q", e, line)
	}
	// ParseStringBuf (the path of a reused buffer) reads the same.
	sameAsParseString(t, p, line, make([]Field, 1, 1+p.FieldsPerLine()))
	// Parse (the copying path) reads the same.
	if e2, err := p.Parse([]byte(line), 1); err != nil || !e2.Time.Equal(e.Time) || e2.IP != e.IP {
		t.Fatalf("Parse and ParseString differ on %q: %v", line, err)
	}
}

// seedLines adds the bench lines, the golden inputs of a directory and the
// shared corpus lines (when present) to a fuzzer.
func seedLines(f *testing.F, dirs ...string) {
	for _, bc := range benchCases {
		f.Add(bc.line)
	}
	for _, d := range dirs {
		ins, _ := filepath.Glob(filepath.Join("../testdata/logs", d, "*.log"))
		for _, in := range ins {
			b, err := os.ReadFile(in)
			if err != nil {
				f.Fatal(err)
			}
			for _, l := range strings.Split(string(b), "\n") {
				if len(l) < 4096 {
					f.Add(l)
				}
			}
		}
	}
	for _, l := range dirtyLines {
		f.Add(l.line)
	}
	for _, l := range corpusSeeds(f) {
		f.Add(l)
	}
}

// corpusSeedsPerFile bounds the lines a fuzzer takes from each file of the
// shared corpus: its first lines show each file's format, and every seed
// runs as a test in `go test`.
const corpusSeedsPerFile = 50

// corpusSeeds returns the first lines of every log of the shared corpus
// (not its assertions, configurations or expected outputs). Without the
// corpus a user's clone seeds from the repository alone, saying so; under
// CI=true, where ../shared is always present, its absence fails the fuzzer.
func corpusSeeds(f *testing.F) []string {
	f.Helper()
	if _, err := os.Stat(corpusDir); err != nil {
		if testenv.CI() {
			f.Fatalf("shared corpus not found at %s: under CI=true the fuzzers are seeded from it: %v", corpusDir, err)
		}
		f.Logf("shared corpus not found at %s: seeded from the repository's lines only", corpusDir)
		return nil
	}
	var out []string
	err := filepath.WalkDir(corpusDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch filepath.Ext(path) {
		case ".assert", ".yaml", ".json", ".tsv", ".md", ".gz", ".bz2", ".xz", ".zst":
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.IndexByte(b, 0) >= 0 {
			return nil // not text
		}
		for i, l := range strings.SplitN(string(b), "\n", corpusSeedsPerFile+1) {
			if i < corpusSeedsPerFile && len(l) < 4096 {
				out = append(out, strings.TrimSuffix(l, "\r"))
			}
		}
		return nil
	})
	if err != nil {
		f.Fatalf("reading the shared corpus: %v", err)
	}
	if len(out) < 1000 {
		f.Fatalf("%d seed lines from the shared corpus at %s, want at least 1,000", len(out), corpusDir)
	}
	return out
}

func fuzzFormat(f *testing.F, o Options, dirs ...string) {
	seedLines(f, dirs...)
	p, err := New(o)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, line string) { checkSane(t, p, line) })
}

func FuzzPresets(f *testing.F) {
	seedLines(f, "combined", "common", "vhost_combined", "host_combined", "nginx_timing", "apache_timing", "traefik_clf", "phpfpm", "caddy", "traefik_json",
		"haproxy", "alb", "cloudfront", "iis", "envoy")
	var ps []*Parser
	for _, name := range Presets() {
		p, err := New(Options{Format: name})
		if err != nil {
			f.Fatal(err)
		}
		ps = append(ps, p)
	}
	f.Fuzz(func(t *testing.T, line string) {
		for _, p := range ps {
			checkSane(t, p, line)
		}
	})
}

func FuzzNginx(f *testing.F) {
	fuzzFormat(f, Options{LogFormat: `$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" "$http_x_forwarded_for" $host rt=$request_time urt=$upstream_response_time cpu=$upstream_http_x_cpu_time`,
		CPUField: "upstream_http_x_cpu_time", TrustedProxies: prefixes(f, "10.0.0.0/8", "127.0.0.1/32")}, "nginx_log_format", "combined")
}

func FuzzApache(f *testing.F) {
	fuzzFormat(f, Options{ApacheFormat: `%v:%p %a %l %u %{%d/%b/%Y:%H:%M:%S %z}t "%r" %>s %B "%{Referer}i" "%{User-Agent}i" %{ms}T "%{X-Forwarded-For}i" %{Content-Type}o %{UNIQUE_ID}e`,
		TrustedProxies: prefixes(f, "192.0.2.10/32")}, "apache_format", "combined")
}

func FuzzFPM(f *testing.F) {
	fuzzFormat(f, Options{FPMFormat: `%{REMOTE_ADDR}e - %u [%t] "%m %r%Q%q" %s %{mili}d %{kilo}M %C%% %{%Y-%m-%dT%H:%M:%S%z}T`}, "fpm_format", "phpfpm")
}

func FuzzJSON(f *testing.F) {
	fuzzFormat(f, Options{JSONFields: map[string]string{"ip": "remote", "time": "ts", "method": "req.method", "path": "req.uri", "status": "status",
		"duration": "took", "user_agent": "req.headers.user-agent", "x_forwarded_for": "req.headers.x-forwarded-for", "cpu": "cpu", "request_id": "req.id"},
		TrustedProxies: prefixes(f, "10.0.0.0/8")}, "json", "caddy", "traefik_json")
}

// FuzzFormatStrings compiles arbitrary format strings: New never panics, and
// a parser it returns never panics either.
func FuzzFormatStrings(f *testing.F) {
	for _, bc := range benchCases {
		f.Add(bc.opts.LogFormat+bc.opts.ApacheFormat+bc.opts.FPMFormat, bc.line)
	}
	f.Add(`%{%Y-%m-%dT%H:%M:%S%z}t %h "%r"`, `2026-11-22T07:09:34+0100 192.0.2.1 "GET / HTTP/1.1"`)
	f.Fuzz(func(t *testing.T, format, line string) {
		for _, o := range []Options{{LogFormat: format}, {ApacheFormat: format}, {FPMFormat: format}} {
			if p, err := New(o); err == nil {
				checkSane(t, p, line)
			}
		}
	})
}

// FuzzDottedQuad checks the IPv4 fast path against netip.ParseAddr: whatever
// it accepts, netip reads as the same address.
func FuzzDottedQuad(f *testing.F) {
	for _, s := range []string{"203.0.113.7", "0.0.0.0", "255.255.255.255", "256.1.1.1", "01.2.3.4", "1.2.3", "1.2.3.4.5", "1.2.3.4 ", "::1", "1..2.3", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := parseDottedQuad(s)
		if !ok {
			return
		}
		b, err := netip.ParseAddr(s)
		if err != nil || a != b {
			t.Fatalf("parseDottedQuad(%q) = %v; netip.ParseAddr = %v, %v", s, a, b, err)
		}
	})
}

// FuzzHexIPv6 checks the IPv6 fast path against netip.ParseAddr: whatever
// it accepts, netip reads as the same address.
func FuzzHexIPv6(f *testing.F) {
	for _, s := range []string{"2001:db8:8000:1a2b::1", "::1", "::", "1::", "::ffff:1.2.3.4", "::ffff:102:304", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7::", "1:2:3:4:5:6:7:8:9",
		"1::2::3", "12345::1", "fe80::1%eth0", "[::1]", "2003:4717:b4a8:779f:b5a5:8d21:fa0e:2892", "A:B:C:D:E:F:a:b", ":1::", "1:", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := parseHexIPv6(s)
		if !ok {
			return
		}
		b, err := netip.ParseAddr(s)
		if err != nil || a != b {
			t.Fatalf("parseHexIPv6(%q) = %v; netip.ParseAddr = %v, %v", s, a, b, err)
		}
	})
}
