// The iptables action: bans enforced by iptables and ip6tables in a chain of
// logjail's own (LOGJAIL by default) in table filter.
//
// What the operator should know:
//
//   - The chain is made, and the jump to it inserted at the top of each
//     `from` chain (INPUT by default; FORWARD, DOCKER-USER), by Sync, for
//     IPv4 and IPv6 alike. Close leaves both in place, so that a restart opens
//     no gap; `logjail clean --flush` (Flush) removes the jumps, the chain and
//     the sets. The chain is logjail's: Sync removes any rule in it that it
//     did not put there.
//   - mode: rules (the default) holds one rule per blocked prefix. A change
//     is one iptables-restore --noflush transaction per family whatever its
//     size, and Sync rewrites the chain atomically when it differs from the
//     store's bans, so a rule is never missing while the chain is rebuilt.
//     iptables walks the rules one by one for every new connection, and with
//     the nf_tables backend each command reloads the whole ruleset: past a
//     few thousand bans use mode: ipset.
//   - mode: ipset holds the prefixes in the ipset sets <chain>-v4 and
//     <chain>-v6 (lowercased: logjail-v4), hash:net with kernel timeouts: a
//     ban ends in the kernel at its Until even when logjail is not running.
//     The chain then holds two rules per family. Set names are at most 31
//     characters, so the chain name is at most 22 in this mode.
//   - Allowed prefixes that lie inside a blocked one get a RETURN rule at the
//     top of the chain (rules mode) or a member in <chain>-allow-v4/-v6
//     (ipset mode), kept as bans come and go.
//   - ports limits the block to those destination ports (at most 15, one
//     multiport match) of protocol (tcp by default); without ports every
//     packet from a blocked prefix is dropped (target DROP) or rejected with
//     ICMP port unreachable (target REJECT).
//   - A prefix of length 0 (every address) is never blocked: hash:net cannot
//     hold it, and a rule for it would cut the host off; Sync and Apply
//     report it as an error and enforce the rest.
//   - from: DOCKER-USER exists only once Docker has started. Missing from
//     iptables it is an error (the manager retries Sync, which inserts the
//     jump once Docker made the chain: the bans are in our chain already).
//     Missing from ip6tables it is skipped: Docker without IPv6 support
//     forwards no IPv6 to containers.
//   - When ip6tables (or iptables) cannot be used, the other family works and
//     every entry of the unusable family is reported as an error by Sync and
//     Apply.
//
// Every rule and set element is built from a netip.Prefix and from options
// checked by the builder; commands run without a shell.
package actions

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coreos/go-iptables/iptables"
)

// The iptables action's limits.
const (
	iptMaxPorts      = 15                    // a multiport match holds 15 ports
	iptMaxTimeout    = 2147483 * time.Second // the longest ipset element timeout
	iptSetMaxElem    = 1048576               // elements of a ban set
	iptAllowMaxElem  = 65536                 // elements of an allow set
	iptRetimeSlack   = 2                     // seconds a set timeout may differ by before Sync resets it
	iptMaxChain      = 28                    // iptables' limit on a chain name
	iptMaxChainIpset = 31 - len("-allow-v4") // ipset's limit on a set name, less our suffix
)

var iptChainRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// iptReserved are names a chain of ours may not take: the builtin chains
// and the standard targets.
var iptReserved = []string{"INPUT", "OUTPUT", "FORWARD", "PREROUTING", "POSTROUTING", "ACCEPT", "DROP", "REJECT", "RETURN", "QUEUE", "DOCKER", "DOCKER-USER"}

// iptClient is the part of go-iptables the action uses.
type iptClient interface {
	Exists(table, chain string, rulespec ...string) (bool, error)
	Insert(table, chain string, pos int, rulespec ...string) error
	Delete(table, chain string, rulespec ...string) error
	ChainExists(table, chain string) (bool, error)
	List(table, chain string) ([]string, error)
	ClearAndDeleteChain(table, chain string) error
}

var _ iptClient = (*iptables.IPTables)(nil)

var (
	_ Backend = (*IPTables)(nil)
	_ Flusher = (*IPTables)(nil)
)

// IPTables is the iptables action (type: iptables). Build it with
// Registry.Build.
type IPTables struct {
	name   string
	chain  string
	from   []string
	target string
	proto  string
	ports  string // "80,443", or "" for every port
	ipset  bool
	now    func() time.Time

	fams [2]*iptFamily // IPv4, IPv6; nil until the first Sync or Apply

	// What the kernel holds, as far as we know: valid after a successful
	// Sync (or a load from the kernel) until a call fails.
	synced bool
	held   map[netip.Prefix]bool // the blocked prefixes
	exempt map[netip.Prefix]bool // the allowed prefixes let through
	allow  []netip.Prefix        // the allow list of the last Sync
}

// iptFamily is iptables or ip6tables.
type iptFamily struct {
	v6      bool
	cmd     string // "iptables" or "ip6tables", for errors
	ipt     iptClient
	restore string // the path of iptables-restore or ip6tables-restore
	err     error  // why this family cannot be used
}

func newIPTables(o *Options, env Env) (Backend, error) {
	b := &IPTables{
		name:   o.String("name", "iptables"),
		now:    env.Now,
		held:   map[netip.Prefix]bool{},
		exempt: map[netip.Prefix]bool{},
	}
	if b.now == nil {
		b.now = time.Now
	}
	b.ipset = o.OneOf("mode", "rules", "rules", "ipset") == "ipset"
	b.chain = o.String("chain", "LOGJAIL")
	maxLen, why := iptMaxChain, ""
	if b.ipset {
		maxLen, why = iptMaxChainIpset, " in mode ipset (the set names add -allow-v4)"
	}
	switch {
	case len(b.chain) == 0 || len(b.chain) > maxLen:
		o.Errorf("chain", "%q: want 1 to %d characters%s", b.chain, maxLen, why)
	case !iptChainRE.MatchString(b.chain):
		o.Errorf("chain", "%q: want letters, digits, _ and - only", b.chain)
	case slices.Contains(iptReserved, strings.ToUpper(b.chain)):
		o.Errorf("chain", "%q is a builtin chain or target: give logjail a chain of its own", b.chain)
	}
	b.from = []string{"INPUT"}
	if o.Has("from") {
		b.from = nil
		for _, f := range o.Strings("from") {
			if !slices.Contains([]string{"INPUT", "FORWARD", "DOCKER-USER"}, f) {
				o.Errorf("from", "%q: want INPUT, FORWARD or DOCKER-USER", f)
				continue
			}
			if !slices.Contains(b.from, f) {
				b.from = append(b.from, f)
			}
		}
		if len(b.from) == 0 && !o.hasErr("from") {
			o.Errorf("from", "want at least one of INPUT, FORWARD, DOCKER-USER")
		}
	}
	b.target = o.OneOf("target", "DROP", "DROP", "REJECT")
	ports := o.Ports("ports")
	if len(ports) > iptMaxPorts {
		o.Errorf("ports", "%d ports: at most %d (one multiport match)", len(ports), iptMaxPorts)
	}
	ps := make([]string, len(ports))
	for i, p := range ports {
		ps[i] = strconv.Itoa(int(p))
	}
	b.ports = strings.Join(ps, ",")
	if o.Has("protocol") && !o.Has("ports") {
		o.Errorf("protocol", "only with ports: without them every protocol is blocked")
	}
	b.proto = o.OneOf("protocol", "tcp", "tcp", "udp")
	if err := o.Err(); err != nil {
		return nil, err
	}
	return b, nil
}

// Name is the action's name: "iptables" or its `name:`.
func (b *IPTables) Name() string { return b.name }

// Close releases nothing: the chain, the jumps and the sets stay in place.
func (b *IPTables) Close() error { return nil }

// families makes the iptables and ip6tables clients on first use; a family
// that cannot be used keeps the reason in err.
func (b *IPTables) families() [2]*iptFamily {
	if b.fams[0] != nil {
		return b.fams
	}
	for i, proto := range []iptables.Protocol{iptables.ProtocolIPv4, iptables.ProtocolIPv6} {
		f := &iptFamily{v6: i == 1, cmd: "iptables"}
		if f.v6 {
			f.cmd = "ip6tables"
		}
		ipt, err := iptables.NewWithProtocol(proto)
		if err == nil {
			f.ipt = ipt
			f.restore, err = exec.LookPath(f.cmd + "-restore")
		}
		if err != nil {
			f.err = fmt.Errorf("%s cannot be used: %w", f.cmd, err)
		}
		b.fams[i] = f
	}
	return b.fams
}

func (b *IPTables) family(p netip.Prefix) *iptFamily {
	if p.Addr().Is4() {
		return b.fams[0]
	}
	return b.fams[1]
}

// holdable reports why p cannot be blocked, or nil.
func iptHoldable(p netip.Prefix) error {
	if !p.IsValid() {
		return fmt.Errorf("invalid prefix")
	}
	if p.Bits() == 0 {
		return fmt.Errorf("%s: refusing to block every address", p)
	}
	return nil
}

// setName is the name of a set of ours: logjail-v4, logjail-allow-v6.
func (b *IPTables) setName(allow, v6 bool) string {
	s := strings.ToLower(b.chain)
	if allow {
		s += "-allow"
	}
	if v6 {
		return s + "-v6"
	}
	return s + "-v4"
}

// matchPorts is the rule part limiting it to the ports, or nil.
func (b *IPTables) matchPorts() []string {
	if b.ports == "" {
		return nil
	}
	return []string{"-m", "multiport", "--dports", b.ports}
}

// verdict is the end of a blocking rule, as iptables -S prints it.
func (b *IPTables) verdict(f *iptFamily) []string {
	if b.target != "REJECT" {
		return []string{"-j", b.target}
	}
	if f.v6 {
		return []string{"-j", "REJECT", "--reject-with", "icmp6-port-unreachable"}
	}
	return []string{"-j", "REJECT", "--reject-with", "icmp-port-unreachable"}
}

// blockTail is a rules-mode blocking rule after `-s PREFIX`, in the order
// iptables -S prints it.
func (b *IPTables) blockTail(f *iptFamily) []string {
	var r []string
	if b.ports != "" {
		r = append(r, "-p", b.proto)
		r = append(r, b.matchPorts()...)
	}
	return append(r, b.verdict(f)...)
}

// blockRule and returnRule are the rules-mode rules for a prefix.
func (b *IPTables) blockRule(f *iptFamily, p netip.Prefix) []string {
	return append([]string{"-s", p.String()}, b.blockTail(f)...)
}

func iptReturnRule(p netip.Prefix) []string { return []string{"-s", p.String(), "-j", "RETURN"} }

// setRules are the ipset-mode chain's rules for a family, in order.
func (b *IPTables) setRules(f *iptFamily) [][]string {
	allow := []string{"-m", "set", "--match-set", b.setName(true, f.v6), "src", "-j", "RETURN"}
	var ban []string
	if b.ports != "" {
		ban = append(ban, "-p", b.proto)
	}
	ban = append(ban, "-m", "set", "--match-set", b.setName(false, f.v6), "src")
	ban = append(ban, b.matchPorts()...)
	ban = append(ban, b.verdict(f)...)
	return [][]string{allow, ban}
}

// exemptions are the allowed prefixes inside a held one.
func (b *IPTables) exemptions() map[netip.Prefix]bool {
	out := map[netip.Prefix]bool{}
	if len(b.allow) == 0 {
		return out
	}
	for p := range b.held {
		for _, a := range Exempt(p, b.allow) {
			out[a] = true
		}
	}
	return out
}

// Sync makes the chains (and sets) hold exactly entries, letting allow
// through, and puts the jumps in place.
func (b *IPTables) Sync(ctx context.Context, entries []Entry, allow []netip.Prefix) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.synced = false
	fams := b.families()
	var errs []error
	want := map[netip.Prefix]Entry{}
	for _, e := range entries {
		p := e.Prefix.Masked()
		if err := iptHoldable(p); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", b.name, err))
			continue
		}
		if f := b.family(p); f.err != nil {
			continue // counted below
		}
		e.Prefix = p
		want[p] = e
	}
	for _, f := range fams {
		if f.err == nil {
			continue
		}
		n := 0
		for _, e := range entries {
			if e.Prefix.Addr().Is4() != f.v6 && iptHoldable(e.Prefix) == nil {
				n++
			}
		}
		if n > 0 {
			errs = append(errs, fmt.Errorf("%s: %d entries not enforced: %w", b.name, n, f.err))
		}
	}
	b.held = map[netip.Prefix]bool{}
	for p := range want {
		b.held[p] = true
	}
	b.allow = slices.Clone(allow)
	b.exempt = b.exemptions()

	var err error
	if b.ipset {
		err = b.syncSets(ctx, want)
	} else {
		err = b.syncRules(ctx)
	}
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	b.synced = true
	for _, f := range fams {
		if f.err == nil {
			if err := b.jumps(f); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// syncRules rewrites each family's chain, in one transaction, unless it
// holds exactly the rules for b.held and b.exempt already.
func (b *IPTables) syncRules(ctx context.Context) error {
	for _, f := range b.fams {
		if f.err != nil {
			continue
		}
		var blocks, returns []netip.Prefix
		for p := range b.held {
			if p.Addr().Is4() != f.v6 {
				blocks = append(blocks, p)
			}
		}
		for p := range b.exempt {
			if p.Addr().Is4() != f.v6 {
				returns = append(returns, p)
			}
		}
		slices.SortFunc(blocks, comparePrefix)
		slices.SortFunc(returns, comparePrefix)
		got, err := b.list(f)
		if err != nil {
			return err
		}
		var rules [][]string
		for _, p := range returns {
			rules = append(rules, iptReturnRule(p))
		}
		for _, p := range blocks {
			rules = append(rules, b.blockRule(f, p))
		}
		if got != nil && b.rulesMatch(f, got, returns, blocks) {
			continue
		}
		if err := b.rewrite(ctx, f, rules); err != nil {
			return err
		}
	}
	return nil
}

// list returns the chain's rules as iptables -S prints them, without the
// -N line; nil when the chain does not exist.
func (b *IPTables) list(f *iptFamily) ([]string, error) {
	ok, err := f.ipt.ChainExists("filter", b.chain)
	if err != nil {
		return nil, fmt.Errorf("%s: %s -S %s: %w", b.name, f.cmd, b.chain, err)
	}
	if !ok {
		return nil, nil
	}
	lines, err := f.ipt.List("filter", b.chain)
	if err != nil {
		return nil, fmt.Errorf("%s: %s -S %s: %w", b.name, f.cmd, b.chain, err)
	}
	out := []string{}
	for _, l := range lines {
		if strings.HasPrefix(l, "-A ") {
			out = append(out, l)
		}
	}
	return out, nil
}

// iptParseRule splits a listed rule `-A CHAIN -s PREFIX rest...` into the
// prefix and the rest; ok is false for a rule of another shape.
func iptParseRule(chain, line string) (p netip.Prefix, rest string, ok bool) {
	fs := strings.Fields(line)
	if len(fs) < 4 || fs[0] != "-A" || fs[1] != chain || fs[2] != "-s" {
		return netip.Prefix{}, "", false
	}
	p, err := netip.ParsePrefix(fs[3])
	if err != nil {
		a, err := netip.ParseAddr(fs[3])
		if err != nil {
			return netip.Prefix{}, "", false
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	return p.Masked(), strings.Join(fs[4:], " "), true
}

// rulesMatch reports whether the listed rules are exactly the RETURN rules
// for returns followed by the blocking rules for blocks (in any order).
func (b *IPTables) rulesMatch(f *iptFamily, got []string, returns, blocks []netip.Prefix) bool {
	if len(got) != len(returns)+len(blocks) {
		return false
	}
	blockTail := strings.Join(b.blockTail(f), " ")
	seenR, seenB := map[netip.Prefix]bool{}, map[netip.Prefix]bool{}
	for i, l := range got {
		p, rest, ok := iptParseRule(b.chain, l)
		if !ok {
			return false
		}
		if i < len(returns) {
			if rest != "-j RETURN" || !slices.Contains(returns, p) || seenR[p] {
				return false
			}
			seenR[p] = true
		} else {
			if rest != blockTail || !b.held[p] || seenB[p] {
				return false
			}
			seenB[p] = true
		}
	}
	return true
}

// rewrite replaces the chain's rules with rules in one transaction,
// making the chain when it is missing.
func (b *IPTables) rewrite(ctx context.Context, f *iptFamily, rules [][]string) error {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "*filter\n:%s - [0:0]\n", b.chain)
	for _, r := range rules {
		fmt.Fprintf(&buf, "-A %s %s\n", b.chain, strings.Join(r, " "))
	}
	buf.WriteString("COMMIT\n")
	return b.restore(ctx, f, &buf)
}

// restore runs iptables-restore --noflush on a script.
func (b *IPTables) restore(ctx context.Context, f *iptFamily, script *bytes.Buffer) error {
	cmd := exec.CommandContext(ctx, f.restore, "--noflush", "--wait")
	cmd.Stdin = script
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %s-restore: %w: %s", b.name, f.cmd, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// jumps inserts `-j CHAIN` at the top of each from chain that lacks it.
func (b *IPTables) jumps(f *iptFamily) error {
	var errs []error
	for _, from := range b.from {
		if from == "DOCKER-USER" {
			ok, err := f.ipt.ChainExists("filter", from)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %s: %w", b.name, f.cmd, err))
				continue
			}
			if !ok {
				if !f.v6 {
					errs = append(errs, fmt.Errorf("%s: %s: from: chain DOCKER-USER does not exist (yet): is Docker running?", b.name, f.cmd))
				}
				continue
			}
		}
		ok, err := f.ipt.Exists("filter", from, "-j", b.chain)
		if err == nil && !ok {
			err = f.ipt.Insert("filter", from, 1, "-j", b.chain)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: jump from %s: %w", b.name, f.cmd, from, err))
		}
	}
	return errors.Join(errs...)
}

// syncSets makes the sets hold exactly want (and b.exempt) with the right
// timeouts, and the chains the two rules per family.
func (b *IPTables) syncSets(ctx context.Context, want map[netip.Prefix]Entry) error {
	if _, err := exec.LookPath("ipset"); err != nil {
		return fmt.Errorf("%s: mode ipset: %w", b.name, err)
	}
	var script bytes.Buffer
	for _, v6 := range []bool{false, true} {
		fam := "inet"
		if v6 {
			fam = "inet6"
		}
		fmt.Fprintf(&script, "create %s hash:net family %s timeout 0 maxelem %d\n", b.setName(false, v6), fam, iptSetMaxElem)
		fmt.Fprintf(&script, "create %s hash:net family %s maxelem %d\n", b.setName(true, v6), fam, iptAllowMaxElem)
	}
	if err := b.ipsetRestore(ctx, &script); err != nil {
		return err
	}
	now := b.now()
	script.Reset()
	for _, v6 := range []bool{false, true} {
		got, err := b.ipsetMembers(ctx, b.setName(false, v6))
		if err != nil {
			return err
		}
		for p := range got {
			if _, ok := want[p]; !ok {
				fmt.Fprintf(&script, "del %s %s\n", b.setName(false, v6), p)
			}
		}
		for p, e := range want {
			if p.Addr().Is4() == v6 {
				continue
			}
			t := int64(e.Timeout(now, iptMaxTimeout) / time.Second)
			g, ok := got[p]
			if !ok || (g == 0) != (t == 0) || g-t > iptRetimeSlack || t-g > iptRetimeSlack {
				fmt.Fprintf(&script, "add %s %s timeout %d\n", b.setName(false, v6), p, t)
			}
		}
		got, err = b.ipsetMembers(ctx, b.setName(true, v6))
		if err != nil {
			return err
		}
		for p := range got {
			if !b.exempt[p] {
				fmt.Fprintf(&script, "del %s %s\n", b.setName(true, v6), p)
			}
		}
		for p := range b.exempt {
			if _, ok := got[p]; !ok && p.Addr().Is4() != v6 {
				fmt.Fprintf(&script, "add %s %s\n", b.setName(true, v6), p)
			}
		}
	}
	if script.Len() > 0 {
		if err := b.ipsetRestore(ctx, &script); err != nil {
			return err
		}
	}
	for _, f := range b.fams {
		if f.err != nil {
			continue
		}
		rules := b.setRules(f)
		got, err := b.list(f)
		if err != nil {
			return err
		}
		same := got != nil && len(got) == len(rules)
		for i := 0; same && i < len(got); i++ {
			same = strings.Join(strings.Fields(got[i]), " ") == "-A "+b.chain+" "+strings.Join(rules[i], " ")
		}
		if !same {
			if err := b.rewrite(ctx, f, rules); err != nil {
				return err
			}
		}
	}
	return nil
}

// ipsetRestore runs `ipset restore -exist` on a script.
func (b *IPTables) ipsetRestore(ctx context.Context, script *bytes.Buffer) error {
	cmd := exec.CommandContext(ctx, "ipset", "restore", "-exist")
	cmd.Stdin = script
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: ipset restore: %w: %s", b.name, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// ipsetMembers lists a set's members with their remaining timeouts (0: no
// timeout); a missing set has none.
func (b *IPTables) ipsetMembers(ctx context.Context, set string) (map[netip.Prefix]int64, error) {
	cmd := exec.CommandContext(ctx, "ipset", "save", set)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if strings.Contains(stderr.String(), "does not exist") {
			return map[netip.Prefix]int64{}, nil
		}
		return nil, fmt.Errorf("%s: ipset save %s: %w: %s", b.name, set, err, strings.TrimSpace(stderr.String()))
	}
	return iptParseSave(set, &stdout), nil
}

// iptParseSave reads the members of set from `ipset save` output: `add SET
// ELEM [timeout N]`, an element without /N being a single address.
func iptParseSave(set string, r *bytes.Buffer) map[netip.Prefix]int64 {
	out := map[netip.Prefix]int64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 3 || fs[0] != "add" || fs[1] != set {
			continue
		}
		p, err := netip.ParsePrefix(fs[2])
		if err != nil {
			a, err := netip.ParseAddr(fs[2])
			if err != nil {
				continue
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		var t int64
		for i := 3; i+1 < len(fs); i++ {
			if fs[i] == "timeout" {
				t, _ = strconv.ParseInt(fs[i+1], 10, 64)
			}
		}
		out[p.Masked()] = t
	}
	return out
}

// load learns what the kernel holds when no Sync has: an Apply before the
// first Sync, or after a failed call. The allowed prefixes are taken to be
// those let through now.
func (b *IPTables) load(ctx context.Context) error {
	b.held = map[netip.Prefix]bool{}
	b.exempt = map[netip.Prefix]bool{}
	if b.ipset {
		for _, v6 := range []bool{false, true} {
			for _, allow := range []bool{false, true} {
				got, err := b.ipsetMembers(ctx, b.setName(allow, v6))
				if err != nil {
					return err
				}
				for p := range got {
					if allow {
						b.exempt[p] = true
					} else {
						b.held[p] = true
					}
				}
			}
		}
	} else {
		for _, f := range b.fams {
			if f.err != nil {
				continue
			}
			got, err := b.list(f)
			if err != nil {
				return err
			}
			tail := strings.Join(b.blockTail(f), " ")
			for _, l := range got {
				p, rest, ok := iptParseRule(b.chain, l)
				switch {
				case ok && rest == "-j RETURN":
					b.exempt[p] = true
				case ok && rest == tail:
					b.held[p] = true
				}
			}
		}
	}
	b.allow = b.allow[:0]
	for p := range b.exempt {
		b.allow = append(b.allow, p)
	}
	b.synced = true
	return nil
}

// Apply makes the changes: in rules mode one iptables-restore transaction
// per family, in ipset mode one ipset restore.
func (b *IPTables) Apply(ctx context.Context, changes []Change) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.families()
	if !b.synced {
		if err := b.load(ctx); err != nil {
			return err
		}
	}
	var errs []error
	var blocks, unblocks []netip.Prefix
	var sets []Change
	for _, c := range changes {
		p := c.Prefix.Masked()
		if err := iptHoldable(p); err != nil {
			if !c.Delete {
				errs = append(errs, fmt.Errorf("%s: %w", b.name, err))
			}
			continue
		}
		if f := b.family(p); f.err != nil {
			if !c.Delete {
				errs = append(errs, fmt.Errorf("%s: %s not enforced: %w", b.name, p, f.err))
			}
			continue
		}
		switch {
		case c.Delete && (b.held[p] || b.ipset):
			unblocks = append(unblocks, p)
			delete(b.held, p)
		case !c.Delete:
			if !b.held[p] {
				blocks = append(blocks, p)
			}
			b.held[p] = true
			c.Prefix = p
			sets = append(sets, c)
		}
	}
	exempt := b.exemptions()
	var allowAdd, allowDel []netip.Prefix
	for p := range exempt {
		if !b.exempt[p] {
			allowAdd = append(allowAdd, p)
		}
	}
	for p := range b.exempt {
		if !exempt[p] {
			allowDel = append(allowDel, p)
		}
	}
	b.exempt = exempt
	var err error
	if b.ipset {
		err = b.applySets(ctx, sets, unblocks, allowAdd, allowDel)
	} else {
		err = b.applyRules(ctx, blocks, unblocks, allowAdd, allowDel)
	}
	if err != nil {
		b.synced = false
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// applyRules adds and deletes rules, one transaction per family.
func (b *IPTables) applyRules(ctx context.Context, blocks, unblocks, allowAdd, allowDel []netip.Prefix) error {
	for _, f := range b.fams {
		if f.err != nil {
			continue
		}
		var buf bytes.Buffer
		line := func(op string, rule []string) {
			fmt.Fprintf(&buf, "%s %s %s\n", op, b.chain, strings.Join(rule, " "))
		}
		mine := func(p netip.Prefix) bool { return p.Addr().Is4() != f.v6 }
		for _, p := range allowAdd {
			if mine(p) {
				line("-I", append([]string{"1"}, iptReturnRule(p)...))
			}
		}
		for _, p := range blocks {
			if mine(p) {
				line("-A", b.blockRule(f, p))
			}
		}
		for _, p := range unblocks {
			if mine(p) {
				line("-D", b.blockRule(f, p))
			}
		}
		for _, p := range allowDel {
			if mine(p) {
				line("-D", iptReturnRule(p))
			}
		}
		if buf.Len() == 0 {
			continue
		}
		script := bytes.NewBufferString("*filter\n")
		script.Write(buf.Bytes())
		script.WriteString("COMMIT\n")
		if err := b.restore(ctx, f, script); err != nil {
			return err
		}
	}
	return nil
}

// applySets adds (or retimes) and deletes set elements in one ipset
// restore: -exist makes both idempotent.
func (b *IPTables) applySets(ctx context.Context, sets []Change, unblocks, allowAdd, allowDel []netip.Prefix) error {
	var buf bytes.Buffer
	now := b.now()
	for _, p := range allowAdd {
		fmt.Fprintf(&buf, "add %s %s\n", b.setName(true, !p.Addr().Is4()), p)
	}
	for _, c := range sets {
		fmt.Fprintf(&buf, "add %s %s timeout %d\n", b.setName(false, !c.Prefix.Addr().Is4()), c.Prefix, int64(c.Timeout(now, iptMaxTimeout)/time.Second))
	}
	for _, p := range unblocks {
		fmt.Fprintf(&buf, "del %s %s\n", b.setName(false, !p.Addr().Is4()), p)
	}
	for _, p := range allowDel {
		fmt.Fprintf(&buf, "del %s %s\n", b.setName(true, !p.Addr().Is4()), p)
	}
	if buf.Len() == 0 {
		return nil
	}
	return b.ipsetRestore(ctx, &buf)
}

// Flush removes the jumps, the chain of both families and the sets.
func (b *IPTables) Flush(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var errs []error
	for _, f := range b.families() {
		if f.err != nil {
			continue
		}
		if ok, err := f.ipt.ChainExists("filter", b.chain); err != nil || !ok {
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %s: %w", b.name, f.cmd, err))
			}
			continue // no chain, no jump to it
		}
		for _, from := range b.from {
			if ok, err := f.ipt.ChainExists("filter", from); err != nil || !ok {
				continue
			}
			for range 100 { // an operator may have doubled it
				ok, err := f.ipt.Exists("filter", from, "-j", b.chain)
				if err == nil && ok {
					err = f.ipt.Delete("filter", from, "-j", b.chain)
				}
				if err != nil {
					errs = append(errs, fmt.Errorf("%s: %s: jump from %s: %w", b.name, f.cmd, from, err))
				}
				if err != nil || !ok {
					break
				}
			}
		}
		if err := f.ipt.ClearAndDeleteChain("filter", b.chain); err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: delete chain %s: %w", b.name, f.cmd, b.chain, err))
		}
	}
	if _, err := exec.LookPath("ipset"); err == nil {
		out, err := exec.CommandContext(ctx, "ipset", "list", "-name").Output()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: ipset list -name: %w", b.name, err))
		}
		names := strings.Fields(string(out))
		for _, v6 := range []bool{false, true} {
			for _, allow := range []bool{false, true} {
				set := b.setName(allow, v6)
				if !slices.Contains(names, set) {
					continue
				}
				if out, err := exec.CommandContext(ctx, "ipset", "destroy", set).CombinedOutput(); err != nil {
					errs = append(errs, fmt.Errorf("%s: ipset destroy %s: %w: %s", b.name, set, err, strings.TrimSpace(string(out))))
				}
			}
		}
	} else if b.ipset {
		errs = append(errs, fmt.Errorf("%s: mode ipset: %w", b.name, err))
	}
	b.held = map[netip.Prefix]bool{}
	b.exempt = map[netip.Prefix]bool{}
	b.synced = false
	return errors.Join(errs...)
}
