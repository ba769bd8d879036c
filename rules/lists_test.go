package rules

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
)

// TestListsAsLookups holds lists, which looks an address up only when
// the first byte of a prefix of the allow list, the deny list or the
// ranges is its own (Config.listed), to the three look-ups alone
// (lookLists), on configurations of random prefixes (IPv4 and IPv6, of
// every length, shorter than 8 bits too, IPv4-mapped ones, host
// addresses) and addresses in them, beside them and anywhere, mapped,
// zoned and the zero Addr.
func TestListsAsLookups(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 3))
	addr := func() netip.Addr {
		switch r.IntN(4) {
		case 0, 1:
			return netip.AddrFrom4([4]byte{byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))})
		case 2:
			var b [16]byte
			for i := range b {
				b[i] = byte(r.IntN(256))
			}
			b[0] = []byte{0x20, 0x2a, 0x00, 0xfe, b[0]}[r.IntN(5)]
			return netip.AddrFrom16(b)
		}
		var b [16]byte
		b[10], b[11], b[12] = 0xff, 0xff, byte(r.IntN(256))
		return netip.AddrFrom16(b) // IPv4-mapped
	}
	skipped, listed, configs := 0, 0, 0
	for cfgN := range 60 {
		var prefixes []netip.Prefix
		seen := map[netip.Prefix]bool{}
		for len(prefixes) < 1+r.IntN(12) {
			a := addr()
			bits := 1 + r.IntN(a.BitLen())
			if r.IntN(2) == 0 {
				bits = a.BitLen() - r.IntN(a.BitLen()/4)
			}
			p := netip.PrefixFrom(a, bits).Masked()
			if !seen[p] {
				seen[p] = true
				prefixes = append(prefixes, p)
			}
		}
		var allow, deny, ranges []string
		var hosts []netip.Addr
		for _, p := range prefixes {
			switch r.IntN(4) {
			case 0:
				allow = append(allow, fmt.Sprintf("%q", p))
			case 1:
				deny = append(deny, fmt.Sprintf("%q", p))
			case 2:
				ranges = append(ranges, fmt.Sprintf("%q", p))
			default:
				if p.IsSingleIP() && !p.Addr().Is4In6() {
					hosts = append(hosts, p.Addr())
				} else {
					ranges = append(ranges, fmt.Sprintf("%q", p))
				}
			}
		}
		text := "sources:\n  - name: web\n    paths: [/x.log]\n    format: combined\n"
		text += "allow: [" + strings.Join(allow, ", ") + "]\ndeny: [" + strings.Join(deny, ", ") + "]\n"
		if len(ranges) > 0 {
			text += "ranges:\n"
			for i, p := range ranges {
				text += fmt.Sprintf("  r%d:\n    cidrs: [%s]\n    limits: [\"100 per second\"]\n", i, p)
			}
		}
		text += "rules:\n  - name: flood\n    limits: [\"5 per 10s\"]\n"
		c, err := Parse("test.yaml", []byte(text), Options{HostAddrs: hosts})
		if err != nil {
			t.Logf("config %d refused (%v):\n%s", cfgN, err, text)
			continue
		}
		configs++
		var as []netip.Addr
		for range 3000 {
			as = append(as, addr())
		}
		for _, p := range prefixes {
			for range 50 {
				a := p.Addr().As16()
				for i := p.Bits()/8 + 12*bool2int(p.Addr().Is4()); i < 16; i++ {
					if r.IntN(3) == 0 {
						a[i] = byte(r.IntN(256))
					}
				}
				b := netip.AddrFrom16(a)
				if p.Addr().Is4() {
					b = b.Unmap()
				}
				as = append(as, b, b.Prev(), b.Next())
			}
		}
		as = append(as, netip.Addr{}, netip.MustParseAddr("fe80::1%eth0"), netip.MustParseAddr("::ffff:127.0.0.1"), netip.MustParseAddr("::1"))
		for _, a := range as {
			l, rg := c.lists(a)
			wl, wrg := c.lookLists(a)
			if l != wl || rg != wrg {
				t.Fatalf("config:\n%s\nlists(%s) = %d, %d; the look-ups: %d, %d", text, a, l, rg, wl, wrg)
			}
			if !c.listed.may(a) {
				skipped++
			}
			if l != 0 {
				listed++
			}
		}
	}
	t.Logf("%d configurations, %d addresses skipped, %d listed", configs, skipped, listed)
	if configs < 40 || skipped < 10000 || listed < 1000 {
		t.Fatalf("%d configurations, %d addresses skipped, %d listed: too few to compare", configs, skipped, listed)
	}
}

func bool2int(b bool) int {
	if b {
		return 1
	}
	return 0
}
