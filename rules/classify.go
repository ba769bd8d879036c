package rules

import (
	"math/bits"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/logjail/logjail/goodbots"
	"github.com/logjail/logjail/internal/word"
	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/rotation"
)

// MaxUserAgentKey is the longest user agent text a key keeps, in bytes; a
// longer one is cut (at a character boundary), so that one client cannot
// make keys of unbounded size. The cut comes before escaping (see uaKey):
// the key's text is at most four times as long.
const MaxUserAgentKey = 512

// Classify decides what the entry e, read from src, is charged to, and
// appends the charges to dst:
//
//   - an allowed address (allow list, the host's own addresses, a trusted
//     proxy) is charged to nothing: VerdictAllowed;
//   - an address on the deny list or in a `banned` range: VerdictDenied;
//   - an address whose most specific range is `none`: VerdictExempt;
//   - an address whose most specific range has limits is charged to that
//     range's rule only, under `range:NAME` when the range is a group;
//   - under good_bots, an entry whose user agent claims a crawler
//     (goodbots.Agent) from an address verified for it is charged to the
//     rule good_bots only, under the crawler's one key range:NAME; a claim
//     from an address not verified is charged as below, each Charge's
//     Claims naming the crawler;
//   - any other entry is charged to every ordinary rule that sees src and
//     whose match it matches. A user rule does not charge an entry without a
//     user.
//
// src may be nil (an entry of no known source): then only the rules without
// `sources` see it. Classify allocates nothing but the key strings it builds.
func (c *Config) Classify(src *Source, e *parser.Entry, dst []Charge) ([]Charge, Verdict) {
	return c.ClassifyCached(nil, src, e, dst)
}

// KeyCache remembers the `ip` and `prefix` key strings of recent addresses
// for one Config, so that a caller classifying a stream of entries (a
// pipeline) does not format the same address for every request. It holds at
// most KeyCacheSize addresses of each kind and starts over when full. A
// KeyCache is used by one goroutine and belongs to one Config (the keys
// depend on ipv6_prefix and ipv4_prefix). The zero value is ready.
// ClassifyKeys makes no address key text but for ADDRESS|ua:TEXT keys:
// there it holds those addresses' texts only (and the user agents).
type KeyCache struct {
	ip, prefix map[netip.Addr]string
	// agents remembers goodbots.Agent of recent user agents (good_bots):
	// a log repeats its user agents, and a look here costs less than the
	// scan. It is a table of agentSlots slots, two ways a set (a user
	// agent lives in its slot or in the slot's twin, the newer of the two
	// in the first), indexed by a hash of the text's length and five of
	// its 8-byte words (agentHash), not of every byte, and checked by a
	// compare of the whole text: a hash that misleads costs a miss, never a
	// wrong answer. At most agentSlots user agents of at most
	// MaxUserAgentKey bytes (about 2 MB); made at the first look.
	agents []agentSlot
}

// agentSlots is the size of KeyCache.agents.
const agentSlots = 1 << 12

type agentSlot struct {
	ua, name string
	kind     goodbots.Kind
}

// agent is goodbots.Agent(ua), through the cache when there is one.
func (k *KeyCache) agent(ua string) (string, goodbots.Kind) {
	if k == nil || len(ua) > MaxUserAgentKey || ua == "" {
		return goodbots.Agent(ua)
	}
	if k.agents == nil {
		k.agents = make([]agentSlot, agentSlots)
	}
	i := agentHash(ua) & (agentSlots - 1)
	s := &k.agents[i]
	if s.ua == ua {
		return s.name, s.kind
	}
	if t := &k.agents[i^1]; t.ua == ua {
		return t.name, t.kind
	}
	name, kind := goodbots.Agent(ua)
	if s.ua != "" {
		k.agents[i^1] = *s // the older goes to the twin slot
	}
	*s = agentSlot{ua: strings.Clone(ua), name: name, kind: kind}
	return name, kind
}

// agentHash hashes a user agent's length and five of its 8-byte words
// (first, last, and three between): user agents of one log differ in
// their versions and platforms, which these words reach, and the cost
// stays the same for a long text.
func agentHash(s string) uint32 {
	n := len(s)
	h := uint64(n) * 0x9e3779b97f4a7c15
	if n < 8 {
		for i := 0; i < n; i++ {
			h = (h ^ uint64(s[i])) * 0x100000001b3
		}
	} else {
		h ^= word.LE(s, 0)
		h = bits.RotateLeft64(h*0x9e3779b97f4a7c15, 29) ^ word.LE(s, (n-8)/4)
		h = bits.RotateLeft64(h*0x9e3779b97f4a7c15, 29) ^ word.LE(s, (n-8)/2)
		h = bits.RotateLeft64(h*0x9e3779b97f4a7c15, 29) ^ word.LE(s, (n-8)*3/4)
		h = bits.RotateLeft64(h*0x9e3779b97f4a7c15, 29) ^ word.LE(s, n-8)
	}
	h *= 0xff51afd7ed558ccd
	return uint32(h >> 32)
}

// KeyCacheSize bounds a KeyCache: about 4 MB when full.
const KeyCacheSize = 1 << 16

func (k *KeyCache) get(m *map[netip.Addr]string, a netip.Addr, build func(netip.Addr) string) string {
	if s, ok := (*m)[a]; ok {
		return s
	}
	if *m == nil || len(*m) >= KeyCacheSize {
		*m = make(map[netip.Addr]string, 1024)
	}
	s := build(a)
	(*m)[a] = s
	return s
}

// Claim is what classifying an entry reads of the configuration alone,
// found ahead (ClaimOf): where its address is in the allow list, the deny
// list and the ranges, what good_bots reads of its user agent
// (goodbots.Agent: the crawler or monitor it names), and which of the
// ordinary rules that see its source its fields match (each rule's
// `match`). Replay's parse workers find it beside the line they have just
// read, so that the merger does neither the three lookups nor the rules'
// matching, nor reads the user agent's text again. The verification of a
// crawler's address is not in it (a DNS verifier has a cache of its own),
// nor a rule's `signatures:` (the pattern's name goes into the charge). The
// zero Claim is none found: classifying looks itself.
type Claim struct {
	name  string
	kind  goodbots.Kind
	found bool
	list  uint8 // claimAllowed, claimDenied or claimRange: the first that holds
	rng   int32 // with claimRange: the range's index (ranges.Lookup)
	// matched has bit i set when rule i's match matches the entry (or it
	// has none), for the ordinary rules that see src; valid with ruled,
	// for that source only (a configuration of at most 64 rules).
	matched uint64
	ruled   bool
	src     *Source
}

// Claim.list.
const (
	claimAllowed uint8 = 1 + iota
	claimDenied
	claimRange
)

// ClaimOf returns e's Claim under c, for an entry of source src (nil: of
// no known source), through k's cache of user agents. k is the caller's own
// (a KeyCache is used by one goroutine); a worker's may be another than the
// classifying pipeline's.
func (c *Config) ClaimOf(k *KeyCache, src *Source, e *parser.Entry) Claim {
	var cl Claim
	c.ClaimTo(k, src, e, &cl)
	return cl
}

// ClaimTo is ClaimOf writing the Claim into *cl (all of it), in place: a
// caller that keeps its claims in a slice (replay's blocks) copies none.
func (c *Config) ClaimTo(k *KeyCache, src *Source, e *parser.Entry, cl *Claim) {
	list, rng := c.lists(e.IP)
	*cl = Claim{found: true, list: list, rng: rng}
	if list != 0 {
		return // classifying reads no user agent, nor the ordinary rules
	}
	if c.bots != nil && e.Has&parser.HasUserAgent != 0 {
		cl.name, cl.kind = k.agent(e.UserAgent)
	}
	if len(c.Rules) <= 64 {
		// The rules without a match hold for every entry (plainOf); those
		// with one are asked.
		src = c.sourceOf(src)
		at := len(c.Sources)
		if src != nil {
			at = src.Index
		}
		matched := c.plainOf[at]
		for _, i := range c.matchOf[at] {
			if c.ruleSpecs[i].match.match(e) {
				matched |= 1 << i
			}
		}
		cl.ruled, cl.src, cl.matched = true, src, matched
	}
}

// sourceOf is src as c knows it: a source of another compile of the
// configuration (a reload) by its name.
func (c *Config) sourceOf(src *Source) *Source {
	if src != nil && (src.Index >= len(c.Sources) || c.Sources[src.Index] != src) {
		return c.Source(src.Name)
	}
	return src
}

// rulesOf returns the indexes of the ordinary rules that see src's
// entries (nil src: the rules without `sources`).
func (c *Config) rulesOf(src *Source) []int {
	if src != nil {
		return c.bySource[src.Index]
	}
	return c.noSource
}

// lists says where a is in the allow list, the deny list and the ranges,
// the first that holds (Claim.list, 0: none), and with claimRange the
// range's index.
func (c *Config) lists(a netip.Addr) (list uint8, rng int32) {
	if !c.listed.has(firstByte(a)) {
		return 0, 0 // no prefix of the three starts with a's first byte (firstBytes.may)
	}
	return c.lookLists(a)
}

// lookLists is lists by the three look-ups alone.
func (c *Config) lookLists(a netip.Addr) (list uint8, rng int32) {
	switch {
	case c.allow.Contains(a):
		return claimAllowed, 0
	case c.deny.Contains(a):
		return claimDenied, 0
	}
	if ri, ok := c.ranges.Lookup(a); ok {
		return claimRange, int32(ri)
	}
	return 0, 0
}

// firstBytes is a set of first bytes of addresses, one bit a byte: IPv6
// in bits 0 to 255, IPv4 in bits 256 to 511 (an IPv4-mapped IPv6 address
// and a zoned one are IPv6, as the lists' tables read them: by their 16
// bytes).
type firstBytes struct{ bits [8]uint64 }

// add adds the first bytes of p's addresses: one byte for a prefix of 8
// bits or more, the 2^(8-bits) bytes it spans for a shorter one.
func (f *firstBytes) add(p netip.Prefix) {
	if !p.IsValid() {
		return
	}
	a, at := p.Addr(), 0
	first := int(a.As16()[0])
	if a.Is4() {
		first, at = int(a.As4()[0]), 256
	}
	span := 1
	if bits := p.Bits(); bits < 8 {
		span = 1 << (8 - bits)
	}
	for b := at + first&^(span-1); b < at+first&^(span-1)+span; b++ {
		f.bits[b>>6] |= 1 << (b & 63)
	}
}

// may reports whether a prefix added may hold a: its first byte is in
// the set. The zero Addr (in no list: the look-ups find nothing for it)
// reads as IPv6 byte 0.
func (f *firstBytes) may(a netip.Addr) bool { return f.has(firstByte(a)) }

// has reports whether bit i (a firstByte) is in the set: may's step,
// which lists calls itself (may does not inline, has does).
func (f *firstBytes) has(i uint) bool { return f.bits[i/64%8]&(1<<(i%64)) != 0 }

// firstByte is a's bit in a firstBytes: its first byte, plus 256 for
// IPv4. One byte of As16's result, not a copy of its 16 (two 8-byte
// stores read back as one 16-byte load stalled).
func firstByte(a netip.Addr) uint {
	if a.Is4() {
		return 256 | uint(a.As16()[12]) // ::ffff:a.b.c.d
	}
	return uint(a.As16()[0])
}

// ClassifyClaimed is ClassifyKeys with e's Claim found ahead (ClaimOf under
// c; nil: none): the same charges and verdict.
func (c *Config) ClassifyClaimed(kcache *KeyCache, src *Source, e *parser.Entry, cl *Claim, dst []Charge) ([]Charge, Verdict) {
	kc := keyCache{cache: kcache, noText: true, claim: cl}
	return c.classify(&kc, src, e, dst)
}

// ClassifyCached is Classify with a KeyCache (nil: none).
func (c *Config) ClassifyCached(kcache *KeyCache, src *Source, e *parser.Entry, dst []Charge) ([]Charge, Verdict) {
	kc := keyCache{cache: kcache}
	return c.classify(&kc, src, e, dst)
}

// ClassifyKeys is ClassifyCached for a caller that feeds the charges to a
// detector and reads no key text: an address or prefix key is carried as
// Charge.Fixed alone (Key is ""), so that no key text is made for a line.
// Every other key is as ClassifyCached makes it.
func (c *Config) ClassifyKeys(kcache *KeyCache, src *Source, e *parser.Entry, dst []Charge) ([]Charge, Verdict) {
	kc := keyCache{cache: kcache, noText: true}
	return c.classify(&kc, src, e, dst)
}

func (c *Config) classify(kc *keyCache, src *Source, e *parser.Entry, dst []Charge) ([]Charge, Verdict) {
	kcache := kc.cache
	a := e.IP
	cl := kc.claim // read, never written: it may be a block's (replay's workers)
	var own Claim  // none found ahead: the lists looked up here
	if cl == nil || !cl.found {
		own.list, own.rng = c.lists(a)
		cl = &own
	}
	switch cl.list {
	case claimAllowed:
		return dst, VerdictAllowed
	case claimDenied:
		return dst, VerdictDenied
	}
	src = c.sourceOf(src)
	cpu := 0.0
	switch {
	case e.Has&parser.HasCPU != 0:
		cpu = e.CPU
	case src != nil && src.CPUFallback == "duration" && e.Has&parser.HasDuration != 0:
		cpu = e.Duration
	}
	dur := 0.0
	if e.Has&parser.HasDuration != 0 {
		dur = e.Duration
	}
	if cl.list == claimRange {
		rg := &c.rangeDefs[cl.rng]
		switch rg.mode {
		case rangeNone:
			return dst, VerdictExempt
		case rangeBanned:
			return dst, VerdictDenied
		}
		sig, ok := c.ruleSpecs[rg.rule].signature(e)
		if !ok {
			return dst, VerdictCharged
		}
		r := c.Rules[rg.rule]
		key, fixed := rg.key, FixedKey{}
		if !rg.group {
			if key, fixed, ok = kc.key(c, r.Key, e); !ok {
				return dst, VerdictCharged
			}
		}
		return append(dst, Charge{Rule: r, Key: key, Fixed: fixed, Addr: a, CPU: cpu, Duration: dur, Signature: sig}), VerdictCharged
	}
	var claims string
	if c.bots != nil && e.Has&parser.HasUserAgent != 0 {
		// Only a user agent that claims a crawler pays for a range lookup.
		name, kind := cl.name, cl.kind
		if !cl.found {
			name, kind = kcache.agent(e.UserAgent)
		}
		if kind == goodbots.Crawler {
			if c.bots.Verify(a, name) == goodbots.Verified {
				return append(dst, Charge{Rule: c.Rules[c.botsRule], Key: c.botKeys[name], Addr: a, CPU: cpu, Duration: dur}), VerdictCharged
			}
			claims = name
		}
	}
	// The rules that see src and whose match e matches, in their order:
	// with the matching found ahead for src (ruled), the bits of
	// cl.matched (set for those rules only, lowest first), else each rule
	// of src's matched here.
	ruled := cl.ruled && cl.src == src
	rs := c.rulesOf(src)
	var left uint64
	if ruled {
		left, rs = cl.matched, nil
	}
	for k := 0; ; k++ {
		var i int
		switch {
		case left != 0:
			i = bits.TrailingZeros64(left)
			left &= left - 1
		case k < len(rs):
			i = rs[k]
			if m := c.ruleSpecs[i].match; m != nil && !m.match(e) {
				continue
			}
		default:
			return dst, VerdictCharged
		}
		sig, ok := "", true
		if sp := &c.ruleSpecs[i]; sp.sigs != nil || kc.plain { // signature's first step, without the call
			if sig, ok = sp.signature(e); !ok {
				continue
			}
		}
		r := c.Rules[i]
		var key string
		var fixed FixedKey
		if r.Key == KeyIP && kc.noText && !kc.plain {
			// key's steps for an address key without its text (most
			// charges), without the call.
			if kc.ipF.IsZero() {
				kc.ipF = c.IPFixed(a)
			}
			key, fixed = kc.ip, kc.ipF
		} else if key, fixed, ok = kc.key(c, r.Key, e); !ok {
			continue
		}
		// Every field set in place: no Charge built aside and copied.
		n := len(dst)
		if n == cap(dst) {
			dst = slices.Grow(dst, 1)
		}
		dst = dst[:n+1]
		ch := &dst[n]
		ch.Rule, ch.Key, ch.Fixed, ch.Addr, ch.CPU, ch.Duration, ch.Claims, ch.Signature = r, key, fixed, a, cpu, dur, claims, sig
	}
}

// keyCache builds each kind of key of one entry at most once: an address
// or prefix key as a FixedKey, and its text unless noText (ClassifyKeys).
type keyCache struct {
	ip, prefix, ua string
	ipF, prefixF   FixedKey
	cache          *KeyCache
	noText         bool
	claim          *Claim // the entry's, when found ahead (ClassifyClaimed); nil: none
	// plain calls key and signature for every charge, as before classify
	// took their first steps itself (TestClassifyStepsAsCalls).
	plain bool
}

func (kc *keyCache) ipKey(c *Config, e *parser.Entry) {
	switch {
	case kc.ip != "":
	case kc.cache != nil:
		kc.ip = kc.cache.get(&kc.cache.ip, e.IP, c.IPKey)
	default:
		kc.ip = c.IPKey(e.IP)
	}
}

func (kc *keyCache) key(c *Config, k KeyKind, e *parser.Entry) (string, FixedKey, bool) {
	switch k {
	case KeyIP:
		if kc.ipF.IsZero() {
			kc.ipF = c.IPFixed(e.IP)
		}
		if !kc.noText {
			kc.ipKey(c, e)
		}
		return kc.ip, kc.ipF, true
	case KeyPrefix:
		if kc.prefixF.IsZero() {
			kc.prefixF = c.PrefixFixed(e.IP)
		}
		if kc.prefix == "" && !kc.noText {
			if kc.cache != nil {
				kc.prefix = kc.cache.get(&kc.cache.prefix, e.IP, c.PrefixKey)
			} else {
				kc.prefix = c.PrefixKey(e.IP)
			}
		}
		return kc.prefix, kc.prefixF, true
	case KeyUser:
		if e.Has&parser.HasUser == 0 || e.User == "" {
			return "", FixedKey{}, false
		}
		return "user:" + parser.Printable(e.User), FixedKey{}, true
	case KeyUserAgent:
		if kc.ua == "" {
			kc.ua = uaKey(e)
		}
		return kc.ua, FixedKey{}, true
	case KeyIPUserAgent:
		kc.ipKey(c, e)
		if kc.ua == "" {
			kc.ua = uaKey(e)
		}
		return kc.ip + "|" + kc.ua, FixedKey{}, true
	}
	return "", FixedKey{}, false
}

// uaKey is "ua:TEXT"; an entry without a user agent is "ua:". TEXT is
// parser.Printable of at most MaxUserAgentKey bytes of the user agent, as a
// user key's NAME is of the user: a key never holds a control character
// (a NUL, a newline, an ESC) nor a byte that is not UTF-8, so that every
// action, file, argv and terminal it reaches gets it as printable text.
func uaKey(e *parser.Entry) string {
	if e.Has&parser.HasUserAgent == 0 {
		return "ua:"
	}
	ua := e.UserAgent
	if len(ua) > MaxUserAgentKey {
		n := MaxUserAgentKey
		for n > 0 && !utf8.RuneStart(ua[n]) {
			n--
		}
		ua = ua[:n]
	}
	return "ua:" + parser.Printable(ua)
}

// IPKey is the key of a under `key: ip`: the address, or for IPv6 its
// ipv6_prefix written as a prefix ("2001:db8:1:2::/64"; the address itself
// when ipv6_prefix is 128).
func (c *Config) IPKey(a netip.Addr) string {
	a = a.Unmap()
	if a.Is6() && c.IPv6Prefix < 128 {
		return netip.PrefixFrom(a.WithZone(""), c.IPv6Prefix).Masked().String()
	}
	return a.WithZone("").String()
}

// PrefixKey is the key of a under `key: prefix`: its ipv4_prefix or
// ipv6_prefix written as a prefix ("203.0.113.0/24"); a full-length prefix is
// written as the address, so one set of addresses has one key.
func (c *Config) PrefixKey(a netip.Addr) string {
	a = a.Unmap().WithZone("")
	bits := c.IPv4Prefix
	if a.Is6() {
		bits = c.IPv6Prefix
	}
	if bits >= a.BitLen() {
		return a.String()
	}
	return netip.PrefixFrom(a, bits).Masked().String()
}

// SourceFor returns the source whose paths match path, rotated siblings
// included (package rotation's model: .1, .2.gz, -20261122, .2026-11-22.xz,
// and the files in the source's olddir); else the only source when there
// is one; else nil. Both path as given and its absolute form are tried.
func (c *Config) SourceFor(path string) *Source {
	cands := []string{filepath.Clean(path)}
	if abs, err := filepath.Abs(path); err == nil && abs != cands[0] {
		cands = append(cands, abs)
	}
	for _, s := range c.Sources {
		for _, g := range s.Paths {
			globs := []string{g}
			if abs, err := filepath.Abs(g); err == nil && abs != g {
				globs = append(globs, abs)
			}
			for _, g := range globs {
				for _, p := range cands {
					if globMatches(g, p, s.OldDir) {
						return s
					}
				}
			}
		}
	}
	if len(c.Sources) == 1 {
		return c.Sources[0]
	}
	return nil
}

// globMatches reports whether p, or a log p is a rotated sibling of (in
// the olddir too), matches the glob g.
func globMatches(g, p, olddir string) bool {
	if ok, _ := filepath.Match(g, p); ok {
		return true
	}
	for _, base := range rotation.Bases(p, olddir, filepath.Dir(g)) {
		if ok, _ := filepath.Match(g, base); ok {
			return true
		}
	}
	return false
}

// KeysContaining returns the address keys that contain a, as `list --key`
// and `unban` look them up: its ip key, its prefix key when that differs,
// and range:NAME for every group range that contains it, most specific
// first. Keys of users and user agents cannot be derived from an address.
func (c *Config) KeysContaining(a netip.Addr) []string {
	a = a.Unmap().WithZone("")
	keys := []string{c.IPKey(a)}
	if p := c.PrefixKey(a); !slices.Contains(keys, p) {
		keys = append(keys, p)
	}
	for _, ri := range c.ranges.Supernets(netip.PrefixFrom(a, a.BitLen())) {
		if rg := c.rangeDefs[ri]; rg.group && !slices.Contains(keys, rg.key) {
			keys = append(keys, rg.key)
		}
	}
	return c.botKeysContaining(a, keys)
}

// AllowedKey reports whether every address a ban of key would block is
// allowed (Allowed): an address or prefix key inside the allow list, the
// host's addresses or a trusted proxy; an ADDRESS|ua:TEXT key whose address
// part is; range:NAME when every CIDR of the group range is. Keys of users
// and user agents block the addresses seen on them, which the key does not
// say: false. A reload lifts the rule bans of the keys it makes allowed.
func (c *Config) AllowedKey(key string) bool {
	if strings.HasPrefix(key, "range:") {
		cidrs := c.GroupRanges()[key]
		for _, p := range cidrs {
			if !c.allow.LookupPrefix(p) {
				return false
			}
		}
		return len(cidrs) > 0
	}
	if a, _, ok := strings.Cut(key, "|ua:"); ok {
		key = a
	}
	p, err := parsePrefix(key)
	if err != nil {
		return false
	}
	return c.allow.LookupPrefix(p)
}
