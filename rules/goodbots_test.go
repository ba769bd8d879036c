package rules_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/goodbots"
	"github.com/logjail/logjail/internal/dnstest"
	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/pipeline"
	"github.com/logjail/logjail/rules"
)

const goodBotsConfig = `
sources:
  - name: web
    paths: [/var/log/nginx/access.log]
    format: combined
rules:
  - name: flood
    limits: ["20 per 10s"]
    ban: {for: 1h}
`

const (
	googlebotUA = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
	browserUA   = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"
	monitorUA   = "Mozilla/5.0+(compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)"
)

func parseGoodBots(t *testing.T, extra string) *rules.Config {
	t.Helper()
	cfg, err := rules.Parse("test.yaml", []byte(goodBotsConfig+extra), rules.Options{HostAddrs: []netip.Addr{}})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func entry(ip, ua string, at time.Time) *parser.Entry {
	return &parser.Entry{IP: netip.MustParseAddr(ip), Time: at, Method: "GET", Path: "/", Status: 200, UserAgent: ua,
		Has: parser.HasUserAgent | parser.HasStatus}
}

// run sends n requests from ip with ua, 10 a second, through a pipeline
// (the rules, then a real detector) and returns every decision.
func run(cfg *rules.Config, p *pipeline.Pipeline, ip, ua string, n int) []detector.Decision {
	start := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	var out []detector.Decision
	for i := range n {
		out = p.Process(cfg.Source("web"), entry(ip, ua, start.Add(time.Duration(i)*100*time.Millisecond)), out)
	}
	return out
}

func TestGoodBotsClassify(t *testing.T) {
	cfg := parseGoodBots(t, "")
	if cfg.GoodBotsVerify != rules.VerifyRanges {
		t.Errorf("GoodBotsVerify = %q, want the default %q", cfg.GoodBotsVerify, rules.VerifyRanges)
	}
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	var kc rules.KeyCache
	for _, c := range []struct {
		name, ip, ua string
		rule, key    string
		claims       string
	}{
		{"verified Googlebot", "66.249.66.1", googlebotUA, rules.GoodBotsRule, "range:googlebot", ""},
		{"verified Googlebot IPv6", "2001:4860:4801:10::1", googlebotUA, rules.GoodBotsRule, "range:googlebot", ""},
		{"verified Bingbot", "157.55.39.1", "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)", rules.GoodBotsRule, "range:bingbot", ""},
		{"fake Googlebot", "203.0.113.9", googlebotUA, "flood", "203.0.113.9", "googlebot"},
		{"Googlebot from Bing's range", "157.55.39.1", googlebotUA, "flood", "157.55.39.1", "googlebot"},
		{"browser from Google's range", "66.249.66.1", browserUA, "flood", "66.249.66.1", ""},
		{"YandexBot without DNS", "203.0.113.10", "Mozilla/5.0 (compatible; YandexBot/3.0; +http://yandex.com/bots)", "flood", "203.0.113.10", "yandexbot"},
		{"monitor", "203.0.113.11", monitorUA, "flood", "203.0.113.11", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			charges, v := cfg.Classify(cfg.Source("web"), entry(c.ip, c.ua, at), nil)
			if v != rules.VerdictCharged || len(charges) != 1 {
				t.Fatalf("verdict %v, charges %+v", v, charges)
			}
			ch := charges[0]
			if ch.Rule.Name != c.rule || ch.Key != c.key || ch.Claims != c.claims {
				t.Errorf("charged to rule %s key %s claims %q; want %s %s %q", ch.Rule.Name, ch.Key, ch.Claims, c.rule, c.key, c.claims)
			}
			// The pipeline's KeyCache remembers the user agent's claim:
			// the same answer, first and second time.
			for range 2 {
				cached, _ := cfg.ClassifyCached(&kc, cfg.Source("web"), entry(c.ip, c.ua, at), nil)
				if len(cached) != 1 || cached[0] != ch {
					t.Errorf("ClassifyCached: %+v, want %+v", cached, ch)
				}
			}
		})
	}
	// A user agent too long for the cache is still read.
	long := strings.Repeat("x", rules.MaxUserAgentKey) + " " + googlebotUA
	if charges, _ := cfg.ClassifyCached(&kc, cfg.Source("web"), entry("66.249.66.1", long, at), nil); len(charges) != 1 || charges[0].Key != "range:googlebot" {
		t.Errorf("a %d-byte Googlebot user agent: %+v", len(long), charges)
	}
	// The crawlers' keys are group keys: a ban of range:googlebot blocks
	// Google's published ranges, and an address in them finds the key.
	if ps := cfg.GroupRanges()["range:googlebot"]; len(ps) < 100 {
		t.Errorf("GroupRanges()[range:googlebot]: %d prefixes", len(ps))
	}
	if keys := cfg.KeysContaining(netip.MustParseAddr("66.249.66.1")); !strings.Contains(strings.Join(keys, " "), "range:googlebot") {
		t.Errorf("KeysContaining(66.249.66.1) = %v, want range:googlebot among them", keys)
	}
}

// A verified Googlebot's 1000 requests (10 a second: 50 times flood's
// limit) never ban it; a fake Googlebot sending the same is banned like
// anyone.
func TestGoodBotsNeverBanned(t *testing.T) {
	cfg := parseGoodBots(t, "")
	p := pipeline.New(cfg)
	if ds := run(cfg, p, "66.249.66.1", googlebotUA, 1000); len(ds) != 0 {
		t.Errorf("a verified Googlebot got %d decisions, first %+v", len(ds), ds[0])
	}
	ds := run(cfg, p, "203.0.113.9", googlebotUA, 1000)
	if len(ds) == 0 || ds[0].Kind != detector.Ban || ds[0].Rule != "flood" || ds[0].Key != "203.0.113.9" {
		t.Fatalf("a fake Googlebot: decisions %+v, want a ban by flood", ds)
	}
	// The one key of the crawler has its own limits: past them, the whole
	// crawler is banned (20 per second).
	p = pipeline.New(cfg)
	start := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	var out []detector.Decision
	for i := range 30 {
		out = p.Process(cfg.Source("web"), entry("66.249.66."+itoa(1+i%3), googlebotUA, start.Add(time.Duration(i)*10*time.Millisecond)), out)
	}
	if len(out) == 0 || out[0].Rule != rules.GoodBotsRule || out[0].Key != "range:googlebot" || out[0].Kind != detector.Ban {
		t.Errorf("30 requests in 0.3s from three Googlebot addresses: %+v, want a ban of range:googlebot by good_bots", out)
	}
}

func itoa(i int) string { return string(rune('0' + i)) }

func TestGoodBotsOptions(t *testing.T) {
	t.Run("off", func(t *testing.T) {
		cfg := parseGoodBots(t, "good_bots: {verify: off}\n")
		if cfg.Rule(rules.GoodBotsRule) != nil {
			t.Error("verify: off still has the good_bots rule")
		}
		charges, _ := cfg.Classify(cfg.Source("web"), entry("66.249.66.1", googlebotUA, time.Now()), nil)
		if len(charges) != 1 || charges[0].Rule.Name != "flood" || charges[0].Claims != "" {
			t.Errorf("verify: off: %+v, want an ordinary charge", charges)
		}
	})
	t.Run("limits", func(t *testing.T) {
		cfg := parseGoodBots(t, "good_bots:\n  limits: [\"5 per second\"]\n  throttle: {initial_delay: 5s}\n")
		r := cfg.Rule(rules.GoodBotsRule)
		if r == nil || len(r.Limits) != 1 || r.Limits[0].Text != "5 per second" || r.Throttle == nil || r.Key != rules.KeyRange || r.Ban.For != 10*time.Minute {
			t.Errorf("good_bots rule %+v", r)
		}
		if cfg.GoodBotsVerify != rules.VerifyRanges {
			t.Errorf("verify %q, want the default", cfg.GoodBotsVerify)
		}
	})
	t.Run("dns without a verifier", func(t *testing.T) {
		// replay and check: the published ranges only.
		cfg := parseGoodBots(t, "good_bots: {verify: dns}\n")
		charges, _ := cfg.Classify(cfg.Source("web"), entry("66.249.66.1", googlebotUA, time.Now()), nil)
		if cfg.GoodBotsVerify != rules.VerifyDNS || len(charges) != 1 || charges[0].Key != "range:googlebot" {
			t.Errorf("verify %q, charges %+v", cfg.GoodBotsVerify, charges)
		}
	})
	t.Run("operator range first", func(t *testing.T) {
		cfg := parseGoodBots(t, "ranges:\n  mine:\n    cidrs: [66.249.66.0/24]\n    limits: none\n")
		_, v := cfg.Classify(cfg.Source("web"), entry("66.249.66.1", googlebotUA, time.Now()), nil)
		if v != rules.VerdictExempt {
			t.Errorf("verdict %v, want exempt by the operator's range", v)
		}
		for _, p := range cfg.GroupRanges()["range:googlebot"] {
			if p.Overlaps(netip.MustParsePrefix("66.249.66.0/24")) {
				t.Errorf("range:googlebot's ban would block %s, the operator's range", p)
			}
		}
	})
}

func TestGoodBotsInvalid(t *testing.T) {
	for _, c := range []struct{ name, yaml, want string }{
		{"verify", "good_bots: {verify: always}\n", `good_bots.verify`},
		{"unknown key", "good_bots: {key: ip}\n", `good_bots.key`},
		{"limit", "good_bots: {limits: [\"5 per fortnight\"]}\n", `good_bots.limits[0]`},
		{"rule name", "  - name: good_bots\n    limits: [\"1 per second\"]\n", `rules[1].name`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := rules.Parse("test.yaml", []byte(goodBotsConfig+c.yaml), rules.Options{HostAddrs: []netip.Addr{}})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want one at %s", err, c.want)
			}
		})
	}
}

// BenchmarkClassifyGoodBots: what good_bots costs a line, against
// verify: off, with the pipeline's KeyCache.
func BenchmarkClassifyGoodBots(b *testing.B) {
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct{ name, extra, ip, ua string }{
		{"off/browser", "good_bots: {verify: off}\n", "203.0.113.7", browserUA},
		{"browser", "", "203.0.113.7", browserUA},
		{"googlebot", "", "66.249.66.1", googlebotUA},
		{"fake", "", "203.0.113.9", googlebotUA},
	} {
		cfg, err := rules.Parse("test.yaml", []byte(goodBotsConfig+c.extra), rules.Options{HostAddrs: []netip.Addr{}})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			e := entry(c.ip, c.ua, at)
			var kc rules.KeyCache
			var dst []rules.Charge
			b.ReportAllocs()
			for b.Loop() {
				dst, _ = cfg.ClassifyCached(&kc, cfg.Source("web"), e, dst[:0])
			}
		})
	}
}

// verify: dns, end to end through the configuration, against a real DNS
// server: a Googlebot outside Google's published ranges whose reverse
// DNS is forward-confirmed is an ordinary client until the answer comes,
// then the crawler's key; a YandexBot (no published ranges) likewise; a
// claim whose address has no PTR stays ordinary. Under verify: ranges the
// same Verifier asks nothing.
func TestGoodBotsDNS(t *testing.T) {
	s := dnstest.Start(t,
		"--ptr-record=5.113.0.203.in-addr.arpa,crawl-203-0-113-5.googlebot.com",
		"--host-record=crawl-203-0-113-5.googlebot.com,203.0.113.5",
		"--ptr-record=20.113.0.203.in-addr.arpa,spider-203-0-113-20.yandex.com",
		"--host-record=spider-203-0-113-20.yandex.com,203.0.113.20",
	)
	v := goodbots.NewVerifier(goodbots.Options{Resolver: s.Resolver()})
	defer v.Close()
	parse := func(extra string) *rules.Config {
		cfg, err := rules.Parse("test.yaml", []byte(goodBotsConfig+extra), rules.Options{HostAddrs: []netip.Addr{}, Verifier: v})
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	yandexUA := "Mozilla/5.0 (compatible; YandexBot/3.0; +http://yandex.com/bots)"
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	charge := func(cfg *rules.Config, ip, ua string) rules.Charge {
		t.Helper()
		charges, _ := cfg.Classify(cfg.Source("web"), entry(ip, ua, at), nil)
		if len(charges) != 1 {
			t.Fatalf("%s: charges %+v", ip, charges)
		}
		return charges[0]
	}

	ranges := parse("")
	if ch := charge(ranges, "203.0.113.5", googlebotUA); ch.Rule.Name != "flood" || ch.Claims != "googlebot" || v.Stats().Lookups != 0 {
		t.Errorf("verify: ranges: %s %s claims %q, %d lookups; want flood, no lookup", ch.Rule.Name, ch.Key, ch.Claims, v.Stats().Lookups)
	}

	cfg := parse("good_bots: {verify: dns}\n")
	for _, c := range []struct{ ip, ua string }{{"203.0.113.5", googlebotUA}, {"203.0.113.20", yandexUA}, {"203.0.113.8", googlebotUA}} {
		if ch := charge(cfg, c.ip, c.ua); ch.Rule.Name != "flood" || ch.Claims == "" {
			t.Errorf("%s before the answer: %s %s claims %q; want flood, claiming", c.ip, ch.Rule.Name, ch.Key, ch.Claims)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := v.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ ip, ua, rule, key string }{
		{"203.0.113.5", googlebotUA, rules.GoodBotsRule, "range:googlebot"},
		{"203.0.113.20", yandexUA, rules.GoodBotsRule, "range:yandexbot"},
		{"203.0.113.8", googlebotUA, "flood", "203.0.113.8"},
		{"203.0.113.5", yandexUA, "flood", "203.0.113.5"}, // Google's crawler claiming Yandex
	} {
		if ch := charge(cfg, c.ip, c.ua); ch.Rule.Name != c.rule || ch.Key != c.key {
			t.Errorf("%s after the answer: %s %s; want %s %s\n%s", c.ip, ch.Rule.Name, ch.Key, c.rule, c.key, s.Log())
		}
	}
}
