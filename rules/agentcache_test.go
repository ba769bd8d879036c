package rules

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/logjail/logjail/goodbots"
	"github.com/logjail/logjail/parser"
)

// TestAgentCacheAsAgent checks the user-agent cache of a KeyCache against
// goodbots.Agent itself: crawlers, monitors and browsers, versions that
// differ in one byte only, short and overlong texts, and user agents forced
// into the same set of slots (three for two ways), in a random order long
// enough to evict and refill every slot many times.
func TestAgentCacheAsAgent(t *testing.T) {
	base := []string{
		"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
		"Googlebot/2.1 (+http://www.google.com/bot.html)",
		"Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
		"Mozilla/5.0 (compatible; DuckDuckBot-Https/1.1; https://duckduckgo.com/duckduckbot)",
		"Mozilla/5.0+(compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)",
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
		"curl/8.5.0", "x", "", "bingbot", "Googlebo", "Googlebot",
		string(make([]byte, MaxUserAgentKey+1)),
	}
	// One byte changed anywhere, so that texts differ between the words
	// the hash reads.
	var uas []string
	for _, ua := range base {
		uas = append(uas, ua)
		for i := 0; i < len(ua); i += 3 {
			b := []byte(ua)
			b[i] ^= 0x20
			uas = append(uas, string(b))
		}
	}
	// Three texts of one set of slots, found by trying versions.
	sets := map[uint32][]string{}
	for v := 0; ; v++ {
		ua := "Mozilla/5.0 (compatible; Googlebot/2.1; probe " + string(rune('a'+v%26)) + string(rune('a'+v/26%26)) + string(rune('a'+v/676%26)) + ")"
		set := agentHash(ua) & (agentSlots - 1) &^ 1
		sets[set] = append(sets[set], ua)
		if len(sets[set]) == 3 {
			uas = append(uas, sets[set]...)
			break
		}
	}
	want := map[string][2]any{}
	for _, ua := range uas {
		name, kind := goodbots.Agent(ua)
		want[ua] = [2]any{name, kind}
	}
	rnd := rand.New(rand.NewPCG(15, 23))
	var kc KeyCache
	for n := range 300000 {
		ua := uas[rnd.IntN(len(uas))]
		if n%7 == 0 {
			ua = uas[len(uas)-1-n/7%3] // the three of one set, in turn
		}
		name, kind := kc.agent(ua)
		if w := want[ua]; name != w[0] || kind != w[1] {
			t.Fatalf("look %d: agent(%q) = %q, %v; goodbots.Agent says %q, %v", n, ua, name, kind, w[0], w[1])
		}
	}
	if len(kc.agents) != agentSlots {
		t.Errorf("%d slots, want %d", len(kc.agents), agentSlots)
	}
}

// TestClassifyClaimedAsKeys checks ClassifyClaimed, given the Claim that
// ClaimOf found through another KeyCache (as replay's parse workers do),
// against ClassifyKeys: the same charges and verdict for addresses in the
// allow list, the deny list and each kind of range (a group with limits,
// none, banned, one keyed by prefix), crawlers from their published ranges
// and from elsewhere, other bots, users, statuses and sources, under a
// configuration with good_bots and one without.
func TestClassifyClaimedAsKeys(t *testing.T) {
	addrs := []string{"198.51.100.10", "2001:db8:aaaa::5", "203.0.113.66", "198.51.100.7", "203.0.113.130",
		"203.0.113.195", "203.0.113.201", "203.0.113.20", "2001:db8:bbbb::9", "66.249.66.1", "157.55.39.1",
		"192.0.2.44", "2001:db8:1:2::3", "::ffff:192.0.2.45"}
	uas := []string{"", "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
		"Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)", "SomeBot/1.0", "Mozilla/5.0 (X11; Linux x86_64)"}
	for _, cfgText := range []string{classifyConfig, classifyConfig + "good_bots: {limits: [\"5 per second\"]}\n"} {
		c := mustParse(t, cfgText, testOptions)
		var merger, worker KeyCache
		n := 0
		for _, src := range append(c.Sources, nil) {
			for _, a := range addrs {
				for i, ua := range uas {
					e := parser.Entry{IP: netip.MustParseAddr(a), Time: time.Unix(1700000000, 0), Method: "POST", Path: "/login",
						Status: 403 + i%2, Has: parser.HasMethod | parser.HasPath | parser.HasStatus}
					if ua != "" {
						e.UserAgent, e.Has = ua, e.Has|parser.HasUserAgent
					}
					if i%2 == 1 {
						e.User, e.Has = "u"+a, e.Has|parser.HasUser
					}
					want, wv := c.ClassifyKeys(&merger, src, &e, nil)
					// The claim found for e's source, and for another
					// (which the matching found ahead does not fit).
					for _, csrc := range append(c.Sources, nil) {
						got, gv := c.ClassifyClaimed(&merger, src, &e, ptr(c.ClaimOf(&worker, csrc, &e)), nil)
						if !reflect.DeepEqual(want, got) || wv != gv {
							t.Fatalf("%s %q: verdict %v, claimed %v; charges\n%+v\nclaimed\n%+v", a, ua, wv, gv, want, got)
						}
					}
					n += len(want)
				}
			}
		}
		if n == 0 {
			t.Fatal("no charge at all: the test checks nothing")
		}
	}
}

// TestClaimedMatchAsMatch checks the rules' matching found ahead (ClaimOf's
// matched rules) against the rules' own matching: for random entries (paths,
// methods, statuses, user agents, users, addresses), under classifyConfig
// with and without good_bots, ClassifyClaimed with the Claim ClaimOf found
// for the entry's source makes ClassifyKeys' charges and verdict.
func TestClaimedMatchAsMatch(t *testing.T) {
	rnd := rand.New(rand.NewPCG(23, 14))
	addrs := []string{"192.0.2.44", "2001:db8:1:2::3", "203.0.113.130", "203.0.113.20", "198.51.100.10", "66.249.66.1"}
	paths := []string{"/", "/login", "/login.php", "/static/a.css", "/x/login"}
	methods := []string{"GET", "POST", "HEAD"}
	uas := []string{"", "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "SomeBot/1.0", "curl/8.0", "Mozilla/5.0 (X11; Linux x86_64)"}
	for _, cfgText := range []string{classifyConfig, classifyConfig + "good_bots: {limits: [\"5 per second\"]}\n"} {
		c := mustParse(t, cfgText, testOptions)
		var merger, worker KeyCache
		srcs := append(c.Sources, nil)
		charged := 0
		for range 20000 {
			e := parser.Entry{IP: netip.MustParseAddr(addrs[rnd.IntN(len(addrs))]), Time: time.Unix(1700000000, 0),
				Method: methods[rnd.IntN(len(methods))], Path: paths[rnd.IntN(len(paths))], Status: 100 + rnd.IntN(500),
				Has: parser.HasMethod | parser.HasPath | parser.HasStatus}
			if ua := uas[rnd.IntN(len(uas))]; ua != "" {
				e.UserAgent, e.Has = ua, e.Has|parser.HasUserAgent
			}
			if rnd.IntN(2) == 0 {
				e.User, e.Has = "u", e.Has|parser.HasUser
			}
			src := srcs[rnd.IntN(len(srcs))]
			want, wv := c.ClassifyKeys(&merger, src, &e, nil)
			got, gv := c.ClassifyClaimed(&merger, src, &e, ptr(c.ClaimOf(&worker, src, &e)), nil)
			if !reflect.DeepEqual(want, got) || wv != gv {
				t.Fatalf("%+v: verdict %v, claimed %v; charges\n%+v\nclaimed\n%+v", e, wv, gv, want, got)
			}
			charged += len(want)
		}
		if charged == 0 {
			t.Fatal("no charge at all: the test checks nothing")
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestClassifyStepsAsCalls classifies random entries (addresses in each
// list and range, users, user agents, paths that signatures catch,
// statuses, every source and none) through classify as it is and with its
// own first steps of key and signature off (keyCache.plain): the same
// charges and verdicts, with and without key text and claims, under
// classifyConfig (an ip rule after an ip+user_agent one, whose address
// text it then carries) and a configuration with signatures.
func TestClassifyStepsAsCalls(t *testing.T) {
	sigCfg := `sources:
  - {name: web, paths: [/var/log/nginx/access.log]}
rules:
  - name: flood
    limits: ["20 per second"]
  - name: probes
    signatures: [secrets, vcs]
    limits: ["1 per 14d"]
  - name: both
    key: ip+user_agent
    limits: ["5 per minute"]
  - name: again
    limits: ["50 per minute"]
`
	addrs := []string{"198.51.100.10", "2001:db8:aaaa::5", "203.0.113.66", "198.51.100.7", "203.0.113.130",
		"203.0.113.195", "203.0.113.201", "203.0.113.20", "2001:db8:bbbb::9", "192.0.2.44", "2001:db8:1:2::3", "::ffff:192.0.2.45"}
	uas := []string{"", "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "SomeBot/1.0", "Mozilla/5.0 (X11; Linux x86_64)"}
	paths := []string{"/", "/login", "/.git/config", "/.env", "/img/a.png"}
	rnd := rand.New(rand.NewPCG(8, 9))
	for _, cfgText := range []string{classifyConfig, sigCfg} {
		c := mustParse(t, cfgText, testOptions)
		var kcs [2]KeyCache
		var worker KeyCache
		charges := 0
		for n := range 20000 {
			e := parser.Entry{IP: netip.MustParseAddr(addrs[rnd.IntN(len(addrs))]), Time: time.Unix(1700000000, 0),
				Method: []string{"GET", "POST"}[rnd.IntN(2)], Path: paths[rnd.IntN(len(paths))], Status: []int{200, 403, 404, 500}[rnd.IntN(4)],
				Has: parser.HasMethod | parser.HasPath | parser.HasStatus}
			if ua := uas[rnd.IntN(len(uas))]; ua != "" {
				e.UserAgent, e.Has = ua, e.Has|parser.HasUserAgent
			}
			if rnd.IntN(2) == 0 {
				e.User, e.Has = fmt.Sprint("u", rnd.IntN(5)), e.Has|parser.HasUser
			}
			srcs := append(slices.Clone(c.Sources), nil)
			src := srcs[rnd.IntN(len(srcs))]
			var cl *Claim
			if rnd.IntN(2) == 0 {
				cl = ptr(c.ClaimOf(&worker, src, &e))
			}
			noText := rnd.IntN(2) == 0
			var got [2][]Charge
			var v [2]Verdict
			for k, plain := range []bool{false, true} {
				kc := keyCache{cache: &kcs[k], noText: noText, claim: cl, plain: plain}
				got[k], v[k] = c.classify(&kc, src, &e, nil)
			}
			if !reflect.DeepEqual(got[1], got[0]) || v[0] != v[1] {
				t.Fatalf("entry %d (%s %q %s, text %v): verdict %v, plain %v; charges\n%+v\nplain\n%+v", n, e.IP, e.UserAgent, e.Path, !noText, v[0], v[1], got[0], got[1])
			}
			charges += len(got[0])
		}
		if charges == 0 {
			t.Fatal("no charge made")
		}
	}
}
