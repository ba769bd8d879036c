package parser

import (
	"errors"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// crowdsecSamples are the CrowdSec hub's test logs (shared corpus,
// crowdsec/<test>/) of the formats the presets haproxy, alb, cloudfront,
// iis and envoy read, with the preset that reads each.
var crowdsecSamples = []struct {
	test, file, preset string
}{
	{"haproxy-logs", "haproxy-logs.log", "haproxy"},
	{"haproxy-nextcloud-whitelist", "haproxy-logs.log", "haproxy"},
	{"aws-alb-logs", "aws-alb-logs.log", "alb"},
	{"aws-alb-http-bad-user-agent", "aws-alb-http-bad-user-agent.log", "alb"},
	{"aws-cloudfront-logs", "aws-cloudfront-logs.log", "cloudfront"},
	{"iis-xml-logs", "iis-logs.log", "iis"},
	{"envoy-logs", "envoy.log", "envoy"},
	{"envoy-http-bad-user-agent", "envoy-http-bad-user-agent.log", "envoy"},
	{"envoy-http-crawl-non_statics", "envoy-http-crawl-non_statics.log", "envoy"},
}

// crowdsecExpected is one row of crowdsec/_derived-expected-ip-time.tsv:
// what CrowdSec's parsers extract from the idx-th event of a test.
type crowdsecExpected struct {
	ip, timestamp, verb, status, path string
}

func readCrowdsecExpected(t *testing.T, corpus string) map[string]map[int]crowdsecExpected {
	t.Helper()
	out := map[string]map[int]crowdsecExpected{}
	for _, l := range readLines(t, filepath.Join(corpus, "crowdsec", "_derived-expected-ip-time.tsv")) {
		if strings.HasPrefix(l, "#") {
			continue
		}
		f := strings.Split(l, "\t")
		if len(f) < 7 {
			continue
		}
		idx, err := strconv.Atoi(f[1])
		if err != nil {
			t.Fatalf("_derived-expected-ip-time.tsv: %q: idx %q: %v", l, f[1], err)
		}
		if out[f[0]] == nil {
			out[f[0]] = map[int]crowdsecExpected{}
		}
		out[f[0]][idx] = crowdsecExpected{ip: f[2], timestamp: f[3], verb: f[4], status: f[5], path: f[6]}
	}
	return out
}

// crowdsecDiffers are the events where logjail reads another client than
// CrowdSec, by design: Envoy's default format string logs no peer, only
// X-Forwarded-For, whose leftmost entry CrowdSec believes; logjail takes
// the peer that set the header (its last entry), and believes the rest only
// from trusted proxies (TestCrowdsecSamplesTrusted).
var crowdsecDiffers = map[string]map[int]string{
	"envoy-logs": {8: "10.42.0.1", 9: "fd00:1234:5678::1"},
}

// TestCrowdsecSamples reads every line of the CrowdSec hub's samples of the
// five formats with their preset: none is rejected, each yields what
// CrowdSec's own parsers extract (client, time, method, status, path; the
// expected values of the corpus's _derived-expected-ip-time.tsv, from their
// parser.assert files), and `format: auto` picks that preset from the
// file's first lines.
func TestCrowdsecSamples(t *testing.T) {
	corpus := needCorpus(t)
	want := readCrowdsecExpected(t, corpus)
	for _, s := range crowdsecSamples {
		t.Run(s.test, func(t *testing.T) {
			path := filepath.Join(corpus, "crowdsec", s.test, s.file)
			lines := readLines(t, path)
			p := mustParser(t, Options{Format: s.preset, Location: time.UTC})
			checked := 0
			for i, l := range lines {
				e, full, err := p.parse(l, i+1)
				if err != nil {
					t.Errorf("%s:%d rejected: %v", path, i+1, err)
					continue
				}
				if !full {
					t.Errorf("%s:%d not read completely by %s: %+v", path, i+1, s.preset, e)
				}
				w, ok := want[s.test][i]
				if !ok {
					continue
				}
				checked++
				ip := w.ip
				if d, ok := crowdsecDiffers[s.test][i]; ok {
					ip = d
				}
				if e.IP.String() != ip {
					t.Errorf("%s:%d: ip %s, want %s", path, i+1, e.IP, ip)
				}
				if w.timestamp != "" {
					wt, err := time.Parse(time.RFC3339Nano, w.timestamp)
					if err != nil {
						t.Fatal(err)
					}
					if !e.Time.Equal(wt) {
						t.Errorf("%s:%d: time %s, want %s", path, i+1, e.Time.Format(time.RFC3339Nano), w.timestamp)
					}
				}
				if w.verb != "" && e.Method != w.verb {
					t.Errorf("%s:%d: method %q, want %q", path, i+1, e.Method, w.verb)
				}
				if w.status != "" && strconv.Itoa(e.Status) != w.status {
					t.Errorf("%s:%d: status %d, want %s", path, i+1, e.Status, w.status)
				}
				// CrowdSec's http_path keeps the query for some formats
				// (CloudFront, the ALB) and not for others (IIS).
				if w.path != "" && e.Path != w.path && e.Path+"?"+e.Query != w.path {
					t.Errorf("%s:%d: path %q query %q, want %q", path, i+1, e.Path, e.Query, w.path)
				}
			}
			checkAsserts(t, path, s.preset, filepath.Join(corpus, "crowdsec", s.test, "parser.assert"), lines, p)
			if len(want[s.test]) > 0 && checked != len(want[s.test]) {
				t.Errorf("%d of the %d expected events checked", checked, len(want[s.test]))
			}
			var sample [][]byte
			for _, l := range lines {
				sample = append(sample, []byte(l))
			}
			got, err := Detect(sample, Options{Location: time.UTC})
			if err != nil || got != s.preset {
				t.Errorf("Detect = %q, %v; want %q", got, err, s.preset)
			}
			t.Logf("%s: %d lines read, %d compared with CrowdSec's", s.test, len(lines), checked)
		})
	}
}

// TestCrowdsecSamplesTrusted: with the proxies of the Envoy sample
// trusted, the client of its default-format lines is the one CrowdSec
// reads (the leftmost X-Forwarded-For address), and its JSON lines, whose
// peer is trusted, are read through their X-Forwarded-For too.
func TestCrowdsecSamplesTrusted(t *testing.T) {
	corpus := needCorpus(t)
	want := readCrowdsecExpected(t, corpus)
	lines := readLines(t, filepath.Join(corpus, "crowdsec", "envoy-logs", "envoy.log"))
	p := mustParser(t, Options{Format: "envoy", TrustedProxies: []netip.Prefix{
		netip.MustParsePrefix("10.42.0.0/16"), netip.MustParsePrefix("fd00:1234:5678::1/128")}})
	for i, exp := range map[int]string{8: want["envoy-logs"][8].ip, 9: want["envoy-logs"][9].ip, 6: "192.168.1.100", 7: "fd00:1234:5678::5a24"} {
		e, err := p.ParseString(lines[i], i+1)
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if e.IP.String() != exp {
			t.Errorf("line %d: ip %s, want %s", i+1, e.IP, exp)
		}
	}
}

// TestCrowdsecSamplesInTestdata: the lines copied into testdata/logs from
// the CrowdSec hub are still those of the shared corpus (SOURCES.md says
// where each came from).
func TestCrowdsecSamplesInTestdata(t *testing.T) {
	corpus := needCorpus(t)
	all := map[string]bool{}
	for _, s := range crowdsecSamples {
		for _, l := range readLines(t, filepath.Join(corpus, "crowdsec", s.test, s.file)) {
			all[l] = true
		}
	}
	for dir, n := range map[string]int{"haproxy": 6, "alb": 6, "cloudfront": 1, "iis": 1, "envoy": 9} {
		found := 0
		for _, l := range readLines(t, filepath.Join("../testdata/logs", dir, "input.log")) {
			if all[l] {
				found++
			}
		}
		if found != n {
			t.Errorf("testdata/logs/%s/input.log: %d lines from the CrowdSec samples, SOURCES.md says %d", dir, found, n)
		}
	}
}

// TestW3CFieldsChange: a #Fields: line changes the columns of the lines
// after it, mid-file too; the directive lines are ErrDirective (not
// malformed); a line that does not have the columns in force is rejected
// naming both counts; and a Parser that starts a new file reads that file's
// own #Fields:.
func TestW3CFieldsChange(t *testing.T) {
	p := mustParser(t, Options{Format: "iis"})
	lines := []string{
		"#Software: Microsoft Internet Information Services 10.0",
		"#Fields: date time c-ip cs-method cs-uri-stem sc-status time-taken",
		"2026-11-22 07:09:34 203.0.113.7 GET /a 200 15",
		"#Fields: date time cs-method c-ip cs-uri-stem sc-status sc-bytes time-taken",
		"2026-11-22 07:09:35 POST 198.51.100.23 /b 404 512 7",
		"2026-11-22 07:09:36 203.0.113.7 GET /a 200 15",
	}
	var got []string
	for i, l := range lines {
		e, err := p.ParseString(l, i+1)
		switch {
		case errors.Is(err, ErrDirective):
			got = append(got, "directive")
		case err != nil:
			got = append(got, err.Error())
		default:
			got = append(got, e.IP.String()+" "+e.Method+" "+e.Path+" "+strconv.Itoa(e.Status)+" "+strconv.FormatFloat(e.Duration, 'f', -1, 64))
		}
	}
	want := []string{
		"directive", "directive",
		"203.0.113.7 GET /a 200 0.015",
		"directive",
		"198.51.100.23 POST /b 404 0.007",
		"line 6: line: 7 columns, but the #Fields: in force names 8 (date time cs-method c-ip cs-uri-stem sc-status sc-bytes time-taken)",
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: %q, want %q", i+1, got[i], want[i])
		}
	}
	// An error on a data line is not ErrDirective.
	if _, err := p.ParseString(lines[5], 6); errors.Is(err, ErrDirective) {
		t.Error("a malformed line is ErrDirective")
	}
	// A new file's header is read again: the first layout comes back.
	if _, err := p.ParseString(lines[1], 1); !errors.Is(err, ErrDirective) {
		t.Fatalf("#Fields: %v", err)
	}
	if e, err := p.ParseString(lines[5], 2); err != nil || e.Path != "/a" {
		t.Errorf("after a new #Fields: %+v, %v", e, err)
	}
}

// TestW3CConcurrent: one Parser reads W3C lines from many goroutines while
// a #Fields: line of the same layout comes again (as at the top of every
// file); under -race nothing races and every line reads the same.
func TestW3CConcurrent(t *testing.T) {
	p := mustParser(t, Options{Format: "iis"})
	header := "#Fields: " + iisDefaultFields
	line := "2026-11-22 07:09:34 192.0.2.10 GET /index.html - 443 - 203.0.113.7 curl/8.5.0 - 200 0 0 15"
	done := make(chan error)
	for g := 0; g < 4; g++ {
		go func() {
			var err error
			for i := 0; i < 200 && err == nil; i++ {
				if i%50 == 0 {
					if _, e := p.ParseString(header, 1); !errors.Is(e, ErrDirective) {
						err = e
					}
					continue
				}
				var e Entry
				if e, err = p.ParseString(line, i+2); err == nil && (e.Path != "/index.html" || e.IP.String() != "203.0.113.7") {
					err = errors.New("misread: " + e.Path)
				}
			}
			done <- err
		}()
	}
	for g := 0; g < 4; g++ {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// TestNewPresetsCarry: the five presets carry duration and no CPU (a `% cpu`
// rule on them is refused unless cpu_fallback: duration), and what a rule
// may match on.
func TestNewPresetsCarry(t *testing.T) {
	for name, want := range map[string][]string{
		"haproxy":    {"ip", "time", "method", "path", "query", "status", "bytes", "duration", "frontend", "backend", "termination_state"},
		"alb":        {"ip", "time", "method", "path", "host", "status", "bytes", "user_agent", "duration", "elb", "trace_id"},
		"cloudfront": {"ip", "time", "method", "path", "query", "status", "bytes", "user_agent", "referer", "host", "duration", "x_edge_location"},
		"iis":        {"ip", "time", "method", "path", "query", "status", "user_agent", "user", "duration", "sc_substatus"},
		"envoy":      {"ip", "time", "method", "path", "status", "bytes", "user_agent", "host", "duration", "request_id"},
	} {
		fields, _ := mustParser(t, Options{Format: name}).Carries()
		for _, f := range want {
			if !containsString(fields, f) {
				t.Errorf("%s: carries %v, without %q", name, fields, f)
			}
		}
		if containsString(fields, "cpu") {
			t.Errorf("%s: carries cpu", name)
		}
	}
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestDetectNewPresets: auto picks each of the five presets from the first
// lines of its golden input (directives, errors and all), and does not take
// one of them for a combined log.
func TestDetectNewPresets(t *testing.T) {
	for _, name := range []string{"haproxy", "alb", "cloudfront", "iis", "envoy", "combined"} {
		b, err := os.ReadFile(filepath.Join("../testdata/logs", name, "input.log"))
		if err != nil {
			t.Fatal(err)
		}
		var sample [][]byte
		for _, l := range strings.Split(string(b), "\n") {
			sample = append(sample, []byte(l))
		}
		if got, err := Detect(sample, Options{}); err != nil || got != name {
			t.Errorf("%s: Detect = %q, %v", name, got, err)
		}
	}
}

// assertLine is one assertion of a parser.assert file on the first parsing
// stage: results["s01-parse"]["parser"][N].Evt.Meta["key"] == "value".
var assertLine = regexp.MustCompile(`^results\["s01-parse"\]\["[^"]+"\]\[(\d+)\]\.Evt\.(Meta|Parsed)\["([a-z_]+)"\] == (".*")$`)

// assertKeys say, per preset, which of CrowdSec's keys hold what logjail
// reads as the user agent, bytes, duration (and in which unit) and host.
var assertKeys = map[string]struct{ ua, bytes, duration, host string }{
	"haproxy":    {bytes: "Parsed.bytes_read", duration: "Parsed.time_duration/ms"},
	"alb":        {ua: "Meta.http_user_agent", bytes: "Parsed.sent_bytes", host: "Meta.http_host"},
	"cloudfront": {ua: "Meta.http_user_agent", bytes: "Parsed.sc_bytes", duration: "Parsed.time_taken/s"},
	"iis":        {ua: "Meta.http_user_agent"},
	"envoy":      {ua: "Meta.http_user_agent", bytes: "Parsed.bytes_sent", duration: "Parsed.duration/ms", host: "Meta.target_fqdn"},
}

// checkAsserts compares the user agent, bytes, duration and host of each
// line with what the sample's parser.assert says CrowdSec extracts, where
// it says it.
func checkAsserts(t *testing.T, path, preset, asserts string, lines []string, p *Parser) {
	t.Helper()
	if _, err := os.Stat(asserts); err != nil {
		return
	}
	got := map[int]map[string]string{}
	for _, l := range readLines(t, asserts) {
		m := assertLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		v, err := strconv.Unquote(m[4])
		if err != nil {
			t.Fatalf("%s: %q: %v", asserts, l, err)
		}
		if got[n] == nil {
			got[n] = map[string]string{}
		}
		got[n][m[2]+"."+m[3]] = v
	}
	k := assertKeys[preset]
	compared := 0
	for n, vals := range got {
		if n >= len(lines) {
			continue
		}
		e, err := p.ParseString(lines[n], n+1)
		if err != nil {
			continue // reported by the caller
		}
		if w, ok := vals[k.ua]; ok && k.ua != "" {
			if preset == "iis" {
				w = plusBlanks(w) // IIS's '+' for a blank, which logjail decodes
			}
			if e.UserAgent != w {
				t.Errorf("%s:%d: user agent %q, CrowdSec %q", path, n+1, e.UserAgent, w)
			}
			compared++
		}
		if w, ok := vals[k.bytes]; ok && k.bytes != "" {
			if strconv.FormatInt(e.Bytes, 10) != w {
				t.Errorf("%s:%d: bytes %d, CrowdSec %s", path, n+1, e.Bytes, w)
			}
			compared++
		}
		if key, unit, _ := strings.Cut(k.duration, "/"); key != "" {
			if w, ok := vals[key]; ok {
				f, err := strconv.ParseFloat(w, 64)
				if err != nil {
					t.Fatalf("%s: %s %q: %v", asserts, key, w, err)
				}
				if unit == "ms" {
					f /= 1000
				}
				if e.Has&HasDuration == 0 || math.Abs(e.Duration-f) > 1e-9 {
					t.Errorf("%s:%d: duration %v (has %v), CrowdSec %s %s", path, n+1, e.Duration, e.Has&HasDuration != 0, w, unit)
				}
				compared++
			}
		}
		if w, ok := vals[k.host]; ok && k.host != "" {
			if e.Host != w {
				t.Errorf("%s:%d: host %q, CrowdSec %q", path, n+1, e.Host, w)
			}
			compared++
		}
	}
	t.Logf("%s: %d values compared with parser.assert", filepath.Base(filepath.Dir(asserts)), compared)
}

// TestW3CBlocksOutOfOrder: a file whose #Fields: changes mid-file, read as
// replay reads it (every line handed to Directive in file order, then
// blocks parsed on several goroutines in any order), reads every line with
// the columns in force at its place; and Directive is false for the lines
// of a format without directives.
func TestW3CBlocksOutOfOrder(t *testing.T) {
	p := mustParser(t, Options{Format: "iis"})
	lines := []string{"#Software: Microsoft Internet Information Services 10.0", "#Fields: date time c-ip cs-method cs-uri-stem sc-status"}
	for i := 0; i < 300; i++ {
		lines = append(lines, "2026-11-22 07:09:34 203.0.113.7 GET /first 200")
	}
	lines = append(lines, "#Fields: date time cs-method cs-uri-stem c-ip sc-status sc-bytes")
	for i := 0; i < 300; i++ {
		lines = append(lines, "2026-11-22 08:09:34 POST /second 198.51.100.23 404 512")
	}
	for i, l := range lines {
		if got, want := p.Directive(l, i+1), l[0] == '#'; got != want {
			t.Fatalf("Directive(line %d) = %v, want %v", i+1, got, want)
		}
	}
	const block = 64
	errs := make(chan error, len(lines)/block+1)
	for start := len(lines) - len(lines)%block; start >= 0; start -= block { // the last block first
		go func(start int) {
			for i := start; i < min(start+block, len(lines)); i++ {
				e, err := p.ParseString(lines[i], i+1)
				if errors.Is(err, ErrDirective) {
					continue
				}
				want := "/first"
				if i > 302 {
					want = "/second"
				}
				if err != nil || e.Path != want {
					errs <- errors.New("line " + strconv.Itoa(i+1) + ": " + e.Path + ", want " + want)
					return
				}
			}
			errs <- nil
		}(start)
	}
	for start := len(lines) - len(lines)%block; start >= 0; start -= block {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if mustParser(t, Options{Format: "combined"}).Directive("#Fields: date", 1) {
		t.Error("combined has a directive")
	}
}

// TestW3CLayoutComesBack: a log whose #Fields: goes back to an earlier
// layout (A, B, A, as an IIS site reconfigured and then restored), handed
// to Directive in file order and then parsed in blocks in either order, as
// replay's workers do: every line is read with the layout at its place.
// The parse of the first A's #Fields: line once the second A was noted
// made the lines under B read as A (a third of them rejected for their
// column count, more or less from run to run in replay).
func TestW3CLayoutComesBack(t *testing.T) {
	a := "#Fields: date time c-ip cs-method cs-uri-stem sc-status"
	b := "#Fields: date time cs-method cs-uri-stem c-ip sc-status sc-bytes"
	var lines, want []string
	add := func(header, line, path string) {
		lines, want = append(lines, header), append(want, "")
		for i := 0; i < 150; i++ {
			lines, want = append(lines, line), append(want, path)
		}
	}
	add(a, "2026-11-22 07:09:34 203.0.113.7 GET /first 200", "/first")
	add(b, "2026-11-22 08:09:34 POST /second 198.51.100.23 404 512", "/second")
	add(a, "2026-11-22 09:09:34 203.0.113.8 GET /third 200", "/third")
	const block = 64
	for _, order := range []string{"forward", "backward"} {
		p := mustParser(t, Options{Format: "iis"})
		for i, l := range lines {
			p.Directive(l, i+1)
		}
		var starts []int
		for s := 0; s < len(lines); s += block {
			starts = append(starts, s)
		}
		if order == "backward" {
			slices.Reverse(starts)
		}
		for _, s := range starts {
			for i := s; i < min(s+block, len(lines)); i++ {
				e, err := p.ParseString(lines[i], i+1)
				if want[i] == "" {
					if !errors.Is(err, ErrDirective) {
						t.Fatalf("%s: line %d: %v, want a directive", order, i+1, err)
					}
					continue
				}
				if err != nil || e.Path != want[i] {
					t.Fatalf("%s: line %d: %q, %v; want %s", order, i+1, e.Path, err, want[i])
				}
			}
		}
	}
}

// TestHandPresetCPUField: a named field of a hand-read preset given as
// cpu_field (an IIS custom field here) is read as CPU seconds.
func TestHandPresetCPUField(t *testing.T) {
	p := mustParser(t, Options{Format: "iis", CPUField: "x_cpu_seconds"})
	if _, err := p.ParseString("#Fields: date time c-ip cs-method cs-uri-stem sc-status time-taken x-cpu-seconds", 1); !errors.Is(err, ErrDirective) {
		t.Fatal(err)
	}
	e, err := p.ParseString("2026-11-22 07:09:34 203.0.113.7 GET /export 200 1250 0.870", 2)
	if err != nil || e.Has&HasCPU == 0 || e.CPU != 0.87 || e.Duration != 1.25 {
		t.Errorf("%+v, %v: want cpu 0.87, duration 1.25", e, err)
	}
	if fields, _ := p.Carries(); !containsString(fields, "cpu") {
		t.Errorf("carries %v, without cpu", fields)
	}
}
