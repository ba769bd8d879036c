package rules

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/logjail/logjail/limits"
)

func TestFull(t *testing.T) {
	c, err := Load("../testdata/rules/valid/full.yaml", testOptions)
	if err != nil {
		t.Fatal(err)
	}
	type top struct {
		StateDir         string
		IPv4Prefix       int
		IPv6Prefix       int
		Skew             time.Duration
		Future           time.Duration
		MaxKeys          int
		MaxBansPerMinute int
		HistoryRetention time.Duration
		Checkpoint       time.Duration
		Cores            int
		Cleaner          string
		Metrics          string
		ControlSocket    string
	}
	gotTop := top{c.StateDir, c.IPv4Prefix, c.IPv6Prefix, c.Skew, c.Future, c.MaxKeys, c.MaxBansPerMinute, c.HistoryRetention, c.Checkpoint, c.Cores, c.Cleaner, c.Metrics, c.ControlSocket}
	wantTop := top{"/srv/logjail", 16, 56, 10 * time.Second, 2 * time.Minute, 5000, 20, 30 * 24 * time.Hour, 10 * time.Second, 4, "*/5 * * * *", "", "/run/logjail/ctl.sock"}
	if diff := cmp.Diff(wantTop, gotTop); diff != "" {
		t.Errorf("top level (-want +got):\n%s", diff)
	}

	var names []string
	for i, s := range c.Sources {
		names = append(names, s.Name)
		if s.Index != i {
			t.Errorf("source %s: Index %d, want %d", s.Name, s.Index, i)
		}
	}
	if diff := cmp.Diff([]string{"nginx", "apache", "fpm", "caddy"}, names); diff != "" {
		t.Errorf("sources (-want +got):\n%s", diff)
	}
	ng := c.Source("nginx")
	if ng.Parser.Location != time.UTC || ng.From != "start" || ng.CPUFallback != "duration" || ng.Parser.CPUField != "upstream_http_x_cpu_time" {
		t.Errorf("nginx source: %+v", ng)
	}
	wantProxies := []netip.Prefix{
		netip.MustParsePrefix("127.0.0.1/32"),
		netip.MustParsePrefix("198.51.100.77/32"),
		netip.MustParsePrefix("2001:db8:ffff::/48"),
	}
	if diff := cmp.Diff(wantProxies, ng.Parser.TrustedProxies, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("trusted proxies (-want +got):\n%s", diff)
	}
	if c.Source("fpm").Parser.Location.String() != "Europe/Paris" {
		t.Errorf("fpm timezone %v", c.Source("fpm").Parser.Location)
	}
	if c.Source("none") != nil {
		t.Error("Source(none) != nil")
	}

	names = nil
	for i, r := range c.Rules {
		names = append(names, r.Name)
		if r.Index != i {
			t.Errorf("rule %s: Index %d, want %d", r.Name, r.Index, i)
		}
		if c.Rule(r.Name) != r {
			t.Errorf("Rule(%q) is not the rule", r.Name)
		}
	}
	if diff := cmp.Diff([]string{"heavy", "flood", "scanners", "accounts", "agents", "nets", "range:googlebot", "range:office", "good_bots"}, names); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	flood := c.Rule("flood")
	wantFlood := &Rule{
		Name: "flood", Index: 1, Key: KeyIP, Combine: CombineAll,
		Limits: []Limit{
			{Text: "20 per second", Kind: limits.Rate{}, N: 20, Window: time.Second},
			{Text: "300 per minute", Kind: limits.Rate{}, N: 300, Window: time.Minute},
			{Text: "10/s burst 20", Kind: limits.Bucket{}, N: 10, Burst: 20, Window: 2 * time.Second},
			{Text: "last 10 within 2s", Kind: limits.LastN{}, N: 10, Window: 2 * time.Second},
			{Text: "10% duration over 1m", Kind: limits.Share{Weight: limits.Duration}, N: 0.1, Window: time.Minute},
		},
		Throttle: &Throttle{InitialDelay: 5 * time.Second, MaxDelay: 80 * time.Second, Quiet: 10 * time.Second},
		Ban:      Ban{After: 4, For: 3 * time.Minute, Factor: 2, Max: 24 * time.Hour, Remember: 60 * 24 * time.Hour},
	}
	if diff := cmp.Diff(wantFlood, flood); diff != "" {
		t.Errorf("flood (-want +got):\n%s", diff)
	}
	wantGoogle := &Rule{
		Name: "range:googlebot", Index: 6, Key: KeyRange, Combine: CombineAll, LogOnly: true,
		Limits:   []Limit{{Text: "50 per second", Kind: limits.Rate{}, N: 50, Window: time.Second}},
		Throttle: &Throttle{InitialDelay: DefaultInitialDelay, MaxDelay: DefaultMaxDelay, Quiet: DefaultQuiet},
		Ban:      Ban{After: 2, For: 5 * time.Minute, Factor: 1, Max: DefaultBanMax, Remember: DefaultRemember},
	}
	if diff := cmp.Diff(wantGoogle, c.Rule("range:googlebot")); diff != "" {
		t.Errorf("range:googlebot (-want +got):\n%s", diff)
	}
	office := c.Rule("range:office")
	if office.Key != KeyPrefix || !office.Limits[0].OfMachine || !approx(office.Limits[0].N, 0.1*4) {
		t.Errorf("range:office: %+v", office)
	}
	if r := c.Rule("scanners"); r.Key != KeyIPUserAgent || !r.LogOnly || r.Throttle != nil {
		t.Errorf("scanners: %+v", r)
	}

	var types []string
	for _, a := range c.Actions {
		types = append(types, a.Type)
	}
	if diff := cmp.Diff(ActionTypes(), types); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	wantNginx := Action{Type: "nginx", Index: 1, Line: 88, Lines: map[string]int{"type": 88, "file": 89, "style": 90, "check": 91, "reload": 92}, Options: map[string]any{
		"file": "/etc/nginx/logjail-deny.conf", "style": "geo",
		"check": []any{"nginx", "-t"}, "reload": []any{"nginx", "-s", "reload"},
	}}
	if diff := cmp.Diff(wantNginx, c.Actions[1]); diff != "" {
		t.Errorf("nginx action (-want +got):\n%s", diff)
	}

	for addr, want := range map[string]bool{"127.0.0.2": true, "::1": true, "198.51.100.77": true, "2001:db8:ffff:1::1": true, "203.0.113.66": false} {
		if got := c.Allowed(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Allowed(%s) = %v, want %v", addr, got, want)
		}
	}
	var bans []string
	for _, b := range c.StaticBans() {
		bans = append(bans, b.Key.String()+" "+b.Reason)
	}
	if diff := cmp.Diff([]string{"203.0.113.66/32 deny list", "203.0.113.67/32 deny list", "198.51.100.128/25 range bad banned"}, bans); diff != "" {
		t.Errorf("static bans (-want +got):\n%s", diff)
	}
	lists := c.ListFiles()
	for i := range lists {
		lists[i] = filepath.Base(lists[i])
	}
	if diff := cmp.Diff([]string{"allow.txt", "deny.txt"}, lists); diff != "" {
		t.Errorf("list files (-want +got):\n%s", diff)
	}
}

func TestDefaults(t *testing.T) {
	c := mustParse(t, `
sources: [{name: web, paths: [/var/log/nginx/access.log]}]
rules:
  - {name: plain, limits: ["20 per second"]}
  - {name: throttled, limits: ["20 per second"], throttle: {initial_delay: 2m}}
  - {name: long, limits: ["20 per second"], ban: {for: 48h}}
`, Options{HostAddrs: []netip.Addr{}})
	type top struct {
		StateDir         string
		IPv4Prefix       int
		IPv6Prefix       int
		Skew             time.Duration
		Future           time.Duration
		MaxKeys          int
		MaxBansPerMinute int
		HistoryRetention time.Duration
		Checkpoint       time.Duration
		Cleaner          string
		Metrics          string
		ControlSocket    string
	}
	gotTop := top{c.StateDir, c.IPv4Prefix, c.IPv6Prefix, c.Skew, c.Future, c.MaxKeys, c.MaxBansPerMinute, c.HistoryRetention, c.Checkpoint, c.Cleaner, c.Metrics, c.ControlSocket}
	wantTop := top{"/var/lib/logjail", 24, 64, 5 * time.Second, time.Minute, 1000000, 100, 90 * 24 * time.Hour, 5 * time.Second, "@every 1m", "127.0.0.1:9390", "/run/logjail/control.sock"}
	if diff := cmp.Diff(wantTop, gotTop); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	if c.Cores < 1 {
		t.Errorf("Cores = %d", c.Cores)
	}
	s := c.Sources[0]
	if s.Parser.Format != "combined" || s.CPUFallback != "none" || s.From != "end" || s.Parser.Location != time.Local {
		t.Errorf("source defaults: %+v", s)
	}
	wantBan := Ban{After: 0, For: 10 * time.Minute, Factor: 1, Max: 24 * time.Hour, Remember: 30 * 24 * time.Hour}
	if diff := cmp.Diff(wantBan, c.Rule("plain").Ban); diff != "" {
		t.Errorf("ban defaults (-want +got):\n%s", diff)
	}
	if r := c.Rule("plain"); r.Key != KeyIP || r.Combine != CombineAny || r.Throttle != nil || r.LogOnly {
		t.Errorf("rule defaults: %+v", r)
	}
	if diff := cmp.Diff(&Throttle{InitialDelay: 2 * time.Minute, MaxDelay: 2 * time.Minute, Quiet: 3 * time.Second}, c.Rule("throttled").Throttle); diff != "" {
		t.Errorf("throttle defaults (-want +got):\n%s", diff)
	}
	if got := c.Rule("long").Ban.Max; got != 48*time.Hour {
		t.Errorf("ban.max default with a longer for = %v, want 48h", got)
	}
}

func TestManyErrorsAtOnce(t *testing.T) {
	text := `state_dir: /var/lib/logjail
ipv6_prefix: 200
sources:
  - name: web
    paths: [/var/log/nginx/access.log]
    formatt: combined
rules:
  - name: flood
    limits: ["20 per fortnight", "7% cpu over 15s"]
    key: ipv4
  - name: scanners
    match: {status: '^(40[34]'}
    sources: [nginx]
    limits: ["30 per 10s"]
allow: [203.0.113.0/99]
actions:
  - type: firewall
`
	_, err := Parse("logjail.yaml", []byte(text), testOptions)
	if err == nil {
		t.Fatal("no error")
	}
	var got []string
	for _, e := range flatten(err) {
		var ce *Error
		if !errors.As(e, &ce) {
			t.Fatalf("%v is not an *Error", e)
		}
		got = append(got, e.Error())
	}
	want := []string{
		`logjail.yaml:2: ipv6_prefix: 200: want 1 to 128`,
		`logjail.yaml:6: sources[0].formatt: unknown key "formatt" (did you mean "format"?)`,
		`logjail.yaml:9: rules[0].limits[0]: "20 per fortnight": unknown period`,
		`logjail.yaml:9: rules[0].limits[1]: "7% cpu over 15s": source "web" carries no CPU: set its cpu_field, or cpu_fallback: duration`,
		`logjail.yaml:10: rules[0].key: "ipv4": want ip, prefix, user, user_agent or ip+user_agent`,
		"logjail.yaml:12: rules[1].match.status: \"^(40[34]\": bad regular expression: missing closing ): `^(40[34]`",
		`logjail.yaml:13: rules[1].sources[0]: unknown source "nginx"`,
		`logjail.yaml:15: allow[0]: "203.0.113.0/99": not a CIDR`,
		`logjail.yaml:17: actions[0].type: "firewall": want blockfile, nginx, apache, haproxy, list, iptables, nftables, endpoint, exec or crowdsec`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"), testOptions)
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("err = %v, want ErrNotExist", err)
	}
}

func TestEmptyConfig(t *testing.T) {
	_, err := Parse("empty.yaml", nil, testOptions)
	if err == nil || !strings.Contains(err.Error(), "empty.yaml: sources: at least one source is required") {
		t.Errorf("err = %v", err)
	}
}

func TestHostAddrsDiscovered(t *testing.T) {
	c := mustParse(t, "sources: [{name: web, paths: [/x]}]", Options{})
	for _, a := range c.HostAddrs() {
		if !c.Allowed(a) {
			t.Errorf("host address %s not allowed", a)
		}
	}
}

func TestWithLimitN(t *testing.T) {
	c := mustParse(t, `
sources: [{name: web, paths: [/x], cpu_fallback: duration}]
rules:
  - name: r
    limits: ["20 per second", "7% cpu over 15s of machine", "10/m burst 20", "last 10 within 2s", "5 per 10s"]
`, Options{HostAddrs: []netip.Addr{}, Cores: 2})
	tests := []struct {
		limit int
		n     float64
		want  Limit
	}{
		{0, 35, Limit{Text: "35 per second", Kind: limits.Rate{}, N: 35, Window: time.Second}},
		{1, 12, Limit{Text: "12% cpu over 15s of machine", Kind: limits.Share{Weight: limits.CPU}, N: 0.24, Window: 15 * time.Second, OfMachine: true, Cores: 2}},
		{2, 30, Limit{Text: "30/m burst 20", Kind: limits.Bucket{}, N: 0.5, Burst: 20, Window: 40 * time.Second}},
		{3, 6.4, Limit{Text: "last 6 within 2s", Kind: limits.LastN{}, N: 6, Window: 2 * time.Second}},
		{4, 7.5, Limit{Text: "7.5 per 10s", Kind: limits.Rate{}, N: 7.5, Window: 10 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.want.Text, func(t *testing.T) {
			cc, err := c.WithLimitN("r", tt.limit, tt.n)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, cc.Rule("r").Limits[tt.limit], cmp.Comparer(approx)); diff != "" {
				t.Errorf("limit (-want +got):\n%s", diff)
			}
			if cc.Rules[0] == c.Rules[0] || c.Rules[0].Limits[tt.limit].Text == tt.want.Text {
				t.Error("the original changed")
			}
			if cc.Sources[0] != c.Sources[0] {
				t.Error("the copy does not share its sources")
			}
		})
	}
	for _, bad := range []struct {
		rule  string
		limit int
		n     float64
	}{{"nope", 0, 1}, {"r", 5, 1}, {"r", -1, 1}, {"r", 0, -1}, {"r", 2, 0}, {"r", 3, 1}} {
		if _, err := c.WithLimitN(bad.rule, bad.limit, bad.n); err == nil {
			t.Errorf("WithLimitN(%q, %d, %v) = nil error", bad.rule, bad.limit, bad.n)
		}
	}
}

func TestSourceFor(t *testing.T) {
	c := mustParse(t, `
sources:
  - {name: nginx, paths: [/var/log/nginx/access.log, /var/log/nginx/*.access.log]}
  - {name: fpm, paths: [/var/log/php*-fpm.log]}
`, testOptions)
	tests := map[string]string{
		"/var/log/nginx/access.log":               "nginx",
		"/var/log/nginx/access.log.1":             "nginx",
		"/var/log/nginx/access.log.2.gz":          "nginx",
		"/var/log/nginx/access.log-20261122":      "nginx",
		"/var/log/nginx/access.log-20261122.gz":   "nginx",
		"/var/log/nginx/shop.access.log.14.gz":    "nginx",
		"/var/log/nginx/../nginx/access.log":      "nginx",
		"/var/log/php8.2-fpm.log.1":               "fpm",
		"/var/log/nginx/error.log":                "",
		"/var/log/nginx/access.log.old":           "",
		"/var/log/nginx/access.logger":            "",
		"/srv/other/access.log":                   "",
		"testdata/logs/access.log":                "",
		"/var/log/nginx/access.log-20261122.gz.1": "",
	}
	for path, want := range tests {
		s := c.SourceFor(path)
		got := ""
		if s != nil {
			got = s.Name
		}
		if got != want {
			t.Errorf("SourceFor(%q) = %q, want %q", path, got, want)
		}
	}
	one := mustParse(t, "sources: [{name: web, paths: [/var/log/nginx/access.log]}]", testOptions)
	if s := one.SourceFor("testdata/logs/access.log"); s == nil || s.Name != "web" {
		t.Errorf("SourceFor with one source = %v, want web", s)
	}
}

func TestRelativePaths(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "logjail.yaml")
	text := "sources:\n  - {name: a, paths: ['logs/*.log']}\n  - {name: b, paths: [/var/log/b.log]}\n"
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(cfg, testOptions)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Sources[0].Paths[0], filepath.Join(dir, "logs/*.log"); got != want {
		t.Errorf("path %q, want %q", got, want)
	}
	if s := c.SourceFor(filepath.Join(dir, "logs", "x.log.1")); s == nil || s.Name != "a" {
		t.Errorf("SourceFor = %v, want a", s)
	}
}
