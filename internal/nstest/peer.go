package nstest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Peer is a second network namespace joined to the test's by a veth pair:
// a client on the other side of a link, whose packets reach the test's
// namespace through its INPUT path as a remote client's would.
type Peer struct {
	Name string // the namespace's name under /run/netns
	// Local and Remote are the addresses of the two ends: Local in the
	// test's namespace, Remote in the peer's.
	Local4, Remote4, Local6, Remote6 netip.Addr
}

// NewPeer makes the peer namespace, the veth pair and the addresses:
// 198.51.100.1/24 and 2001:db8::1/64 on the test's side, .2 and ::2 on the
// peer's. Call it from inside Enter; the namespace is deleted at cleanup.
func NewPeer(t testing.TB) *Peer {
	t.Helper()
	if err := Isolated(); err != nil {
		t.Fatalf("NewPeer outside a test namespace: %v", err)
	}
	p := &Peer{
		Name:   "lj-peer-" + strconv.Itoa(os.Getpid()),
		Local4: netip.MustParseAddr("198.51.100.1"), Remote4: netip.MustParseAddr("198.51.100.2"),
		Local6: netip.MustParseAddr("2001:db8::1"), Remote6: netip.MustParseAddr("2001:db8::2"),
	}
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	run("netns", "add", p.Name)
	t.Cleanup(func() { exec.Command("ip", "netns", "delete", p.Name).Run() })
	run("link", "add", "lj-a", "type", "veth", "peer", "name", "lj-b", "netns", p.Name)
	run("addr", "add", p.Local4.String()+"/24", "dev", "lj-a")
	run("addr", "add", p.Local6.String()+"/64", "dev", "lj-a", "nodad")
	run("link", "set", "lj-a", "up")
	run("-n", p.Name, "addr", "add", p.Remote4.String()+"/24", "dev", "lj-b")
	run("-n", p.Name, "addr", "add", p.Remote6.String()+"/64", "dev", "lj-b", "nodad")
	run("-n", p.Name, "link", "set", "lj-b", "up")
	run("-n", p.Name, "link", "set", "lo", "up")
	return p
}

// Dial connects over TCP from the peer's namespace to addr and closes the
// connection: nil when the connection was accepted.
func (p *Peer) Dial(addr netip.AddrPort, timeout time.Duration) error {
	errc := make(chan error, 1)
	go func() {
		// This goroutine's thread enters the peer's namespace and is never
		// handed back to the runtime: it ends with the goroutine.
		runtime.LockOSThread()
		f, err := os.Open("/run/netns/" + p.Name)
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", p.Name, err)
			return
		}
		c, err := net.DialTimeout("tcp", addr.String(), timeout)
		if err == nil {
			c.Close()
		}
		errc <- err
	}()
	return <-errc
}

// DialContext connects from the peer's namespace: a socket made there
// stays there, whichever thread uses it later. It fits
// http.Transport.DialContext, for an HTTP client on the peer's side.
func (p *Peer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	rc := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		f, err := os.Open("/run/netns/" + p.Name)
		if err != nil {
			rc <- result{nil, err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			rc <- result{nil, fmt.Errorf("setns %s: %w", p.Name, err)}
			return
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		rc <- result{c, err}
	}()
	r := <-rc
	return r.c, r.err
}

// HTTPClient is an HTTP client on the peer's side of the link: a new
// connection for every request.
func (p *Peer) HTTPClient() *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: p.DialContext, DisableKeepAlives: true, Proxy: nil,
	}}
}

// Listen accepts TCP connections on a and closes them at once, until the
// test ends: a server for a client to reach or be refused. It returns the
// address with the port chosen (a's port may be 0).
func Listen(t testing.TB, a netip.AddrPort) netip.AddrPort {
	t.Helper()
	l, err := net.Listen("tcp", a.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return netip.MustParseAddrPort(l.Addr().String())
}
