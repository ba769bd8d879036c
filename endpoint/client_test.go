package endpoint

import (
	"net/http"
	"net/netip"
	"testing"
)

var loopback = Proxies{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("203.0.113.250/32")}

func TestClientAddr(t *testing.T) {
	for _, c := range []struct {
		name, peer string
		xff        []string
		realIP     []string
		want       string // "" for an error
	}{
		{"untrusted peer", "198.51.100.7:5555", nil, nil, "198.51.100.7"},
		{"spoofed XFF from an untrusted peer is ignored", "198.51.100.7:5555", []string{"203.0.113.1"}, nil, "198.51.100.7"},
		{"spoofed X-Real-IP from an untrusted peer is ignored", "198.51.100.7:5555", nil, []string{"203.0.113.1"}, "198.51.100.7"},
		{"trusted peer, one XFF", "127.0.0.1:1", []string{"198.51.100.7"}, nil, "198.51.100.7"},
		{"rightmost untrusted", "127.0.0.1:1", []string{"203.0.113.9, 198.51.100.7, 203.0.113.250"}, nil, "198.51.100.7"},
		{"several headers in order", "127.0.0.1:1", []string{"203.0.113.9", "198.51.100.7, 127.0.0.1"}, nil, "198.51.100.7"},
		{"all trusted: the leftmost", "127.0.0.1:1", []string{"127.0.0.5, 203.0.113.250"}, nil, "127.0.0.5"},
		{"IPv6", "[::1]:1", []string{"2001:db8::7"}, nil, "2001:db8::7"},
		{"IPv6 peer untrusted", "[2001:db8::9]:443", []string{"198.51.100.7"}, nil, "2001:db8::9"},
		{"ports", "127.0.0.1:1", []string{"198.51.100.7:4711"}, nil, "198.51.100.7"},
		{"IPv6 with port", "127.0.0.1:1", []string{"[2001:db8::1]:80"}, nil, "2001:db8::1"},
		{"mapped", "127.0.0.1:1", []string{"::ffff:198.51.100.7"}, nil, "198.51.100.7"},
		{"mapped peer", "[::ffff:198.51.100.8]:1", nil, nil, "198.51.100.8"},
		{"spaces and empty items", "127.0.0.1:1", []string{" , 198.51.100.7 ,"}, nil, "198.51.100.7"},
		{"X-Real-IP without XFF", "127.0.0.1:1", nil, []string{"198.51.100.7"}, "198.51.100.7"},
		{"XFF wins over X-Real-IP", "127.0.0.1:1", []string{"198.51.100.7"}, []string{"203.0.113.1"}, "198.51.100.7"},
		{"no header: the trusted peer itself", "127.0.0.1:1", nil, nil, "127.0.0.1"},
		{"unix socket peer with XFF", "@", []string{"198.51.100.7"}, nil, "198.51.100.7"},
		{"unix socket peer without a header", "@", nil, nil, ""},
		{"garbage", "127.0.0.1:1", []string{"unknown"}, nil, ""},
		{"garbage after the client", "127.0.0.1:1", []string{"nonsense, 198.51.100.7"}, nil, "198.51.100.7"},
		{"garbage at the right", "127.0.0.1:1", []string{"198.51.100.7, nonsense"}, nil, ""},
		{"zone", "127.0.0.1:1", []string{"fe80::1%eth0"}, nil, ""},
		{"hostname", "127.0.0.1:1", []string{"example.com"}, nil, ""},
		{"empty XFF", "127.0.0.1:1", []string{" , "}, nil, ""},
		{"two X-Real-IP", "127.0.0.1:1", nil, []string{"198.51.100.7", "198.51.100.8"}, ""},
		{"bad X-Real-IP", "127.0.0.1:1", nil, []string{"1.2.3"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &http.Request{RemoteAddr: c.peer, Header: http.Header{}}
			for _, v := range c.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			for _, v := range c.realIP {
				r.Header.Add("X-Real-IP", v)
			}
			got, err := clientOf(r, loopback)
			if c.want == "" {
				if err == nil {
					t.Fatalf("got %v, want an error", got)
				}
				return
			}
			if err != nil || got != netip.MustParseAddr(c.want) {
				t.Fatalf("got %v %v, want %s", got, err, c.want)
			}
		})
	}
}

// FuzzClientAddr: any header gives an address without a zone, never
// mapped, or an error; never a panic; an untrusted peer is always the
// answer, whatever the headers say.
func FuzzClientAddr(f *testing.F) {
	f.Add("127.0.0.1:1", "198.51.100.7, 203.0.113.250", "")
	f.Add("198.51.100.7:1", "203.0.113.1", "203.0.113.2")
	f.Add("@", "", "[2001:db8::1]:80")
	f.Add("[::1]:1", "::ffff:1.2.3.4,,", "")
	f.Fuzz(func(t *testing.T, peer, xff, real string) {
		r := &http.Request{RemoteAddr: peer, Header: http.Header{}}
		if xff != "" {
			r.Header.Set("X-Forwarded-For", xff)
		}
		if real != "" {
			r.Header.Set("X-Real-IP", real)
		}
		a, err := clientOf(r, loopback)
		if err != nil {
			return
		}
		if !a.IsValid() || a.Zone() != "" || a.Is4In6() {
			t.Fatalf("client = %v", a)
		}
		if p, ok := peerAddr(peer); ok && !loopback.Trusts(p) && a != p {
			t.Fatalf("untrusted peer %v, but the answer is %v", p, a)
		}
	})
}

// clientOf is clientAddr for a net/http request, as the tests build them.
func clientOf(r *http.Request, trusted Proxies) (netip.Addr, error) {
	peer, peerOK := peerAddr(r.RemoteAddr)
	return clientAddr(peer, peerOK, bytesOf(r.Header.Values("X-Forwarded-For")), bytesOf(r.Header.Values("X-Real-Ip")), trusted)
}

func bytesOf(ss []string) [][]byte {
	if len(ss) == 0 {
		return nil
	}
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// peerAddr reads http.Request.RemoteAddr: host:port for TCP, "@" or a path
// for a unix socket.
func peerAddr(remote string) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return netip.Addr{}, false
	}
	return ap.Addr().Unmap(), true
}
