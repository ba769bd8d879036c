package parser

import (
	"encoding/binary"
	"net/netip"
	"strings"
)

// parseAddr reads a client address as logs write it: IPv4, IPv6 with or
// without brackets, "[v6]:port", "v4:port", with a zone (dropped). IPv4-mapped
// IPv6 addresses are unmapped.
func parseAddr(s string) (netip.Addr, bool) {
	if a, ok := parseDottedQuad(s); ok {
		return a, true
	}
	if a, ok := parseHexIPv6(s); ok {
		// Whatever it reads has two colons or more and no blank, bracket
		// or zone: the general path below would hand it whole to netip.
		return a.Unmap(), true
	}
	s = trimSpace(s)
	if s == "" || s == "-" {
		return netip.Addr{}, false
	}
	if s[0] == '[' {
		j := strings.IndexByte(s, ']')
		if j < 0 {
			return netip.Addr{}, false
		}
		if rest := s[j+1:]; rest != "" && !isPort(rest) {
			return netip.Addr{}, false
		}
		s = s[1:j]
	} else if c := strings.IndexByte(s, ':'); c >= 0 && strings.IndexByte(s[c+1:], ':') < 0 {
		// one colon: "v4:port"
		if !isPort(s[c:]) {
			return netip.Addr{}, false
		}
		s = s[:c]
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.WithZone("").Unmap(), true
}

// parseHexIPv6 reads the common IPv6 text, hex groups and at most one "::"
// ("2001:db8:8000:1a2b::1"), as netip.ParseAddr reads it, without its
// generality. Anything else (a dotted-quad tail, a zone, "::" alone, any
// malformed text) reports false and is left to netip.ParseAddr, which
// decides it.
func parseHexIPv6(s string) (netip.Addr, bool) {
	if a, n, ok := hexIPv6At(s, 0); ok && n == len(s) {
		return a, true
	}
	return netip.Addr{}, false
}

// hexIPv6At reads the hex IPv6 text that starts at s[p] and returns where
// it ends: at the end of s or at a byte after a group that is neither a
// hex digit nor ':'. The groups are shifted into two 128-bit values, those
// before the "::" and those after, rather than stored byte by byte.
func hexIPv6At(s string, p int) (netip.Addr, int, bool) {
	var hh, hl, th, tl uint64 // the groups before "::" (or all), after it
	heads, tails := 0, 0      // how many groups each holds
	ellipsis := false
	if len(s)-p > 2 && s[p] == ':' && s[p+1] == ':' {
		ellipsis, p = true, p+2
	}
	for {
		g, d := uint64(0), 0
		for ; p < len(s) && d < 5; p, d = p+1, d+1 {
			v := hexValue[s[p]]
			if v > 15 {
				break
			}
			g = g<<4 | uint64(v)
		}
		if d == 0 || d > 4 || heads+tails == 8 {
			return netip.Addr{}, 0, false
		}
		if ellipsis {
			th, tl = th<<16|tl>>48, tl<<16|g
			tails++
		} else {
			hh, hl = hh<<16|hl>>48, hl<<16|g
			heads++
		}
		if p == len(s) || s[p] != ':' {
			break
		}
		if p++; p == len(s) {
			return netip.Addr{}, 0, false
		}
		if s[p] == ':' {
			if ellipsis {
				return netip.Addr{}, 0, false
			}
			ellipsis = true
			if p++; p == len(s) || hexValue[s[p]] > 15 {
				break
			}
		}
	}
	if ellipsis == (heads+tails == 8) {
		// Eight groups and a "::", or fewer and none.
		return netip.Addr{}, 0, false
	}
	// The head's groups go to the top: shift it left by the groups missing.
	switch k := uint(16 * (8 - heads)); {
	case k >= 128:
		hh, hl = 0, 0
	case k >= 64:
		hh, hl = hl<<(k-64), 0
	case k > 0:
		hh, hl = hh<<k|hl>>(64-k), hl<<k
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], hh|th)
	binary.BigEndian.PutUint64(b[8:], hl|tl)
	return netip.AddrFrom16(b), p, true
}

func isPort(s string) bool {
	if len(s) < 2 || s[0] != ':' || len(s) > 6 {
		return false
	}
	for i := 1; i < len(s); i++ {
		if s[i]-'0' > 9 {
			return false
		}
	}
	return true
}

// trusted reports whether a is inside one of the prefixes.
func trusted(a netip.Addr, ps []netip.Prefix) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientFrom applies X-Forwarded-For: when conn is a trusted proxy, the client
// is the rightmost XFF address that is not a trusted proxy; when every XFF
// address is trusted, the leftmost one. Walking stops at an entry that is not
// an address (whatever is left of it cannot be believed), keeping the last good
// one. xff is a comma-separated list ("a, b, c"); it may be empty.
func clientFrom(conn netip.Addr, xff string, ps []netip.Prefix) netip.Addr {
	if len(ps) == 0 || xff == "" || !trusted(conn, ps) {
		return conn
	}
	client := conn
	rest := xff
	for rest != "" {
		var item string
		if j := strings.LastIndexByte(rest, ','); j >= 0 {
			item, rest = rest[j+1:], rest[:j]
		} else {
			item, rest = rest, ""
		}
		item = trimSpace(item)
		if item == "" {
			continue
		}
		a, ok := parseAddr(item)
		if !ok {
			return client
		}
		client = a
		if !trusted(a, ps) {
			return a
		}
	}
	return client
}

// splitLast cuts the last element off a comma-separated list: for nginx's
// $proxy_add_x_forwarded_for ("xff, remote_addr").
func splitLast(list string) (head, last string) {
	if j := strings.LastIndexByte(list, ','); j >= 0 {
		return list[:j], trimSpace(list[j+1:])
	}
	return "", trimSpace(list)
}

// parseDottedQuad reads the common case, a plain IPv4 address ("203.0.113.7"),
// without netip.ParseAddr's generality. Anything else (blanks, a port, a
// leading zero, IPv6) reports false and takes the general path, which
// decides exactly as netip does.
func parseDottedQuad(s string) (netip.Addr, bool) {
	if a, n, ok := dottedQuadAt(s, 0); ok && n == len(s) {
		return a, true
	}
	return netip.Addr{}, false
}

// dottedQuadAt reads a dotted quad that starts at s[i] and returns where it
// ends: four numbers of 1 to 3 digits, no leading zero, up to 255, between
// dots; what follows is not looked at.
func dottedQuadAt(s string, i int) (netip.Addr, int, bool) {
	var u uint32 // the four bytes, stored at once (a byte at a time would
	// stall netip.AddrFrom4's load of all four)
	for k := 0; k < 4; k++ {
		if k > 0 {
			if i >= len(s) || s[i] != '.' {
				return netip.Addr{}, 0, false
			}
			i++
		}
		if i >= len(s) || s[i]-'0' > 9 {
			return netip.Addr{}, 0, false
		}
		v := uint(s[i] - '0')
		i++
		if i < len(s) && s[i]-'0' <= 9 {
			if v == 0 {
				return netip.Addr{}, 0, false // a leading zero
			}
			v = v*10 + uint(s[i]-'0')
			i++
			if i < len(s) && s[i]-'0' <= 9 {
				v = v*10 + uint(s[i]-'0')
				i++
				if v > 255 {
					return netip.Addr{}, 0, false
				}
			}
		}
		u = u<<8 | uint32(v)
	}
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], u)
	return netip.AddrFrom4(b), i, true
}

// hexValue is the value of a hex digit, 255 for any other byte. Read only.
var hexValue = func() (t [256]uint8) {
	for c := range t {
		switch {
		case c >= '0' && c <= '9':
			t[c] = uint8(c - '0')
		case c >= 'a' && c <= 'f':
			t[c] = uint8(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			t[c] = uint8(c - 'A' + 10)
		default:
			t[c] = 255
		}
	}
	return t
}()
