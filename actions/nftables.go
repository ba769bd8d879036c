//go:build linux

// The nftables action keeps the blocked prefixes in sets of an nftables
// table of its own, spoken to over netlink (github.com/google/nftables), no
// nft binary needed:
//
//	table inet logjail {
//		set ban4   { type ipv4_addr; flags interval,timeout; }
//		set ban6   { type ipv6_addr; flags interval,timeout; }
//		set allow4 { type ipv4_addr; flags interval; }
//		set allow6 { type ipv6_addr; flags interval; }
//		chain input {
//			type filter hook input priority -10; policy accept;
//			ip saddr @allow4 return
//			ip6 saddr @allow6 return
//			[meta l4proto tcp th dport { 80, 443 }] ip saddr @ban4 drop
//			[meta l4proto tcp th dport { 80, 443 }] ip6 saddr @ban6 drop
//		}
//	}
//
// What an operator should know:
//
//   - The chain is named after its hook (input or forward) and hooks at
//     priority -10 by default, before the usual filter chains (priority 0):
//     a banned address is dropped even when a later chain would accept it,
//     established connections included. The policy is accept: what is not
//     banned goes on to the other chains. `target: reject` answers TCP with
//     a reset when `ports` are given for tcp, else with an ICMP port
//     unreachable.
//   - Set elements carry kernel timeouts (the ban's time left, at most ten
//     years; none for a ban until lifted): bans expire even when the daemon
//     is dead. A ban with no end stays until the daemon, or `logjail clean
//     --flush`, lifts it.
//   - The sets are interval sets, so that a prefix is one element (a start
//     and, unless the prefix ends at the last address, an interval end). The
//     kernel refuses overlapping intervals and timeouts on interval ends:
//     where one blocked prefix contains another, only the outer one is in
//     the set (with its own timeout), and the inner one goes in when the
//     outer one is lifted; an interval end left behind by an expired start
//     is removed by the next Sync. Sets are not auto-merged: merging
//     adjacent prefixes would make lifting one of them impossible.
//   - The allow sets hold every allowed prefix given to Sync (the allow
//     list), and the chain returns for them before the ban rules: an
//     allowed address inside a banned prefix is let through (to the other
//     chains).
//   - Sync reads the table and makes it what the configuration says: it
//     creates what is missing, rebuilds the chain when its rules (tagged
//     with a comment) or hook differ, recreates the table when a set has
//     the wrong type, removes stale elements, adds missing ones and
//     replaces those whose timeout is more than 2s off. Changes are sent in
//     netlink batches of at most nftBatchElems set elements (the kernel
//     refuses larger messages); a replaced element is deleted and re-added
//     in the same batch, so it is never absent.
//   - Close leaves the table in place (a restart opens no gap); Flush
//     (`logjail clean --flush`) deletes it.
//   - Two nftables actions must not share one `table:`.
package actions

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"net/netip"
	"regexp"
	"slices"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
)

const (
	// nftMaxTimeout caps a kernel timeout: a longer ban is refreshed by the
	// next Sync long before it runs out.
	nftMaxTimeout = 10 * 365 * 24 * time.Hour
	// nftSlack is how far a kernel timeout may be off before Sync or Apply
	// replaces the element.
	nftSlack = 2 * time.Second
	// nftMsgElems and nftBatchElems bound the set elements of one netlink
	// message (its element list is one attribute, at most 64 KiB) and of
	// one batch (sent in one sendmsg, at most the socket's send buffer).
	nftMsgElems   = 1024
	nftBatchElems = 2048
)

var nftTableRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// Nftables is the nftables action; see the top of nftables.go.
type Nftables struct {
	name     string
	table    string
	hook     string // "input" or "forward"
	priority int
	reject   bool
	ports    []uint16
	proto    string // "tcp" or "udp"
	now      func() time.Time

	conn   *nftables.Conn
	synced bool // installed is what the kernel holds

	desired   map[netip.Prefix]Entry
	lens      map[int]int // how many desired prefixes have each length (nftLenKey)
	allow     []netip.Prefix
	installed map[netip.Prefix]time.Time // the elements in ban4/ban6: their expiry (zero: none)
}

var (
	_ Backend = (*Nftables)(nil)
	_ Flusher = (*Nftables)(nil)
)

func buildNftables(o *Options, env Env) (Backend, error) {
	b := &Nftables{
		name:      o.String("name", "nftables"),
		table:     o.String("table", "logjail"),
		hook:      o.OneOf("hook", "input", "input", "forward"),
		priority:  o.Int("priority", -10, math.MinInt32, math.MaxInt32),
		reject:    o.OneOf("target", "drop", "drop", "reject") == "reject",
		ports:     o.Ports("ports"),
		proto:     o.OneOf("protocol", "tcp", "tcp", "udp"),
		now:       env.Now,
		desired:   map[netip.Prefix]Entry{},
		lens:      map[int]int{},
		installed: map[netip.Prefix]time.Time{},
	}
	if !nftTableRe.MatchString(b.table) {
		o.Errorf("table", "%q: want 1 to 32 letters, digits, _ or -", b.table)
	}
	if o.Has("protocol") && len(b.ports) == 0 {
		o.Errorf("protocol", "applies to ports: give `ports:` too, or leave protocol out to block every protocol")
	}
	if b.now == nil {
		b.now = time.Now
	}
	return b, o.Err()
}

// Name is the action's name.
func (b *Nftables) Name() string { return b.name }

// Sync makes the table hold exactly entries and allow; see the top of
// nftables.go.
func (b *Nftables) Sync(ctx context.Context, entries []Entry, allow []netip.Prefix) error {
	b.desired = make(map[netip.Prefix]Entry, len(entries))
	b.lens = map[int]int{}
	for _, e := range entries {
		b.setDesired(Change{Entry: e})
	}
	b.allow = slices.Clone(allow)
	return b.reconcile(ctx)
}

// Apply adds, replaces and deletes set elements, in netlink batches.
func (b *Nftables) Apply(ctx context.Context, changes []Change) error {
	affected := make(map[netip.Prefix]bool, len(changes))
	var wide []netip.Prefix
	for _, c := range changes {
		b.setDesired(c)
		affected[c.Prefix] = true
		if !c.Prefix.IsSingleIP() {
			wide = append(wide, c.Prefix)
		}
	}
	if !b.synced {
		return b.reconcile(ctx)
	}
	// A prefix set or lifted may cover or uncover the prefixes inside it:
	// they are affected too. Many such prefixes: look at everything.
	if len(wide) > 16 {
		affected = make(map[netip.Prefix]bool, len(b.desired)+len(b.installed))
		for p := range b.desired {
			affected[p] = true
		}
		for p := range b.installed {
			affected[p] = true
		}
	} else if len(wide) > 0 {
		for _, m := range []map[netip.Prefix]bool{nftKeys(b.desired), nftKeys(b.installed)} {
			for q := range m {
				for _, w := range wide {
					if q.Bits() > w.Bits() && w.Contains(q.Addr()) {
						affected[q] = true
					}
				}
			}
		}
	}
	now := b.now()
	has := func(q netip.Prefix) bool { _, ok := b.desired[q]; return ok }
	ops := make([]nftOp, 0, len(affected))
	for p := range affected {
		e, want := b.desired[p]
		want = want && !nftContained(p, b.lens, has)
		exp, installed := b.installed[p]
		if !want {
			if installed {
				ops = append(ops, nftOp{set: nftSetName(p), del: nftItemOf(p, 0), touch: true})
			}
			continue
		}
		t := e.Timeout(now, nftMaxTimeout)
		if !installed {
			ops = append(ops, nftOp{set: nftSetName(p), add: nftItemOf(p, t)})
		} else if !nftSameExpiry(exp, now, t) {
			ops = append(ops, nftOp{set: nftSetName(p), del: nftItemOf(p, 0), add: nftItemOf(p, t), touch: true})
		}
	}
	return b.commit(ctx, ops, now)
}

func nftKeys[V any](m map[netip.Prefix]V) map[netip.Prefix]bool {
	out := make(map[netip.Prefix]bool, len(m))
	for p := range m {
		out[p] = true
	}
	return out
}

// setDesired records a change in desired and lens.
func (b *Nftables) setDesired(c Change) {
	_, had := b.desired[c.Prefix]
	k := nftLenKey(c.Prefix, c.Prefix.Bits())
	switch {
	case c.Delete && had:
		delete(b.desired, c.Prefix)
		if b.lens[k]--; b.lens[k] <= 0 {
			delete(b.lens, k)
		}
	case !c.Delete:
		if !had {
			b.lens[k]++
		}
		b.desired[c.Prefix] = c.Entry
	}
}

// Flush deletes the table.
func (b *Nftables) Flush(ctx context.Context) error {
	c, err := b.open()
	if err != nil {
		return err
	}
	b.synced = false
	t, err := b.findTable(c)
	if err != nil || t == nil {
		return err
	}
	c.DelTable(t)
	if err := c.Flush(); err != nil {
		return b.errorf("delete table inet %s: %w", b.table, err)
	}
	return nil
}

// Close closes the netlink connection; the table stays.
func (b *Nftables) Close() error {
	if b.conn == nil {
		return nil
	}
	err := b.conn.CloseLasting()
	b.conn = nil
	return err
}

func (b *Nftables) errorf(format string, a ...any) error {
	return fmt.Errorf("nftables action %q: "+format, append([]any{b.name}, a...)...)
}

func (b *Nftables) open() (*nftables.Conn, error) {
	if b.conn != nil {
		return b.conn, nil
	}
	c, err := nftables.New(nftables.AsLasting())
	if err != nil {
		return nil, b.errorf("netlink: %w", err)
	}
	b.conn = c
	return c, nil
}

// The names of the table's sets.
const (
	nftBan4   = "ban4"
	nftBan6   = "ban6"
	nftAllow4 = "allow4"
	nftAllow6 = "allow6"
)

// nftSetSpecs are the sets of the table.
var nftSetSpecs = []struct {
	name    string
	key     nftables.SetDatatype
	timeout bool
}{
	{nftBan4, nftables.TypeIPAddr, true},
	{nftBan6, nftables.TypeIP6Addr, true},
	{nftAllow4, nftables.TypeIPAddr, false},
	{nftAllow6, nftables.TypeIP6Addr, false},
}

func (b *Nftables) tableRef() *nftables.Table {
	return &nftables.Table{Name: b.table, Family: nftables.TableFamilyINet}
}

func (b *Nftables) setRef(name string) *nftables.Set {
	for _, s := range nftSetSpecs {
		if s.name == name {
			return &nftables.Set{Table: b.tableRef(), Name: name, KeyType: s.key, Interval: true, HasTimeout: s.timeout}
		}
	}
	panic("nftables: no set " + name)
}

func (b *Nftables) findTable(c *nftables.Conn) (*nftables.Table, error) {
	ts, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return nil, b.errorf("list tables: %w", err)
	}
	for _, t := range ts {
		if t.Name == b.table {
			return t, nil
		}
	}
	return nil, nil
}

// reconcile makes the table what the configuration, b.desired and b.allow
// say, reading what the kernel holds.
func (b *Nftables) reconcile(ctx context.Context) error {
	b.synced = false
	c, err := b.open()
	if err != nil {
		return err
	}
	if err := b.ensureTable(c); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	now := b.now()
	var ops []nftOp
	installed := map[netip.Prefix]time.Time{}
	present := map[netip.Prefix]bool{} // wanted and in the kernel, maybe to replace
	want := nftOutermost(b.desired)
	allowWant := map[netip.Prefix]bool{}
	for _, p := range b.allow {
		allowWant[p.Masked()] = true
	}
	allowWant = nftOutermostSet(allowWant)
	for _, spec := range nftSetSpecs {
		els, err := c.GetSetElements(b.setRef(spec.name))
		if err != nil {
			return b.errorf("list set %s: %w", spec.name, err)
		}
		items, orphans := nftItems(els, spec.key.Bytes)
		for _, o := range orphans {
			ops = append(ops, nftOp{set: spec.name, del: o})
		}
		for _, it := range items {
			p, ok := it.prefix()
			switch {
			case !ok:
				ops = append(ops, nftOp{set: spec.name, del: it, touch: true})
			case !spec.timeout:
				if !allowWant[p] {
					ops = append(ops, nftOp{set: spec.name, del: it})
				}
				delete(allowWant, p) // present: nothing to add
			default:
				e, wanted := want[p]
				if !wanted {
					ops = append(ops, nftOp{set: spec.name, del: it, touch: true})
					continue
				}
				present[p] = true
				t := e.Timeout(now, nftMaxTimeout)
				var exp time.Time
				if it.timeout != 0 {
					exp = now.Add(it.expires)
				}
				if nftSameExpiry(exp, now, t) {
					installed[p] = exp
				} else {
					ops = append(ops, nftOp{set: spec.name, del: it, add: nftItemOf(p, t), touch: true})
				}
			}
		}
	}
	for p, e := range want {
		if !present[p] {
			ops = append(ops, nftOp{set: nftSetName(p), add: nftItemOf(p, e.Timeout(now, nftMaxTimeout))})
		}
	}
	for p := range allowWant {
		allowSet := nftAllow4
		if !p.Addr().Is4() {
			allowSet = nftAllow6
		}
		ops = append(ops, nftOp{set: allowSet, add: nftItemOf(p, 0)})
	}
	b.installed = installed
	return b.commit(ctx, ops, now)
}

// ensureTable creates the table, its sets and its chain where missing,
// rebuilding what differs from the configuration.
func (b *Nftables) ensureTable(c *nftables.Conn) error {
	t, err := b.findTable(c)
	if err != nil {
		return err
	}
	if t != nil {
		sets, err := c.GetSets(t)
		if err != nil {
			return b.errorf("list sets: %w", err)
		}
		if !b.setsOK(sets) {
			// A set of the wrong type or flags cannot be changed in place:
			// start over (the elements are added back right after).
			c.DelTable(t)
			t = nil
		}
	}
	if t == nil {
		t = c.AddTable(b.tableRef())
		for _, spec := range nftSetSpecs {
			if err := c.AddSet(b.setRef(spec.name), nil); err != nil {
				return b.errorf("set %s: %w", spec.name, err)
			}
		}
		ch := c.AddChain(b.chainRef())
		if err := b.addRules(c, ch); err != nil {
			return err
		}
		if err := c.Flush(); err != nil {
			return b.errorf("create table inet %s: %w", b.table, err)
		}
		return nil
	}
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return b.errorf("list chains: %w", err)
	}
	want := b.chainRef()
	var found *nftables.Chain
	for _, ch := range chains {
		if ch.Table.Name != b.table {
			continue
		}
		switch {
		case ch.Name == want.Name:
			found = ch
		case ch.Name == "input" || ch.Name == "forward":
			// The chain of another hook, from an earlier configuration.
			c.FlushChain(ch)
			c.DelChain(ch)
		}
	}
	switch {
	case found == nil:
		c.AddChain(want)
		if err := b.addRules(c, want); err != nil {
			return err
		}
	case !nftSameHook(found, want):
		c.FlushChain(found)
		c.DelChain(found)
		c.AddChain(want)
		if err := b.addRules(c, want); err != nil {
			return err
		}
	default:
		rules, err := c.GetRules(t, found)
		if err != nil {
			return b.errorf("list chain %s: %w", found.Name, err)
		}
		if !b.rulesOK(rules) {
			c.FlushChain(want)
			if err := b.addRules(c, want); err != nil {
				return err
			}
		}
	}
	if err := c.Flush(); err != nil {
		return b.errorf("chain %s: %w", want.Name, err)
	}
	return nil
}

func (b *Nftables) setsOK(sets []*nftables.Set) bool {
	for _, spec := range nftSetSpecs {
		i := slices.IndexFunc(sets, func(s *nftables.Set) bool { return s.Name == spec.name })
		if i < 0 {
			return false
		}
		s := sets[i]
		if s.KeyType.Name != spec.key.Name || !s.Interval || s.HasTimeout != spec.timeout || s.AutoMerge || s.IsMap || s.Constant {
			return false
		}
	}
	return true
}

func (b *Nftables) chainRef() *nftables.Chain {
	hook := nftables.ChainHookInput
	if b.hook == "forward" {
		hook = nftables.ChainHookForward
	}
	accept := nftables.ChainPolicyAccept
	return &nftables.Chain{
		Name:     b.hook,
		Table:    b.tableRef(),
		Hooknum:  hook,
		Priority: nftables.ChainPriorityRef(nftables.ChainPriority(b.priority)),
		Type:     nftables.ChainTypeFilter,
		Policy:   &accept,
	}
}

func nftSameHook(got, want *nftables.Chain) bool {
	return got.Hooknum != nil && got.Priority != nil && *got.Hooknum == *want.Hooknum &&
		*got.Priority == *want.Priority && got.Type == want.Type &&
		(got.Policy == nil || *got.Policy == *want.Policy)
}

// nftRuleSpec describes one rule of the chain; its comment tags the rule
// with a hash of the spec, so that Sync can tell its own rules, as this
// configuration wants them, from anything else.
type nftRuleSpec struct {
	name    string // the set looked up
	v6      bool
	verdict string // "return", "drop", "reject"
}

func (b *Nftables) ruleSpecs() []nftRuleSpec {
	v := "drop"
	if b.reject {
		v = "reject"
	}
	return []nftRuleSpec{
		{nftAllow4, false, "return"},
		{nftAllow6, true, "return"},
		{nftBan4, false, v},
		{nftBan6, true, v},
	}
}

func (b *Nftables) comment(r nftRuleSpec) string {
	h := fnv.New32a()
	fmt.Fprintf(h, "v1 %s %v %s %s %v", r.name, r.v6, r.verdict, b.proto, b.ports)
	return fmt.Sprintf("logjail %s %08x", r.name, h.Sum32())
}

func (b *Nftables) rulesOK(rules []*nftables.Rule) bool {
	specs := b.ruleSpecs()
	if len(rules) != len(specs) {
		return false
	}
	for i, r := range rules {
		got, _ := userdata.GetString(r.UserData, userdata.TypeComment)
		if got != b.comment(specs[i]) {
			return false
		}
	}
	return true
}

// addRules queues the chain's rules (and their anonymous port sets: the
// kernel binds an anonymous set to one rule alone).
func (b *Nftables) addRules(c *nftables.Conn, ch *nftables.Chain) error {
	for _, r := range b.ruleSpecs() {
		var ex []expr.Any
		if r.verdict != "return" && len(b.ports) > 0 {
			proto := byte(unix.IPPROTO_TCP)
			if b.proto == "udp" {
				proto = unix.IPPROTO_UDP
			}
			ex = append(ex,
				&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2})
			if len(b.ports) > 1 {
				ports := &nftables.Set{Table: ch.Table, Anonymous: true, Constant: true, KeyType: nftables.TypeInetService}
				els := make([]nftables.SetElement, len(b.ports))
				for i, p := range b.ports {
					els[i] = nftables.SetElement{Key: binaryutil.BigEndian.PutUint16(p)}
				}
				if err := c.AddSet(ports, els); err != nil {
					return b.errorf("port set: %w", err)
				}
				ex = append(ex, &expr.Lookup{SourceRegister: 1, SetName: ports.Name, SetID: ports.ID})
			} else {
				ex = append(ex, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(b.ports[0])})
			}
		}
		nfproto, off, n := byte(unix.NFPROTO_IPV4), uint32(12), uint32(4)
		if r.v6 {
			nfproto, off, n = unix.NFPROTO_IPV6, 8, 16
		}
		ex = append(ex,
			&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{nfproto}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n},
			&expr.Lookup{SourceRegister: 1, SetName: r.name})
		switch r.verdict {
		case "return":
			ex = append(ex, &expr.Verdict{Kind: expr.VerdictReturn})
		case "drop":
			ex = append(ex, &expr.Verdict{Kind: expr.VerdictDrop})
		case "reject":
			if b.proto == "tcp" && len(b.ports) > 0 {
				ex = append(ex, &expr.Reject{Type: unix.NFT_REJECT_TCP_RST})
			} else {
				ex = append(ex, &expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_PORT_UNREACH})
			}
		}
		c.AddRule(&nftables.Rule{
			Table:    ch.Table,
			Chain:    ch,
			Exprs:    ex,
			UserData: userdata.AppendString(nil, userdata.TypeComment, b.comment(r)),
		})
	}
	return nil
}

// nftItem is a prefix, or a range found in a set, as set elements: its
// start and the address after its end (invalid when it ends at the last
// address, then it has no interval end element).
type nftItem struct {
	p       netip.Prefix // for items made from a prefix
	start   netip.Addr
	end     netip.Addr
	timeout time.Duration // the element's timeout; 0: none
	expires time.Duration // as read: the time left
	endOnly bool          // an interval end whose start is gone
}

func nftItemOf(p netip.Prefix, timeout time.Duration) nftItem {
	return nftItem{p: p, start: p.Addr(), end: nftLast(p).Next(), timeout: timeout}
}

// prefix is the prefix the item spans, if it is one.
func (it nftItem) prefix() (netip.Prefix, bool) {
	if it.p.IsValid() {
		return it.p, true
	}
	if !it.start.IsValid() {
		return netip.Prefix{}, false
	}
	for bits := it.start.BitLen(); bits >= 0; bits-- {
		p := netip.PrefixFrom(it.start, bits)
		if p.Masked().Addr() != it.start {
			break
		}
		if nftLast(p).Next() == it.end {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

// elements are the set elements of the item, with timeout unless del.
func (it nftItem) elements(del bool) []nftables.SetElement {
	var out []nftables.SetElement
	if !it.endOnly {
		e := nftables.SetElement{Key: it.start.AsSlice()}
		if !del {
			e.Timeout = it.timeout
		}
		out = append(out, e)
	}
	if it.end.IsValid() {
		out = append(out, nftables.SetElement{Key: it.end.AsSlice(), IntervalEnd: true})
	}
	return out
}

// nftLast is the last address of p.
func nftLast(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// nftItems pairs the elements of an interval set into ranges; interval ends
// without a start (left when a start timed out) are orphans.
func nftItems(els []nftables.SetElement, keyLen uint32) (items, orphans []nftItem) {
	els = slices.Clone(els)
	slices.SortFunc(els, func(a, b nftables.SetElement) int {
		if c := bytes.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		if a.IntervalEnd != b.IntervalEnd {
			if a.IntervalEnd {
				return -1
			}
			return 1
		}
		return 0
	})
	for i := 0; i < len(els); i++ {
		e := els[i]
		a, ok := netip.AddrFromSlice(e.Key)
		if !ok || uint32(len(e.Key)) != keyLen {
			continue
		}
		if e.IntervalEnd {
			orphans = append(orphans, nftItem{end: a, endOnly: true})
			continue
		}
		it := nftItem{start: a, timeout: e.Timeout, expires: e.Expires}
		if i+1 < len(els) && els[i+1].IntervalEnd {
			it.end, _ = netip.AddrFromSlice(els[i+1].Key)
			i++
		}
		items = append(items, it)
	}
	return items, orphans
}

// nftOutermost keeps the prefixes of m that no other prefix of m contains:
// the kernel refuses overlapping intervals, and the outer prefix blocks the
// inner ones anyway.
func nftOutermost(m map[netip.Prefix]Entry) map[netip.Prefix]Entry {
	lens := map[int]int{} // the lengths in use, IPv6 ones offset by 1000
	for p := range m {
		lens[nftLenKey(p, p.Bits())]++
	}
	out := make(map[netip.Prefix]Entry, len(m))
	for p, e := range m {
		if !nftContained(p, lens, func(q netip.Prefix) bool { _, ok := m[q]; return ok }) {
			out[p] = e
		}
	}
	return out
}

func nftOutermostSet(m map[netip.Prefix]bool) map[netip.Prefix]bool {
	lens := map[int]int{}
	for p := range m {
		lens[nftLenKey(p, p.Bits())]++
	}
	out := make(map[netip.Prefix]bool, len(m))
	for p := range m {
		if !nftContained(p, lens, func(q netip.Prefix) bool { return m[q] }) {
			out[p] = true
		}
	}
	return out
}

func nftLenKey(p netip.Prefix, bits int) int {
	if p.Addr().Is4() {
		return bits
	}
	return 1000 + bits
}

// nftContained reports whether a prefix that has holds p, looking only at
// the lengths in lens.
func nftContained(p netip.Prefix, lens map[int]int, has func(netip.Prefix) bool) bool {
	for bits := 0; bits < p.Bits(); bits++ {
		if lens[nftLenKey(p, bits)] > 0 {
			if q, _ := p.Addr().Prefix(bits); has(q) {
				return true
			}
		}
	}
	return false
}

// nftSameExpiry reports whether an element expiring at exp (zero: never)
// matches a wanted timeout t (0: none) at now, within nftSlack.
func nftSameExpiry(exp, now time.Time, t time.Duration) bool {
	if exp.IsZero() || t == 0 {
		return exp.IsZero() && t == 0
	}
	d := exp.Sub(now.Add(t))
	return d <= nftSlack && d >= -nftSlack
}

// nftOp is one change of a set: an item deleted (with touch: first re-added
// without a timeout, so that deleting one the kernel has timed out is no
// error), an item added, or both (a replacement).
type nftOp struct {
	set      string
	del, add nftItem
	touch    bool
}

// size is the number of set elements the op sends.
func (o nftOp) size() int {
	n := 0
	if o.del.start.IsValid() || o.del.endOnly {
		n = o.del.count()
		if o.touch {
			n *= 2
		}
	}
	if o.add.start.IsValid() {
		n += o.add.count()
	}
	return n
}

// count is the number of set elements of the item.
func (it nftItem) count() int {
	n := 0
	if !it.endOnly {
		n++
	}
	if it.end.IsValid() {
		n++
	}
	return n
}

// nftSetName is the ban set of a prefix.
func nftSetName(p netip.Prefix) string {
	if p.Addr().Is4() {
		return nftBan4
	}
	return nftBan6
}

// commit sends ops in batches: deletions first (a prefix going away may
// contain one coming in), then replacements, then additions; in each batch
// deletions precede additions, set by set. It records what ban4/ban6 hold.
func (b *Nftables) commit(ctx context.Context, ops []nftOp, now time.Time) error {
	rank := func(o nftOp) int {
		switch {
		case !o.add.start.IsValid():
			return 0
		case o.del.start.IsValid():
			return 1
		}
		return 2
	}
	slices.SortStableFunc(ops, func(x, y nftOp) int { return rank(x) - rank(y) })
	c, err := b.open()
	if err != nil {
		return err
	}
	for len(ops) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, size := 0, 0
		for n < len(ops) && (n == 0 || size+ops[n].size() <= nftBatchElems) {
			size += ops[n].size()
			n++
		}
		batch := ops[:n]
		ops = ops[n:]
		if err := b.send(c, batch); err != nil {
			b.synced = false
			return err
		}
		for _, o := range batch {
			if o.set != nftBan4 && o.set != nftBan6 {
				continue
			}
			if p, ok := o.del.prefix(); ok && o.del.start.IsValid() {
				delete(b.installed, p)
			}
			if o.add.start.IsValid() {
				var exp time.Time
				if o.add.timeout != 0 {
					exp = now.Add(o.add.timeout)
				}
				b.installed[o.add.p] = exp
			}
		}
	}
	b.synced = true
	return nil
}

func (b *Nftables) send(c *nftables.Conn, batch []nftOp) error {
	type lists struct{ touch, del, add []nftables.SetElement }
	per := map[string]*lists{}
	var names []string
	get := func(name string) *lists {
		l := per[name]
		if l == nil {
			l = &lists{}
			per[name] = l
			names = append(names, name)
		}
		return l
	}
	for _, o := range batch {
		l := get(o.set)
		if d := o.del; d.start.IsValid() || d.endOnly {
			if o.touch {
				t := d
				t.timeout = 0
				l.touch = append(l.touch, t.elements(false)...)
			}
			l.del = append(l.del, d.elements(true)...)
		}
		if o.add.start.IsValid() {
			l.add = append(l.add, o.add.elements(false)...)
		}
	}
	slices.Sort(names)
	var n int
	for _, name := range names {
		l, s := per[name], b.setRef(name)
		for _, step := range []struct {
			els []nftables.SetElement
			f   func(*nftables.Set, []nftables.SetElement) error
		}{{l.touch, c.SetAddElements}, {l.del, c.SetDeleteElements}, {l.add, c.SetAddElements}} {
			for chunk := range slices.Chunk(step.els, nftMsgElems) {
				if err := step.f(s, chunk); err != nil {
					return b.errorf("set %s: %w", name, err)
				}
				n += len(chunk)
			}
		}
	}
	if err := c.Flush(); err != nil {
		return b.errorf("update sets of table inet %s (%d elements): %w", b.table, n, err)
	}
	return nil
}
