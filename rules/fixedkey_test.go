package rules

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"testing"

	"github.com/logjail/logjail/parser"
)

// TestFixedKeyText: for v4, IPv6 and IPv4-mapped addresses (with a zone
// too) under every prefix length, the fixed key of IPKey and PrefixKey
// writes their text byte for byte and parses back from it to itself.
func TestFixedKeyText(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	addrs := []netip.Addr{
		netip.MustParseAddr("203.0.113.7"), netip.MustParseAddr("198.51.100.255"), netip.MustParseAddr("0.0.0.0"),
		netip.MustParseAddr("::ffff:203.0.113.7"), netip.MustParseAddr("2001:db8::"), netip.MustParseAddr("2001:db8::1"),
		netip.MustParseAddr("2001:db8:1:2:3:4:5:6"), netip.MustParseAddr("fe80::1%eth0"), netip.MustParseAddr("::"),
		netip.MustParseAddr("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
	}
	for range 200 {
		var b [16]byte
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		addrs = append(addrs, netip.AddrFrom16(b), netip.AddrFrom4([4]byte(b[:4])))
	}
	n := 0
	for v4 := 1; v4 <= 32; v4++ {
		for v6 := 1; v6 <= 128; v6++ {
			if v4 != 24 && v4 != 32 && v6%7 != 0 && v6 != 64 && v6 != 128 {
				continue
			}
			c := &Config{IPv4Prefix: v4, IPv6Prefix: v6}
			for _, a := range addrs {
				for _, k := range []struct {
					name  string
					text  string
					fixed FixedKey
				}{{"IPKey", c.IPKey(a), c.IPFixed(a)}, {"PrefixKey", c.PrefixKey(a), c.PrefixFixed(a)}} {
					n++
					if got := k.fixed.String(); got != k.text {
						t.Fatalf("v4 /%d v6 /%d %s: %s = %q, its fixed key %+v writes %q", v4, v6, a, k.name, k.text, k.fixed, got)
					}
					back, ok := ParseFixedKey(k.text)
					if !ok || back != k.fixed {
						t.Fatalf("ParseFixedKey(%q) = %+v %v, want %+v", k.text, back, ok, k.fixed)
					}
					if multi := k.fixed.Multi(); multi != (k.text != a.Unmap().WithZone("").String()) {
						t.Fatalf("%q: Multi %v", k.text, multi)
					}
				}
			}
		}
	}
	t.Logf("%d keys", n)
}

// TestParseFixedKeyRefuses: texts that are no canonical address or
// prefix stay text keys, and a mapped address is not its IPv4 one.
func TestParseFixedKeyRefuses(t *testing.T) {
	for _, s := range []string{
		"", "user:alice", "ua:curl", "range:googlebot", "203.0.113.7|ua:curl", "203.0.113.7/32",
		"203.0.113.7/24", "2001:DB8::1", "2001:db8:0::1", "fe80::1%eth0", "2001:db8::/129", "203.0.113.07",
		"2001:db8::1.2.3.4", "2001:db8::1/64", "198.51.100.", "::ffff:203.0.113.0/24",
	} {
		if k, ok := ParseFixedKey(s); ok {
			t.Errorf("ParseFixedKey(%q) = %+v, want a text key", s, k)
		}
	}
	v4, _ := ParseFixedKey("203.0.113.7")
	mapped, ok := ParseFixedKey("::ffff:203.0.113.7")
	if !ok || mapped == v4 || mapped.String() != "::ffff:203.0.113.7" {
		t.Errorf("::ffff:203.0.113.7 = %+v %v, the same key as 203.0.113.7 (%+v)", mapped, ok, v4)
	}
	if p, ok := ParseFixedKey("::ffff:203.0.113.0/120"); !ok || p.String() != "::ffff:203.0.113.0/120" {
		t.Errorf("::ffff:203.0.113.0/120 = %+v %v", p, ok)
	}
}

// TestClassifyKeys: ClassifyKeys charges what ClassifyCached charges, an
// address or prefix key as its fixed key alone (whose text is
// ClassifyCached's key), every other key as its text; and it makes no
// text: no allocation for an entry of a new address.
func TestClassifyKeys(t *testing.T) {
	c := mustParse(t, `
ipv6_prefix: 64
sources: [{name: web, paths: [/x]}]
ranges:
  office: {cidrs: [198.51.100.0/24], key: prefix, limits: ["5 per second"]}
  crawler: {cidrs: [203.0.113.128/25], group: true, limits: ["5 per second"]}
rules:
  - {name: ip, limits: ["5 per second"]}
  - {name: nets, key: prefix, limits: ["5 per second"]}
  - {name: users, key: user, limits: ["5 per second"]}
  - {name: ipua, key: ip+user_agent, limits: ["5 per second"]}
`, testOptions)
	src := c.Source("web")
	var kc, kc2 KeyCache
	var a, b []Charge
	for i := range 300 {
		e := parser.Entry{User: "alice", UserAgent: "curl", Has: parser.HasUser | parser.HasUserAgent}
		switch i % 4 {
		case 0:
			e.IP = netip.AddrFrom4([4]byte{203, 0, 113, byte(i)}) // the crawler range from .128
		case 1:
			e.IP = netip.AddrFrom4([4]byte{198, 51, 100, byte(i)}) // office
		default:
			e.IP = netip.MustParseAddr(fmt.Sprintf("2001:db8:%x::%x", i, i))
		}
		a, _ = c.ClassifyCached(&kc, src, &e, a[:0])
		b, _ = c.ClassifyKeys(&kc2, src, &e, b[:0])
		if len(a) != len(b) || len(a) == 0 {
			t.Fatalf("%s: %d charges, ClassifyKeys %d", e.IP, len(a), len(b))
		}
		for j := range a {
			x, y := a[j], b[j]
			if x.Fixed.IsZero() {
				if x.Key != y.Key || !y.Fixed.IsZero() {
					t.Errorf("%s: text key %q, ClassifyKeys %q %+v", e.IP, x.Key, y.Key, y.Fixed)
				}
			} else if y.Key != "" || y.Fixed != x.Fixed || x.Fixed.String() != x.Key {
				t.Errorf("%s: key %q (%+v), ClassifyKeys %q %+v", e.IP, x.Key, x.Fixed, y.Key, y.Fixed)
			}
			x.Key, x.Fixed, y.Key, y.Fixed = "", FixedKey{}, "", FixedKey{}
			if x != y {
				t.Errorf("%s: charge %+v, ClassifyKeys %+v", e.IP, x, y)
			}
		}
	}
	// Address keys alone: nothing allocated for an entry of a new /64.
	c = mustParse(t, `
sources: [{name: web, paths: [/x]}]
rules:
  - {name: ip, limits: ["5 per second"]}
  - {name: nets, key: prefix, limits: ["5 per second"]}
`, testOptions)
	src = c.Source("web")
	var kc3 KeyCache
	next := uint32(0)
	allocs := testing.AllocsPerRun(1000, func() {
		next++
		e := parser.Entry{IP: netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, byte(next >> 24), byte(next >> 16), byte(next >> 8), byte(next), 15: 1})}
		b, _ = c.ClassifyKeys(&kc3, src, &e, b[:0])
		if len(b) != 2 || b[0].Key != "" || b[1].Key != "" || b[1].Fixed.IsZero() {
			t.Fatalf("charges %+v", b)
		}
	})
	if allocs != 0 {
		t.Errorf("ClassifyKeys of a new address: %v allocations, want 0", allocs)
	}
}

// netipText is what AppendText wrote before it formatted the words itself
// (issue 23): netip's text of k's address, or of its prefix.
func netipText(k FixedKey) string {
	a := k.Addr()
	if !a.IsValid() {
		return ""
	}
	if !k.Multi() {
		return a.String()
	}
	return netip.PrefixFrom(a, int(k.Bits)).String()
}

// randomWords returns 128 bits whose 16-bit groups are each zero, 0xffff,
// one small value or random, so that every shape of zero run (none, one,
// two equal, at either end, all) comes up often; and, one time in eight,
// an IPv4-mapped address.
func randomWords(rng *rand.Rand) (hi, lo uint64) {
	var w [2]uint64
	for i := range 8 {
		var g uint64
		switch rng.IntN(4) {
		case 0: // zero
		case 1:
			g = 0xffff
		case 2:
			g = uint64(rng.IntN(0x120))
		default:
			g = uint64(rng.Uint32() & 0xffff)
		}
		w[i/4] |= g << (48 - 16*(i%4))
	}
	if rng.IntN(8) == 0 {
		w[0], w[1] = 0, 0xffff<<32|uint64(rng.Uint32())
	}
	return w[0], w[1]
}

// TestAppendTextAsNetip: AppendText writes netip's text byte for byte on
// 2,000,000 random keys (v4, v6 and IPv4-mapped; whole addresses and
// prefixes of every length, masked as the key table holds them), and on
// the edge cases by name; and appends to what b holds.
func TestAppendTextAsNetip(t *testing.T) {
	for _, s := range []string{"::", "::1", "1::", "::ffff:0.0.0.0", "::ffff:255.255.255.255", "::fffe:1.2.3.4",
		"0:0:1::", "1:0:0:1::", "1::1:0:0:1", "1:0:0:1:0:0:1:0", "1:0:1:0:1:0:1:0", "1:2:3:4:5:6:7:8",
		"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "0.0.0.0", "255.255.255.255", "10.0.0.1", "::1.2.3.4"} {
		a := netip.MustParseAddr(s)
		for bits := 0; bits <= a.BitLen(); bits++ {
			k := mappedKey(a, bits)
			if a.Is4() {
				k = fixedKeyOf(a, bits)
			}
			if got, want := k.String(), netipText(k); got != want {
				t.Fatalf("%s /%d: %q, netip writes %q", s, bits, got, want)
			}
		}
	}
	rng := rand.New(rand.NewPCG(23, 5))
	n := 2_000_000
	if testing.Short() {
		n = 200_000
	}
	buf := []byte("key=")
	for i := range n {
		var k FixedKey
		if i%4 == 0 {
			bits := 32
			if i%8 == 0 {
				bits = rng.IntN(33)
			}
			k = fixedKeyOf(netip.AddrFrom4([4]byte{byte(rng.Uint32()), byte(rng.IntN(3) * 127), byte(rng.Uint32()), byte(rng.Uint32())}), bits)
		} else {
			hi, lo := randomWords(rng)
			bits := 128
			if i%2 == 0 {
				bits = rng.IntN(129)
			}
			hi, lo = Mask128(hi, lo, bits)
			k = FixedKey{Hi: hi, Lo: lo, Bits: uint8(bits), Fam: 6}
		}
		buf = k.AppendText(buf[:4])
		if want := netipText(k); string(buf[4:]) != want || string(buf[:4]) != "key=" {
			t.Fatalf("key %+v: AppendText wrote %q after %q, netip writes %q", k, buf[4:], buf[:4], want)
		}
	}
	if got := (FixedKey{}).AppendText(buf[:4]); string(got) != "key=" {
		t.Fatalf("the zero key appended %q", got[4:])
	}
}

// TestHexGroupZeroGroups holds appendAddr6's two pieces to plain models:
// hexGroup to strconv's hexadecimal on every 16-bit value, zeroGroups to
// a group-by-group comparison on words made of zero, one-bit, full and
// random groups.
func TestHexGroupZeroGroups(t *testing.T) {
	for v := range 1 << 16 {
		x, d := hexGroup(uint16(v))
		got := string([]byte{byte(x), byte(x >> 8), byte(x >> 16), byte(x >> 24)}[:d])
		if want := strconv.FormatUint(uint64(v), 16); got != want || x>>(8*d)&0xff != 0 && d < 4 {
			t.Fatalf("hexGroup(%#x) = %q (x %#x, %d digits), want %q", v, got, x, d, want)
		}
	}
	rng := rand.New(rand.NewPCG(23, 55))
	groups := []uint64{0, 1, 0x8000, 0x7fff, 0xffff, 0x0100}
	for range 200_000 {
		var x uint64
		var want uint8
		for i := range 4 {
			g := rng.Uint64() & 0xffff
			if rng.IntN(2) == 0 {
				g = groups[rng.IntN(len(groups))]
			}
			x |= g << (48 - 16*i)
			if g == 0 {
				want |= 1 << i
			}
		}
		if got := zeroGroups(x); got != want {
			t.Fatalf("zeroGroups(%#016x) = %04b, want %04b", x, got, want)
		}
	}
}

// BenchmarkAppendText: a key's text, by AppendText and by netip as before.
func BenchmarkAppendText(b *testing.B) {
	keys := []FixedKey{
		mappedKey(netip.MustParseAddr("2001:db8:8000:1f3a::1"), 128),
		mappedKey(netip.MustParseAddr("2001:db8:8000:1f3a::1"), 64),
		fixedKeyOf(netip.MustParseAddr("203.0.113.77"), 32),
	}
	for _, k := range keys {
		buf := make([]byte, 0, 64)
		b.Run(k.String()+"/fixed", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				buf = k.AppendText(buf[:0])
			}
		})
		b.Run(k.String()+"/netip", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				a := k.Addr()
				if k.Multi() {
					buf = netip.PrefixFrom(a, int(k.Bits)).AppendTo(buf[:0])
				} else {
					buf = a.AppendTo(buf[:0])
				}
			}
		})
	}
}

// TestIPFixedAsFixedKeyOf holds IPFixed (its own steps for an IPv4
// address) to what it was, fixedKeyOf of the unmapped address at 32 bits
// or at ipv6_prefix, on random IPv4, IPv4-mapped and IPv6 addresses (zones
// too) and the zero address.
func TestIPFixedAsFixedKeyOf(t *testing.T) {
	rnd := rand.New(rand.NewPCG(10, 11))
	for _, p6 := range []int{128, 64, 56} {
		c := &Config{IPv6Prefix: p6, IPv4Prefix: 24}
		model := func(a netip.Addr) FixedKey {
			a = a.Unmap()
			if a.Is6() {
				return fixedKeyOf(a, c.IPv6Prefix)
			}
			return fixedKeyOf(a, 32)
		}
		for n := range 100000 {
			var b [16]byte
			for i := range b {
				b[i] = byte(rnd.Uint32())
			}
			var a netip.Addr
			switch n % 5 {
			case 0:
				a = netip.AddrFrom4([4]byte(b[:4]))
			case 1:
				a = netip.AddrFrom16([16]byte{10: 0xff, 11: 0xff, 12: b[0], 13: b[1], 14: b[2], 15: b[3]})
			case 2:
				a = netip.AddrFrom16(b)
			case 3:
				a = netip.AddrFrom16(b).WithZone("eth0")
			}
			if got, want := c.IPFixed(a), model(a); got != want {
				t.Fatalf("IPFixed(%v) = %+v, want %+v", a, got, want)
			}
		}
	}
}
