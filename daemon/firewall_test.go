package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/logjail/logjail/daemon"
	"github.com/logjail/logjail/internal/nstest"
)

// firewallConfig: a flood rule whose bans last long enough to see the
// unban, and an iptables action that rejects the test's ports. The IPv6
// key is the client's /64.
const firewallConfig = `state_dir: %s
checkpoint: 1s
metrics: ""
cleaner: "@every 1s"
sources:
  - name: web
    paths: [%s]
    format: combined
    from: start
rules:
  - name: flood
    limits: ["5 per 10s"]
    ban: {for: %s}
actions:
  - type: %s
    target: %s
    ports: [%d, %d]
%s`

// TestFirewallBlocksAClient is the whole path on a real network: two
// namespaces joined by a veth pair, a TCP server in one, a client in the
// other. The client's flood in the followed log bans it: its connections
// are refused while the ban is active, and accepted again after an unban
// through the daemon's control (before the call returns) and after the
// ban's expiry, for IPv4 and IPv6, with iptables rules, iptables with ipset
// and nftables.
func TestFirewallBlocksAClient(t *testing.T) {
	for _, c := range []struct {
		name, typ, target, extra string
		need                     []string
	}{
		{"iptables-rules", "iptables", "REJECT", "", []string{"iptables", "ip6tables"}},
		{"iptables-ipset", "iptables", "REJECT", "    mode: ipset\n", []string{"iptables", "ip6tables", "ipset"}},
		{"nftables", "nftables", "reject", "", []string{"nft"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !nstest.Enter(t, append(c.need, "ip")...) {
				return
			}
			testFirewall(t, c.typ, c.target, c.extra)
		})
	}
}

func testFirewall(t *testing.T, typ, target, extra string) {
	peer := nstest.NewPeer(t)
	l4 := nstest.Listen(t, netip.AddrPortFrom(peer.Local4, 0))
	l6 := nstest.Listen(t, netip.AddrPortFrom(peer.Local6, 0))

	dir := t.TempDir()
	logPath := filepath.Join(dir, "access.log")
	if err := os.WriteFile(logPath, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "logjail.yaml")
	cfg := fmt.Sprintf(firewallConfig, filepath.Join(dir, "state"), logPath, "4s", typ, target, l4.Port(), l6.Port(), extra)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctl := daemon.NewControl()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var logs syncBuffer
	go func() {
		done <- daemon.Run(ctx, daemon.Options{ConfigPath: cfgPath, Control: ctl, Poll: true,
			Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs.String())
		}
	})

	dial := func(a netip.AddrPort) error { return peer.Dial(a, time.Second) }
	flood := func(ip netip.Addr) {
		f, err := os.OpenFile(logPath, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		now := time.Now().Format("02/Jan/2006:15:04:05 -0700")
		for i := range 8 {
			fmt.Fprintf(f, "%s - - [%s] \"GET /%d HTTP/1.1\" 200 1 \"-\" \"t\"\n", ip, now, i)
		}
	}
	// waitDial waits until dialing a gives the wanted outcome.
	waitDial := func(a netip.AddrPort, refused bool, what string) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			err := dial(a)
			if (err != nil) == refused {
				// REJECT answers with an ICMP error, which the kernel rate
				// limits: a refused or a timed-out connection both say the
				// client is blocked.
				var ne net.Error
				if refused && !errors.Is(err, syscall.ECONNREFUSED) && !(errors.As(err, &ne) && ne.Timeout()) {
					t.Errorf("%s: %v, want refused or timed out", what, err)
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: still %v after 15 s", what, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// Before any ban both clients get through: waited for, since on a busy
	// machine the new link's first SYN can be lost and one dial time out.
	for _, a := range []netip.AddrPort{l4, l6} {
		waitDial(a, false, fmt.Sprintf("before any ban, %s from the peer", a))
	}

	// IPv4: banned, then unbanned through the control; the unban has taken
	// effect when Unban returns.
	flood(peer.Remote4)
	waitDial(l4, true, "IPv4 client while banned")
	if err := dial(l6); err != nil {
		t.Errorf("the IPv6 client, not banned, is refused too: %v", err)
	}
	uctx, ucancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ucancel()
	lifted, err := ctl.Unban(uctx, "flood", peer.Remote4.String(), "test", "a customer")
	if err != nil || len(lifted) != 1 {
		t.Fatalf("Unban: %v %v", lifted, err)
	}
	if err := dial(l4); err != nil {
		t.Fatalf("right after Unban returned, the IPv4 client is still refused: %v", err)
	}

	// IPv6: the client's /64 is banned, then the ban expires by itself.
	flood(peer.Remote6)
	waitDial(l6, true, "IPv6 client while its /64 is banned")
	if _, err := ctl.Unban(uctx, "flood", "2001:db8::/64", "test", ""); err != nil {
		t.Fatalf("Unban of the /64: %v", err)
	}
	if err := dial(l6); err != nil {
		t.Fatalf("right after Unban returned, the IPv6 client is still refused: %v", err)
	}
	flood(peer.Remote6)
	flood(peer.Remote4)
	waitDial(l6, true, "IPv6 client banned again")
	waitDial(l4, true, "IPv4 client banned again")
	waitDial(l6, false, "IPv6 client after the ban's expiry")
	waitDial(l4, false, "IPv4 client after the ban's expiry")
	if !strings.Contains(logs.String(), "action") {
		t.Errorf("the daemon did not log its action")
	}
}
