package rules

import (
	"net/netip"
	"slices"

	"gopkg.in/yaml.v3"

	"github.com/logjail/logjail/goodbots"
)

// GoodBotsRule is the name of the rule verified crawlers are charged to,
// each under its own key range:NAME (package goodbots names them:
// range:googlebot, range:bingbot, ...). An ordinary rule may not take
// the name while good_bots is on.
const GoodBotsRule = "good_bots"

// Good bots' verification modes (good_bots.verify).
const (
	VerifyRanges = "ranges" // published ranges only: deterministic, what replay uses
	VerifyDNS    = "dns"    // also forward-confirmed reverse DNS, with Options.Verifier
	VerifyOff    = "off"    // crawlers are ordinary clients
)

// goodBotsDefault is good_bots when the configuration leaves it, or some
// of its keys, out (example.yaml shows the same).
const goodBotsDefault = `verify: ranges
limits: ["20 per second", "2000 per minute"]
ban: {for: 10m}
`

var goodBotsKeys = []string{"verify", "limits", "combine", "throttle", "ban", "log_only"}

// goodBots reads good_bots (or its default) and adds its rule.
func (b *builder) goodBots(fields map[string]field, o Options) {
	c := b.c
	var def yaml.Node
	if err := yaml.Unmarshal([]byte(goodBotsDefault), &def); err != nil {
		panic(err) // a constant
	}
	defFile := b.file
	b.file = "(good_bots default)"
	defaults := b.mapping(def.Content[0], GoodBotsRule, goodBotsKeys...)
	b.file = defFile
	var given []field
	node := def.Content[0]
	if f, ok := fields[GoodBotsRule]; ok {
		given = b.mapping(f.val, f.path, goodBotsKeys...)
		node = f.val
	}
	for _, d := range defaults {
		if !slices.ContainsFunc(given, func(g field) bool { return g.key.Value == d.key.Value }) {
			given = append(given, d)
		}
	}
	var body []field
	for _, f := range given {
		if f.key.Value == "verify" {
			b.oneOf(f.val, f.path, &c.GoodBotsVerify, VerifyRanges, VerifyDNS, VerifyOff)
			continue
		}
		body = append(body, f)
	}
	if c.GoodBotsVerify == VerifyOff || c.GoodBotsVerify == "" {
		return
	}
	if _, ok := c.ruleIndex[GoodBotsRule]; ok {
		at, path := node, GoodBotsRule
		if f, ok := fields["rules"]; ok {
			if r := resolve(f.val); r != nil && r.Kind == yaml.SequenceNode {
				for i, item := range r.Content {
					for j := 0; item.Kind == yaml.MappingNode && j+1 < len(item.Content); j += 2 {
						if item.Content[j].Value == "name" && item.Content[j+1].Value == GoodBotsRule {
							at, path = item.Content[j+1], index("rules", i)+".name"
						}
					}
				}
			}
		}
		b.errorf(at, path, "%q is the name of good_bots' own rule: rename the rule, or set good_bots: {verify: off}", GoodBotsRule)
		return
	}
	r := &Rule{Name: GoodBotsRule, Index: len(c.Rules)}
	b.ruleBody(r, node, GoodBotsRule, body, true)
	c.ruleSpecs = growSpecs(c.ruleSpecs, r.Index)
	c.ruleIndex[r.Name] = r.Index
	c.Rules = append(c.Rules, r)
	c.botsRule = r.Index
	c.bots = o.Verifier
	if c.GoodBotsVerify == VerifyRanges || c.bots == nil {
		c.bots = goodbots.NewVerifier(goodbots.Options{})
	}
	c.botKeys = map[string]string{}
	c.botRanges = map[string][]netip.Prefix{}
	for _, bot := range goodbots.Bots() {
		if bot.Kind != goodbots.Crawler {
			continue
		}
		k := "range:" + bot.Name
		c.botKeys[bot.Name] = k
		for _, p := range bot.Ranges {
			c.botRanges[k] = append(c.botRanges[k], p)
		}
	}
}

// botGroupRanges adds to out (GroupRanges) the published ranges of the
// crawlers, by key, less the operator's ranges (an address in a range of
// the operator's goes by that range first).
func (c *Config) botGroupRanges(out map[string][]netip.Prefix) {
	for k, ps := range c.botRanges {
		for _, p := range ps {
			covered := false
			for range c.ranges.Supernets(p) {
				covered = true
				break
			}
			if covered {
				continue
			}
			var holes []netip.Prefix
			for q := range c.ranges.Subnets(p) {
				holes = append(holes, q)
			}
			out[k] = append(out[k], carve(p, holes)...)
		}
	}
}

// botKeysContaining appends to keys the range:NAME of every crawler whose
// published ranges hold a (KeysContaining).
func (c *Config) botKeysContaining(a netip.Addr, keys []string) []string {
	for k, ps := range c.botRanges {
		if slices.ContainsFunc(ps, func(p netip.Prefix) bool { return p.Contains(a) }) && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}
