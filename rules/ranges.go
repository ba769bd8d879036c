package rules

import (
	"net/netip"
	"slices"
)

// GroupRanges returns the CIDRs of every range with `group: true`, by its
// key (range:NAME), each list sorted by address: what a ban of the key
// blocks (DESIGN.md: a ban of a range key blocks every address in it,
// including addresses never seen in the logs). A range nested inside
// another's CIDR is inside it for this as for KeysContaining: a ban of the
// outer range blocks it too, unless it is on the allow list.
func (c *Config) GroupRanges() map[string][]netip.Prefix {
	out := map[string][]netip.Prefix{}
	for p, ri := range c.ranges.All() {
		if rg := &c.rangeDefs[ri]; rg.group {
			out[rg.key] = append(out[rg.key], p)
		}
	}
	for _, ps := range out {
		slices.SortFunc(ps, func(a, b netip.Prefix) int {
			if c := a.Addr().Compare(b.Addr()); c != 0 {
				return c
			}
			return a.Bits() - b.Bits()
		})
	}
	return out
}
