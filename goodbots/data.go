package goodbots

import (
	"bufio"
	"bytes"
	_ "embed"
	"fmt"
	"net/netip"
	"strings"
	"sync"

	"github.com/gaissmai/bart"
)

//go:embed bots.txt
var botsTxt []byte

// Kind says what a user agent claims to be.
type Kind int

// Kinds.
const (
	None    Kind = iota // no known crawler or monitor
	Crawler             // a search engine's crawler, verifiable by its address
	Monitor             // an uptime monitor, recognised by its user agent only
)

func (k Kind) String() string {
	switch k {
	case Crawler:
		return "crawler"
	case Monitor:
		return "monitor"
	}
	return "none"
}

// Bot is one known crawler or monitor, as bots.txt describes it.
type Bot struct {
	Name    string         // its key's NAME: range:NAME
	Kind    Kind           // Crawler or Monitor
	Agents  []string       // user-agent tokens that claim it
	Domains []string       // reverse DNS domains (crawlers that publish them)
	Source  string         // where Ranges come from, and their date
	Ranges  []netip.Prefix // published ranges (crawlers that publish them)
}

// table is bots.txt compiled: the bots, their ranges as routing tables,
// and the user-agent tokens indexed for Agent. It never changes once
// built.
type table struct {
	bots   []Bot
	byName map[string]int
	ranges []*bart.Lite // by bot index; nil when the bot has no ranges
	agents agentIndex
}

// builtin is bots.txt, compiled once on first use. It is immutable: the
// package has no mutable state.
var builtin = sync.OnceValue(func() *table {
	t, err := parseTable(botsTxt)
	if err != nil {
		panic("goodbots: bots.txt: " + err.Error()) // TestBuiltin reads it
	}
	return t
})

// Bots returns the known crawlers and monitors, in the order of bots.txt.
func Bots() []Bot {
	t := builtin()
	out := make([]Bot, len(t.bots))
	for i, b := range t.bots {
		b.Agents = append([]string(nil), b.Agents...)
		b.Domains = append([]string(nil), b.Domains...)
		b.Ranges = append([]netip.Prefix(nil), b.Ranges...)
		out[i] = b
	}
	return out
}

// Crawlers returns the names of the known crawlers, in the order of
// bots.txt.
func Crawlers() []string {
	var out []string
	for _, b := range builtin().bots {
		if b.Kind == Crawler {
			out = append(out, b.Name)
		}
	}
	return out
}

// parseTable reads the bots.txt format (see the file's own header). An
// error names the line.
func parseTable(data []byte) (*table, error) {
	t := &table{byName: map[string]int{}}
	var cur *Bot
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		text = strings.TrimSpace(text)
		if text == "" {
			continue
		}
		word, rest, _ := strings.Cut(text, " ")
		rest = strings.TrimSpace(rest)
		switch word {
		case "crawler", "monitor":
			if rest == "" || strings.ContainsAny(rest, " \t") {
				return nil, fmt.Errorf("line %d: %s: want one name", line, word)
			}
			if _, dup := t.byName[rest]; dup {
				return nil, fmt.Errorf("line %d: %q listed twice", line, rest)
			}
			k := Crawler
			if word == "monitor" {
				k = Monitor
			}
			t.byName[rest] = len(t.bots)
			t.bots = append(t.bots, Bot{Name: rest, Kind: k})
			cur = &t.bots[len(t.bots)-1]
			continue
		}
		if cur == nil {
			return nil, fmt.Errorf("line %d: %q before the first crawler or monitor", line, word)
		}
		switch word {
		case "agent":
			if len(rest) < 2 {
				return nil, fmt.Errorf("line %d: agent: want a token of at least 2 bytes", line)
			}
			cur.Agents = append(cur.Agents, rest)
		case "dns", "source":
			if cur.Kind != Crawler {
				return nil, fmt.Errorf("line %d: %s: only for a crawler", line, word)
			}
			if rest == "" {
				return nil, fmt.Errorf("line %d: %s: empty", line, word)
			}
			if word == "source" {
				cur.Source = rest
				continue
			}
			for _, d := range strings.Fields(rest) {
				cur.Domains = append(cur.Domains, strings.ToLower(strings.Trim(d, ".")))
			}
		default:
			if cur.Kind != Crawler {
				return nil, fmt.Errorf("line %d: %q: a monitor has agents only", line, word)
			}
			for _, s := range strings.Fields(text) {
				p, err := parseCIDR(s)
				if err != nil {
					return nil, fmt.Errorf("line %d: %v", line, err)
				}
				cur.Ranges = append(cur.Ranges, p)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	t.ranges = make([]*bart.Lite, len(t.bots))
	for i, b := range t.bots {
		if len(b.Agents) == 0 {
			return nil, fmt.Errorf("%s: no agent", b.Name)
		}
		if len(b.Ranges) > 0 && b.Source == "" {
			return nil, fmt.Errorf("%s: ranges without a source", b.Name)
		}
		if len(b.Ranges) > 0 {
			t.ranges[i] = new(bart.Lite)
			for _, p := range b.Ranges {
				t.ranges[i].Insert(p)
			}
		}
	}
	agents, err := newAgentIndex(t.bots)
	if err != nil {
		return nil, err
	}
	t.agents = agents
	return t, nil
}

// parseCIDR reads a CIDR or a single address (a full-length prefix).
func parseCIDR(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil || p.Bits() < 8 {
			return netip.Prefix{}, fmt.Errorf("%q: not a CIDR of at least 8 bits", s)
		}
		if p.Masked() != p {
			return netip.Prefix{}, fmt.Errorf("%q: host bits set", s)
		}
		return p, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("%q: not an address or CIDR", s)
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}
