package endpoint

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"unsafe"
)

// Proxies are the trusted proxies of an endpoint: the peers whose
// X-Forwarded-For and X-Real-IP are believed.
type Proxies []netip.Prefix

// Trusts reports whether a is one of the proxies.
func (ps Proxies) Trusts(a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// errNoPeer is the error of a request whose peer address is not an
// address (a unix socket: the proxy must then say who the client is).
var errNoPeer = errors.New("the peer has no address (unix socket) and sent no X-Forwarded-For or X-Real-IP")

// clientAddr is the client a request asks about, by the one trust rule
// (the package documentation): from its peer (peerOK false for a unix
// socket) and its X-Forwarded-For and X-Real-IP headers, which peek
// returns by name, every header of that name in the order received. The
// peer is the client, unless the peer is a trusted proxy (a unix socket
// peer always is: only local processes reach it); then X-Forwarded-For
// decides when the request has one, read from the right, its first
// untrusted address (the leftmost when every one is trusted), what lies
// left of it never read; else the one X-Real-IP; else the peer itself.
// A value that does not parse where it is read is an error, never a
// guess. Ports ("198.51.100.7:4711", "[2001:db8::1]:80") and IPv4-mapped
// IPv6 addresses are accepted; zones are not.
//
// peek may return a buffer it reuses (fasthttp's PeekAll does): clientAddr
// reads one header's values before it asks for the next.
func clientAddr(peer netip.Addr, peerOK bool, peek func(name string) [][]byte, trusted Proxies) (netip.Addr, error) {
	if peerOK && !trusted.Trusts(peer) {
		return peer, nil
	}
	if xff := peek("X-Forwarded-For"); len(xff) > 0 {
		return fromForwarded(xff, trusted)
	}
	if realIP := peek("X-Real-Ip"); len(realIP) > 0 {
		if len(realIP) > 1 {
			return netip.Addr{}, errors.New("X-Real-IP: sent more than once")
		}
		a, err := parseHost(strings.TrimSpace(string(realIP[0])))
		if err != nil {
			return netip.Addr{}, fmt.Errorf("X-Real-IP: %w", err)
		}
		return a, nil
	}
	if !peerOK {
		return netip.Addr{}, errNoPeer
	}
	return peer, nil
}

// fromForwarded walks X-Forwarded-For from the right.
func fromForwarded(values [][]byte, trusted Proxies) (netip.Addr, error) {
	var last netip.Addr
	for i := len(values) - 1; i >= 0; i-- {
		v := values[i]
		for len(v) > 0 {
			var item []byte
			if j := bytes.LastIndexByte(v, ','); j >= 0 {
				item, v = v[j+1:], v[:j]
			} else {
				item, v = v, nil
			}
			item = bytes.TrimSpace(item)
			if len(item) == 0 {
				continue
			}
			a, err := parseHost(transient(item))
			if err != nil {
				return netip.Addr{}, fmt.Errorf("X-Forwarded-For: %w", err)
			}
			if !trusted.Trusts(a) {
				return a, nil
			}
			last = a
		}
	}
	if !last.IsValid() {
		return netip.Addr{}, errors.New("X-Forwarded-For: empty")
	}
	return last, nil
}

// transient is b as a string without a copy, for parseHost alone: the
// string must not outlive b (the request's header), and parseHost keeps
// none of it (its errors quote a copy, and an address it returns holds
// no zone: netip interns a zone by copying it anyway). /auth reads
// X-Forwarded-For on every request: a copy there was a third of its
// allocations, and the garbage the collector runs for on a busy core
// (issue 23, docs/performance.md).
func transient(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// parseHost reads an address, with or without a port.
func parseHost(s string) (netip.Addr, error) {
	if len(s) > 64 {
		return netip.Addr{}, fmt.Errorf("%.64q…: not an address", s)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		ap, err2 := netip.ParseAddrPort(s)
		if err2 != nil {
			return netip.Addr{}, fmt.Errorf("%q: not an address", s)
		}
		a = ap.Addr()
	}
	if a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("%q: an address with a zone is no client", s)
	}
	return a.Unmap(), nil
}
