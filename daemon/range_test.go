package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logjail/logjail/control"
	"github.com/logjail/logjail/daemon"
	"github.com/logjail/logjail/internal/nstest"
)

// rangeConfig: the group range bots (an IPv4 and an IPv6 CIDR, given as
// %[2]s) with its own limit, an allowed address inside it, and three
// actions: nftables rejecting the test's ports, an nginx deny file, the
// decision endpoint.
const rangeConfig = `state_dir: %[1]s/state
checkpoint: 1s
metrics: ""
sources:
  - name: web
    paths: [%[1]s/access.log]
    format: combined
    from: start
allow: [198.51.100.7]
ranges:
  bots:
    cidrs: [%[2]s]
    group: true
    limits: ["5 per 10s"]
    ban: {for: 1h}
rules:
  - name: flood
    limits: ["1000 per 10s"]
    ban: {for: 1h}
actions:
  - type: nftables
    target: reject
    ports: [%[3]d, %[4]d]
  - type: nginx
    file: %[1]s/deny.conf
    settle: 0s
    min_interval: 0s
  - type: endpoint
    listen: 127.0.0.1:%[5]d
`

// TestRangeBanCoversTheRange is the whole path for a group range: a log in
// which a handful of the range's addresses flood bans range:bots, and an
// address of the range that never appears in the log (the peer's, over a
// veth pair) is refused by the firewall, answered 403 by the endpoint and
// denied in the nginx file (and banned by /v1/throttle); an allowed
// address inside and one outside pass.
// A reload that narrows the range lets the peer's IPv4 address through at
// once; an operator's `ban range:bots` covers the range too, and still
// does after a restart, from the store.
func TestRangeBanCoversTheRange(t *testing.T) {
	if !nstest.Enter(t, "nft", "ip") {
		return
	}
	peer := nstest.NewPeer(t)
	l4 := nstest.Listen(t, netip.AddrPortFrom(peer.Local4, 0))
	l6 := nstest.Listen(t, netip.AddrPortFrom(peer.Local6, 0))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	epPort := l.Addr().(*net.TCPAddr).Port
	l.Close()

	dir := t.TempDir()
	cfgPath, logPath, denyPath := filepath.Join(dir, "logjail.yaml"), filepath.Join(dir, "access.log"), filepath.Join(dir, "deny.conf")
	writeConfig := func(cidrs string) {
		t.Helper()
		if err := os.WriteFile(cfgPath, fmt.Appendf(nil, rangeConfig, dir, cidrs, l4.Port(), l6.Port(), epPort), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeConfig("198.51.100.0/25, 2001:db8::/120")
	if err := os.WriteFile(logPath, nil, 0o644); err != nil {
		t.Fatal(err)
	}

	ctl := daemon.NewControl()
	reload := make(chan struct{}, 1)
	var logs syncBuffer
	start := func() (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- daemon.Run(ctx, daemon.Options{ConfigPath: cfgPath, Control: ctl, Poll: true, Reload: reload,
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		}()
		stopped := false
		stop = func() {
			if stopped {
				return
			}
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
		t.Cleanup(stop)
		return stop
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs.String())
		}
	})

	// What each client gets: from the endpoint (its status, asked with
	// X-Forwarded-For from the trusted loopback), and for the peer's two
	// addresses, from the firewall ("ok" or "blocked"); and whether the
	// nginx file has a line ("deny.conf: LINE": "yes" or "no").
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
	auth := func(client string) string {
		req, _ := http.NewRequest("GET", fmt.Sprintf("http://127.0.0.1:%d/auth", epPort), nil)
		req.Header.Set("X-Forwarded-For", client)
		resp, err := hc.Do(req)
		if err != nil {
			return err.Error()
		}
		resp.Body.Close()
		if d := resp.Header.Get("X-Logjail-Decision"); d == "unready" {
			return d
		}
		return fmt.Sprint(resp.StatusCode)
	}
	dial := func(a netip.AddrPort) string {
		if err := peer.Dial(a, time.Second); err != nil {
			return "blocked"
		}
		return "ok"
	}
	// expect waits until every check gives its answer.
	expect := func(what string, want map[string]string) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			var wrong []string
			for k, w := range want {
				var got string
				switch k {
				case "peer4":
					got = dial(l4)
				case "peer6":
					got = dial(l6)
				default:
					if line, ok := strings.CutPrefix(k, "deny.conf: "); ok {
						b, _ := os.ReadFile(denyPath)
						got = map[bool]string{true: "yes", false: "no"}[strings.Contains(string(b), "\n"+line+"\n")]
						break
					}
					got = auth(k)
				}
				if got != w {
					wrong = append(wrong, fmt.Sprintf("%s: %s, want %s", k, got, w))
				}
			}
			if len(wrong) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: after 15s still\n%s", what, strings.Join(wrong, "\n"))
			}
			<-tick.C
		}
	}

	stop := start()
	want := map[string]string{
		"peer4": "ok", "peer6": "ok", // 198.51.100.2 and 2001:db8::2: in the range, never in the log
		"198.51.100.77":  "200", // in the range, never in the log
		"198.51.100.7":   "200", // allowed, in the range
		"198.51.100.200": "200", // outside
		"2001:db8::ab":   "200", // in the range's IPv6 CIDR, never in the log
	}
	expect("before any ban", want)

	// Six of the range's addresses, one request each: the range's key is
	// over 5 per 10s.
	f, err := os.OpenFile(logPath, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Format("02/Jan/2006:15:04:05 -0700")
	for i := range 6 {
		fmt.Fprintf(f, "198.51.100.%d - - [%s] \"GET /%d HTTP/1.1\" 200 1 \"-\" \"t\"\n", 50+i, now, i)
	}
	f.Close()
	want["peer4"], want["peer6"], want["198.51.100.77"], want["2001:db8::ab"] = "blocked", "blocked", "403", "403"
	for _, line := range []string{"allow 198.51.100.7;", "deny 198.51.100.0/25;", "deny 2001:db8::/120;"} {
		want["deny.conf: "+line] = "yes"
	}
	expect("range:bots banned", want)
	// The Cerberus query says the same of the unseen address.
	if resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d/v1/throttle?ip=198.51.100.77&event=range:bots", epPort)); err != nil {
		t.Errorf("/v1/throttle: %v", err)
	} else {
		var ans struct {
			Throttle struct {
				Range, Reason string
				Sleep         int
			}
		}
		err := json.NewDecoder(resp.Body).Decode(&ans)
		resp.Body.Close()
		if th := ans.Throttle; err != nil || th.Sleep != -1 || th.Reason != "banned" || th.Range != "range:bots" {
			t.Errorf("/v1/throttle for 198.51.100.77: %+v %v, want banned in range:bots", th, err)
		}
	}
	// A reload narrows the IPv4 CIDR: the peer's 198.51.100.2 is out of
	// it, .77 still in.
	writeConfig("198.51.100.64/26, 2001:db8::/120")
	reload <- struct{}{}
	want["peer4"], want["198.51.100.10"] = "ok", "200"
	want["deny.conf: deny 198.51.100.0/25;"], want["deny.conf: deny 198.51.100.64/26;"] = "no", "yes"
	want["deny.conf: allow 198.51.100.7;"] = "no" // no longer inside a banned prefix: no exemption
	expect("range:bots narrowed by a reload", want)

	// The operator lifts it, and bans the range by hand.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if lifted, err := ctl.Unban(ctx, "range:bots", "range:bots", "test", "a partner"); err != nil || len(lifted) != 1 {
		t.Fatalf("Unban: %v %v", lifted, err)
	}
	for k := range want {
		switch {
		case strings.HasPrefix(k, "peer"):
			want[k] = "ok"
		case strings.HasPrefix(k, "deny.conf: "):
			want[k] = "no"
		default:
			want[k] = "200"
		}
	}
	expect("range:bots unbanned", want)
	if _, err := ctl.Ban(ctx, control.BanRequest{Key: "range:nope", For: "1h"}, "test"); err == nil || !strings.Contains(err.Error(), "range:nope") {
		t.Errorf("a ban of a range not configured: %v, want an error naming it", err)
	}
	if _, err := ctl.Ban(ctx, control.BanRequest{Key: "range:bots", For: "1h"}, "test"); err != nil {
		t.Fatalf("Ban range:bots: %v", err)
	}
	// Ban returns once every action has applied it.
	if got := dial(l6); got != "blocked" {
		t.Errorf("right after the operator's ban of range:bots, the peer's IPv6 address is %s", got)
	}
	want["peer6"], want["198.51.100.77"], want["2001:db8::ab"] = "blocked", "403", "403"
	want["deny.conf: deny 198.51.100.64/26;"], want["deny.conf: deny 2001:db8::/120;"] = "yes", "yes"
	expect("range:bots banned by the operator", want)

	// A restart loads the operator's ban from the store and resolves it
	// against the configured range again.
	stop()
	start()
	expect("after a restart", want)
}
