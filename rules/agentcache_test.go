package rules

import (
	"math/rand/v2"
	"testing"

	"github.com/logjail/logjail/goodbots"
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
