package endpoint

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// loopback: the trusted proxies of the tests' endpoints.
var loopback = Proxies{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("203.0.113.250/32"), netip.MustParsePrefix("2001:db8:ffff::/48")}

// remoteOnly trusts no loopback peer: the tests' own connections are then
// untrusted clients.
var remoteOnly = Proxies{netip.MustParsePrefix("203.0.113.250/32"), netip.MustParsePrefix("2001:db8:ffff::/48")}

// header is one header line, sent as written.
type header struct{ name, value string }

// ask sends GET /auth with hdrs, each line as written, over a new
// connection to the endpoint at network, addr, and returns the status and
// the JSON answer: the client the endpoint judged, or its error.
func ask(t testing.TB, network, addr string, hdrs []header) (int, authAnswer) {
	t.Helper()
	var k keepAlive
	defer k.close()
	return k.ask(t, network, addr, hdrs)
}

// keepAlive asks over one connection, kept open between questions (a
// fuzz test asks thousands of them), opening another when the server has
// closed it.
type keepAlive struct {
	c  net.Conn
	br *bufio.Reader
}

func (k *keepAlive) close() {
	if k.c != nil {
		k.c.Close()
		k.c = nil
	}
}

func (k *keepAlive) ask(t testing.TB, network, addr string, hdrs []header) (int, authAnswer) {
	t.Helper()
	var b strings.Builder
	b.WriteString("GET /auth HTTP/1.1\r\nHost: logjail\r\nAccept: application/json\r\n")
	for _, h := range hdrs {
		fmt.Fprintf(&b, "%s: %s\r\n", h.name, h.value)
	}
	b.WriteString("\r\n")
	for attempt := 0; ; attempt++ {
		if k.c == nil {
			c, err := net.DialTimeout(network, addr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			k.c, k.br = c, bufio.NewReader(c)
		}
		k.c.SetDeadline(time.Now().Add(3 * time.Second))
		resp, err := func() (*http.Response, error) {
			if _, err := io.WriteString(k.c, b.String()); err != nil {
				return nil, err
			}
			return http.ReadResponse(k.br, nil)
		}()
		if err != nil {
			k.close()
			if attempt == 0 {
				continue // the server had closed the kept connection
			}
			t.Fatalf("headers %q: %v", hdrs, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.Close {
			k.close()
		}
		var ans authAnswer
		if err := json.Unmarshal(body, &ans); err != nil {
			t.Fatalf("answer %d %q: %v", resp.StatusCode, body, err)
		}
		return resp.StatusCode, ans
	}
}

// peers are endpoints that see the tests' connections as each kind of
// peer: a trusted proxy over IPv4, IPv6 and a unix socket, and an
// untrusted client. Each serves the empty ban view (every answer is 200
// with the client, or 400 with the error).
type peers map[string][2]string // kind -> network, address

func servePeers(t testing.TB) peers {
	t.Helper()
	bans := NewBans("endpoint")
	bans.Sync(context.Background(), nil, nil)
	p := peers{}
	start := func(kind, network, addr string, trusted Proxies) {
		l, err := net.Listen(network, addr)
		if err != nil {
			t.Fatal(err)
		}
		s := NewServer(Config{Trusted: trusted}, bans, nil, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Serve(ctx, l) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		})
		p[kind] = [2]string{network, l.Addr().String()}
	}
	start("127.0.0.1", "tcp", "127.0.0.1:0", loopback)
	start("::1", "tcp", "[::1]:0", loopback)
	start("unix", "unix", t.TempDir()+"/auth.sock", loopback)
	start("untrusted", "tcp", "127.0.0.1:0", remoteOnly)
	return p
}

// TestClientAddr is the trust rule (package documentation), through the
// real server: which address a request is judged as, for each kind of
// peer and each combination of X-Forwarded-For and X-Real-IP, repeated,
// empty and malformed ones included.
func TestClientAddr(t *testing.T) {
	p := servePeers(t)
	xff := func(v string) header { return header{"X-Forwarded-For", v} }
	xri := func(v string) header { return header{"X-Real-IP", v} }
	for _, c := range []struct {
		name, peer string
		hdrs       []header
		want       string // "" for a 400
	}{
		{"untrusted peer", "untrusted", nil, "127.0.0.1"},
		{"forged XFF from an untrusted peer is ignored", "untrusted", []header{xff("198.51.100.7")}, "127.0.0.1"},
		{"forged X-Real-IP from an untrusted peer is ignored", "untrusted", []header{xri("198.51.100.7")}, "127.0.0.1"},
		{"garbage from an untrusted peer is ignored", "untrusted", []header{xff("nonsense"), xri("nonsense")}, "127.0.0.1"},
		{"trusted peer, one XFF", "127.0.0.1", []header{xff("198.51.100.7")}, "198.51.100.7"},
		{"rightmost untrusted", "127.0.0.1", []header{xff("203.0.113.9, 198.51.100.7, 203.0.113.250")}, "198.51.100.7"},
		{"forged leftmost XFF ($proxy_add_x_forwarded_for)", "127.0.0.1", []header{xff("203.0.113.66, 198.51.100.7")}, "198.51.100.7"},
		{"several XFF headers, in order", "127.0.0.1", []header{xff("203.0.113.9"), xff("198.51.100.7, 127.0.0.1")}, "198.51.100.7"},
		{"several XFF headers, the client's first", "127.0.0.1", []header{xff("203.0.113.66"), xff("198.51.100.7")}, "198.51.100.7"},
		{"lower-case names", "127.0.0.1", []header{{"x-forwarded-for", "198.51.100.7"}, {"x-real-ip", "203.0.113.66"}}, "198.51.100.7"},
		{"all trusted: the leftmost", "127.0.0.1", []header{xff("127.0.0.5, 203.0.113.250")}, "127.0.0.5"},
		{"IPv6", "::1", []header{xff("2001:db8::7")}, "2001:db8::7"},
		{"IPv6 trusted hop", "::1", []header{xff("2001:db8::7, 2001:db8:ffff::1")}, "2001:db8::7"},
		{"ports", "127.0.0.1", []header{xff("198.51.100.7:4711")}, "198.51.100.7"},
		{"IPv6 with port", "127.0.0.1", []header{xff("[2001:db8::1]:80")}, "2001:db8::1"},
		{"mapped", "127.0.0.1", []header{xff("::ffff:198.51.100.7")}, "198.51.100.7"},
		{"spaces and empty items", "127.0.0.1", []header{xff(" , 198.51.100.7 ,")}, "198.51.100.7"},
		{"X-Real-IP without XFF", "127.0.0.1", []header{xri("198.51.100.7")}, "198.51.100.7"},
		{"X-Real-IP with a port", "127.0.0.1", []header{xri("198.51.100.7:80")}, "198.51.100.7"},
		// The README's nginx snippet sets both to $remote_addr; a forged
		// X-Real-IP beside the proxy's XFF is never read.
		{"XFF wins over a forged X-Real-IP", "127.0.0.1", []header{xff("198.51.100.7"), xri("203.0.113.66")}, "198.51.100.7"},
		{"XFF wins over X-Real-IP, X-Real-IP first", "127.0.0.1", []header{xri("203.0.113.66"), xff("198.51.100.7")}, "198.51.100.7"},
		{"XFF wins over repeated X-Real-IP", "127.0.0.1", []header{xri("203.0.113.66"), xri("203.0.113.67"), xff("198.51.100.7")}, "198.51.100.7"},
		{"XFF wins over a malformed X-Real-IP", "127.0.0.1", []header{xff("198.51.100.7"), xri("nonsense")}, "198.51.100.7"},
		{"no header: the trusted peer itself", "127.0.0.1", nil, "127.0.0.1"},
		{"unix socket peer with XFF", "unix", []header{xff("198.51.100.7")}, "198.51.100.7"},
		{"unix socket peer with X-Real-IP", "unix", []header{xri("198.51.100.7")}, "198.51.100.7"},
		{"unix socket peer without a header", "unix", nil, ""},
		{"garbage", "127.0.0.1", []header{xff("unknown")}, ""},
		{"garbage left of the client is never read", "127.0.0.1", []header{xff("nonsense, 198.51.100.7")}, "198.51.100.7"},
		{"garbage at the right", "127.0.0.1", []header{xff("198.51.100.7, nonsense")}, ""},
		{"garbage in a later XFF header", "127.0.0.1", []header{xff("198.51.100.7"), xff("nonsense")}, ""},
		{"zone", "127.0.0.1", []header{xff("fe80::1%eth0")}, ""},
		{"hostname", "127.0.0.1", []header{xff("example.com")}, ""},
		{"too long", "127.0.0.1", []header{xff(strings.Repeat("9", 100))}, ""},
		{"empty XFF", "127.0.0.1", []header{xff(" , ")}, ""},
		{"empty XFF beside X-Real-IP", "127.0.0.1", []header{xff(","), xri("198.51.100.7")}, ""},
		{"two X-Real-IP", "127.0.0.1", []header{xri("198.51.100.7"), xri("198.51.100.8")}, ""},
		{"two addresses in X-Real-IP", "127.0.0.1", []header{xri("198.51.100.7, 198.51.100.8")}, ""},
		{"bad X-Real-IP", "127.0.0.1", []header{xri("1.2.3")}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, ans := ask(t, p[c.peer][0], p[c.peer][1], c.hdrs)
			if c.want == "" {
				if code != http.StatusBadRequest || ans.Error == "" {
					t.Fatalf("%d %+v, want 400 with the error", code, ans)
				}
				return
			}
			if code != http.StatusOK || ans.Client != c.want {
				t.Fatalf("%d %+v, want 200 for %s", code, ans, c.want)
			}
		})
	}
}

// modelClient is the trust rule written out plainly, apart from the
// server's code: the client a request from the tests' loopback peer
// (trusted or not) is judged as, given its X-Forwarded-For and X-Real-IP
// header values in order; ok false for a 400.
func modelClient(peerTrusted bool, xff, realIP []string) (client string, ok bool) {
	if !peerTrusted {
		return "127.0.0.1", true // nothing the client sends is read
	}
	if len(xff) > 0 { // X-Forwarded-For decides, X-Real-IP is not read
		items := strings.Split(strings.Join(xff, ","), ",")
		leftmost := ""
		for i := len(items) - 1; i >= 0; i-- {
			item := strings.TrimSpace(items[i])
			if item == "" {
				continue
			}
			a, ok := modelParse(item)
			if !ok {
				return "", false
			}
			if !loopback.Trusts(a) {
				return a.String(), true
			}
			leftmost = a.String()
		}
		return leftmost, leftmost != ""
	}
	switch len(realIP) {
	case 0:
		return "127.0.0.1", true
	case 1:
		a, ok := modelParse(strings.TrimSpace(realIP[0]))
		return a.String(), ok
	}
	return "", false
}

// modelParse reads "ADDRESS" or "ADDRESS:PORT" / "[ADDRESS]:PORT",
// refusing zones.
func modelParse(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			return netip.Addr{}, false
		}
		a = ap.Addr()
	}
	if a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// FuzzClientAddr sends header combinations to the real server and checks
// its answer against modelClient: xffs and reals are header values, one a
// line (so headers repeat); lower sends the names in lower case.
func FuzzClientAddr(f *testing.F) {
	f.Add(true, "203.0.113.66, 198.51.100.7", "203.0.113.66", false)
	f.Add(true, "198.51.100.7, 203.0.113.250", "", false)
	f.Add(false, "203.0.113.1", "203.0.113.2", false)
	f.Add(true, "", "[2001:db8::1]:80", true)
	f.Add(true, "", "198.51.100.7\n198.51.100.8", false)
	f.Add(true, "::ffff:1.2.3.4,,\n127.0.0.1", "", false)
	f.Add(true, "nonsense, 198.51.100.7\n203.0.113.250", "garbage", true)
	f.Add(true, " , ", "198.51.100.7", false)
	f.Add(true, "fe80::1%eth0", "", false)
	p := servePeers(f)
	conns := map[string]*keepAlive{"127.0.0.1": {}, "untrusted": {}}
	f.Cleanup(func() {
		for _, k := range conns {
			k.close()
		}
	})
	f.Fuzz(func(t *testing.T, trusted bool, xffs, reals string, lower bool) {
		if len(xffs)+len(reals) > 1500 {
			t.Skip("beyond the header size a proxy sends")
		}
		var xff, realIP []string
		for v := range strings.SplitSeq(xffs, "\n") {
			if xffs != "" {
				xff = append(xff, v)
			}
		}
		for v := range strings.SplitSeq(reals, "\n") {
			if reals != "" {
				realIP = append(realIP, v)
			}
		}
		var hdrs []header
		xn, rn := "X-Forwarded-For", "X-Real-IP"
		if lower {
			xn, rn = strings.ToLower(xn), strings.ToLower(rn)
		}
		for _, v := range xff {
			hdrs = append(hdrs, header{xn, v})
		}
		for _, v := range realIP {
			hdrs = append(hdrs, header{rn, v})
		}
		for _, h := range hdrs {
			for _, b := range []byte(h.value) {
				if b < 0x20 || b > 0x7e {
					t.Skip("not a header value")
				}
			}
		}
		want, ok := modelClient(trusted, xff, realIP)
		kind := "untrusted"
		if trusted {
			kind = "127.0.0.1"
		}
		code, ans := conns[kind].ask(t, p[kind][0], p[kind][1], hdrs)
		if !ok {
			if code != http.StatusBadRequest {
				t.Fatalf("headers %q: %d %+v, want 400", hdrs, code, ans)
			}
			return
		}
		if code != http.StatusOK || ans.Client != want {
			t.Fatalf("headers %q: %d %+v, want 200 for %s", hdrs, code, ans, want)
		}
	})
}
