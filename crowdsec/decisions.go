package crowdsec

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/logjail/logjail/actions"
	"github.com/logjail/logjail/state"
)

// Origin is the origin of every decision logjail serves.
const Origin = "logjail"

// forever is the duration a ban without an end is sent with: CrowdSec's
// decisions always have one.
const forever = 10 * 365 * 24 * time.Hour

// decision is a decision as the API keeps it.
type decision = state.BouncerDecision

// fields are what identify a decision's content: a change of any of them
// is a new decision (a new ID), the old one deleted.
func sameFields(a, b *decision) bool {
	return a.Value == b.Value && a.Scope == b.Scope && a.Type == b.Type && a.Scenario == b.Scenario && a.Until.Equal(b.Until)
}

// toDecisions is what an entry becomes: a decision for its prefix, or,
// where allowed prefixes lie inside it, one for each of the largest
// prefixes of it that contain none (CrowdSec's decisions have no
// exemptions).
func (a *API) toDecisions(e actions.Entry, allow []netip.Prefix) []decision {
	typ := "ban"
	if e.Kind == actions.KindThrottle {
		typ = a.cfg.ThrottleAs
	}
	var out []decision
	for _, p := range subtract(e.Prefix, actions.Exempt(e.Prefix, allow)) {
		scope := "Range"
		if p.IsSingleIP() {
			scope = "Ip"
		}
		out = append(out, decision{Value: actions.PrefixString(p), Scope: scope, Type: typ, Scenario: e.Rule, Until: e.Until})
	}
	return out
}

// subtract returns p less the prefixes of holes (each inside p), as the
// fewest prefixes: p halved until no half holds a hole but as a whole.
func subtract(p netip.Prefix, holes []netip.Prefix) []netip.Prefix {
	if len(holes) == 0 {
		return []netip.Prefix{p}
	}
	for _, h := range holes {
		if h.Bits() <= p.Bits() && h.Contains(p.Addr()) {
			return nil // p lies inside a hole
		}
	}
	if p.Bits() >= p.Addr().BitLen() {
		return []netip.Prefix{p}
	}
	lo := netip.PrefixFrom(p.Addr(), p.Bits()+1)
	hiAddr := p.Addr().AsSlice()
	hiAddr[p.Bits()/8] |= 0x80 >> (p.Bits() % 8)
	ha, _ := netip.AddrFromSlice(hiAddr)
	hi := netip.PrefixFrom(ha, p.Bits()+1)
	var out []netip.Prefix
	for _, half := range []netip.Prefix{lo, hi} {
		var in []netip.Prefix
		for _, h := range holes {
			if half.Overlaps(h) {
				in = append(in, h)
			}
		}
		out = append(out, subtract(half, in)...)
	}
	return out
}

// Name names the action.
func (a *API) Name() string { return a.cfg.Name }

// InMemory: the decisions are logjail's own (in memory and in the
// database): nothing outside changes them, the periodic resync can skip
// them.
func (a *API) InMemory() bool { return true }

// Sync makes the active decisions exactly those of entries: decisions
// that did not change keep their IDs, the others are deleted and made
// anew.
func (a *API) Sync(ctx context.Context, entries []actions.Entry, allow []netip.Prefix) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.allow = slices.Clone(allow)
	want := map[string]decision{}
	a.pieces = map[netip.Prefix][]string{}
	for _, e := range entries {
		for _, d := range a.toDecisions(e, allow) {
			want[d.Value] = d
			a.pieces[e.Prefix] = append(a.pieces[e.Prefix], d.Value)
		}
	}
	ch := a.begin()
	for v, d := range a.active {
		if w, ok := want[v]; !ok || !sameFields(d, &w) {
			ch.remove(d)
		}
	}
	for _, w := range sortedValues(want) {
		if d, ok := a.active[w.Value]; !ok || !sameFields(d, &w) {
			ch.add(w)
		}
	}
	return ch.commit()
}

// Apply sets and deletes entries: the decisions an entry made before (one,
// or its pieces around exemptions) give way to those it makes now.
func (a *API) Apply(ctx context.Context, changes []actions.Change) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	ch := a.begin()
	pieces := maps.Clone(a.pieces)
	for _, c := range changes {
		var want []decision
		if !c.Delete {
			want = a.toDecisions(c.Entry, a.allow)
		}
		keep := map[string]decision{}
		var values []string
		for _, w := range want {
			keep[w.Value] = w
			values = append(values, w.Value)
		}
		old := pieces[c.Prefix]
		if len(values) > 0 {
			pieces[c.Prefix] = values
		} else {
			delete(pieces, c.Prefix)
		}
		for _, v := range old {
			d := a.active[v]
			if d == nil {
				continue
			}
			w, kept := keep[v]
			if kept && sameFields(d, &w) {
				continue
			}
			if !kept && heldElsewhere(pieces, v, c.Prefix) {
				continue // another entry makes the same value (a piece of a split range)
			}
			ch.remove(d)
		}
		for _, w := range want {
			if d, ok := a.active[w.Value]; !ok || !sameFields(d, &w) || ch.removing(d) {
				ch.add(w)
			}
		}
	}
	err := ch.commit()
	if err == nil {
		a.pieces = pieces
	}
	return err
}

// heldElsewhere reports whether an entry other than the one of prefix
// except makes the decision of value v: the entry whose prefix it is, or
// one whose prefix was split around exemptions into pieces among which it
// is.
func heldElsewhere(pieces map[netip.Prefix][]string, v string, except netip.Prefix) bool {
	p, err := parseValue(v)
	if err != nil {
		return false
	}
	if p != except && slices.Contains(pieces[p], v) {
		return true
	}
	for q, vs := range pieces {
		if q != except && q != p && q.Bits() < p.Bits() && q.Contains(p.Addr()) && slices.Contains(vs, v) {
			return true
		}
	}
	return false
}

// Close: the listener is closed by Serve's context; nothing else is held.
func (a *API) Close() error { return nil }

var (
	_ actions.Backend = (*API)(nil)
	_ actions.Memory  = (*API)(nil)
)

func parseValue(v string) (netip.Prefix, error) {
	if strings.Contains(v, "/") {
		return netip.ParsePrefix(v)
	}
	ad, err := netip.ParseAddr(v)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(ad, ad.BitLen()), nil
}

func sortedValues(m map[string]decision) []decision {
	out := make([]decision, 0, len(m))
	for _, d := range m {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b decision) int { return strings.Compare(a.Value, b.Value) })
	return out
}

// change is one write of the decisions: removals and additions, given
// their sequence numbers as they come, written to the database in one
// transaction, then made visible.
type change struct {
	a       *API
	seq     int64
	added   []decision
	removed map[int64]int64
	gone    []*decision
}

func (a *API) begin() *change { return &change{a: a, seq: a.seq, removed: map[int64]int64{}} }

func (c *change) remove(d *decision) {
	if c.removing(d) {
		return
	}
	c.seq++
	c.removed[d.ID] = c.seq
	c.gone = append(c.gone, d)
}

// removing reports whether the change removes d.
func (c *change) removing(d *decision) bool {
	_, ok := c.removed[d.ID]
	return ok
}

func (c *change) add(d decision) {
	for _, x := range c.added {
		if x.Value == d.Value {
			return // one decision a value
		}
	}
	c.seq++
	d.ID = c.seq
	c.added = append(c.added, d)
}

// commit writes the change and, once it is written, makes it the API's
// state; a failed write changes nothing (the manager retries with a Sync).
// a.mu is held.
func (c *change) commit() error {
	if len(c.added) == 0 && len(c.removed) == 0 {
		return nil
	}
	a := c.a
	prune := a.pruneBelow()
	if err := a.db.WriteBouncerDecisions(c.added, c.removed, prune); err != nil {
		return fmt.Errorf("crowdsec %s: %w", a.cfg.Name, err)
	}
	for _, d := range c.gone {
		if a.active[d.Value] == d {
			delete(a.active, d.Value)
		}
		nd := *d
		nd.Deleted = c.removed[d.ID]
		a.removed = append(a.removed, &nd)
	}
	for i := range c.added {
		d := c.added[i]
		a.active[d.Value] = &d
		a.order = append(a.order, &d) // IDs only grow: the order holds
	}
	if len(a.order) > 2*len(a.active)+64 {
		a.order = slices.DeleteFunc(a.order, func(d *decision) bool { return a.active[d.Value] != d })
	}
	a.seq = c.seq
	if prune > 0 {
		i := 0
		for i < len(a.removed) && a.removed[i].Deleted <= prune {
			i++
		}
		a.removed = slices.Delete(a.removed, 0, i)
	}
	return nil
}

// pruneBelow is the sequence number every bouncer that ever pulled has
// reached: removals up to it are needed by none. A bouncer that never
// pulled the stream needs none (its first delta is every active
// decision). a.mu is held.
func (a *API) pruneBelow() int64 {
	low := a.seq
	for _, b := range a.bouncers {
		if b.LastSeq > 0 && b.LastSeq < low {
			low = b.LastSeq
		}
	}
	return low
}
