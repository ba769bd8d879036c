package daemon_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/logjail/logjail/daemon"
	"github.com/logjail/logjail/internal/nstest"
)

// allowFirewallConfig: firewallConfig's rule and nftables action, with an
// allow file the daemon watches.
const allowFirewallConfig = `state_dir: %[1]s/state
checkpoint: 1s
metrics: ""
sources:
  - name: web
    paths: [%[1]s/access.log]
    format: combined
    from: start
allow: ["file:%[1]s/allow.txt"]
rules:
  - name: flood
    limits: ["5 per 10s"]
    ban: {for: 1h}
actions:
  - type: nftables
    target: reject
    ports: [%[2]d]
`

// TestAllowFileLiftsFirewallBan: in a network namespace, a client the rule
// banned is refused by nftables; once the allow file lists it (no SIGHUP),
// it connects again within 2 s.
func TestAllowFileLiftsFirewallBan(t *testing.T) {
	if !nstest.Enter(t, "nft", "ip") {
		return
	}
	peer := nstest.NewPeer(t)
	l4 := nstest.Listen(t, netip.AddrPortFrom(peer.Local4, 0))
	dir := t.TempDir()
	for name, text := range map[string]string{"access.log": "", "allow.txt": "# nobody\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfgPath := filepath.Join(dir, "logjail.yaml")
	if err := os.WriteFile(cfgPath, fmt.Appendf(nil, allowFirewallConfig, dir, l4.Port()), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var logs syncBuffer
	go func() {
		done <- daemon.Run(ctx, daemon.Options{ConfigPath: cfgPath, Poll: true,
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
	wait := func(refused bool, within time.Duration, what string) time.Duration {
		t.Helper()
		start := time.Now()
		for {
			err := peer.Dial(l4, 200*time.Millisecond)
			if (err != nil) == refused {
				return time.Since(start)
			}
			if time.Since(start) > within {
				t.Fatalf("%s: still %v after %v", what, err, within)
			}
		}
	}
	wait(false, 15*time.Second, "before any ban")
	f, err := os.OpenFile(filepath.Join(dir, "access.log"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Format("02/Jan/2006:15:04:05 -0700")
	for i := range 8 {
		fmt.Fprintf(f, "%s - - [%s] \"GET /%d HTTP/1.1\" 200 1 \"-\" \"t\"\n", peer.Remote4, now, i)
	}
	f.Close()
	wait(true, 15*time.Second, "the banned client")
	if err := os.WriteFile(filepath.Join(dir, "allow.txt"), []byte(peer.Remote4.String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	took := wait(false, 2*time.Second, "the client once allowed")
	t.Logf("allow file written -> nftables lets the client through: %v", took)
}
