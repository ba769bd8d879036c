package rules

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/logjail/logjail/parser"
)

const classifyConfig = `
ipv4_prefix: 24
ipv6_prefix: 64
sources:
  - name: web
    paths: [/var/log/nginx/access.log]
    log_format: '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" "$http_x_forwarded_for"'
    trusted_proxies: [198.51.100.250]
  - {name: fpm, paths: [/var/log/php/*.access.log], format: phpfpm}
  - {name: timed, paths: [/var/log/timed.log], format: nginx_timing, cpu_fallback: duration}
allow: [198.51.100.10, "2001:db8:aaaa::/48"]
deny: [203.0.113.66, 198.51.100.0/24]
ranges:
  crawler:
    cidrs: [203.0.113.128/25]
    group: true
    limits: ["50 per second"]
    ban: {for: 5m}
  crawler-quiet:
    cidrs: [203.0.113.192/27]
    limits: none
  crawler-bad:
    cidrs: [203.0.113.200/29]
    limits: banned
  office:
    cidrs: [203.0.113.16/28, "2001:db8:bbbb::/48"]
    key: prefix
    limits: ["100 per minute"]
rules:
  - name: flood
    limits: ["20 per second"]
  - name: login
    sources: [web]
    match: {path: '^/login', method: '^POST$'}
    key: ip+user_agent
    limits: ["5 per minute"]
  - name: bots
    match:
      user_agent: '(?i)bot'
      not: {user_agent: 'Googlebot'}
    key: user_agent
    limits: ["100 per minute"]
  - name: users
    key: user
    limits: ["1000 per hour"]
  - name: scanners
    match: {status: '^4(03|04)$'}
    limits: ["30 per 10s"]
  - name: heavy
    sources: [fpm, timed]
    limits: ["10% cpu over 15s"]
  - name: nets
    sources: [timed]
    key: prefix
    limits: ["1000 per minute"]
`

func mustParse(t testing.TB, text string, o Options) *Config {
	t.Helper()
	c, err := Parse("test.yaml", []byte(text), o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// got is a Charge as the tests compare it.
type got struct {
	Rule     string
	Key      string
	Addr     string
	CPU      float64
	Duration float64
}

func TestClassify(t *testing.T) {
	c := mustParse(t, classifyConfig, Options{HostAddrs: []netip.Addr{netip.MustParseAddr("203.0.113.1"), netip.MustParseAddr("2001:db8::1")}, Cores: 2})
	get := func(e parser.Entry) parser.Entry {
		e.Has |= parser.HasMethod | parser.HasPath | parser.HasStatus | parser.HasProtocol
		if e.Method == "" {
			e.Method = "GET"
		}
		if e.Path == "" {
			e.Path = "/"
		}
		if e.Status == 0 {
			e.Status = 200
		}
		return e
	}
	ip := netip.MustParseAddr
	tests := []struct {
		name    string
		source  string
		entry   parser.Entry
		verdict Verdict
		want    []got
	}{
		{
			name: "plain ip", source: "web",
			entry:   get(parser.Entry{IP: ip("203.0.113.7")}),
			verdict: VerdictCharged,
			want:    []got{{Rule: "flood", Key: "203.0.113.7", Addr: "203.0.113.7"}},
		},
		{
			name: "host address allowed", source: "web",
			entry:   get(parser.Entry{IP: ip("203.0.113.1")}),
			verdict: VerdictAllowed,
		},
		{
			name: "host IPv6 address allowed", source: "web",
			entry:   get(parser.Entry{IP: ip("2001:db8::1")}),
			verdict: VerdictAllowed,
		},
		{
			name: "allow wins over deny", source: "web",
			entry:   get(parser.Entry{IP: ip("198.51.100.10")}),
			verdict: VerdictAllowed,
		},
		{
			name: "trusted proxy allowed though denied", source: "fpm",
			entry:   get(parser.Entry{IP: ip("198.51.100.250")}),
			verdict: VerdictAllowed,
		},
		{
			name: "deny CIDR", source: "web",
			entry:   get(parser.Entry{IP: ip("198.51.100.11")}),
			verdict: VerdictDenied,
		},
		{
			name: "deny address", source: "web",
			entry:   get(parser.Entry{IP: ip("203.0.113.66")}),
			verdict: VerdictDenied,
		},
		{
			name: "allowed IPv6 prefix", source: "web",
			entry:   get(parser.Entry{IP: ip("2001:db8:aaaa:1::5")}),
			verdict: VerdictAllowed,
		},
		{
			name: "group range charged to range rule only", source: "web",
			entry:   get(parser.Entry{IP: ip("203.0.113.130"), Status: 404}),
			verdict: VerdictCharged,
			want:    []got{{Rule: "range:crawler", Key: "range:crawler", Addr: "203.0.113.130"}},
		},
		{
			name: "more specific none range exempts", source: "web",
			entry:   get(parser.Entry{IP: ip("203.0.113.193")}),
			verdict: VerdictExempt,
		},
		{
			name: "most specific banned range denies", source: "web",
			entry:   get(parser.Entry{IP: ip("203.0.113.201")}),
			verdict: VerdictDenied,
		},
		{
			name: "range with prefix key", source: "timed",
			entry:   get(parser.Entry{IP: ip("203.0.113.20")}),
			verdict: VerdictCharged,
			want:    []got{{Rule: "range:office", Key: "203.0.113.0/24", Addr: "203.0.113.20"}},
		},
		{
			name: "IPv6 range with prefix key", source: "web",
			entry:   get(parser.Entry{IP: ip("2001:db8:bbbb:1:2::3")}),
			verdict: VerdictCharged,
			want:    []got{{Rule: "range:office", Key: "2001:db8:bbbb:1::/64", Addr: "2001:db8:bbbb:1:2::3"}},
		},
		{
			name: "IPv6 keyed by /64", source: "web",
			entry:   get(parser.Entry{IP: ip("2001:db8:1:2:aaaa::7")}),
			verdict: VerdictCharged,
			want:    []got{{Rule: "flood", Key: "2001:db8:1:2::/64", Addr: "2001:db8:1:2:aaaa::7"}},
		},
		{
			name: "match and ip+user_agent key", source: "web",
			entry:   get(parser.Entry{IP: ip("203.0.113.7"), Method: "POST", Path: "/login/", UserAgent: "curl/8.0", Has: parser.HasUserAgent}),
			verdict: VerdictCharged,
			want: []got{
				{Rule: "flood", Key: "203.0.113.7", Addr: "203.0.113.7"},
				{Rule: "login", Key: "203.0.113.7|ua:curl/8.0", Addr: "203.0.113.7"},
			},
		},
		{
			name: "match needs every field", source: "web",
			entry:   get(parser.Entry{IP: ip("203.0.113.7"), Method: "GET", Path: "/login"}),
			verdict: VerdictCharged,
			want:    []got{{Rule: "flood", Key: "203.0.113.7", Addr: "203.0.113.7"}},
		},
		{
			name: "rule sources", source: "fpm",
			entry:   get(parser.Entry{IP: ip("203.0.113.7"), Method: "POST", Path: "/login"}),
			verdict: VerdictCharged,
			want: []got{
				{Rule: "flood", Key: "203.0.113.7", Addr: "203.0.113.7"},
				{Rule: "heavy", Key: "203.0.113.7", Addr: "203.0.113.7"},
			},
		},
		{
			name: "user agent key and not", source: "web",
			entry:   get(parser.Entry{IP: ip("203.0.113.8"), UserAgent: "EvilBot/1.0", Has: parser.HasUserAgent}),
			verdict: VerdictCharged,
			want: []got{
				{Rule: "flood", Key: "203.0.113.8", Addr: "203.0.113.8"},
				{Rule: "bots", Key: "ua:EvilBot/1.0", Addr: "203.0.113.8"},
			},
		},
		{
			name: "not excludes", source: "web",
			entry:   get(parser.Entry{IP: ip("203.0.113.8"), UserAgent: "Mozilla/5.0 (compatible; Googlebot/2.1)", Has: parser.HasUserAgent}),
			verdict: VerdictCharged,
			want:    []got{{Rule: "flood", Key: "203.0.113.8", Addr: "203.0.113.8"}},
		},
		{
			name: "user key", source: "web",
			entry:   get(parser.Entry{IP: ip("203.0.113.9"), User: "alice", Has: parser.HasUser}),
			verdict: VerdictCharged,
			want: []got{
				{Rule: "flood", Key: "203.0.113.9", Addr: "203.0.113.9"},
				{Rule: "users", Key: "user:alice", Addr: "203.0.113.9"},
			},
		},
		{
			name: "status match", source: "web",
			entry:   get(parser.Entry{IP: ip("203.0.113.9"), Status: 404}),
			verdict: VerdictCharged,
			want: []got{
				{Rule: "flood", Key: "203.0.113.9", Addr: "203.0.113.9"},
				{Rule: "scanners", Key: "203.0.113.9", Addr: "203.0.113.9"},
			},
		},
		{
			name: "status that does not match", source: "web",
			entry:   get(parser.Entry{IP: ip("203.0.113.9"), Status: 4404}),
			verdict: VerdictCharged,
			want:    []got{{Rule: "flood", Key: "203.0.113.9", Addr: "203.0.113.9"}},
		},
		{
			name: "cpu from the entry", source: "fpm",
			entry:   get(parser.Entry{IP: ip("203.0.113.7"), CPU: 0.25, Duration: 0.5, Has: parser.HasCPU | parser.HasDuration}),
			verdict: VerdictCharged,
			want: []got{
				{Rule: "flood", Key: "203.0.113.7", Addr: "203.0.113.7", CPU: 0.25, Duration: 0.5},
				{Rule: "heavy", Key: "203.0.113.7", Addr: "203.0.113.7", CPU: 0.25, Duration: 0.5},
			},
		},
		{
			name: "cpu falls back on duration", source: "timed",
			entry:   get(parser.Entry{IP: ip("203.0.113.7"), Duration: 0.5, Has: parser.HasDuration}),
			verdict: VerdictCharged,
			want: []got{
				{Rule: "flood", Key: "203.0.113.7", Addr: "203.0.113.7", CPU: 0.5, Duration: 0.5},
				{Rule: "heavy", Key: "203.0.113.7", Addr: "203.0.113.7", CPU: 0.5, Duration: 0.5},
				{Rule: "nets", Key: "203.0.113.0/24", Addr: "203.0.113.7", CPU: 0.5, Duration: 0.5},
			},
		},
		{
			name: "no fallback without cpu_fallback", source: "web",
			entry:   get(parser.Entry{IP: ip("203.0.113.7"), Duration: 0.5, Has: parser.HasDuration}),
			verdict: VerdictCharged,
			want:    []got{{Rule: "flood", Key: "203.0.113.7", Addr: "203.0.113.7", Duration: 0.5}},
		},
		{
			name: "IPv6 prefix key", source: "timed",
			entry:   get(parser.Entry{IP: ip("2001:db8:1:2:aaaa::7")}),
			verdict: VerdictCharged,
			want: []got{
				{Rule: "flood", Key: "2001:db8:1:2::/64", Addr: "2001:db8:1:2:aaaa::7"},
				{Rule: "heavy", Key: "2001:db8:1:2::/64", Addr: "2001:db8:1:2:aaaa::7"},
				{Rule: "nets", Key: "2001:db8:1:2::/64", Addr: "2001:db8:1:2:aaaa::7"},
			},
		},
		{
			name: "no source: rules for every source only", source: "",
			entry:   get(parser.Entry{IP: ip("203.0.113.7"), Method: "POST", Path: "/login"}),
			verdict: VerdictCharged,
			want:    []got{{Rule: "flood", Key: "203.0.113.7", Addr: "203.0.113.7"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := c.Source(tt.source)
			if tt.source != "" && src == nil {
				t.Fatalf("no source %q", tt.source)
			}
			charges, v := c.Classify(src, &tt.entry, nil)
			if v != tt.verdict {
				t.Errorf("verdict %v, want %v", v, tt.verdict)
			}
			var gots []got
			for _, ch := range charges {
				gots = append(gots, got{Rule: ch.Rule.Name, Key: ch.Key, Addr: ch.Addr.String(), CPU: ch.CPU, Duration: ch.Duration})
				if c.Rules[ch.Rule.Index] != ch.Rule {
					t.Errorf("rule %q: Index %d does not point back at it", ch.Rule.Name, ch.Rule.Index)
				}
			}
			if diff := cmp.Diff(tt.want, gots); diff != "" {
				t.Errorf("charges (-want +got):\n%s", diff)
			}
		})
	}
}

func TestClassifyAppends(t *testing.T) {
	c := mustParse(t, classifyConfig, testOptions)
	e := parser.Entry{IP: netip.MustParseAddr("203.0.113.7")}
	dst := []Charge{{Key: "earlier"}}
	dst, _ = c.Classify(c.Source("web"), &e, dst)
	if len(dst) != 2 || dst[0].Key != "earlier" || dst[1].Rule.Name != "flood" {
		t.Errorf("Classify did not append: %+v", dst)
	}
}

func TestKeys(t *testing.T) {
	tests := []struct {
		v4, v6       int
		addr         string
		ipKey, prefx string
	}{
		{24, 64, "203.0.113.7", "203.0.113.7", "203.0.113.0/24"},
		{32, 64, "203.0.113.7", "203.0.113.7", "203.0.113.7"},
		{16, 64, "2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64", "2001:db8:1:2::/64"},
		{24, 128, "2001:db8:1:2:3:4:5:6", "2001:db8:1:2:3:4:5:6", "2001:db8:1:2:3:4:5:6"},
		{24, 48, "2001:db8:1:2:3:4:5:6", "2001:db8:1::/48", "2001:db8:1::/48"},
		{24, 64, "::ffff:203.0.113.7", "203.0.113.7", "203.0.113.0/24"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			c := &Config{IPv4Prefix: tt.v4, IPv6Prefix: tt.v6}
			a := netip.MustParseAddr(tt.addr)
			if got := c.IPKey(a); got != tt.ipKey {
				t.Errorf("IPKey = %q, want %q", got, tt.ipKey)
			}
			if got := c.PrefixKey(a); got != tt.prefx {
				t.Errorf("PrefixKey = %q, want %q", got, tt.prefx)
			}
		})
	}
}

func TestUserAgentKeys(t *testing.T) {
	c := mustParse(t, `
sources: [{name: web, paths: [/x]}]
rules:
  - {name: ua, key: user_agent, limits: ["5 per second"]}
  - {name: ipua, key: ip+user_agent, limits: ["5 per second"]}
  - {name: user, key: user, limits: ["5 per second"]}
`, testOptions)
	long := strings.Repeat("é", 400) // 800 bytes
	tests := []struct {
		name string
		e    parser.Entry
		want []string
	}{
		{"absent user agent", parser.Entry{IP: netip.MustParseAddr("2001:db8::7")}, []string{"ua:", "2001:db8::/64|ua:"}},
		{"long user agent", parser.Entry{IP: netip.MustParseAddr("203.0.113.7"), UserAgent: long, Has: parser.HasUserAgent},
			[]string{"ua:" + long[:MaxUserAgentKey], "203.0.113.7|ua:" + long[:MaxUserAgentKey]}},
		{"user", parser.Entry{IP: netip.MustParseAddr("203.0.113.7"), User: "bob", Has: parser.HasUser}, []string{"ua:", "203.0.113.7|ua:", "user:bob"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			charges, _ := c.Classify(c.Sources[0], &tt.e, nil)
			var keys []string
			for _, ch := range charges {
				keys = append(keys, ch.Key)
			}
			if diff := cmp.Diff(tt.want, keys); diff != "" {
				t.Errorf("keys (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMatchFieldsAgreeWithGet(t *testing.T) {
	e := parser.Entry{
		Method: "GET", Path: "/p", Query: "q=1", Protocol: "HTTP/1.1", Status: 404,
		Referer: "https://ref.example/", UserAgent: "ua", User: "u", Host: "h.example",
		Has: parser.HasMethod | parser.HasPath | parser.HasQuery | parser.HasProtocol | parser.HasStatus |
			parser.HasReferer | parser.HasUserAgent | parser.HasUser | parser.HasHost,
	}
	var empty parser.Entry
	for _, name := range []string{"method", "path", "query", "protocol", "status", "referer", "user_agent", "user", "host"} {
		if !parser.Ref(name).Own() {
			t.Errorf("%s: not read directly", name)
		}
		for _, e := range []*parser.Entry{&e, &empty} {
			v, ok := e.Get(name)
			// An expression matching exactly the value matches exactly when Get has it.
			c := mustParse(t, "sources: [{name: web, paths: [/x], format: auto}]\nrules: [{name: r, limits: [\"1 per second\"], match: {"+name+": '^"+v+"$'}}]", testOptions)
			m := c.ruleSpecs[0].match
			if got := m.match(e); got != ok {
				t.Errorf("%s=%q (present %v): match = %v", name, v, ok, got)
			}
		}
	}
}

func TestAllowed(t *testing.T) {
	c := mustParse(t, classifyConfig, Options{HostAddrs: []netip.Addr{netip.MustParseAddr("203.0.113.1")}, Cores: 2})
	for addr, want := range map[string]bool{
		"203.0.113.1":          true, // host
		"198.51.100.10":        true, // allow
		"198.51.100.250":       true, // trusted proxy
		"::ffff:198.51.100.10": true, // mapped
		"2001:db8:aaaa::1":     true,
		"198.51.100.11":        false, // denied, not allowed
		"203.0.113.7":          false,
	} {
		if got := c.Allowed(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Allowed(%s) = %v, want %v", addr, got, want)
		}
	}
}

func TestStaticBans(t *testing.T) {
	c := mustParse(t, classifyConfig, testOptions)
	want := []StaticBan{
		{Key: netip.MustParsePrefix("203.0.113.66/32"), Origin: "deny", Reason: "deny list"},
		{Key: netip.MustParsePrefix("198.51.100.0/24"), Origin: "deny", Reason: "deny list"},
		{Key: netip.MustParsePrefix("203.0.113.200/29"), Origin: "range", Reason: "range crawler-bad banned"},
	}
	if diff := cmp.Diff(want, c.StaticBans(), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("StaticBans (-want +got):\n%s", diff)
	}
}

func BenchmarkClassify(b *testing.B) {
	c := mustParse(b, classifyConfig, testOptions)
	src := c.Source("web")
	e := parser.Entry{
		IP: netip.MustParseAddr("203.0.113.7"), Method: "GET", Path: "/index.html", Status: 404, UserAgent: "Mozilla/5.0",
		Has: parser.HasMethod | parser.HasPath | parser.HasStatus | parser.HasUserAgent,
	}
	dst := make([]Charge, 0, 8)
	b.ReportAllocs()
	for b.Loop() {
		dst, _ = c.Classify(src, &e, dst[:0])
	}
}

func TestKeysContaining(t *testing.T) {
	c := mustParse(t, classifyConfig, testOptions)
	tests := map[string][]string{
		"203.0.113.130":        {"203.0.113.130", "203.0.113.0/24", "range:crawler"},
		"203.0.113.7":          {"203.0.113.7", "203.0.113.0/24"},
		"2001:db8:1:2:aaaa::7": {"2001:db8:1:2::/64"},
	}
	for addr, want := range tests {
		if diff := cmp.Diff(want, c.KeysContaining(netip.MustParseAddr(addr))); diff != "" {
			t.Errorf("KeysContaining(%s) (-want +got):\n%s", addr, diff)
		}
	}
}

func BenchmarkClassifyExample(b *testing.B) {
	c, err := Parse("example.yaml", Example(), testOptions)
	if err != nil {
		b.Fatal(err)
	}
	src := c.Sources[0]
	entries := []parser.Entry{
		{IP: netip.MustParseAddr("203.0.113.7"), Method: "GET", Path: "/static/js/vendor.2df89c15.js", Status: 200},
		{IP: netip.MustParseAddr("203.0.113.8"), Method: "GET", Path: "/products/82441-utpara", Status: 200},
		{IP: netip.MustParseAddr("2001:db8:1:2::7"), Method: "GET", Path: "/wp-login.php", Status: 404},
	}
	for i := range entries {
		entries[i].Has = parser.HasMethod | parser.HasPath | parser.HasStatus
	}
	dst := make([]Charge, 0, 8)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		dst, _ = c.Classify(src, &entries[i%len(entries)], dst[:0])
		i++
	}
}

func TestClassifyAllocations(t *testing.T) {
	c := mustParse(t, classifyConfig, testOptions)
	src := c.Source("web")
	dst := make([]Charge, 0, 8)
	for _, tt := range []struct {
		name string
		ip   string
		max  float64
	}{
		{"allowed", "198.51.100.10", 0},
		{"denied", "198.51.100.11", 0},
		{"exempt", "203.0.113.193", 0},
		{"group range", "203.0.113.130", 0},
		{"ip key", "203.0.113.7", 1},
	} {
		e := parser.Entry{IP: netip.MustParseAddr(tt.ip), Path: "/x", Status: 404, Has: parser.HasPath | parser.HasStatus}
		if n := testing.AllocsPerRun(100, func() { dst, _ = c.Classify(src, &e, dst[:0]) }); n > tt.max {
			t.Errorf("%s: %v allocations, want at most %v", tt.name, n, tt.max)
		}
	}
}

// TestAllowWinsOverStaticBans: a deny entry or banned range wholly inside the
// allow list (or the host's own address) is not banned; one that only
// partly overlaps it stays banned (the actions exempt the allowed part).
func TestAllowWinsOverStaticBans(t *testing.T) {
	const cfg = `
sources: [{name: web, paths: [/var/log/x.log], format: combined}]
allow: [203.0.113.0/28]
deny: [203.0.113.4, 203.0.113.0/24, 203.0.113.250, 198.51.100.9]
ranges:
  bad: {cidrs: [203.0.113.8/30], limits: banned}
rules: [{name: r, limits: ["5 per second"]}]
`
	c, err := Parse("t.yaml", []byte(cfg), Options{HostAddrs: []netip.Addr{netip.MustParseAddr("203.0.113.250")}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range c.StaticBans() {
		got = append(got, b.Key.String())
	}
	want := []string{"203.0.113.0/24", "198.51.100.9/32"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("StaticBans (-want +got):\n%s", diff)
	}
}

// TestKeyCache: keys from a KeyCache are those Classify builds, for IPv4,
// IPv6 /64 and prefix keys, also after the cache starts over when full.
func TestKeyCache(t *testing.T) {
	const cfg = `
sources: [{name: web, paths: [/var/log/x.log], format: combined}]
ipv4_prefix: 24
ipv6_prefix: 64
rules:
  - {name: byip, limits: ["5 per second"]}
  - {name: bynet, key: prefix, limits: ["50 per second"]}
`
	c := mustParse(t, cfg, testOptions)
	var kc KeyCache
	addrs := []string{"203.0.113.7", "2001:db8:1:2::7", "198.51.100.200", "2001:db8:1:3::1"}
	for round := 0; round < 2; round++ {
		for i := 0; i < KeyCacheSize+10; i++ {
			a := netip.MustParseAddr(addrs[i%len(addrs)])
			if i >= len(addrs) && i < KeyCacheSize {
				// Fill the cache with other addresses so that it starts over.
				a = netip.AddrFrom4([4]byte{198, 51, byte(i >> 8), byte(i)})
			}
			e := parser.Entry{IP: a}
			want, _ := c.Classify(nil, &e, nil)
			got, _ := c.ClassifyCached(&kc, nil, &e, nil)
			if len(got) != 2 || len(want) != 2 || got[0].Key != want[0].Key || got[1].Key != want[1].Key {
				t.Fatalf("%s: cached %v, uncached %v", a, got, want)
			}
		}
	}
	if len(kc.ip) > KeyCacheSize || len(kc.prefix) > KeyCacheSize {
		t.Errorf("cache holds %d/%d addresses, more than %d", len(kc.ip), len(kc.prefix), KeyCacheSize)
	}
}

func TestAllowedKey(t *testing.T) {
	cfg, err := Parse("/x/logjail.yaml", []byte(`sources: [{name: web, paths: [/x/a.log]}]
allow: [203.0.113.0/24, "2001:db8:1::/48"]
ranges:
  inside: {cidrs: [203.0.113.128/25], group: true, limits: ["5 per 10s"]}
  across: {cidrs: [203.0.113.0/24, 198.51.100.0/24], group: true, limits: ["5 per 10s"]}
`), testOptions)
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]bool{
		"203.0.113.7":               true,
		"203.0.113.0/25":            true,
		"203.0.112.0/23":            false, // only half of it is allowed
		"198.51.100.7":              false,
		"2001:db8:1:2::/64":         true,
		"2001:db8:2::/64":           false,
		"203.0.113.7|ua:curl":       true,
		"2001:db8:1:2::/64|ua:curl": true,
		"198.51.100.7|ua:curl":      false,
		"range:inside":              true,
		"range:across":              false,
		"range:none":                false,
		"user:bob":                  false,
		"ua:curl":                   false,
	} {
		if got := cfg.AllowedKey(key); got != want {
			t.Errorf("AllowedKey(%q) = %v, want %v", key, got, want)
		}
	}
}

// TestChargeFieldsAllSet: classify sets each field of a Charge in place in
// the caller's slice, which holds an earlier entry's charges (its loop over
// the rules, "Every field set in place"); a field added to Charge must be
// set there too, or it would keep an earlier charge's value.
func TestChargeFieldsAllSet(t *testing.T) {
	var names []string
	for f := range reflect.TypeFor[Charge]().Fields() {
		names = append(names, f.Name)
	}
	want := []string{"Rule", "Key", "Fixed", "Addr", "CPU", "Duration", "Claims", "Signature"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("Charge's fields (-set by classify +declared):\n%s", diff)
	}
}
