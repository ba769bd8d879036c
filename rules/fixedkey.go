package rules

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
	"slices"
	"strings"

	"github.com/logjail/logjail/internal/word"
)

// FixedKey is an address or prefix key (`key: ip`, `key: prefix`, and a
// range's rule keyed by either) as a fixed-size value: the address or the
// masked prefix as 128 bits, its family and its length. It is what the
// detector's key table compares and keeps, so that no key text is made for
// a line (Config.ClassifyKeys); its text (String) is the key's one
// canonical form, byte for byte Config.IPKey's or Config.PrefixKey's. The
// zero value is no key: the charge's key is its text (Charge.Key).
//
// Two keys are the same key exactly when their FixedKeys are equal: an
// IPv4 key (Fam 4, the address in the low 32 bits of Lo) and the
// IPv4-mapped IPv6 key of the same bits (Fam 6) differ, as their texts do.
type FixedKey struct {
	Hi, Lo uint64 // the address, or the prefix masked, big-endian
	Bits   uint8  // the prefix length; 32 or 128, the family's, for an address
	Fam    uint8  // 4 or 6; 0: no fixed key
}

// IsZero reports whether k is no key.
func (k FixedKey) IsZero() bool { return k.Fam == 0 }

// Multi reports whether k is a prefix shorter than its family's length:
// more than one address.
func (k FixedKey) Multi() bool { return int(k.Bits) < k.full() }

func (k FixedKey) full() int {
	if k.Fam == 4 {
		return 32
	}
	return 128
}

// fixedKeyOf returns the key of a (unmapped, without its zone) cut to bits
// (the whole address when bits is its length or more).
func fixedKeyOf(a netip.Addr, bits int) FixedKey {
	a = a.Unmap()
	if a.Is4() {
		bits = min(max(bits, 0), 32)
		_, lo := word.Addr(a)
		v := lo & 0xffffffff
		if bits < 32 {
			v &= ^uint64(0) << (32 - bits) & 0xffffffff
		}
		return FixedKey{Lo: v, Bits: uint8(bits), Fam: 4}
	}
	return mappedKey(a, bits)
}

// mappedKey is the IPv6 key of a (an IPv4-mapped address stays IPv6) cut
// to bits.
func mappedKey(a netip.Addr, bits int) FixedKey {
	hi, lo := word.Addr(a)
	bits = min(max(bits, 0), 128)
	hi, lo = Mask128(hi, lo, bits)
	return FixedKey{Hi: hi, Lo: lo, Bits: uint8(bits), Fam: 6}
}

// Mask128 is the 128-bit value hi:lo (hi its first 64 bits) with only its
// first bits kept, 0 ≤ bits ≤ 128: an address's prefix of that length.
func Mask128(hi, lo uint64, bits int) (uint64, uint64) {
	switch {
	case bits <= 0:
		return 0, 0
	case bits < 64:
		return hi & (^uint64(0) << (64 - bits)), 0
	case bits == 64:
		return hi, 0
	case bits < 128:
		return hi, lo & (^uint64(0) << (128 - bits))
	}
	return hi, lo
}

// Addr returns k's address (the prefix's first one); invalid for the zero key.
func (k FixedKey) Addr() netip.Addr {
	switch k.Fam {
	case 4:
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(k.Lo))
		return netip.AddrFrom4(b)
	case 6:
		var b [16]byte
		binary.BigEndian.PutUint64(b[:8], k.Hi)
		binary.BigEndian.PutUint64(b[8:], k.Lo)
		return netip.AddrFrom16(b)
	}
	return netip.Addr{}
}

// AppendText appends k's text to b: the address for a whole address, else
// the prefix ("203.0.113.0/24", "2001:db8:1:2::/64"), as IPKey and
// PrefixKey write them. The zero key appends nothing.
//
// The text is written from k's words, byte for byte what netip.Addr's and
// netip.Prefix's AppendTo write for k's address and prefix (RFC 5952: the
// groups in lower-case hexadecimal without leading zeros, the longest run
// of two or more zero groups, the first of equal ones, as "::"; an
// IPv4-mapped address as ::ffff: and its dotted quad), without making the
// netip.Addr (issue 23: a checkpoint writes the text of every key it
// holds, and netip's formatting was most of its cost).
// TestAppendTextAsNetip holds it to netip's on millions of random keys.
func (k FixedKey) AppendText(b []byte) []byte {
	switch k.Fam {
	case 4:
		b = appendAddr4(b, uint32(k.Lo))
	case 6:
		b = appendAddr6(b, k.Hi, k.Lo)
	default:
		return b
	}
	if k.Multi() {
		b = append(b, '/')
		b = appendDecimal(b, k.Bits)
	}
	return b
}

const hexDigits = "0123456789abcdef"

// appendDecimal appends x in decimal.
func appendDecimal(b []byte, x uint8) []byte {
	if x >= 100 {
		b = append(b, hexDigits[x/100])
	}
	if x >= 10 {
		b = append(b, hexDigits[x/10%10])
	}
	return append(b, hexDigits[x%10])
}

// appendAddr4 appends the IPv4 address v as a dotted quad.
func appendAddr4(b []byte, v uint32) []byte {
	b = appendDecimal(b, uint8(v>>24))
	b = append(b, '.')
	b = appendDecimal(b, uint8(v>>16))
	b = append(b, '.')
	b = appendDecimal(b, uint8(v>>8))
	b = append(b, '.')
	return appendDecimal(b, uint8(v))
}

// appendAddr6 appends the IPv6 address hi:lo (hi its first 64 bits) as
// netip.Addr.AppendTo writes it.
func appendAddr6(b []byte, hi, lo uint64) []byte {
	if hi == 0 && lo>>32 == 0xffff {
		return appendAddr4(append(b, "::ffff:"...), uint32(lo))
	}
	g := [8]uint16{uint16(hi >> 48), uint16(hi >> 32), uint16(hi >> 16), uint16(hi),
		uint16(lo >> 48), uint16(lo >> 32), uint16(lo >> 16), uint16(lo)}
	zero := zeroGroups(hi) | zeroGroups(lo)<<4 // bit i: group i is 0
	// The longest run of two or more zero groups, the first of equal
	// ones: none when start is 8. One step a run of zero groups.
	start, n := 8, 1
	for m := zero; m != 0; {
		i := bits.TrailingZeros8(m)
		l := bits.TrailingZeros8(^(zero >> i)) // the run of zero groups at i
		if l > n {
			start, n = i, l
		}
		m &^= uint8((1<<l - 1) << i)
	}
	// Written straight into b's spare capacity: "ffff:" seven times and
	// "ffff" (39 bytes) at most, a group's four digits written whole
	// (hexGroup) within them. (A buffer on the stack, zeroed and copied,
	// cost as much as the digits: its copy read what was just stored.)
	b = slices.Grow(b, 39)
	buf := b[len(b) : len(b)+39]
	w := 0
	for i := 0; i < 8; i++ {
		if i == start {
			buf[w], buf[w+1] = ':', ':'
			w += 2
			if i += n; i >= 8 {
				break
			}
		} else if i > 0 {
			buf[w] = ':'
			w++
		}
		x, d := hexGroup(g[i])
		binary.LittleEndian.PutUint32(buf[w:w+4], x)
		w += d
	}
	return b[:len(b)+w]
}

// zeroGroups returns the 16-bit groups of x that are 0, the first (the
// top one) as bit 0: z has a group's top bit set when the group is 0
// (its low 15 bits plus 0x7fff carry into that bit when any is set, and
// the bit itself is or-ed in; the complement keeps the groups with
// neither).
func zeroGroups(x uint64) uint8 {
	const low, top = 0x7fff7fff7fff7fff, 0x8000800080008000
	z := ^((x&low + low) | x) & top
	return uint8(z>>63 | z>>46&2 | z>>29&4 | z>>12&8)
}

// hexGroup returns v in lower-case hexadecimal without leading zeros as
// the first d of the 4 bytes of x, little-endian (the bytes after them
// are zeros): the four digits are made at once, a byte each, and shifted
// down past the leading zeros, so that a group costs no loop or table.
func hexGroup(v uint16) (x uint32, d int) {
	u := uint32(v)
	// A nibble a byte, the first digit in the lowest byte.
	x = u>>12 | u>>8&0xf<<8 | u>>4&0xf<<16 | u&0xf<<24
	// A byte whose nibble is 10 or more gets 'a'-'0'-10 more: n+6 carries
	// into bit 4 exactly then (no byte carries into the next: n ≤ 15).
	over := (x + 0x06060606) >> 4 & 0x01010101
	x += 0x30303030 + over*('a'-'0'-10)
	d = (bits.Len16(v|1) + 3) / 4
	return x >> (32 - 8*d), d
}

// String returns k's text (AppendText).
func (k FixedKey) String() string {
	var buf [64]byte
	return string(k.AppendText(buf[:0]))
}

// ParseFixedKey returns the fixed key whose text is s, exactly: false
// when s is not the canonical text of an address or a masked prefix
// (user:NAME, range:NAME, ADDRESS|ua:TEXT, an address with a zone, a
// prefix not masked, upper-case hexadecimal), which stays a text key.
// So every key has one form: the text of a FixedKey is never a text key.
func ParseFixedKey(s string) (FixedKey, bool) {
	if len(s) == 0 || len(s) > 49 || !isHexOrColon(s[0]) {
		return FixedKey{}, false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isHexOrColon(c) && c != '.' && c != '/' {
			return FixedKey{}, false // no parse (whose error allocates) of most text keys
		}
	}
	var k FixedKey
	if strings.IndexByte(s, '/') >= 0 {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return FixedKey{}, false
		}
		k = fixedKeyOf(p.Addr(), p.Bits())
		if p.Addr().Is4In6() {
			k = mappedKey(p.Addr(), p.Bits()) // fixedKeyOf unmaps: a mapped prefix is a key of its own
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return FixedKey{}, false
		}
		k = fixedKeyOf(a, a.BitLen())
		if a.Is4In6() {
			k = mappedKey(a, 128)
		}
	}
	var buf [64]byte
	if string(k.AppendText(buf[:0])) != s {
		return FixedKey{}, false
	}
	return k, true
}

func isHexOrColon(c byte) bool {
	return c == ':' || '0' <= c && c <= '9' || 'a' <= c && c <= 'f'
}

// IPFixed is IPKey(a) as a FixedKey: its text is IPKey's.
func (c *Config) IPFixed(a netip.Addr) FixedKey {
	a = a.Unmap()
	if a.Is4() {
		// fixedKeyOf(a, 32), the whole address, without its steps
		// (classify makes one for most entries; TestIPFixedAsFixedKeyOf).
		_, lo := word.Addr(a)
		return FixedKey{Lo: lo & 0xffffffff, Bits: 32, Fam: 4}
	}
	if a.Is6() {
		return fixedKeyOf(a, c.IPv6Prefix)
	}
	return fixedKeyOf(a, 32)
}

// PrefixFixed is PrefixKey(a) as a FixedKey: its text is PrefixKey's.
func (c *Config) PrefixFixed(a netip.Addr) FixedKey {
	a = a.Unmap()
	if a.Is6() {
		return fixedKeyOf(a, c.IPv6Prefix)
	}
	return fixedKeyOf(a, c.IPv4Prefix)
}
