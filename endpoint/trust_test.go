package endpoint_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logjail/logjail/daemon"
	"github.com/logjail/logjail/internal/nstest"
	"github.com/logjail/logjail/internal/testenv"
)

// trustConfig: the client's IPv4 address (198.51.100.2) is denied, its
// IPv6 one (2001:db8::2) is not; two endpoints, one per fail mode.
const trustConfig = `state_dir: %[1]s/state
control_socket: %[1]s/control.sock
metrics: ""
deny: [198.51.100.2]
sources:
  - name: web
    paths: [%[1]s/access.log]
    format: %[2]s
rules:
  - name: flood
    limits: ["1000 per 1s"]
    ban: {for: 1m}
actions:
  - type: endpoint
    name: open
    listen: 127.0.0.1:%[3]d
  - type: endpoint
    name: closed
    listen: 127.0.0.1:%[4]d
    fail: closed
`

// forgeries are header sets a client sends to pass as another address.
func forgeries(as string) []http.Header {
	return []http.Header{
		{"X-Real-Ip": {as}},
		{"X-Forwarded-For": {as}},
		{"X-Forwarded-For": {as + ", 203.0.113.9"}},
		{"X-Forwarded-For": {as}, "X-Real-Ip": {as}},
		{"X-Forwarded-For": {as, as}, "X-Real-Ip": {as, "203.0.113.9"}},
		{"X-Forwarded-For": {"nonsense"}, "X-Real-Ip": {"nonsense"}},
		{"X-Forwarded-For": {""}, "X-Real-Ip": {""}},
	}
}

// TestProxyTrust: a client behind the README's nginx snippets (fail open
// and fail closed) and Caddy's cannot choose the address it is judged as:
// denied on its IPv4 address, it gets 403 every time, whatever it forges
// in X-Real-IP and X-Forwarded-For (once, repeated, both, garbage); on
// its IPv6 address, not denied, it gets 200 even when it forges the
// denied address. With logjail stopped, nginx answers 200 with the fail
// open snippet and 503 with the fail closed one, never 500.
func TestProxyTrust(t *testing.T) {
	for _, proxy := range []string{"nginx", "caddy"} {
		t.Run(proxy, func(t *testing.T) {
			if !nstest.Enter(t, proxy, "ip") {
				return
			}
			testTrust(t, proxy)
		})
	}
}

func testTrust(t *testing.T, proxy string) {
	peer := nstest.NewPeer(t)
	dir := t.TempDir()
	openPort, closedPort := testenv.FreePort(t), testenv.FreePort(t)
	upstream := startUpstream(t)
	if err := os.WriteFile(filepath.Join(dir, "access.log"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	listen := func(port int) (string, string) {
		return net.JoinHostPort(peer.Local4.String(), strconv.Itoa(port)), net.JoinHostPort(peer.Local6.String(), strconv.Itoa(port))
	}
	// sites: the proxy's front ends, by the fail mode they are for.
	sites := map[string]int{"open": testenv.FreePort(t)}
	format := "combined"
	switch proxy {
	case "nginx":
		sites["closed"] = testenv.FreePort(t)
		o4, o6 := listen(sites["open"])
		c4, c6 := listen(sites["closed"])
		startNginx(t, dir, o4, nginxServer(nginxSnippet(nginxOpen, openPort, upstream), o4, o6)+
			nginxServer(nginxSnippet(nginxClosed, closedPort, upstream), c4, c6))
	case "caddy":
		format = "caddy"
		o4, o6 := listen(sites["open"])
		startCaddy(t, dir, o4, openPort, upstream, o4, o6)
	}
	client := peer.HTTPClient()
	get := func(site string, v6 bool, h http.Header) (int, string) {
		host := peer.Local4.String()
		if v6 {
			host = "[" + peer.Local6.String() + "]"
		}
		req, _ := http.NewRequest("GET", fmt.Sprintf("http://%s:%d/", host, sites[site]), nil)
		for k, vs := range h {
			req.Header[k] = vs
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}

	if proxy == "nginx" { // logjail not running yet
		for _, v6 := range []bool{false, true} {
			if code, _ := get("open", v6, nil); code != 200 {
				t.Errorf("logjail down, fail open snippet (IPv6 %v): %d, want 200", v6, code)
			}
			if code, retry := get("closed", v6, nil); code != 503 || retry != "1" {
				t.Errorf("logjail down, fail closed snippet (IPv6 %v): %d Retry-After %q, want 503 with Retry-After 1", v6, code, retry)
			}
		}
	}

	cfg := filepath.Join(dir, "logjail.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, trustConfig, dir, format, openPort, closedPort), 0o600); err != nil {
		t.Fatal(err)
	}
	stop := startDaemon(t, cfg)
	// The deny list reaches the endpoints at start.
	deadline := time.Now().Add(20 * time.Second)
	for site := range sites {
		for {
			code, _ := get(site, false, nil)
			if code == 403 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the denied client still gets %d", site, code)
			}
		}
	}
	for site := range sites {
		for _, h := range forgeries("2001:db8::2") {
			if code, _ := get(site, false, h); code != 403 {
				t.Errorf("%s: the denied client forging %v: %d, want 403", site, h, code)
			}
		}
		for _, h := range forgeries("198.51.100.2") {
			if code, _ := get(site, true, h); code != 200 {
				t.Errorf("%s: a client not denied, forging the denied address, %v: %d, want 200", site, h, code)
			}
		}
	}
	if proxy != "nginx" {
		return
	}
	stop() // logjail stopped again
	for _, v6 := range []bool{false, true} {
		if code, _ := get("open", v6, nil); code != 200 {
			t.Errorf("logjail stopped, fail open snippet (IPv6 %v): %d, want 200", v6, code)
		}
		if code, retry := get("closed", v6, nil); code != 503 || retry != "1" {
			t.Errorf("logjail stopped, fail closed snippet (IPv6 %v): %d Retry-After %q, want 503 with Retry-After 1", v6, code, retry)
		}
	}
}

// startDaemon runs the daemon in-process; the function it returns stops
// it (also called at the test's end).
func startDaemon(t *testing.T, cfg string) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var logs strings.Builder
	var mu sync.Mutex
	go func() {
		done <- daemon.Run(ctx, daemon.Options{ConfigPath: cfg, Poll: true,
			Logger: slog.New(slog.NewTextHandler(lockedBuilder{&mu, &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
			if t.Failed() {
				mu.Lock()
				t.Logf("daemon log:\n%s", logs.String())
				mu.Unlock()
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

type lockedBuilder struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (l lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// TestREADMESnippets: the nginx snippets the tests run are the README's,
// word for word.
func TestREADMESnippets(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]string{"fail open": nginxOpen, "fail closed": nginxClosedFallback} {
		if !strings.Contains(string(readme), "```nginx\n"+s+"```\n") {
			t.Errorf("the README has no nginx block that is the %s snippet:\n%s", name, s)
		}
	}
}
