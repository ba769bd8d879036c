package parser

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// scanRefN is how many mutated lines TestScanAsReference reads through both
// scanners (and how many random values each helper's test reads, times 4):
// `go test ./parser/ -run AsReference -args -scanref.n=5000000` for millions.
var scanRefN = flag.Int("scanref.n", 0, "mutated lines TestScanAsReference compares (0: 200,000, or 20,000 with -short or -race)")

func scanRefCount() int {
	if *scanRefN > 0 {
		return *scanRefN
	}
	if testing.Short() || raceEnabled {
		return 20000
	}
	return 200000
}

// sameAsReference reads line with p (a line format) through parseTo and
// through the reference scanner (ref_scan_test.go), each into an Entry full
// of another line's values, and fails on any difference: the Entry field
// for field (floats bit for bit, the time's instant and zone),
// whether the line was read completely, the error and its text; with a
// format of the CLF prefix, also twice through one TimeMemo.
func sameAsReference(t *testing.T, p *Parser, line string) {
	t.Helper()
	if p.items == nil {
		return
	}
	dirty := Entry{IP: netip.MustParseAddr("192.0.2.99"), Time: time.Unix(1, 0), Method: "X", Path: "/x", Query: "q", Protocol: "P",
		Status: 999, Bytes: 9, Referer: "r", UserAgent: "u", User: "us", Host: "h", Duration: 9, CPU: 9, Has: 0xfff, Fields: []Field{{"a", "b"}}}
	got, want := dirty, dirty
	gotFull, gotErr := p.parseTo(line, 7, nil, &got, nil)
	wantFull, wantErr := refParseTo(p, line, 7, nil, &want)
	if gotFull != wantFull || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !reflect.DeepEqual(gotErr, wantErr) {
		t.Fatalf("%s: %q:\nfull %v, error %v\nwant full %v, error %v", p.name, line, gotFull, gotErr, wantFull, wantErr)
	}
	if !reflect.DeepEqual(got, want) || math.Float64bits(got.Duration) != math.Float64bits(want.Duration) ||
		math.Float64bits(got.CPU) != math.Float64bits(want.CPU) {
		t.Fatalf("%s: %q:\ngot  %+v\nwant %+v", p.name, line, got, want)
	}
	if p.clfNext > 0 {
		// Through a TimeMemo (ParseStringMemo) too: the line read once
		// fills it, read again takes its time from it.
		var m TimeMemo
		for range 2 {
			got = dirty
			gotFull, gotErr = p.parseTo(line, 7, nil, &got, &m)
			if gotFull != wantFull || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) ||
				math.Float64bits(got.Duration) != math.Float64bits(want.Duration) || math.Float64bits(got.CPU) != math.Float64bits(want.CPU) {
				t.Fatalf("%s: %q with a memo:\ngot  %+v, %v, %v\nwant %+v, %v, %v", p.name, line, got, gotFull, gotErr, want, wantFull, wantErr)
			}
		}
	}
}

// scanRefFormats are the line formats the scanners are compared on: every
// line preset, the benchmarks', the golden directories' and the fuzzers'
// formats, and formats with the fields none of those has.
func scanRefFormats(t *testing.T) []*Parser {
	t.Helper()
	var opts []Options
	for _, name := range presetOrder {
		if _, ok := presetItems(name); ok {
			opts = append(opts, Options{Format: name}, Options{Format: name, TrustedProxies: prefixes(t, "10.0.0.0/8", "192.0.2.0/24")})
		}
	}
	for _, bc := range benchCases {
		if bc.opts.LogFormat != "" || bc.opts.ApacheFormat != "" || bc.opts.FPMFormat != "" {
			opts = append(opts, bc.opts)
		}
	}
	dirs, _ := filepath.Glob("../testdata/logs/*/options.json")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			t.Fatal(err)
		}
		var g goldenOptions
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&g); err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		if g.LogFormat != "" || g.ApacheFormat != "" || g.FPMFormat != "" {
			o := Options{LogFormat: g.LogFormat, ApacheFormat: g.ApacheFormat, FPMFormat: g.FPMFormat, CPUField: g.CPUField, Location: time.UTC}
			for _, s := range g.TrustedProxies {
				o.TrustedProxies = append(o.TrustedProxies, netip.MustParsePrefix(s))
			}
			opts = append(opts, o)
		}
	}
	opts = append(opts,
		Options{LogFormat: `$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" "$http_x_forwarded_for" $host rt=$request_time urt=$upstream_response_time cpu=$upstream_http_x_cpu_time`,
			CPUField: "upstream_http_x_cpu_time", TrustedProxies: prefixes(t, "10.0.0.0/8", "127.0.0.1/32")},
		Options{ApacheFormat: `%v:%p %a %l %u %{%d/%b/%Y:%H:%M:%S %z}t "%r" %>s %B "%{Referer}i" "%{User-Agent}i" %{ms}T "%{X-Forwarded-For}i" %{Content-Type}o %{UNIQUE_ID}e`,
			TrustedProxies: prefixes(t, "192.0.2.10/32")},
		Options{FPMFormat: `%{REMOTE_ADDR}e - %u [%t] "%m %r%Q%q" %s %{mili}d %{kilo}M %C%% %{%Y-%m-%dT%H:%M:%S%z}T`},
		Options{LogFormat: `$proxy_add_x_forwarded_for $host [$time_iso8601] $request_method $uri$is_args$args $server_protocol $status $bytes_sent $msec "$http_user_agent"`,
			TrustedProxies: prefixes(t, "10.0.0.0/8")},
		Options{LogFormat: `$msec $realip_remote_addr $remote_addr "$request_uri" $status $request_time`},
		Options{LogFormat: `$remote_addr $remote_user $time_local $request_time`, Location: time.FixedZone("X", 3600)},
		Options{ApacheFormat: `%h %l %u %t "%r" %>s %b %D %{cpu}e`, CPUField: "cpu"},
		// Timing fields (numAt's) between blanks, commas and quotes, one of
		// them the CPU field, one quoted, one last.
		Options{LogFormat: `$remote_addr [$time_local] $status $request_time $upstream_connect_time,$upstream_header_time;$bytes_sent "$upstream_response_time" "$http_user_agent" t=$upstream_http_x_t`,
			CPUField: "request_time"},
		// The CLF prefix and a tail of them (readNums): the last one last,
		// or before a quoted field.
		Options{LogFormat: `$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" $request_time $upstream_response_time`},
		Options{ApacheFormat: `%h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-Agent}i" %{cpu}e/%{ms}T "%{Host}i"`, CPUField: "env_cpu"},
	)
	var ps []*Parser
	for _, o := range opts {
		p, err := New(o)
		if err != nil {
			t.Fatalf("%+v: %v", o, err)
		}
		ps = append(ps, p)
	}
	return ps
}

// scanRefLines are the lines the scanners are compared on: the benchmarks',
// the dirty lines, every golden input line, the fuzzers' stored seeds and
// up to 200 lines of every log of the shared corpus (when present).
func scanRefLines(t *testing.T) []string {
	t.Helper()
	var lines []string
	for _, bc := range benchCases {
		lines = append(lines, bc.line)
	}
	for _, l := range dirtyLines {
		lines = append(lines, l.line)
	}
	ins, _ := filepath.Glob("../testdata/logs/*/*.log")
	for _, in := range ins {
		b, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.Split(string(b), "\n")...)
	}
	seeds, _ := filepath.Glob("testdata/fuzz/*/*")
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "string("); ok {
				if u, err := strconv.Unquote(strings.TrimSuffix(v, ")")); err == nil {
					lines = append(lines, u)
				}
			}
		}
	}
	if _, err := os.Stat(corpusDir); err == nil {
		err := filepath.WalkDir(corpusDir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			switch filepath.Ext(path) {
			case ".assert", ".yaml", ".json", ".tsv", ".md", ".gz", ".bz2", ".xz", ".zst":
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil || bytes.IndexByte(b, 0) >= 0 {
				return err
			}
			for i, l := range strings.SplitN(string(b), "\n", 201) {
				if i < 200 && len(l) < 8192 {
					lines = append(lines, l)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	} else {
		t.Logf("shared corpus not found at %s: compared on the repository's lines only", corpusDir)
	}
	return lines
}

// mutate makes 1 to 4 random edits of line: a byte replaced, inserted or
// deleted (the bytes a scanner decides on most often: quotes, backslashes,
// blanks, brackets, digits, separators), a run deleted or repeated, or the
// line cut short.
func mutate(r *rand.Rand, line string) string {
	const special = "\"\\ \t-[]:./?,+0123456789xX%eE\r\n"
	pick := func() byte {
		if r.IntN(8) == 0 {
			return byte(r.IntN(256))
		}
		return special[r.IntN(len(special))]
	}
	b := []byte(line)
	for n := 1 + r.IntN(4); n > 0; n-- {
		if len(b) == 0 {
			b = append(b, pick())
			continue
		}
		i := r.IntN(len(b))
		switch r.IntN(7) {
		case 0, 1:
			b[i] = pick()
		case 2:
			b = append(b[:i], append([]byte{pick()}, b[i:]...)...)
		case 3:
			b = append(b[:i], b[i+1:]...)
		case 4:
			j := i + r.IntN(min(len(b)-i, 16)+1)
			b = append(b[:i], b[j:]...)
		case 5:
			j := i + r.IntN(min(len(b)-i, 16)+1)
			b = append(b[:j], append(append([]byte(nil), b[i:j]...), b[j:]...)...)
		case 6:
			b = b[:i]
		}
	}
	return string(b)
}

// TestScanAsReference reads every line of scanRefLines with every format
// of scanRefFormats, then scanRefCount mutations of the lines each format
// reads, through the scanner and through main's scanner at 3ee57b3
// (ref_scan_test.go): every Entry, error and completeness is the same.
func TestScanAsReference(t *testing.T) {
	ps := scanRefFormats(t)
	lines := scanRefLines(t)
	read := make([][]string, len(ps)) // the lines each format reads
	for i, p := range ps {
		for _, l := range lines {
			sameAsReference(t, p, l)
			if _, err := p.ParseString(l, 1); err == nil {
				read[i] = append(read[i], l)
			}
		}
	}
	r := rand.New(rand.NewPCG(23, 4))
	n := scanRefCount()
	for k := 0; k < n; k++ {
		i := r.IntN(len(ps))
		base := lines[r.IntN(len(lines))]
		if len(read[i]) > 0 && r.IntN(4) != 0 {
			base = read[i][r.IntN(len(read[i]))]
		}
		sameAsReference(t, ps[i], mutate(r, base))
	}
	t.Logf("%d formats, %d lines, %d mutated lines", len(ps), len(lines), n)
}

// TestHelpersAsReference compares the number, address and time readers with
// their reference copies on random values and random edits of them.
func TestHelpersAsReference(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 5))
	n := 4 * scanRefCount()
	digitsOf := func(max int) string {
		b := make([]byte, r.IntN(max+1))
		for i := range b {
			b[i] = byte('0' + r.IntN(10))
		}
		return string(b)
	}
	tr := timeReader{zones: new(zoneCache), loc: time.UTC, clfs: new(clfCache)}
	fixed := 0 // times clfFixed read
	hex6 := 0  // addresses parseHexIPv6 read
	months := []string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec", "jAN", "Foo"}
	for k := 0; k < n; k++ {
		// Numbers: "d.ddd" and lists of them, with every digit count.
		var f string
		switch r.IntN(4) {
		case 0:
			f = digitsOf(4) + "." + digitsOf(4)
		case 1:
			f = digitsOf(22) + "." + digitsOf(22)
		case 2:
			f = digitsOf(20)
		default:
			f = digitsOf(3) + "." + digitsOf(3) + ", " + digitsOf(2) + "." + digitsOf(3) + " : -"
		}
		if r.IntN(3) == 0 {
			f = mutate(r, f)
		}
		if a, aok := parseFloat(f); true {
			b, bok := refParseFloat(f)
			if aok != bok || math.Float64bits(a) != math.Float64bits(b) {
				t.Fatalf("parseFloat(%q) = %v, %v; reference %v, %v", f, a, aok, b, bok)
			}
		}
		if a, aok := sumFloats(f); true {
			b, bok := refSumFloats(f)
			if aok != bok || math.Float64bits(a) != math.Float64bits(b) {
				t.Fatalf("sumFloats(%q) = %v, %v; reference %v, %v", f, a, aok, b, bok)
			}
		}
		// numAt: parseFloat's number where it starts, with what follows.
		for _, g := range []string{f, f + " cpu=1", f + "." + digitsOf(2), "-" + f} {
			at := r.IntN(2) * min(1, len(g))
			a, end, aok := numAt(g, at)
			if aok {
				b, bok := refParseFloat(g[at:end])
				if !bok || math.Float64bits(a) != math.Float64bits(b) || strings.TrimSpace(g[at:end]) != g[at:end] {
					t.Fatalf("numAt(%q, %d) = %v, %d; reference of %q %v, %v", g, at, a, end, g[at:end], b, bok)
				}
			}
			if end < len(g) && (g[end]-'0' <= 9 || g[end] == '.' && aok && strings.IndexByte(g[at:end], '.') < 0) {
				t.Fatalf("numAt(%q, %d) stopped at %d, before %q", g, at, end, g[end])
			}
			if b, bok := refParseFloat(g[at:]); bok && strings.TrimSpace(g[at:]) == g[at:] && (!aok || end != len(g) || math.Float64bits(a) != math.Float64bits(b)) {
				t.Fatalf("numAt(%q, %d) = %v, %d, %v; reference %v", g, at, a, end, aok, b)
			}
		}
		if a, aok := atoi(f); true {
			b, bok := refAtoi(f)
			if aok != bok || a != b {
				t.Fatalf("atoi(%q) = %v, %v; reference %v, %v", f, a, aok, b, bok)
			}
		}
		// Addresses: IPv4, IPv6 (compressed or not, mapped, zoned,
		// bracketed, with a port), then edits of them.
		var a string
		switch r.IntN(4) {
		case 0:
			a = netip.AddrFrom4([4]byte{byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))}).String()
		case 1:
			var b [16]byte
			for i := range b {
				if r.IntN(3) != 0 {
					b[i] = byte(r.IntN(256))
				}
			}
			a = netip.AddrFrom16(b).String()
		case 2:
			a = fmt.Sprintf("2001:db8:%x:%x::%x", 0x8000+r.IntN(4), r.IntN(65536), r.IntN(3))
		default:
			a = netip.AddrFrom16([16]byte{10: 0xff, 11: 0xff, 12: byte(r.IntN(256)), 15: 1}).StringExpanded()
		}
		switch r.IntN(6) {
		case 0:
			a = "[" + a + "]:" + digitsOf(6)
		case 1:
			a += "%eth0"
		case 2:
			a += ":" + digitsOf(5)
		}
		if r.IntN(2) == 0 {
			a = mutate(r, a)
		}
		if x, ok := parseHexIPv6(a); ok {
			hex6++
			if y, err := netip.ParseAddr(a); err != nil || x != y {
				t.Fatalf("parseHexIPv6(%q) = %v; netip.ParseAddr = %v, %v", a, x, y, err)
			}
		}
		if x, xok := parseAddr(a); true {
			y, yok := refParseAddr(a)
			if xok != yok || x != y {
				t.Fatalf("parseAddr(%q) = %v, %v; reference %v, %v", a, x, xok, y, yok)
			}
		}
		// CLF times, in and out of range, with and without a zone or a
		// fraction, then edits of them.
		c := fmt.Sprintf("%02d/%s/%04d:%02d:%02d:%02d", r.IntN(33), months[r.IntN(len(months))], 1965+r.IntN(70), r.IntN(26), r.IntN(61), r.IntN(62))
		switch r.IntN(5) {
		case 0:
		case 1:
			c += "." + digitsOf(9) + " +0000"
		default:
			c += fmt.Sprintf(" %c%02d%02d", "+-"[r.IntN(2)], r.IntN(25), r.IntN(61))
		}
		if r.IntN(3) == 0 {
			c = mutate(r, c)
		}
		if len(c) == 26 {
			if x, xok, done := tr.clfFixed(c); done {
				fixed++
				if y, yok := refClf(&tr, c); xok != yok || !x.Equal(y) || !reflect.DeepEqual(x, y) {
					t.Fatalf("clfFixed(%q) = %v, %v; reference %v, %v", c, x, xok, y, yok)
				}
			}
		}
		for range 2 { // the second from the cache, when the first was a time
			x, xok := tr.clf(c)
			y, yok := refClf(&tr, c)
			if xok != yok || !x.Equal(y) || !reflect.DeepEqual(x, y) {
				t.Fatalf("clf(%q) = %v, %v; reference %v, %v", c, x, xok, y, yok)
			}
		}
	}
	// Three fifths of the times have the usual shape, and a third of those
	// are edited: clfFixed read at least a third of all.
	if fixed < n/3 {
		t.Errorf("clfFixed read %d of %d times", fixed, n)
	}
	// Half the addresses are IPv6 without a dotted tail, and of those a
	// half are bare and unedited: parseHexIPv6 read at least a sixth of all.
	if hex6 < n/6 {
		t.Errorf("parseHexIPv6 read %d of %d addresses", hex6, n)
	}
}

// TestCLFCacheConcurrent reads a few hundred times, each many times over,
// from four goroutines at once through one parser's cache: every reading
// is the reference's (under -race: and the cache's slots are no data race).
func TestCLFCacheConcurrent(t *testing.T) {
	var texts []string
	for i := range 300 {
		texts = append(texts, fmt.Sprintf("%02d/Nov/2026:07:%02d:%02d %c%02d00", 1+i%28, i/60%60, i%60, "+-"[i%2], i%14))
	}
	tr := timeReader{zones: new(zoneCache), loc: time.UTC, clfs: new(clfCache)}
	want := make([]time.Time, len(texts))
	for i, c := range texts {
		var ok bool
		if want[i], ok = refClf(&tr, c); !ok {
			t.Fatalf("%q: not a time", c)
		}
	}
	errs := make(chan error, 4)
	for g := range 4 {
		go func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range scanRefCount() / 4 {
				i := r.IntN(len(texts))
				if got, ok := tr.clf(texts[i]); !ok || !reflect.DeepEqual(got, want[i]) {
					errs <- fmt.Errorf("clf(%q) = %v, %v; want %v", texts[i], got, ok, want[i])
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestCLFPrefix checks which formats readCLF reads the prefix of, that it
// reads the whole prefix of the usual lines (row 2's, the genlog's) and
// stops at the first unusual value, the scan going on from there as the
// reference's does.
func TestCLFPrefix(t *testing.T) {
	genlog := Options{LogFormat: `$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" rt=$request_time cpu=$upstream_http_x_cpu_time`,
		CPUField: "upstream_http_x_cpu_time", Location: time.UTC}
	for _, c := range []struct {
		opts  Options
		next  int
		ident bool
	}{
		{Options{Format: "combined"}, 14, true},
		{Options{Format: "nginx_timing"}, 14, true},
		{Options{Format: "apache_timing"}, 14, true},
		{Options{Format: "traefik_clf"}, 14, true},
		{Options{Format: "common"}, 0, false},         // the size ends the line
		{Options{Format: "host_combined"}, 0, false},  // a host first
		{Options{Format: "vhost_combined"}, 0, false}, // a host first
		{Options{Format: "phpfpm"}, 0, false},
		{genlog, 12, false},
		{Options{LogFormat: `$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent`}, 0, false},
		{Options{LogFormat: `$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent-$request_time`}, 0, false}, // a '-' after the size
		{Options{LogFormat: `$proxy_add_x_forwarded_for - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer"`}, 0, false},
		{Options{LogFormat: `$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer"`, CPUField: "status"}, 0, false},
	} {
		p, err := New(c.opts)
		if err != nil {
			t.Fatal(err)
		}
		if p.clfNext != c.next || p.clfIdent != c.ident {
			t.Errorf("%+v: clfPrefix %d %v, want %d %v", c.opts, p.clfNext, p.clfIdent, c.next, c.ident)
		}
	}
	row2, err := New(Options{Format: "combined"})
	if err != nil {
		t.Fatal(err)
	}
	gen, err := New(genlog)
	if err != nil {
		t.Fatal(err)
	}
	whole := func(p *Parser, line string) bool {
		var e Entry
		var st lineState
		st.noEscape = strings.IndexByte(line, '\\') < 0
		i, _ := p.readCLF(line, &e, &st)
		if p.clfRefUA {
			return i == p.clfNext+4
		}
		return i == p.clfNext
	}
	for _, c := range []struct {
		p     *Parser
		lines []string
	}{{row2, genLines(2000, true)}, {gen, genLines(2000, false)}} {
		for _, l := range c.lines {
			if !whole(c.p, l) {
				t.Fatalf("%s: %q: the prefix not read whole", c.p.name, l)
			}
			sameAsReference(t, c.p, l)
		}
	}
	for _, bc := range benchCases {
		if bc.name == "combined" || bc.name == "combined6" || bc.name == "log_format" || bc.name == "nginx_timing" || bc.name == "apache_timing" || bc.name == "traefik_clf" {
			p, err := New(bc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if !whole(p, bc.line) {
				t.Errorf("%s: %q: the prefix not read whole", bc.name, bc.line)
			}
		}
	}
	// Each value readCLF does not take, and where it stops.
	const base = `203.0.113.7 - - [22/Nov/2026:07:09:34 +0100] "GET /a?b=c HTTP/1.1" 200 5123 "-" "curl/8.5.0"`
	for _, c := range []struct {
		from, to string
		stop     int // the item readCLF stops at (row2's combined: 18 past the user agent)
	}{
		{"", "", 18},
		{`- - [`, `alice - [`, 2},
		{`- - [`, `- alice [`, 18},
		{`- - [`, `- al\"ice [`, 18},
		{`- - [`, `- [`, 4},
		{`- - [`, `-  [`, 18},
		{`- - [`, `- - - [`, 18},
		{`203.0.113.7`, `::ffff:203.0.113.7`, 0},
		{`203.0.113.7`, `2001:db8::7`, 18},
		{`203.0.113.7`, `203.0.113.7:80`, 0},
		{`203.0.113.7`, `[2001:db8::7]`, 0},
		{`+0100]`, `+01]`, 6},
		{`07:09:34 +0100`, `07:09:34.123 +0100`, 6},
		{`22/Nov/2026:07:09:34 +0100`, `22/Foo/2026:07:09:34 +0100`, 18},
		{`"GET /a?b=c HTTP/1.1"`, `""`, 18},
		{`"GET /a?b=c HTTP/1.1"`, `"-"`, 18},
		{`"GET /a?b=c HTTP/1.1"`, `"GET /a\" HTTP/1.1"`, 8},
		{`"GET /a?b=c HTTP/1.1"`, `"GET /"a" HTTP/1.1"`, 8},
		{`"GET /a?b=c HTTP/1.1"`, `"\x16\x03\x01"`, 18},
		{` 200 `, ` 999 `, 10},
		{` 200 `, ` 099 `, 10},
		{` 200 `, ` 2000 `, 10},
		{` 200 `, ` - `, 10},
		{` 200 `, ` 20 `, 10},
		{` 5123 `, ` - `, 18},
		{` 5123 `, ` -- `, 12},
		{` 5123 `, ` `, 12},
		{` 5123 `, ` 1234567890123456789 `, 12},
		{` 5123 `, ` 123456789012345678 `, 18},
		{` 5123 `, ` 12a `, 12},
		{` 5123 "-"`, ` 5123"-"`, 12},
		{`"-" "curl`, `"" "curl`, 18},
		{`"-" "curl`, `"-\" "curl`, 14},
		{`"-" "curl`, `"-"" "curl`, 14},
		{`"-" "curl`, `"a"b" "curl`, 14},
		{`"-" "curl`, `"-"  "curl`, 14},
		{`"-" "curl`, `"-" "cu"rl`, 16},
		{`"-" "curl`, `"-" "c\"url`, 16},
		{`"-" "curl`, `"-" "c" url`, 18},
		{`"-" "curl`, `"-" "c"url`, 16},
		{`"-" "curl`, `"-" "c\url`, 18},
		{`8.5.0"`, `8.5.0`, 16},
	} {
		line := strings.Replace(base, c.from, c.to, 1)
		var e Entry
		var st lineState
		st.noEscape = strings.IndexByte(line, '\\') < 0
		if i, _ := row2.readCLF(line, &e, &st); i != c.stop {
			t.Errorf("%q: readCLF stops at item %d, want %d", line, i, c.stop)
		}
		for k := len(line); k >= 0; k-- {
			sameAsReference(t, row2, line[:k])
			sameAsReference(t, gen, line[:k]+` rt=0.1 cpu=0.02`)
		}
	}
}

// TestNumItems checks which fields read a number first (item.num): the
// genlog's timing fields do; Apache's %D, a quoted field and one before
// a digit or '.' do not.
func TestNumItems(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want map[string]bool
	}{
		{Options{LogFormat: `$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" rt=$request_time cpu=$upstream_http_x_cpu_time`,
			CPUField: "upstream_http_x_cpu_time"}, map[string]bool{"request_time": true, "upstream_http_x_cpu_time": true}},
		{Options{ApacheFormat: `%h %l %u %t "%r" %>s %b %D %{cpu}e`, CPUField: "cpu"}, map[string]bool{"env_cpu": true}},
		{Options{LogFormat: `$remote_addr [$time_local] "$request_time" $upstream_connect_time.$request_length 1$upstream_header_time`},
			map[string]bool{"request_length": true, "upstream_header_time": true}},
	} {
		p, err := New(c.o)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, it := range p.items {
			if it.num {
				got[it.name] = true
			}
		}
		for _, name := range []string{"request_time", "upstream_connect_time"} {
			if _, ok := c.want[name]; !ok {
				c.want[name] = false
			}
		}
		for name, want := range c.want {
			if got[name] != want {
				t.Errorf("%+v: %s num %v, want %v (all: %v)", c.o, name, got[name], want, got)
			}
		}
		for name := range got {
			if !c.want[name] {
				t.Errorf("%+v: %s num, not expected", c.o, name)
			}
		}
	}
}

// TestNumTailAsReference edits only the timing fields at the end of a
// line (numAt, readNums), where TestScanAsReference's edits of whole
// lines seldom fall, and compares every edited line with the reference.
func TestNumTailAsReference(t *testing.T) {
	head := `203.0.113.7 - - [06/Jan/2025:00:00:00 +0000] "GET /a HTTP/1.1" 200 512 "-" "Mozilla/5.0 (X11)" `
	r := rand.New(rand.NewPCG(23, 6))
	num := func() string {
		switch r.IntN(5) {
		case 0:
			return strconv.Itoa(r.IntN(1000))
		case 1:
			return "-"
		default:
			return strconv.FormatFloat(r.Float64()*float64(r.IntN(100)), 'f', r.IntN(5), 64)
		}
	}
	for _, c := range []struct {
		o    Options
		tail func() string
	}{
		{Options{LogFormat: `$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" rt=$request_time cpu=$upstream_http_x_cpu_time`,
			CPUField: "upstream_http_x_cpu_time"}, func() string { return "rt=" + num() + " cpu=" + num() }},
		{Options{LogFormat: `$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" $request_time $upstream_response_time`},
			func() string { return num() + " " + num() }},
		{Options{ApacheFormat: `%h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-Agent}i" %{cpu}e/%{ms}T "%{Host}i"`, CPUField: "env_cpu"},
			func() string { return num() + "/" + num() + ` "example.com"` }},
	} {
		p, err := New(c.o)
		if err != nil {
			t.Fatal(err)
		}
		for k := 0; k < scanRefCount()/10; k++ {
			tail := c.tail()
			if r.IntN(4) != 0 {
				tail = mutate(r, tail)
			}
			sameAsReference(t, p, head+tail)
		}
	}
}

// TestHasWordAsHasAt holds hasWord, a literal compared as one 8-byte word,
// to hasAt's compare a byte: literals of 0 to 12 bytes (those past 8 go
// byte by byte), at every position of random lines and past their end,
// where the literal is there, where one byte of it differs and where the
// line ends inside it; and checks that the items of a compiled format
// carry their literals' words.
func TestHasWordAsHasAt(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 29))
	const alphabet = ` -[]"=rtcpu.0123456789\`
	str := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		return string(b)
	}
	n := 0
	for range 20000 {
		s := str(r.IntN(24))
		lit := str(r.IntN(13))
		if r.IntN(2) == 0 && len(s) > 0 {
			// A literal taken from the line, maybe cut by its end, maybe
			// with one byte changed.
			i := r.IntN(len(s))
			lit = s[i:min(len(s), i+r.IntN(13))]
			if r.IntN(3) == 0 && len(lit) > 0 {
				b := []byte(lit)
				b[r.IntN(len(b))] ^= 1
				lit = string(b)
			}
		}
		w, m := word8(lit)
		for i := 0; i <= len(s)+2; i++ {
			got, want := hasWord(s, i, lit, w, m), hasAt(s, i, lit)
			if got != want {
				t.Fatalf("hasWord(%q, %d, %q) = %v, hasAt %v", s, i, lit, got, want)
			}
			if want {
				n++
			}
		}
	}
	if n < 20000 {
		t.Fatalf("only %d matches: the test compares too few", n)
	}
	p, err := New(Options{LogFormat: `$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" rt=$request_time upstream_response_time_here=$upstream_response_time`})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range p.items {
		lw, lm := word8(it.lit)
		sw, sm := word8(it.sep)
		if it.kind == kLit && (it.litW != lw || it.litM != lm) || it.sepW != sw || it.sepM != sm {
			t.Errorf("item %q %q: words %x/%x %x/%x, want %x/%x %x/%x", it.name, it.lit, it.litW, it.litM, it.sepW, it.sepM, lw, lm, sw, sm)
		}
	}
}

// TestSetRequestAsReference holds setRequest, which takes the usual
// " HTTP/x.y" at the request's end without looking for its last blank, to
// the reference's on random requests: methods, blanks and runs of them
// anywhere, protocols cut, doubled, lower case, with blanks inside, and
// bytes changed near the end.
func TestSetRequestAsReference(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 1))
	parts := []string{"GET", "POST", "", " ", "  ", "/", "/a/b.css", "/x?q=1 2", "HTTP/1.1", "HTTP/2.0", "HTTP/", "http/1.1", "HTTP/1", "HTTP/1.1 ", "HTTP/1 1", "HTTP/11.0", "-", "\\\"", "HTTP/1.1HTTP/1.1"}
	n := 0
	for range 100000 {
		var b []byte
		if r.IntN(4) > 0 {
			// A request as logged: a method, a target, a protocol.
			b = append(b, []string{"GET", "POST", "M-_x"}[r.IntN(3)]...)
			b = append(b, "   "[:1+r.IntN(2)]...)
			b = append(b, []string{"/", "/a/b.css", "/x?q=1 2", "/HTTP/1.1", "*"}[r.IntN(5)]...)
			b = append(b, "   "[:1+r.IntN(2)]...)
			b = append(b, []string{"HTTP/1.1", "HTTP/2.0", "HTTP/1.0", "HTTP/1", "HTTP/11.0", "HTTP/1 1", "HTTP/1.1 "}[r.IntN(7)]...)
		}
		for k := r.IntN(3); k > 0; k-- {
			b = append(b, parts[r.IntN(len(parts))]...)
			if r.IntN(3) > 0 {
				b = append(b, ' ')
			}
		}
		if len(b) > 0 && r.IntN(4) == 0 {
			b[len(b)-1-r.IntN(min(len(b), 10))] = " H/1.\x00"[r.IntN(6)]
		}
		raw := string(b)
		for _, noEscape := range []bool{true, false} {
			var e, we Entry
			st, wst := lineState{noEscape: noEscape}, lineState{noEscape: noEscape}
			setRequest(raw, &e, &st)
			refSetRequest(raw, &we, &wst)
			if !reflect.DeepEqual(e, we) || !reflect.DeepEqual(st, wst) {
				t.Fatalf("setRequest(%q): %+v, reference %+v", raw, e, we)
			}
			if e.Has&HasProtocol != 0 {
				n++
			}
		}
	}
	if n < 10000 {
		t.Fatalf("only %d requests with a protocol: too few to compare", n)
	}
}

// TestDigitsAtAsLoop holds digitsAt, which reads up to 8 digits at once,
// to a loop a digit: random runs of 0 to 20 digits followed by every kind
// of byte (the ones next to '0' and '9' in the table, 0x80 and more), at
// offsets with fewer and more than 8 bytes after them.
func TestDigitsAtAsLoop(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 31))
	others := "/:.- \"\x00\x7f\x80\xb0\xb9\xff\x10\x1a"
	n := 0
	for range 300000 {
		var b []byte
		for range r.IntN(4) {
			b = append(b, others[r.IntN(len(others))])
		}
		pos := len(b)
		for range r.IntN(21) {
			b = append(b, byte('0'+r.IntN(10)))
		}
		for range r.IntN(10) {
			if r.IntN(3) == 0 {
				b = append(b, byte('0'+r.IntN(10)))
			} else {
				b = append(b, others[r.IntN(len(others))])
			}
		}
		s := string(b)
		max := 8 + r.IntN(11)
		var want int64
		q := pos
		for q < len(s) && q < pos+max && s[q]-'0' <= 9 {
			want = want*10 + int64(s[q]-'0')
			q++
		}
		if v, end := digitsAt(s, pos, max); v != want || end != q {
			t.Fatalf("digitsAt(%q, %d, %d) = %d, %d; want %d, %d", s, pos, max, v, end, want, q)
		}
		if q-pos >= 8 {
			n++
		}
	}
	if n < 10000 {
		t.Fatalf("only %d runs of 8 digits or more", n)
	}
}
