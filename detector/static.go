package detector

import (
	"net/netip"
	"slices"
	"time"

	"github.com/logjail/logjail/rules"
)

// Static appends, at log time t, a ban (rule "deny", until zero) for every
// static ban not in force since the previous call, and an unban (reason
// "removed from config") for every one that is no longer in bans, in key
// order. Call it at start and after every reload. Static bans are not
// counted by the circuit breaker and never LogOnly.
func (d *Detector) Static(t time.Time, bans []rules.StaticBan, out []Decision) []Decision {
	next := make(map[string]rules.StaticBan, len(bans))
	for _, b := range bans {
		key := prefixKey(b.Key)
		if _, dup := next[key]; dup || !b.Key.IsValid() {
			continue
		}
		next[key] = b
		if old, had := d.static[key]; had {
			if old != b {
				d.staticChanged(key)
			}
			continue
		}
		d.staticChanged(key)
		reason := b.Reason
		if reason == "" {
			reason = "deny list"
		}
		out = append(out, Decision{Rule: staticRule, Key: key, Kind: Ban, Time: t, Reason: reason, Origin: b.Origin})
	}
	var gone []string
	for key := range d.static {
		if _, ok := next[key]; !ok {
			gone = append(gone, key)
		}
	}
	slices.Sort(gone)
	for _, key := range gone {
		out = append(out, Decision{Rule: staticRule, Key: key, Kind: Unban, Time: t, Reason: "removed from config", Origin: d.static[key].Origin})
		d.gone = append(d.gone, goneKey{rule: staticRule, key: key})
	}
	d.static = next
	return out
}

// staticRule is the rule name of static bans' decisions and key states.
const staticRule = "deny"

// staticChanged marks a static ban changed for the next checkpoint.
func (d *Detector) staticChanged(key string) {
	if d.staticDirty == nil {
		d.staticDirty = map[string]struct{}{}
	}
	d.staticDirty[key] = struct{}{}
}

// prefixKey is the canonical key of a denied CIDR: the address alone for a
// single address, else the masked prefix.
func prefixKey(p netip.Prefix) string {
	p = p.Masked()
	if p.IsSingleIP() {
		return p.Addr().String()
	}
	return p.String()
}
