package rules

import (
	"net/netip"
	"slices"
)

// GroupRanges returns the addresses of every range with `group: true`, by
// its key (range:NAME), as prefixes sorted by address: what a ban of the
// key blocks (DESIGN.md: a ban of a range key blocks every address in it,
// including addresses never seen in the logs). The addresses of a range
// are those it is the most specific range of, the ones charged to its key:
// its CIDRs less the CIDRs of other ranges nested in them (a `none`
// range of partners inside a provider's range stays out of the
// provider's ban), each remaining piece as few prefixes as cover it.
func (c *Config) GroupRanges() map[string][]netip.Prefix {
	out := map[string][]netip.Prefix{}
	for p, ri := range c.ranges.All() {
		rg := &c.rangeDefs[ri]
		if !rg.group {
			continue
		}
		var holes []netip.Prefix
		for q, qi := range c.ranges.Subnets(p) {
			if qi != ri {
				holes = append(holes, q)
			}
		}
		out[rg.key] = append(out[rg.key], carve(p, holes)...)
	}
	c.botGroupRanges(out)
	for k, ps := range out {
		slices.SortFunc(ps, comparePrefix)
		// A CIDR of the range inside another of its own adds nothing.
		kept := ps[:0]
		for _, p := range ps {
			if !slices.ContainsFunc(kept, func(q netip.Prefix) bool { return q.Bits() <= p.Bits() && q.Contains(p.Addr()) }) {
				kept = append(kept, p)
			}
		}
		out[k] = kept
	}
	return out
}

// carve returns p less the holes, as prefixes.
func carve(p netip.Prefix, holes []netip.Prefix) []netip.Prefix {
	split := false
	for _, h := range holes {
		if h.Bits() <= p.Bits() && h.Contains(p.Addr()) {
			return nil // wholly in a hole
		}
		if p.Overlaps(h) {
			split = true
		}
	}
	if !split {
		return []netip.Prefix{p}
	}
	b := p.Bits()
	lo := netip.PrefixFrom(p.Addr(), b+1)
	s := p.Addr().AsSlice()
	s[b/8] |= 0x80 >> (b % 8)
	hiAddr, _ := netip.AddrFromSlice(s)
	hi := netip.PrefixFrom(hiAddr, b+1)
	return append(carve(lo, holes), carve(hi, holes)...)
}

// comparePrefix orders prefixes by address, then by length.
func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}
