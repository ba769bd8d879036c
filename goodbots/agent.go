package goodbots

import (
	"fmt"
	"slices"
	"strings"
)

// Agent says which known crawler or monitor the user agent ua claims to
// be: its name and kind, or ("", None). A token of bots.txt matches as a
// whole word, ASCII case ignored: letters, digits and '-' continue a word,
// so "Googlebot" matches "Mozilla/5.0 (compatible; Googlebot/2.1; ...)"
// and "Googlebot-Image/1.0" (a token of its own), not "Googlebot-like" nor
// "NotGooglebot". The first token found, from the left, wins.
//
// Agent runs on every log line: it allocates nothing and looks at each
// word of ua once, through a filter on the word's first two bytes, before
// comparing any token. A claim is only a claim: Verifier.Verify says
// whether the address is the crawler's.
func Agent(ua string) (name string, kind Kind) {
	t := builtin()
	if i := t.agents.find(ua); i >= 0 {
		return t.bots[i].Name, t.bots[i].Kind
	}
	return "", None
}

// agentIndex finds the tokens of bots.txt in a user agent.
type agentIndex struct {
	// first has bit k set when some token starts with the two bytes k
	// (lower case, as key makes it).
	first  [1 << 16 / 64]uint64
	tokens []agentToken // by key, longer first
}

type agentToken struct {
	text string // lower case
	key  uint16
	bot  int // index in table.bots
}

// lowerASCII and wordByte are tables over bytes, built once; they never
// change.
var (
	lowerASCII = func() (t [256]byte) {
		for i := range t {
			t[i] = byte(i)
			if 'A' <= i && i <= 'Z' {
				t[i] += 'a' - 'A'
			}
		}
		return t
	}()
	wordByte = func() (t [256]bool) {
		for i := range t {
			c := byte(i)
			t[i] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-'
		}
		return t
	}()
)

func key(a, b byte) uint16 { return uint16(lowerASCII[a])<<8 | uint16(lowerASCII[b]) }

func newAgentIndex(bots []Bot) (agentIndex, error) {
	var ix agentIndex
	seen := map[string]string{}
	for bi, b := range bots {
		for _, a := range b.Agents {
			low := strings.ToLower(a)
			if other, dup := seen[low]; dup {
				return ix, fmt.Errorf("agent %q: listed for %s and %s", a, other, b.Name)
			}
			seen[low] = b.Name
			if !wordByte[low[0]] || low[0] == '-' {
				return ix, fmt.Errorf("agent %q: must start with a letter or digit", a)
			}
			k := key(low[0], low[1])
			ix.first[k/64] |= 1 << (k % 64)
			ix.tokens = append(ix.tokens, agentToken{text: low, key: k, bot: bi})
		}
	}
	slices.SortStableFunc(ix.tokens, func(a, b agentToken) int {
		if a.key != b.key {
			return int(a.key) - int(b.key)
		}
		return len(b.text) - len(a.text)
	})
	return ix, nil
}

// find returns the bot index of the first token found in ua, or -1.
func (ix *agentIndex) find(ua string) int {
	n := len(ua)
	for i := 0; i+1 < n; {
		if !wordByte[ua[i]] {
			i++
			continue
		}
		// A word starts at i (every token starts with a letter or digit).
		if k := key(ua[i], ua[i+1]); ix.first[k/64]&(1<<(k%64)) != 0 {
			if bot := ix.at(ua, i, k); bot >= 0 {
				return bot
			}
		}
		for i++; i < n && wordByte[ua[i]]; i++ {
		}
	}
	return -1
}

// at returns the bot of the token with first bytes k that is a word at
// ua[i:], or -1.
func (ix *agentIndex) at(ua string, i int, k uint16) int {
	j, _ := slices.BinarySearchFunc(ix.tokens, k, func(t agentToken, k uint16) int { return int(t.key) - int(k) })
	for ; j < len(ix.tokens) && ix.tokens[j].key == k; j++ {
		t := &ix.tokens[j]
		end := i + len(t.text)
		if end > len(ua) || !equalLower(ua[i:end], t.text) {
			continue
		}
		if end < len(ua) && wordByte[ua[end]] && wordByte[t.text[len(t.text)-1]] {
			continue // the word goes on: "Googlebot-like"
		}
		return t.bot
	}
	return -1
}

// equalLower reports whether s, ASCII case ignored, is low (lower case).
func equalLower(s, low string) bool {
	for i := 0; i < len(low); i++ {
		if lowerASCII[s[i]] != low[i] {
			return false
		}
	}
	return true
}
