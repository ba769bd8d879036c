package goodbots

import (
	"net/netip"
	"strings"
	"testing"
)

func TestBuiltin(t *testing.T) {
	tb, err := parseTable(botsTxt)
	if err != nil {
		t.Fatalf("bots.txt: %v", err)
	}
	want := map[string]Kind{
		"googlebot": Crawler, "bingbot": Crawler, "applebot": Crawler, "duckduckbot": Crawler, "yandexbot": Crawler, "baiduspider": Crawler,
		"uptimerobot": Monitor, "pingdom": Monitor, "statuscake": Monitor, "site24x7": Monitor, "betterstack": Monitor,
		"freshping": Monitor, "hetrixtools": Monitor, "uptime-kuma": Monitor, "datadog": Monitor, "newrelic": Monitor,
	}
	for name, kind := range want {
		i, ok := tb.byName[name]
		if !ok {
			t.Errorf("bots.txt lacks %s", name)
			continue
		}
		if tb.bots[i].Kind != kind {
			t.Errorf("%s is a %v, want %v", name, tb.bots[i].Kind, kind)
		}
	}
	// The published ranges the package doc names, spot-checked: an
	// address each crawler's own documentation shows.
	for _, c := range []struct {
		bot  string
		addr string
	}{
		{"googlebot", "66.249.66.1"},
		{"googlebot", "2001:4860:4801:10::1"},
		{"bingbot", "157.55.39.1"},
		{"bingbot", "40.77.167.1"},
		{"applebot", "17.241.208.161"},
	} {
		if r := tb.ranges[tb.byName[c.bot]]; r == nil || !r.Contains(netip.MustParseAddr(c.addr)) {
			t.Errorf("%s is not in %s's ranges", c.addr, c.bot)
		}
	}
	for _, name := range []string{"yandexbot", "baiduspider"} {
		if b := tb.bots[tb.byName[name]]; len(b.Ranges) != 0 || len(b.Domains) == 0 {
			t.Errorf("%s: %d ranges, domains %v: want DNS only", name, len(b.Ranges), b.Domains)
		}
	}
	for _, b := range tb.bots {
		if len(b.Ranges) > 0 && b.Source == "" {
			t.Errorf("%s: ranges without a source", b.Name)
		}
	}
}

func TestParseTableErrors(t *testing.T) {
	for _, c := range []struct{ name, data, want string }{
		{"before", "agent Foo\n", "line 1"},
		{"dup", "crawler a\n agent Aa\ncrawler a\n agent Bb\n", "line 3"},
		{"cidr", "crawler a\n agent Aa\n source s\n 10.0.0.1/8\n", "host bits"},
		{"monitor ranges", "monitor a\n agent Aa\n 10.0.0.0/8\n", "agents only"},
		{"no agent", "crawler a\n", "no agent"},
		{"dup agent", "crawler a\n agent Aa\ncrawler b\n agent aa\n", "listed for a and b"},
		{"no source", "crawler a\n agent Aa\n 10.0.0.0/8\n", "without a source"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseTable([]byte(c.data))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
}

// Real user agents of every bot, as they appear in access logs.
var agentCases = []struct {
	ua   string
	name string
	kind Kind
}{
	{"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "googlebot", Crawler},
	{"Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.6099.71 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "googlebot", Crawler},
	{"Googlebot/2.1 (+http://www.google.com/bot.html)", "googlebot", Crawler},
	{"Googlebot-Image/1.0", "googlebot", Crawler},
	{"Googlebot-Video/1.0", "googlebot", Crawler},
	{"Googlebot-News", "googlebot", Crawler},
	{"Mozilla/5.0 (X11; Linux x86_64; Storebot-Google/1.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/79.0.3945.88 Safari/537.36", "googlebot", Crawler},
	{"Mozilla/5.0 (compatible; Google-InspectionTool/1.0;)", "googlebot", Crawler},
	{"Mozilla/5.0 (compatible; GoogleOther)", "googlebot", Crawler},
	{"GoogleOther-Image/1.0", "googlebot", Crawler},
	{"GoogleOther-Video/1.0", "googlebot", Crawler},
	{"Google-Extended", "googlebot", Crawler},
	{"Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)", "bingbot", Crawler},
	{"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm) Chrome/116.0.1938.76 Safari/537.36", "bingbot", Crawler},
	{"Mozilla/5.0 (Windows NT 6.1; WOW64) AppleWebKit/534+ (KHTML, like Gecko) BingPreview/1.0b", "bingbot", Crawler},
	{"Mozilla/5.0 (compatible; adidxbot/2.0; +http://www.bing.com/bingbot.htm)", "bingbot", Crawler},
	{"msnbot/2.0b (+http://search.msn.com/msnbot.htm)", "bingbot", Crawler},
	{"msnbot-media/1.1 (+http://search.msn.com/msnbot.htm)", "bingbot", Crawler},
	{"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/13.1.1 Safari/605.1.15 (Applebot/0.1; +http://www.apple.com/go/applebot)", "applebot", Crawler},
	{"Applebot-Extended/0.1", "applebot", Crawler},
	{"DuckDuckBot/1.1; (+http://duckduckgo.com/duckduckbot.html)", "duckduckbot", Crawler},
	{"Mozilla/5.0 (compatible; DuckDuckBot-Https/1.1; https://duckduckgo.com/duckduckbot)", "duckduckbot", Crawler},
	{"DuckAssistBot/1.0; (+http://duckduckgo.com/duckassistbot.html)", "duckduckbot", Crawler},
	{"Mozilla/5.0 (compatible; YandexBot/3.0; +http://yandex.com/bots)", "yandexbot", Crawler},
	{"Mozilla/5.0 (compatible; YandexImages/3.0; +http://yandex.com/bots)", "yandexbot", Crawler},
	{"Mozilla/5.0 (iPhone; CPU iPhone OS 8_1 like Mac OS X) AppleWebKit/600.1.4 (KHTML, like Gecko) Version/8.0 Mobile/12B411 Safari/600.1.4 (compatible; YandexMobileBot/3.0; +http://yandex.com/bots)", "yandexbot", Crawler},
	{"Mozilla/5.0 (compatible; YandexAccessibilityBot/3.0; +http://yandex.com/bots)", "yandexbot", Crawler},
	{"Mozilla/5.0 (compatible; YandexRenderResourcesBot/1.0; +http://yandex.com/bots)", "yandexbot", Crawler},
	{"Mozilla/5.0 (compatible; Baiduspider/2.0; +http://www.baidu.com/search/spider.html)", "baiduspider", Crawler},
	{"Baiduspider-image+(+http://www.baidu.com/search/spider.htm)", "baiduspider", Crawler},
	{"Mozilla/5.0 (compatible; Baiduspider-render/2.0; +http://www.baidu.com/search/spider.html)", "baiduspider", Crawler},
	{"Mozilla/5.0+(compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)", "uptimerobot", Monitor},
	{"Pingdom.com_bot_version_1.4_(http://www.pingdom.com/)", "pingdom", Monitor},
	{"Mozilla/5.0 (compatible; pingdom.com_bot_version_1.4)", "pingdom", Monitor},
	{"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/61.0.3163.100 Safari/537.36 PingdomPageSpeed/1.0 (pingbot/2.0; +http://www.pingdom.com/)", "pingdom", Monitor},
	{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/91.0.4472.124 Safari/537.36 PingdomTMS/2021.2", "pingdom", Monitor},
	{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/97.0.4692.71 Safari/537.36 StatusCake", "statuscake", Monitor},
	{"StatusCake_Pagespeed_indev", "statuscake", Monitor},
	{"Mozilla/5.0 (Windows NT 6.1; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/70.0.3538.77 Safari/537.36 Site24x7", "site24x7", Monitor},
	{"Site24x7", "site24x7", Monitor},
	{"Better Uptime Bot Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/61.0.3163.100 Safari/537.36", "betterstack", Monitor},
	{"Better Stack Better Uptime Bot Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/61.0.3163.100 Safari/537.36", "betterstack", Monitor},
	{"Mozilla/5.0 (compatible; BetterStackBot/1.0; +https://betterstack.com/)", "betterstack", Monitor},
	{"Freshping Monitoring (+https://freshping.io)", "freshping", Monitor},
	{"HetrixTools Uptime Monitoring Bot. https://hetrix.tools/uptime-monitoring-bot.html", "hetrixtools", Monitor},
	{"Uptime-Kuma/1.23.13", "uptime-kuma", Monitor},
	{"Datadog/Synthetics", "datadog", Monitor},
	{"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36 DatadogSynthetics", "datadog", Monitor},
	{"NewRelicPinger/1.0 (1234567)", "newrelic", Monitor},
	{"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36 NewRelicSynthetics/1.0", "newrelic", Monitor},
	{"updown.io daemon 2.11", "updown", Monitor},
	{"Mozilla/5.0 (compatible; OhDear/1.1; +https://ohdear.app/checks/uptime)", "ohdear", Monitor},
	// Case is ignored: a claim is a claim, however it is spelled.
	{"Mozilla/5.0 (compatible; GOOGLEBOT/2.1)", "googlebot", Crawler},
	// Near misses: a token continued by a letter, digit or '-' is another word.
	{"Mozilla/5.0 (compatible; Googlebot-like/1.0)", "", None},
	{"Mozilla/5.0 (compatible; NotGooglebot/1.0)", "", None},
	{"Mozilla/5.0 (compatible; Googlebots/1.0)", "", None},
	{"Mozilla/5.0 (compatible; MyBingbot2/1.0)", "", None},
	{"Mozilla/5.0 (compatible; Applebotanist/1.0)", "", None},
	{"Mozilla/5.0 (compatible; XUptimeRobot/2.0)", "", None},
	{"Mozilla/5.0 (compatible; UptimeRobots/2.0)", "", None},
	{"Site24x7x", "", None},
	// Browsers, with "bot" inside a word, and Apple's WebKit.
	{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36", "", None},
	{"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_1) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Safari/605.1.15", "", None},
	{"Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0 Robotics/1.0 Abbott", "", None},
	{"Mozilla/5.0 (compatible; bot)", "", None},
	{"curl/8.5.0", "", None},
	{"", "", None},
	{"G", "", None},
	{"Go", "", None},
}

func TestAgent(t *testing.T) {
	covered := map[string]bool{}
	for _, c := range agentCases {
		t.Run(c.ua, func(t *testing.T) {
			name, kind := Agent(c.ua)
			if name != c.name || kind != c.kind {
				t.Errorf("Agent(%q) = %q, %v; want %q, %v", c.ua, name, kind, c.name, c.kind)
			}
		})
		if c.kind != None {
			for _, b := range builtin().bots {
				for _, a := range b.Agents {
					if containsWord(c.ua, a) {
						covered[strings.ToLower(a)] = true
					}
				}
			}
		}
	}
	// Every token of bots.txt has a real user agent above.
	for _, b := range builtin().bots {
		for _, a := range b.Agents {
			if !covered[strings.ToLower(a)] {
				t.Errorf("no test user agent for %s's token %q", b.Name, a)
			}
		}
	}
}

// containsWord is Agent's matching rule written plainly, for the coverage
// check: tok occurs in ua, ASCII case ignored, as a whole word.
func containsWord(ua, tok string) bool {
	lu, lt := strings.ToLower(ua), strings.ToLower(tok)
	for i := 0; i+len(lt) <= len(lu); i++ {
		if lu[i:i+len(lt)] != lt {
			continue
		}
		if i > 0 && wordByte[lu[i-1]] {
			continue
		}
		if e := i + len(lt); e < len(lu) && wordByte[lu[e]] {
			continue
		}
		return true
	}
	return false
}

func TestAgentAllocs(t *testing.T) {
	for _, c := range agentCases {
		if n := testing.AllocsPerRun(100, func() { Agent(c.ua) }); n != 0 {
			t.Errorf("Agent(%q): %v allocations", c.ua, n)
		}
	}
}

func FuzzAgent(f *testing.F) {
	for _, c := range agentCases {
		f.Add(c.ua)
	}
	f.Fuzz(func(t *testing.T, ua string) {
		name, kind := Agent(ua)
		if (name == "") != (kind == None) {
			t.Fatalf("Agent(%q) = %q, %v", ua, name, kind)
		}
		if kind == None {
			return
		}
		// What Agent finds, the plain rule finds.
		for _, b := range builtin().bots {
			if b.Name != name {
				continue
			}
			for _, a := range b.Agents {
				if containsWord(ua, a) {
					return
				}
			}
		}
		t.Fatalf("Agent(%q) = %s, but no token of it is a word of it", ua, name)
	})
}

func BenchmarkAgent(b *testing.B) {
	for _, c := range []struct{ name, ua string }{
		{"browser", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"},
		{"googlebot", "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.6099.71 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"},
		{"curl", "curl/8.5.0"},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.ua)))
			for b.Loop() {
				Agent(c.ua)
			}
		})
	}
}
