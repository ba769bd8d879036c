package parser

import (
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Conformance against peers' expected results in ../shared/corpus (see its
// SOURCES.md). Every row of a supported format is compared; a mismatch is a
// failure. Where logjail reads a line differently on purpose, the comparison
// says so in a comment and checks logjail's reading instead.

func mustParser(t testing.TB, o Options) *Parser {
	t.Helper()
	p, err := New(o)
	if err != nil {
		t.Fatalf("New(%+v): %v", o, err)
	}
	return p
}

func prefixes(t testing.TB, ss ...string) []netip.Prefix {
	t.Helper()
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

// Formats that CrowdSec hub tests log in, written as logjail options.
const (
	npmProxyFormat       = `[$time_local] $upstream_cache_status $upstream_status $status - $request_method $scheme $host "$request_uri" [Client $remote_addr] [Length $body_bytes_sent] [Gzip $gzip_ratio] [Sent-to $server] "$http_user_agent" "$http_referer"`
	npmProxyNoSentFormat = `[$time_local] $upstream_cache_status $upstream_status $status - $request_method $scheme $host "$request_uri" [Client $remote_addr] [Length $body_bytes_sent] [Gzip $gzip_ratio] "$http_user_agent" "$http_referer"`
	npmStandardFormat    = `[$time_local] $status - $request_method $scheme $host "$request_uri" [Client $remote_addr] [Length $body_bytes_sent] [Gzip $gzip_ratio] "$http_user_agent" "$http_referer"`
	npmCatchFormat       = `[$time_local] $host $remote_addr $request_time "$request" $status $body_bytes_sent $request_length $http_referer $http_user_agent`
	bunkerwebFormat      = `$host $remote_addr - $request_id - [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"`
	envoyTextFormat      = `[$time_iso8601] "$request" $status $response_flags $bytes_received $bytes_sent $duration $upstream_service_time "$http_x_forwarded_for" "$http_user_agent" "$request_id" "$host" "$upstream_host"`
	vhostCombined        = `%v %h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-Agent}i"`
)

var envoyJSON = map[string]string{
	"ip": "downstream_remote_address", "x_forwarded_for": "x-forwarded-for", "time": "start_time",
	"method": "method", "path": "x-envoy-origin-path", "protocol": "protocol", "status": "response_code",
	"bytes": "bytes_sent", "user_agent": "user-agent", "host": ":authority",
}

var (
	isoStart = regexp.MustCompile(`^\[\d{4}-\d\d-\d\dT`)
	clfStart = regexp.MustCompile(`^\[\d\d/\w{3}/\d{4}:`)
)

// accessLine says whether a line looks like a CLF-family access-log line:
// its first or second word is an address.
func accessLine(l string) bool {
	f := strings.Fields(l)
	for i := 0; i < len(f) && i < 2; i++ {
		if _, ok := parseAddr(strings.TrimSuffix(f[i], ",")); ok {
			return true
		}
	}
	return false
}

// crowdsecFormat says how logjail reads a CrowdSec test line, or why the
// line's format is not one logjail supports.
func crowdsecFormat(test, raw string) (Options, string) {
	switch {
	case raw == "":
		return Options{}, "no raw line asserted (syslog/XML/CloudFront events)"
	case strings.HasPrefix(raw, "{"):
		switch {
		case strings.Contains(raw, `"logger":"http.log.access`):
			return Options{Format: "caddy"}, ""
		case strings.Contains(raw, `"ClientHost"`):
			return Options{Format: "traefik_json"}, ""
		case strings.Contains(raw, `"downstream_remote_address"`):
			// Envoy JSON access log, by field mapping; no trusted proxy, as
			// CrowdSec charges the peer (downstream_remote_address).
			return Options{JSONFields: envoyJSON}, ""
		}
		return Options{}, "JSON that is no access log (WAF events)"
	case isoStart.MatchString(raw):
		// Envoy's default text format carries no peer address, only XFF.
		// CrowdSec takes its first entry; logjail the rightmost untrusted
		// one, so the pod network of the fixture (10.42.0.0/16 and the
		// sidecar fd00:1234:5678::1) is declared a trusted proxy here.
		return Options{LogFormat: envoyTextFormat, TrustedProxies: []netip.Prefix{
			netip.MustParsePrefix("10.42.0.0/16"), netip.MustParsePrefix("fd00:1234:5678::1/128")}}, ""
	case clfStart.MatchString(raw):
		if strings.Contains(raw, "[Client ") {
			head, _, _ := strings.Cut(raw[strings.IndexByte(raw, ']')+2:], " - ")
			switch {
			case strings.Count(head, " ") == 0:
				return Options{LogFormat: npmStandardFormat}, ""
			case strings.Contains(raw, "[Sent-to "):
				return Options{LogFormat: npmProxyFormat}, ""
			default:
				return Options{LogFormat: npmProxyNoSentFormat}, ""
			}
		}
		return Options{LogFormat: npmCatchFormat}, ""
	case strings.HasPrefix(raw, "[") || regexp.MustCompile(`^\d{4}/\d\d/\d\d `).MatchString(raw):
		return Options{}, "error log, not an access log"
	case strings.Contains(raw, "haproxy[") || regexp.MustCompile(`^\S+:\d+ \[`).MatchString(raw):
		return Options{}, "HAProxy log format (not supported)"
	case strings.HasPrefix(test, "aws-alb") || strings.HasPrefix(test, "litespeed") || strings.HasPrefix(test, "zoraxy") ||
		strings.HasPrefix(test, "iis") || strings.HasPrefix(test, "aws-cloudfront") || strings.HasPrefix(test, "nginx-mail"):
		return Options{}, test + " log format (not supported)"
	case test == "traefik_clf":
		return Options{Format: "traefik_clf"}, ""
	}
	f := strings.Fields(raw)
	if !accessLine(raw) {
		return Options{}, "not an access-log line (plugin debug output)"
	}
	if len(f) > 5 && strings.HasPrefix(test, "bunkerweb") && f[4] == "-" {
		return Options{LogFormat: bunkerwebFormat}, ""
	}
	if len(f) > 1 {
		if _, ok := parseAddr(f[0]); !ok {
			if _, ok := parseAddr(f[1]); ok {
				return Options{ApacheFormat: vhostCombined}, ""
			}
		}
	}
	return Options{Format: "combined"}, ""
}

// atLeast fails t when fewer than min cases were compared: min is the
// figure the corpus gives today, so that a corpus moved, cut or misread
// fails the test instead of comparing nothing. A corpus that grows raises
// the figure by hand.
func atLeast(t *testing.T, what string, got, min int) {
	t.Helper()
	if got < min {
		t.Errorf("%s: %d, want at least %d (the corpus's figure)", what, got, min)
	}
}

func TestConformanceCrowdSec(t *testing.T) {
	path := filepath.Join(needCorpus(t), "crowdsec", "_derived-expected-ip-time.tsv")
	unsupported := map[string]int{}
	compared := 0
	for _, l := range readLines(t, path) {
		if strings.HasPrefix(l, "#") || l == "" {
			continue
		}
		c := strings.SplitN(l, "\t", 8)
		if len(c) < 8 {
			t.Fatalf("short row %q", l)
		}
		test, idx, wantIP, wantTime, wantMethod, wantStatus, wantPath, raw := c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]
		o, why := crowdsecFormat(test, raw)
		if why != "" {
			unsupported[why]++
			continue
		}
		compared++
		t.Run(test+"/"+idx, func(t *testing.T) {
			p := mustParser(t, o)
			e, err := p.ParseString(raw, 1)
			if err != nil {
				t.Fatalf("%v\n%s", err, raw)
			}
			if got := e.IP.String(); got != netip.MustParseAddr(wantIP).Unmap().String() {
				t.Errorf("ip = %s, want %s", got, wantIP)
			}
			if wantTime != "" {
				want, err := time.Parse(time.RFC3339Nano, wantTime)
				if err != nil {
					t.Fatal(err)
				}
				got := e.Time
				if want.Nanosecond() == 0 {
					got = got.Truncate(time.Second) // CrowdSec keeps whole seconds
				}
				if !got.Equal(want) {
					t.Errorf("time = %s, want %s", e.Time.Format(time.RFC3339Nano), wantTime)
				}
			}
			if got, _ := e.Get("method"); got != wantMethod {
				t.Errorf("method = %q, want %q", got, wantMethod)
			}
			gotStatus, _ := e.Get("status")
			if (wantStatus == "0" || wantStatus == "-") && e.Has&HasStatus == 0 {
				// Deliberate: Caddy logs status 0 when no handler wrote a
				// response, Traefik "-" when the client went away; logjail
				// reads a status outside 100-599 as absent.
			} else if gotStatus != wantStatus {
				t.Errorf("status = %q, want %q", gotStatus, wantStatus)
			}
			gotPath := e.Path
			if e.Has&HasQuery != 0 {
				gotPath += "?" + e.Query
			}
			if e.Has&HasPath == 0 {
				// Deliberate: a request line that is no request (a TLS
				// handshake, garbage) gives no method or path in logjail;
				// it is kept, as logged, as the field "request", which is
				// what CrowdSec calls the path.
				gotPath, _ = e.Get("request")
			}
			// Deliberate: "GET /x  HTTP/2.0" (two blanks) gives CrowdSec the
			// path "/x "; logjail drops the blanks before the protocol.
			if gotPath != strings.TrimRight(wantPath, " ") {
				t.Errorf("path = %q, want %q", gotPath, wantPath)
			}
		})
	}
	t.Logf("crowdsec: %d rows compared; not supported: %v", compared, unsupported)
	atLeast(t, "crowdsec rows compared", compared, 193)
}

// failJSON is fail2ban's per-line expectation.
type failJSON struct {
	Time  string `json:"time"`
	Match bool   `json:"match"`
	Host  string `json:"host"`
}

func TestConformanceFail2ban(t *testing.T) {
	dir := filepath.Join(needCorpus(t), "fail2ban")
	// fail2ban's test suite runs in CET/CEST and writes zone-less local times.
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatalf("Europe/Paris: %v (time/tzdata is linked in)", err)
	}
	files := []string{"apache-badbots", "apache-fakegooglebot", "apache-pass", "nginx-bad-request", "nginx-botsearch", "php-url-fopen", "traefik-auth", "haproxy-http-auth"}
	compared, skipped := 0, 0
	for _, name := range files {
		lines := readLines(t, filepath.Join(dir, name))
		var want *failJSON
		for i, l := range lines {
			if rest, ok := strings.CutPrefix(l, "# failJSON:"); ok {
				want = new(failJSON)
				if err := json.Unmarshal([]byte(rest), want); err != nil {
					t.Fatalf("%s:%d: %v", name, i+1, err)
				}
				continue
			}
			if strings.HasPrefix(l, "#") || strings.TrimSpace(l) == "" || want == nil {
				continue
			}
			w := *want
			want = nil
			if w.Host == "" || w.Time == "" {
				continue // no expectation to compare
			}
			if strings.Contains(l, "haproxy[") || !accessLine(l) {
				skipped++ // HAProxy's format is not supported; error-log lines are no access log
				continue
			}
			o := Options{Format: "combined", Location: paris}
			switch {
			case name == "traefik-auth":
				o = Options{Format: "traefik_clf", Location: paris}
			case strings.Contains(l, " - - - ["):
				// "%h %l %u - [%t ] %v ..." as in fail2ban's fakegooglebot sample.
				o = Options{ApacheFormat: `%h %l %u - %t %v "%r" %>s %b "%{Referer}i" "%{User-Agent}i"`, Location: paris}
			default:
				if f := strings.Fields(l); len(f) > 1 {
					if _, ok := parseAddr(f[0]); !ok {
						o = Options{ApacheFormat: vhostCombined, Location: paris}
					}
				}
			}
			compared++
			t.Run(fmt.Sprintf("%s:%d", name, i+1), func(t *testing.T) {
				e, err := mustParser(t, o).ParseString(l, i+1)
				if err != nil {
					t.Fatalf("%v\n%s", err, l)
				}
				if got := e.IP.String(); got != w.Host {
					t.Errorf("ip = %s, want %s", got, w.Host)
				}
				if got := e.Time.In(paris).Format("2006-01-02T15:04:05"); got != w.Time {
					t.Errorf("time in Europe/Paris = %s, want %s", got, w.Time)
				}
			})
		}
	}
	t.Logf("fail2ban: %d access-log lines compared, %d HAProxy or error-log lines skipped", compared, skipped)
	atLeast(t, "fail2ban lines compared", compared, 28)
}

// beatsTrusted is the trusted set the Beats fixtures imply: Beats takes the
// first public address of the list; logjail the rightmost address that is
// not a trusted proxy. Both agree when the private ranges and loopback are
// trusted (the fixtures' load balancers and local proxies) and so is the
// CloudFront edge of the "Amazon CloudFront" line (204.246.1.1): the list
// "10.5.102.222, 175.16.199.1, 204.246.1.1" then reads 175.16.199.1.
var beatsTrusted = []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "127.0.0.0/8", "::1/128", "fc00::/7", "204.246.1.1/32"}

const (
	nginxListFormat  = `$proxy_add_x_forwarded_for - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"`
	nginxQuotedXFF   = `"$http_x_forwarded_for" $remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"`
	nginxUnquotedXFF = `$http_x_forwarded_for $remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"`
	hostPrefix       = `$host `
)

// beatsFormat picks the log_format a Beats nginx fixture line was written with.
func beatsFormat(l string, withHost bool) string {
	rest := l
	prefix := ""
	if withHost {
		_, rest, _ = strings.Cut(l, " ")
		prefix = hostPrefix
	}
	before, _, _ := strings.Cut(rest, " - ")
	switch {
	case strings.HasPrefix(rest, `"`):
		return prefix + nginxQuotedXFF
	case strings.Contains(before, ", ") && !strings.Contains(before[strings.LastIndex(before, ", ")+2:], " ") || !strings.Contains(before, " "):
		return prefix + nginxListFormat
	}
	return prefix + nginxUnquotedXFF
}

func TestConformanceBeatsXFF(t *testing.T) {
	dir := filepath.Join(needCorpus(t), "ipextract")
	trusted := prefixes(t, beatsTrusted...)

	t.Run("nginx", func(t *testing.T) {
		var want []map[string]any
		b := readLines(t, filepath.Join(dir, "beats-nginx-access-test.log-expected.json"))
		if err := json.Unmarshal([]byte(strings.Join(b, "\n")), &want); err != nil {
			t.Fatal(err)
		}
		lines := readLines(t, filepath.Join(dir, "beats-nginx-access-test.log"))
		atLeast(t, "beats-nginx-access-test.log lines", len(lines), 7)
		if len(lines) != len(want) {
			t.Fatalf("%d lines, %d expectations", len(lines), len(want))
		}
		for i, l := range lines {
			t.Run(strconv.Itoa(i+1), func(t *testing.T) {
				e, err := mustParser(t, Options{LogFormat: beatsFormat(l, false), TrustedProxies: trusted}).ParseString(l, i+1)
				if err != nil {
					t.Fatal(err)
				}
				if got, w := e.IP.String(), netip.MustParseAddr(want[i]["source.ip"].(string)).String(); got != w {
					t.Errorf("ip = %s, want %s", got, w)
				}
				wt, _ := time.Parse(time.RFC3339Nano, want[i]["@timestamp"].(string))
				if !e.Time.Equal(wt) {
					t.Errorf("time = %s, want %s", e.Time, wt)
				}
				if got, w := e.Status, int(want[i]["http.response.status_code"].(float64)); got != w {
					t.Errorf("status = %d, want %d", got, w)
				}
			})
		}
	})

	t.Run("nginx-with-host", func(t *testing.T) {
		lines := readLines(t, filepath.Join(dir, "beats-nginx-access-test-with-host.log"))
		rows := 0
		defer func() { atLeast(t, "beats-nginx-access-test-with-host rows", rows, 10) }()
		for _, row := range readLines(t, filepath.Join(dir, "beats-nginx-access-test-with-host.expected.tsv")) {
			if strings.HasPrefix(row, "#") {
				continue
			}
			rows++
			c := strings.Split(row, "\t")
			n, _ := strconv.Atoi(c[0])
			l := lines[n-1]
			t.Run(c[0], func(t *testing.T) {
				e, err := mustParser(t, Options{LogFormat: beatsFormat(l, true), TrustedProxies: trusted}).ParseString(l, n)
				if c[3] == "-" {
					// Deliberate: Beats keeps "unix:" or "localhost" as
					// source.address; logjail cannot charge a name, so the
					// line is rejected for its address.
					if pe, ok := err.(*Error); !ok || pe.Field != "ip" {
						t.Fatalf("err = %v, want an ip error", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if got, w := e.IP.String(), netip.MustParseAddr(c[3]).String(); got != w {
					t.Errorf("ip = %s, want %s", got, w)
				}
				wt, _ := time.Parse(time.RFC3339, c[1])
				if !e.Time.Equal(wt) {
					t.Errorf("time = %s, want %s", e.Time, wt)
				}
				if e.Host != c[5] || strconv.Itoa(e.Status) != c[6] || strconv.FormatInt(e.Bytes, 10) != c[7] {
					t.Errorf("host, status, bytes = %q %d %d, want %s %s %s", e.Host, e.Status, e.Bytes, c[5], c[6], c[7])
				}
			})
		}
	})

	t.Run("apache", func(t *testing.T) {
		// No expected file in the corpus: the values are those of the lines.
		want := []struct {
			ip     string // "" when the line is rejected for its address
			time   string
			status int
		}{
			{"::1", "2016-12-26T16:16:29+02:00", 404},
			{"192.168.33.1", "2016-12-26T16:22:13Z", 404},
			{"::1", "2016-12-26T16:16:48+02:00", 408},
			{"172.17.0.1", "2017-05-29T19:02:48Z", 404},
			// Deliberate: a host name (HostnameLookups On) is no address to charge.
			{"", "", 0},
			{"127.0.0.1", "2019-02-02T05:38:45+01:00", 408},
			{"123.123.123.123", "2019-07-04T09:20:46+02:00", 200}, // vhost_combined
		}
		lines := readLines(t, filepath.Join(dir, "beats-apache-access-test.log"))
		if len(lines) != len(want) {
			t.Fatalf("%d lines, want %d", len(lines), len(want))
		}
		for i, l := range lines {
			o := Options{Format: "combined", TrustedProxies: trusted}
			if i == 6 {
				o = Options{ApacheFormat: vhostCombined, TrustedProxies: trusted}
			}
			e, err := mustParser(t, o).ParseString(l, i+1)
			if want[i].ip == "" {
				if pe, ok := err.(*Error); !ok || pe.Field != "ip" {
					t.Errorf("line %d: err = %v, want an ip error", i+1, err)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			wt, _ := time.Parse(time.RFC3339, want[i].time)
			if e.IP.String() != want[i].ip || !e.Time.Equal(wt) || e.Status != want[i].status {
				t.Errorf("line %d: %s %s %d, want %+v", i+1, e.IP, e.Time, e.Status, want[i])
			}
		}
	})
}

func TestConformancePHPFPM(t *testing.T) {
	dir := filepath.Join(needCorpus(t), "formats", "php-fpm")
	type truth struct {
		method, uri, addr, xff string
		cpuMS, sleepMS         float64
		status                 int
	}
	var rows []truth
	for _, l := range readLines(t, filepath.Join(dir, "ground-truth.tsv")) {
		if strings.HasPrefix(l, "#") {
			continue
		}
		c := strings.Split(l, "\t")
		cpu, _ := strconv.ParseFloat(c[5], 64)
		sl, _ := strconv.ParseFloat(c[6], 64)
		st, _ := strconv.Atoi(c[7])
		rows = append(rows, truth{c[1], c[2], c[3], c[4], cpu, sl, st})
	}
	files := []struct {
		file     string
		format   string
		peerIP   bool // %R only: the client is the FastCGI peer
		pctField int  // the word of the line holding %C
	}{
		{"access-default-extended.log", `%R - %u %t "%m %r%Q%q" %s %f %{mili}d %{kilo}M %C%%`, true, 10},
		{"access-all-fields.log", `%{REMOTE_ADDR}e %R [%t] [%T] "%m %{REQUEST_URI}e" %s %d %{mili}d %{micro}d %C %{user}C %{system}C %M %{kilo}M %l %n %p "%{HTTP_X_FORWARDED_FOR}e" "%{HTTP_USER_AGENT}e"`, false, 12},
		{"access-remote-addr-tz.log", `%{REMOTE_ADDR}e - %u [%t] "%m %r%Q%q" %s %{mili}d %{kilo}M %C%% %{%Y-%m-%dT%H:%M:%S%z}T`, false, 9},
	}
	for _, f := range files {
		t.Run(f.file, func(t *testing.T) {
			p := mustParser(t, Options{FPMFormat: f.format})
			lines := readLines(t, filepath.Join(dir, f.file))
			atLeast(t, f.file+" lines", len(lines), 27)
			for i, l := range lines {
				w := rows[i]
				e, err := p.ParseString(l, i+1)
				if err != nil {
					t.Errorf("%v", err)
					continue
				}
				wantIP := w.addr
				if f.peerIP {
					wantIP = "127.0.0.1" // the pool logs %R only: the web server's address
				}
				uri := e.Path
				if e.Has&HasQuery != 0 {
					uri += "?" + e.Query
				}
				if e.IP.String() != wantIP || e.Method != w.method || uri != w.uri || e.Status != w.status {
					t.Errorf("line %d: %s %s %s %d, want %s %s %s %d", i+1, e.IP, e.Method, uri, e.Status, wantIP, w.method, w.uri, w.status)
				}
				intended := (w.cpuMS + w.sleepMS) / 1000
				if e.Has&HasDuration == 0 || e.Duration < intended || e.Duration > intended+0.050 {
					t.Errorf("line %d: duration %v, want %v..%v", i+1, e.Duration, intended, intended+0.050)
				}
				// CPU is %C/100 × duration. %C is PHP-FPM's own tick-sampled
				// measure and under-reads busy loops on this pool (35 % for a
				// 200 ms loop), so the intended CPU of the ground truth is
				// only an upper bound; logjail reports what the log says.
				pct, _ := strconv.ParseFloat(strings.TrimSuffix(strings.Fields(l)[f.pctField], "%"), 64)
				if want := pct / 100 * e.Duration; e.Has&HasCPU == 0 || math.Abs(e.CPU-want) > 1e-9 {
					t.Errorf("line %d: cpu %v s, want %v s (%v %% of %v s)", i+1, e.CPU, want, pct, e.Duration)
				}
				// Ticks of 10 ms can even push %C over 100 % of a short request.
				if e.CPU > w.cpuMS/1000+0.015 {
					t.Errorf("line %d: cpu %v s above the intended %v ms", i+1, e.CPU, w.cpuMS)
				}
				if e.Time.IsZero() {
					t.Errorf("line %d: no time", i+1)
				}
			}
		})
	}
	t.Run("trusted-proxy", func(t *testing.T) {
		// Line 13 came through 10.0.0.5 with X-Forwarded-For "2001:db8:abcd::1, 10.0.0.5".
		p := mustParser(t, Options{FPMFormat: files[1].format, TrustedProxies: prefixes(t, "10.0.0.0/8")})
		l := readLines(t, filepath.Join(dir, files[1].file))[12]
		e, err := p.ParseString(l, 13)
		if err != nil {
			t.Fatal(err)
		}
		if e.IP.String() != "2001:db8:abcd::1" {
			t.Errorf("ip = %s, want 2001:db8:abcd::1", e.IP)
		}
	})
	t.Run("zone", func(t *testing.T) {
		p := mustParser(t, Options{FPMFormat: files[2].format})
		e, err := p.ParseString(readLines(t, filepath.Join(dir, files[2].file))[0], 1)
		if err != nil {
			t.Fatal(err)
		}
		if _, off := e.Time.Zone(); off != 5*3600+1800 {
			t.Errorf("zone offset %d, want +0530", off)
		}
	})
}

func TestConformanceTraefik(t *testing.T) {
	dir := filepath.Join(needCorpus(t), "formats")
	t.Run("json", func(t *testing.T) {
		p := mustParser(t, Options{Format: "traefik_json"})
		lines := readLines(t, filepath.Join(dir, "elastic-integrations-traefik-test-format-json.log"))
		atLeast(t, "traefik JSON lines", len(lines), 7)
		for i, l := range lines {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatal(err)
			}
			e, err := p.ParseString(l, i+1)
			if err != nil {
				t.Errorf("%v", err)
				continue
			}
			wt, _ := time.Parse(time.RFC3339Nano, m["StartLocal"].(string))
			host, ok := m["ClientHost"].(string)
			if !ok { // older Traefik: only ClientAddr
				host, _, _ = strings.Cut(m["ClientAddr"].(string), ":")
			}
			if e.IP.String() != host || !e.Time.Equal(wt) || float64(e.Status) != m["DownstreamStatus"] ||
				e.Method != m["RequestMethod"] || math.Abs(e.Duration-m["Duration"].(float64)/1e9) > 1e-12 {
				t.Errorf("line %d: %+v\nwant %v %v %v %v %v", i+1, e, m["ClientHost"], wt, m["DownstreamStatus"], m["RequestMethod"], m["Duration"])
			}
		}
	})
	t.Run("clf", func(t *testing.T) {
		p := mustParser(t, Options{Format: "traefik_clf"})
		lines := readLines(t, filepath.Join(dir, "beats-traefik-clf-test.log"))
		if len(lines) != 2 {
			t.Fatalf("beats-traefik-clf-test.log: %d lines, want the 2 the expectations describe", len(lines))
		}
		want := []struct {
			ip     string
			status int
			dur    float64
		}{{"192.168.33.1", 304, 0.002}, {"85.181.35.98", 304, 0.003}}
		for i, l := range lines {
			e, err := p.ParseString(l, i+1)
			if err != nil {
				t.Fatal(err)
			}
			// Line 2 has an unbalanced quote in the router name
			// ("Host-host1 "http://...): IP, time, request and status
			// still come out; what follows the broken field is absent.
			if i == 1 && e.Has&HasDuration == 0 {
				e.Duration = want[i].dur
			}
			if e.IP.String() != want[i].ip || e.Status != want[i].status || e.Duration != want[i].dur || e.Time.IsZero() {
				t.Errorf("line %d: %s %d %v %v, want %+v", i+1, e.IP, e.Status, e.Duration, e.Time, want[i])
			}
		}
	})
}
