package parser

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
	_ "time/tzdata" // Europe/Paris on a machine without a zone database: the tests never skip for it

	"github.com/google/go-cmp/cmp"
)

var addrCmp = cmp.Comparer(func(a, b netip.Addr) bool { return a == b })

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

var ip = netip.MustParseAddr

// dirtyLines are lines real logs carry: each must still give IP and time.
var dirtyLines = []struct {
	name string
	opts Options
	line string
	want Entry
}{
	{"nginx \\x escapes and escaped quotes", Options{Format: "combined"},
		`192.0.2.1 - - [22/Nov/2026:07:09:34 +0100] "GET /a\x22b?q=\x5C HTTP/1.1" 200 5 "-" "agent \x22x\x22 caf\xC3\xA9"`,
		Entry{IP: ip("192.0.2.1"), Time: at("2026-11-22T07:09:34+01:00"), Method: "GET", Path: `/a"b`, Query: `q=\`, Protocol: "HTTP/1.1", Status: 200, Bytes: 5, UserAgent: `agent "x" café`,
			Has: HasMethod | HasPath | HasQuery | HasProtocol | HasStatus | HasBytes | HasUserAgent}},
	{"apache escaped quotes", Options{Format: "combined"},
		`192.0.2.1 - - [22/Nov/2026:07:09:34 +0100] "GET /\"x\" HTTP/1.1" 200 5 "-" "a \"b\" c"`,
		Entry{IP: ip("192.0.2.1"), Time: at("2026-11-22T07:09:34+01:00"), Method: "GET", Path: `/"x"`, Protocol: "HTTP/1.1", Status: 200, Bytes: 5, UserAgent: `a "b" c`,
			Has: HasMethod | HasPath | HasProtocol | HasStatus | HasBytes | HasUserAgent}},
	{"old apache unescaped quotes in the request", Options{Format: "combined"},
		`192.0.2.1 - - [10/Oct/2004:04:20:13 -0400] "GET /x"y" z HTTP/1.0" 404 276 "-" "-"`,
		Entry{IP: ip("192.0.2.1"), Time: at("2004-10-10T04:20:13-04:00"), Method: "GET", Path: `/x"y" z`, Protocol: "HTTP/1.0", Status: 404, Bytes: 276,
			Has: HasMethod | HasPath | HasProtocol | HasStatus | HasBytes}},
	{"raw 8-bit bytes", Options{Format: "combined"},
		"192.0.2.1 - \xe9 [22/Nov/2026:07:09:34 +0100] \"GET /\xff HTTP/1.1\" 200 5 \"-\" \"\xfe\"",
		Entry{IP: ip("192.0.2.1"), Time: at("2026-11-22T07:09:34+01:00"), Method: "GET", Path: "/\xff", Protocol: "HTTP/1.1", Status: 200, Bytes: 5, UserAgent: "\xfe", User: "\xe9",
			Has: HasMethod | HasPath | HasProtocol | HasStatus | HasBytes | HasUserAgent | HasUser}},
	{"TLS handshake as request", Options{Format: "combined"},
		`192.0.2.1 - - [22/Nov/2026:07:09:34 +0100] "\x16\x03\x01\x00\xF1\x01\x00\x00\xED\x03\x03" 400 157 "-" "-"`,
		Entry{IP: ip("192.0.2.1"), Time: at("2026-11-22T07:09:34+01:00"), Status: 400, Bytes: 157, Has: HasStatus | HasBytes,
			Fields: []Field{{"request", `\x16\x03\x01\x00\xF1\x01\x00\x00\xED\x03\x03`}}}},
	{"binary garbage as request", Options{Format: "combined"},
		"192.0.2.1 - - [22/Nov/2026:07:09:34 +0100] \"\x01\x02 \x03\" 400 0 \"-\" \"-\"",
		Entry{IP: ip("192.0.2.1"), Time: at("2026-11-22T07:09:34+01:00"), Status: 400, Bytes: 0, Has: HasStatus | HasBytes,
			Fields: []Field{{"request", "\x01\x02 \x03"}}}},
	{"dash for every optional field", Options{Format: "nginx_timing"},
		`192.0.2.1 - - [22/Nov/2026:07:09:34 +0100] "-" - - "-" "-" -`,
		Entry{IP: ip("192.0.2.1"), Time: at("2026-11-22T07:09:34+01:00")}},
	{"CRLF", Options{Format: "common"},
		"192.0.2.1 - - [22/Nov/2026:07:09:34 +0100] \"GET / HTTP/1.1\" 200 5\r\n",
		Entry{IP: ip("192.0.2.1"), Time: at("2026-11-22T07:09:34+01:00"), Method: "GET", Path: "/", Protocol: "HTTP/1.1", Status: 200, Bytes: 5,
			Has: HasMethod | HasPath | HasProtocol | HasStatus | HasBytes}},
	{"16 KiB line", Options{Format: "combined"},
		`192.0.2.1 - - [22/Nov/2026:07:09:34 +0100] "GET /` + strings.Repeat("x", 16<<10) + ` HTTP/1.1" 414 0 "-" "-"`,
		Entry{IP: ip("192.0.2.1"), Time: at("2026-11-22T07:09:34+01:00"), Method: "GET", Path: "/" + strings.Repeat("x", 16<<10), Protocol: "HTTP/1.1", Status: 414, Bytes: 0,
			Has: HasMethod | HasPath | HasProtocol | HasStatus | HasBytes}},
	{"missing ident field", Options{Format: "combined"},
		`192.0.2.1 - [22/Nov/2026:07:09:34 +0100] "GET / HTTP/1.1" 200 5 "-" "-"`,
		Entry{IP: ip("192.0.2.1"), Time: at("2026-11-22T07:09:34+01:00"), Method: "GET", Path: "/", Protocol: "HTTP/1.1", Status: 200, Bytes: 5,
			Has: HasMethod | HasPath | HasProtocol | HasStatus | HasBytes}},
	{"common line read as combined", Options{Format: "combined"},
		`192.0.2.1 - - [22/Nov/2026:07:09:34 +0100] "GET / HTTP/1.1" 200 5`,
		Entry{IP: ip("192.0.2.1"), Time: at("2026-11-22T07:09:34+01:00"), Method: "GET", Path: "/", Protocol: "HTTP/1.1", Status: 200, Bytes: 5,
			Has: HasMethod | HasPath | HasProtocol | HasStatus | HasBytes}},
	{"extra trailing fields", Options{Format: "combined"},
		`192.0.2.1 - - [22/Nov/2026:07:09:34 +0100] "GET / HTTP/1.1" 200 5 "-" "ua" "10.0.0.1" 0.003`,
		Entry{IP: ip("192.0.2.1"), Time: at("2026-11-22T07:09:34+01:00"), Method: "GET", Path: "/", Protocol: "HTTP/1.1", Status: 200, Bytes: 5, UserAgent: "ua",
			Has: HasMethod | HasPath | HasProtocol | HasStatus | HasBytes | HasUserAgent}},
	{"IPv6 in brackets with port", Options{Format: "common"},
		`[2001:db8::1]:443 - - [22/Nov/2026:07:09:34 +0100] "GET / HTTP/1.1" 200 5`,
		Entry{IP: ip("2001:db8::1"), Time: at("2026-11-22T07:09:34+01:00"), Method: "GET", Path: "/", Protocol: "HTTP/1.1", Status: 200, Bytes: 5,
			Has: HasMethod | HasPath | HasProtocol | HasStatus | HasBytes}},
	{"IPv4-mapped and zoned", Options{Format: "common"},
		`::ffff:192.0.2.9 - - [22/Nov/2026:07:09:34 +0100] "GET / HTTP/1.1" 200 5`,
		Entry{IP: ip("192.0.2.9"), Time: at("2026-11-22T07:09:34+01:00"), Method: "GET", Path: "/", Protocol: "HTTP/1.1", Status: 200, Bytes: 5,
			Has: HasMethod | HasPath | HasProtocol | HasStatus | HasBytes}},
}

func TestDirtyLines(t *testing.T) {
	for _, tc := range dirtyLines {
		t.Run(tc.name, func(t *testing.T) {
			p := mustParser(t, tc.opts)
			got, err := p.Parse([]byte(tc.line), 7)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, addrCmp); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestFormats(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		opts Options
		line string
		want Entry
	}{
		{"nginx msec and cpu list", Options{LogFormat: `$msec $remote_addr "$request_method $request_uri" $status $bytes_sent $request_time cpu=$upstream_http_x_cpu_time`, CPUField: "upstream_http_x_cpu_time", Location: time.UTC},
			`1795327774.250 192.0.2.1 "GET /a?b" 200 10 0.500 cpu=0.100, 0.200`,
			Entry{IP: ip("192.0.2.1"), Time: at("2026-11-22T06:09:34.25Z"), Method: "GET", Path: "/a", Query: "b", Status: 200, Bytes: 10, Duration: 0.5, CPU: 0.30000000000000004,
				Has: HasMethod | HasPath | HasQuery | HasStatus | HasBytes | HasDuration | HasCPU, Fields: []Field{{"upstream_http_x_cpu_time", "0.100, 0.200"}}}},
		{"nginx time_iso8601 and uri is_args args", Options{LogFormat: `$time_iso8601 $remote_addr $uri$is_args$args $server_protocol`},
			`2026-11-22T07:09:34+05:30 2001:db8::2 /x?y=1 HTTP/2.0`,
			Entry{IP: ip("2001:db8::2"), Time: at("2026-11-22T07:09:34+05:30"), Path: "/x", Query: "y=1", Protocol: "HTTP/2.0", Has: HasPath | HasQuery | HasProtocol}},
		{"zone-less time in the source zone", Options{ApacheFormat: `%h [%{%Y-%m-%d %H:%M:%S}t] %>s`, Location: paris},
			`192.0.2.1 [2026-07-01 12:00:00] 200`,
			Entry{IP: ip("192.0.2.1"), Time: time.Date(2026, 7, 1, 12, 0, 0, 0, paris), Status: 200, Has: HasStatus}},
		{"apache %D %U %q %H %m %v", Options{ApacheFormat: `%v %a %t "%m %U%q %H" %s %D`},
			`example.com 192.0.2.1 [01/Jan/2026:00:00:00 +0000] "GET /p?x=1 HTTP/1.1" 200 1500`,
			Entry{IP: ip("192.0.2.1"), Time: at("2026-01-01T00:00:00Z"), Method: "GET", Path: "/p", Query: "x=1", Protocol: "HTTP/1.1", Status: 200, Host: "example.com", Duration: 0.0015,
				Has: HasMethod | HasPath | HasQuery | HasProtocol | HasStatus | HasHost | HasDuration}},
		{"time missing", Options{LogFormat: `$remote_addr [$time_local] $status`}, `192.0.2.1 200`, Entry{}},
		// %T is whole seconds, %D microseconds: the finer wins, in either order.
		{"apache %T then %D", Options{ApacheFormat: `%h %t %s %T %D`},
			`192.0.2.1 [01/Jan/2026:00:00:00 +0000] 200 1 1500000`,
			Entry{IP: ip("192.0.2.1"), Time: at("2026-01-01T00:00:00Z"), Status: 200, Duration: 1.5,
				Has: HasStatus | HasDuration, Fields: []Field{{"duration_s", "1"}}}},
		{"apache %D then %T", Options{ApacheFormat: `%h %t %s %D %T`},
			`192.0.2.1 [01/Jan/2026:00:00:00 +0000] 200 1500000 1`,
			Entry{IP: ip("192.0.2.1"), Time: at("2026-01-01T00:00:00Z"), Status: 200, Duration: 1.5,
				Has: HasStatus | HasDuration, Fields: []Field{{"duration_s", "1"}}}},
		{"apache %{us}T with epoch time", Options{ApacheFormat: `%{sec}t %h %{us}T`, Location: time.UTC},
			`1795327774 192.0.2.1 2500`,
			Entry{IP: ip("192.0.2.1"), Time: at("2026-11-22T06:09:34Z"), Duration: 0.0025, Has: HasDuration}},
		{"fpm %R is the client without REMOTE_ADDR", Options{FPMFormat: `%R - %u %t "%m %r%Q%q" %s %d %C%%`},
			`127.0.0.1 - bob 22/Nov/2026:07:09:30 +0000 "GET /cpu.php?ms=10" 200 0.500 50.00%`,
			Entry{IP: ip("127.0.0.1"), Time: at("2026-11-22T07:09:30Z"), Method: "GET", Path: "/cpu.php", Query: "ms=10", Status: 200, User: "bob", Duration: 0.5, CPU: 0.25,
				Has: HasMethod | HasPath | HasQuery | HasStatus | HasUser | HasDuration | HasCPU}},
		{"caddy falls back to remote_ip", Options{Format: "caddy"},
			`{"ts":1700000000,"request":{"remote_ip":"192.0.2.5","method":"GET","uri":"/?a","headers":{"User-Agent":["x","y"]}},"status":200,"size":3}`,
			Entry{IP: ip("192.0.2.5"), Time: time.Unix(1700000000, 0), Method: "GET", Path: "/", Query: "a", Status: 200, Bytes: 3, UserAgent: "x",
				Has: HasMethod | HasPath | HasQuery | HasStatus | HasBytes | HasUserAgent}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := mustParser(t, tc.opts).ParseString(tc.line, 1)
			if tc.want.IP == (netip.Addr{}) {
				// Only that it reads: the time is missing here, so an error.
				if err == nil {
					t.Fatalf("want an error, got %+v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, addrCmp); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestTrustedProxies(t *testing.T) {
	trusted := prefixes(t, "10.0.0.0/8", "2001:db8:ffff::/48")
	format := `$remote_addr "$http_x_forwarded_for" [$time_local]`
	tests := []struct{ line, want string }{
		{`10.0.0.1 "203.0.113.5" [22/Nov/2026:07:09:34 +0100]`, "203.0.113.5"},
		{`10.0.0.1 "198.51.100.1, 203.0.113.5, 10.0.0.7" [22/Nov/2026:07:09:34 +0100]`, "203.0.113.5"},
		{`198.51.100.9 "203.0.113.5" [22/Nov/2026:07:09:34 +0100]`, "198.51.100.9"}, // untrusted peer: XFF ignored
		{`10.0.0.1 "10.0.0.2, 10.0.0.3" [22/Nov/2026:07:09:34 +0100]`, "10.0.0.2"},  // all trusted: the leftmost
		{`10.0.0.1 "-" [22/Nov/2026:07:09:34 +0100]`, "10.0.0.1"},
		{`10.0.0.1 "garbage, 203.0.113.5" [22/Nov/2026:07:09:34 +0100]`, "203.0.113.5"},
		{`10.0.0.1 "203.0.113.5, garbage, 10.0.0.9" [22/Nov/2026:07:09:34 +0100]`, "10.0.0.9"}, // stops at what is no address
		{`2001:db8:ffff::1 "[2001:db8::5]:1234, ::ffff:192.0.2.8" [22/Nov/2026:07:09:34 +0100]`, "192.0.2.8"},
		{`10.0.0.1 "fe80::1%eth0" [22/Nov/2026:07:09:34 +0100]`, "fe80::1"},
	}
	p := mustParser(t, Options{LogFormat: format, TrustedProxies: trusted})
	for _, tc := range tests {
		t.Run(tc.line, func(t *testing.T) {
			e, err := p.ParseString(tc.line, 1)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, e.IP.String()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	p := mustParser(t, Options{})
	tests := []struct {
		line  string
		field string
		msg   string
	}{
		{"", "line", "line 12: line: empty"},
		{"\r\n", "line", "line 12: line: empty"},
		{`host.example - - [22/Nov/2026:07:09:34 +0100] "GET / HTTP/1.1" 200 5`, "ip", `line 12: ip: "host.example": not an address`},
		{`192.0.2.1 - - [32/Nov/2026:07:09:34 +0100] "GET / HTTP/1.1" 200 5`, "time", `line 12: time: "32/Nov/2026:07:09:34 +0100": cannot parse`},
		{`192.0.2.1 nothing else`, "time", `line 12: time: not found: the line does not match the format (expected " [" at byte 18, after user)`},
	}
	for _, tc := range tests {
		t.Run(tc.line, func(t *testing.T) {
			_, err := p.Parse([]byte(tc.line), 12)
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want *Error", err)
			}
			if diff := cmp.Diff(tc.msg, err.Error()); diff != "" || pe.Field != tc.field || pe.Line != 12 {
				t.Errorf("field %q (-want +got):\n%s", pe.Field, diff)
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		opts Options
		want string // part of the message
	}{
		{Options{Format: "auto"}, "Detect"},
		{Options{Format: "w3c"}, `unknown format "w3c"`},
		{Options{Format: "combined", LogFormat: "$remote_addr"}, "more than one"},
		{Options{ApacheFormat: `%h %Z %t`}, "%Z: unknown directive"},
		{Options{ApacheFormat: `%h %{%Q}t`}, "unsupported conversion %Q"},
		{Options{ApacheFormat: `%h %{ns}T %t`}, `%{ns}T: unknown unit "ns"`},
		{Options{FPMFormat: `%R %t %W`}, "%W: unknown directive"},
		{Options{LogFormat: `$remote_addr $`}, `"$" at byte 13`},
		{Options{LogFormat: `$remote_addr$remote_user [$time_local]`}, "remote_addr and remote_user are not separated"},
		{Options{LogFormat: `$remote_addr - $status`}, "no field gives the time"},
		{Options{LogFormat: `[$time_local] $status`}, "no field gives the client address"},
		{Options{JSONFields: map[string]string{"time": "ts"}}, `no "ip"`},
		{Options{JSONFields: map[string]string{"ip": "a..b", "time": "ts"}}, "not a dotted path"},
		{Options{JSONFields: map[string]string{"ip": "ip", "time": "ts", "duration": "d", "duration_ms": "dms"}}, "duration and duration_ms: one duration only"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			_, err := New(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestJSONDurationUnits: Envoy logs %DURATION% in milliseconds; mapped as
// duration_ms it is read as such, not as seconds (1500 ms is 1.5 s, not
// 25 minutes). duration stays seconds, duration_us and duration_ns their
// units.
func TestJSONDurationUnits(t *testing.T) {
	line := `{"downstream_remote_address":"198.51.100.7","start_time":"2026-11-22T07:09:34.000Z","d":1500}`
	for name, want := range map[string]float64{"duration": 1500, "duration_ms": 1.5, "duration_us": 0.0015, "duration_ns": 0.0000015} {
		t.Run(name, func(t *testing.T) {
			p := mustParser(t, Options{JSONFields: map[string]string{"ip": "downstream_remote_address", "time": "start_time", name: "d"}})
			e, err := p.ParseString(line, 1)
			if err != nil {
				t.Fatal(err)
			}
			if e.Has&HasDuration == 0 || math.Abs(e.Duration-want) > 1e-12 {
				t.Errorf("duration %v (has %v), want %v seconds", e.Duration, e.Has&HasDuration != 0, want)
			}
		})
	}
}

func TestGet(t *testing.T) {
	p := mustParser(t, Options{LogFormat: `$remote_addr [$time_local] "$request" $status $body_bytes_sent $host $request_time $upstream_addr`})
	e, err := p.ParseString(`192.0.2.1 [22/Nov/2026:07:09:34 +0100] "GET /a?b=c HTTP/1.1" 404 12 example.com 0.250 10.0.0.1:80`, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"ip": "192.0.2.1", "time": "2026-11-22T07:09:34+01:00", "method": "GET", "path": "/a", "query": "b=c",
		"protocol": "HTTP/1.1", "status": "404", "bytes": "12", "host": "example.com", "duration": "0.25", "upstream_addr": "10.0.0.1:80"}
	got := map[string]string{}
	for _, n := range []string{"ip", "time", "method", "path", "query", "protocol", "status", "bytes", "referer", "user_agent", "user", "host", "duration", "cpu", "upstream_addr", "nope"} {
		if v, ok := e.Get(n); ok {
			got[n] = v
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestDetect(t *testing.T) {
	lines := func(ss ...string) [][]byte {
		var out [][]byte
		for _, s := range ss {
			out = append(out, []byte(s))
		}
		return out
	}
	for _, bc := range benchCases {
		if bc.opts.Format == "" {
			continue
		}
		t.Run(bc.name, func(t *testing.T) {
			got, err := Detect(lines(bc.line, bc.line), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got != bc.opts.Format {
				t.Errorf("Detect = %q, want %q", got, bc.opts.Format)
			}
		})
	}
	if _, err := Detect(lines("hello", "world"), Options{}); err == nil {
		t.Error("Detect on prose: want an error")
	}
}

func TestPresets(t *testing.T) {
	want := []string{"alb", "apache_timing", "caddy", "cloudfront", "combined", "common", "envoy", "haproxy", "host_combined", "iis", "nginx_timing", "phpfpm", "traefik_clf", "traefik_json", "vhost_combined"}
	if diff := cmp.Diff(want, Presets()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, name := range want {
		p := mustParser(t, Options{Format: name})
		if p.Name() != name {
			t.Errorf("Name() = %q, want %q", p.Name(), name)
		}
	}
	if got := mustParser(t, Options{}).Name(); got != "combined" {
		t.Errorf("default Name() = %q", got)
	}
}

// TestConcurrent parses from many goroutines with one Parser (run with -race);
// every zone offset goes through the shared zone cache.
func TestConcurrent(t *testing.T) {
	p := mustParser(t, Options{})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				off := (i%48 - 24) * 30
				sign := '+'
				if off < 0 {
					sign, off = '-', -off
				}
				line := fmt.Sprintf(`192.0.2.%d - - [22/Nov/2026:07:09:34 %c%02d%02d] "GET / HTTP/1.1" 200 1`, g, sign, off/60, off%60)
				e, err := p.ParseString(line, i)
				if err != nil {
					t.Error(err)
					return
				}
				if _, o := e.Time.Zone(); o != map[rune]int{'+': 1, '-': -1}[sign]*off*60 {
					t.Errorf("%s: offset %d", line, o)
				}
			}
		}()
	}
	wg.Wait()
}

func TestAllocs(t *testing.T) {
	p := mustParser(t, Options{})
	line := benchCases[1].line
	if n := testing.AllocsPerRun(100, func() { _, _ = p.ParseString(line, 1) }); n != 0 {
		t.Errorf("ParseString: %v allocs, want 0", n)
	}
	b := []byte(line)
	if n := testing.AllocsPerRun(100, func() { _, _ = p.Parse(b, 1) }); n > 1 {
		t.Errorf("Parse: %v allocs, want at most 1", n)
	}
}

func TestDottedQuad(t *testing.T) {
	for s, want := range map[string]bool{
		"203.0.113.7": true, "0.0.0.0": true, "255.255.255.255": true,
		"256.1.1.1": false, "01.2.3.4": false, "1.2.3": false, "1.2.3.4.5": false,
		"1.2.3.4 ": false, "::1": false, "1..2.3": false, "": false, "1.2.3.4:80": false, "1234.1.1.1": false,
	} {
		if _, got := parseDottedQuad(s); got != want {
			t.Errorf("parseDottedQuad(%q) ok = %v, want %v", s, got, want)
		}
	}
	// What the fast path refuses, the general path still reads.
	for _, s := range []string{" 203.0.113.7", "203.0.113.7:8080", "::ffff:203.0.113.7"} {
		if a, ok := parseAddr(s); !ok || a.String() != "203.0.113.7" {
			t.Errorf("parseAddr(%q) = %v, %v; want 203.0.113.7", s, a, ok)
		}
	}
}

// TestDaysFromCivil checks the fixed-offset arithmetic against time.Date
// over every day from 1970 to 2400, and the normalisations time.Date makes.
func TestDaysFromCivil(t *testing.T) {
	for day := time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC); day.Year() <= 2400; day = day.AddDate(0, 0, 1) {
		if got, want := daysFromCivil(day.Year(), int(day.Month()), day.Day()), day.Unix()/86400; got != want {
			t.Fatalf("%s: %d days, want %d", day.Format(time.DateOnly), got, want)
		}
	}
	tr := timeReader{zones: new(zoneCache), loc: time.UTC}
	for _, c := range []struct{ y, mo, d, h, mi, s, off int }{
		{2026, 11, 22, 23, 59, 60, 3600}, // leap second: the next minute
		{2026, 12, 31, 24, 0, 0, -19800}, // hour 24: the next day
		{2024, 2, 29, 12, 30, 15, 0},
	} {
		got, _ := tr.date(c.y, c.mo, c.d, c.h, c.mi, c.s, 5, c.off, true)
		want := time.Date(c.y, time.Month(c.mo), c.d, c.h, c.mi, c.s, 5, time.FixedZone(ZoneName(c.off), c.off))
		if !got.Equal(want) || got.Format(time.RFC3339Nano) != want.Format(time.RFC3339Nano) {
			t.Errorf("%+v: %s, want %s", c, got.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano))
		}
	}
}
