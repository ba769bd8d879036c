package parser

import (
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
	var b [4]byte
	i := 0
	for k := 0; k < 4; k++ {
		if k > 0 {
			if i >= len(s) || s[i] != '.' {
				return netip.Addr{}, false
			}
			i++
		}
		start, v := i, 0
		for i < len(s) && i-start < 3 && s[i]-'0' <= 9 {
			v = v*10 + int(s[i]-'0')
			i++
		}
		if i == start || v > 255 || (i-start > 1 && s[start] == '0') {
			return netip.Addr{}, false
		}
		b[k] = byte(v)
	}
	if i != len(s) {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4(b), true
}
