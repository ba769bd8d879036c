package daemon_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logjail/logjail/daemon"
	"github.com/logjail/logjail/goodbots"
	"github.com/logjail/logjail/internal/dnstest"
	"github.com/logjail/logjail/internal/testenv"
)

const goodBotsDaemonConfig = `state_dir: %[1]s/state
control_socket: %[1]s/control.sock
checkpoint: 1s
metrics: ""
sources:
  - name: web
    paths: [%[1]s/access.log]
    format: combined
    from: start
good_bots: {verify: dns}
rules:
  - name: flood
    limits: ["5 per 10s"]
    ban: {for: 1h}
actions:
  - type: endpoint
    listen: 127.0.0.1:%[2]d
`

// TestGoodBotsDNSLive: the daemon with good_bots: {verify: dns} and a
// real DNS server. A Googlebot outside Google's published ranges whose
// reverse DNS is forward-confirmed (203.0.113.5) is an ordinary client for
// its first lines, while the lookup runs; once it is verified, 60 lines
// in a few seconds (twelve times flood's limit) never ban it. A fake
// Googlebot (203.0.113.8: no PTR) sending the same is banned by flood,
// which the decision endpoint says.
func TestGoodBotsDNSLive(t *testing.T) {
	s := dnstest.Start(t,
		"--ptr-record=5.113.0.203.in-addr.arpa,crawl-203-0-113-5.googlebot.com",
		"--host-record=crawl-203-0-113-5.googlebot.com,203.0.113.5",
	)
	v := goodbots.NewVerifier(goodbots.Options{Resolver: s.Resolver()})
	defer v.Close()
	dir := t.TempDir()
	port := testenv.FreePort(t)
	cfgPath := filepath.Join(dir, "logjail.yaml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(goodBotsDaemonConfig, dir, port)), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "access.log")
	ua := "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
	t0 := time.Now().UTC().Add(-time.Minute)
	write := func(ip string, from time.Time, n int) {
		t.Helper()
		var b strings.Builder
		for i := range n {
			at := from.Add(time.Duration(i) * 50 * time.Millisecond)
			fmt.Fprintf(&b, "%s - - [%s] \"GET /p%d HTTP/1.1\" 200 1 \"-\" %q\n", ip, at.Format("02/Jan/2006:15:04:05 -0700"), i, ua)
		}
		f, err := os.OpenFile(logPath, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(b.String()); err != nil {
			t.Fatal(err)
		}
	}
	write("203.0.113.5", t0, 3) // under flood's 5: the lookup's time

	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan struct{})
	var runErr error
	var logs syncBuffer
	go func() {
		defer close(exited)
		runErr = daemon.Run(ctx, daemon.Options{ConfigPath: cfgPath, Poll: true, Verifier: v,
			Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	}()
	t.Cleanup(func() {
		cancel()
		<-exited
		if runErr != nil {
			t.Errorf("Run: %v", runErr)
		}
		if t.Failed() {
			t.Logf("daemon log:\n%s\ndnsmasq:\n%s", logs.String(), s.Log())
		}
	})

	// The daemon's first lines of the Googlebot start the lookup.
	deadline := time.Now().Add(20 * time.Second)
	for v.Stats().Lookups == 0 {
		select {
		case <-exited:
			t.Fatal("the daemon exited")
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the daemon started no reverse DNS lookup in 20s")
		}
	}
	sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer scancel()
	if err := v.Settle(sctx); err != nil {
		t.Fatal(err)
	}
	if got := v.Verify(netip.MustParseAddr("203.0.113.5"), "googlebot"); got != goodbots.Verified {
		t.Fatalf("203.0.113.5 is %v after the lookup", got)
	}

	write("203.0.113.8", t0.Add(10*time.Second), 60)
	write("203.0.113.5", t0.Add(20*time.Second), 60)
	waitAuth(t, port, "203.0.113.8", 20*time.Second, exited, func(a authAnswer) bool { return a.code == 403 })
	// The fake's ban was decided on lines written before the crawler's:
	// by the time the endpoint refuses it, the crawler's lines are read or
	// being read; the crawler is never refused.
	write("198.51.100.1", t0.Add(30*time.Second), 6) // a marker after both: banned once read
	waitAuth(t, port, "198.51.100.1", 20*time.Second, exited, func(a authAnswer) bool { return a.code == 403 })
	if a, err := askAuth(port, "203.0.113.5"); err != nil || a.code != 200 {
		t.Errorf("/auth for the verified Googlebot: %+v, %v; want 200 (charged to range:googlebot, under good_bots' limits)", a, err)
	}
}
