package endpoint_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logjail/logjail/control"
	"github.com/logjail/logjail/daemon"
	"github.com/logjail/logjail/internal/nstest"
	"github.com/logjail/logjail/internal/testenv"
)

// proxyConfig: the proxy's access log is the log logjail follows; the
// flood rule throttles at once (Perlbal's ladder) and bans after three
// violations.
const proxyConfig = `state_dir: %[1]s/state
checkpoint: 1s
metrics: ""
cleaner: "@every 1s"
sources:
  - name: web
    paths: [%[1]s/access.log]
    format: %[2]s
    from: start
rules:
  - name: flood
    limits: ["5 per 2s"]
    throttle: {initial_delay: 2s, max_delay: 2s, quiet: 1s}
    ban: {after: 3, for: 4s}
actions:
  - type: endpoint
    listen: 127.0.0.1:%[3]d
`

// TestProxies is the decision endpoint behind a real proxy: a client on
// the far side of a veth pair requests through nginx (auth_request) or
// Caddy (forward_auth), the proxy's access log is what logjail follows, and
// the client's own requests drive it over the limit: 200, then 429 with
// Retry-After, then 403; 200 again after the ban's expiry, and at once
// after an unban through the daemon's control.
func TestProxies(t *testing.T) {
	for _, proxy := range []string{"nginx", "caddy"} {
		t.Run(proxy, func(t *testing.T) {
			if !nstest.Enter(t, proxy, "ip") {
				return
			}
			testProxy(t, proxy)
		})
	}
}

func testProxy(t *testing.T, proxy string) {
	peer := nstest.NewPeer(t)
	dir := t.TempDir()
	epPort, proxyPort := testenv.FreePort(t), testenv.FreePort(t)
	upstream := startUpstream(t)
	format := "combined"
	if proxy == "caddy" {
		format = "caddy"
	}
	cfgPath := filepath.Join(dir, "logjail.yaml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(proxyConfig, dir, format, epPort)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "access.log"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	listen := net.JoinHostPort(peer.Local4.String(), strconv.Itoa(proxyPort))
	switch proxy {
	case "nginx":
		startNginx(t, dir, listen, nginxServer(nginxSnippet(nginxOpen, epPort, upstream), listen))
	case "caddy":
		startCaddy(t, dir, listen, epPort, upstream)
	}

	ctl := daemon.NewControl()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var logs bytes.Buffer
	var logMu sync.Mutex
	go func() {
		done <- daemon.Run(ctx, daemon.Options{ConfigPath: cfgPath, Control: ctl, Poll: true,
			Logger: slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if t.Failed() {
			logMu.Lock()
			t.Logf("daemon log:\n%s", logs.String())
			logMu.Unlock()
		}
	})

	client := peer.HTTPClient()
	url := "http://" + listen + "/"
	get := func() (int, string) {
		resp, err := client.Get(url)
		if err != nil {
			return 0, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	// until calls cond every 50 ms until it holds, for up to 20 s.
	until := func(what string, cond func() (bool, string)) {
		t.Helper()
		deadline := time.NewTimer(20 * time.Second)
		defer deadline.Stop()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			ok, state := cond()
			if ok {
				return
			}
			select {
			case <-deadline.C:
				t.Fatalf("%s: not after 20 s; %s", what, state)
			case <-tick.C:
			}
		}
	}
	// waitFor requests every 50 ms (the client's flood, when it is one)
	// until the answer is want.
	waitFor := func(what string, want int) string {
		t.Helper()
		var seen []int
		var retry string
		until(what, func() (bool, string) {
			var code int
			code, retry = get()
			if len(seen) == 0 || seen[len(seen)-1] != code {
				seen = append(seen, code)
			}
			return code == want, fmt.Sprintf("answers %v, want %d", seen, want)
		})
		return retry
	}
	// ask asks the endpoint about the client as the proxy does, without a
	// request through the proxy: nothing is logged, nothing charged.
	ask := func() (int, string) {
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
		req, err := http.NewRequest("GET", fmt.Sprintf("http://127.0.0.1:%d/auth", epPort), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Forwarded-For", peer.Remote4.String())
		resp, err := c.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("X-Logjail-Decision")
	}
	waitFor("the endpoint to answer", 200)
	retry := waitFor("a flood to be throttled", 429)
	if retry != "2" {
		t.Errorf("429 with Retry-After %q, want the ladder's delay, 2", retry)
	}
	waitFor("the throttled client to be banned", 403)
	if code, decision := ask(); code != 403 {
		t.Fatalf("the endpoint asked directly about the banned client: %d %s, want 403", code, decision)
	}
	// The client stays quiet until the ban (4 s) ends, as the endpoint
	// says it; then its request through the proxy gets through.
	until("the ban's expiry at the endpoint", func() (bool, string) {
		code, decision := ask()
		return code == 200, fmt.Sprintf("the endpoint answers %d %s", code, decision)
	})
	if code, _ := get(); code != 200 {
		t.Fatalf("through the proxy once the endpoint lets the client through: %d, want 200", code)
	}
	// Banned again, then unbanned by an operator: 200 at once. The client
	// first stays quiet until its 2 s window is empty (the 4 s ban still
	// holds), or its next request would be throttled again, rightly: the
	// daemon's own windows say when.
	waitFor("a second flood to be banned", 403)
	uctx, ucancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ucancel()
	until("the client's window to empty", func() (bool, string) {
		top, err := ctl.Top(uctx, control.TopRequest{Rule: "flood", N: 1000})
		if err != nil {
			return false, err.Error()
		}
		for _, k := range top.Keys {
			if k.Key == peer.Remote4.String() {
				for _, l := range k.Limits {
					if l.Value != nil && *l.Value > 0 {
						return false, fmt.Sprintf("%s: %v in its window of %q", k.Key, *l.Value, l.Limit)
					}
				}
			}
		}
		return true, ""
	})
	if _, err := ctl.Unban(uctx, "flood", peer.Remote4.String(), "test", "a customer"); err != nil {
		t.Fatalf("Unban: %v", err)
	}
	if code, _ := get(); code != 200 {
		t.Fatalf("right after Unban returned: %d, want 200", code)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// startUpstream is the application behind the proxy.
func startUpstream(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "app") })}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

// nginxMain is an nginx configuration around a test's paths and server
// blocks.
const nginxMain = `worker_processes 1;
user root;
daemon off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log notice;
events { worker_connections 64; }
http {
    access_log %[1]s/access.log combined;
    client_body_temp_path %[1]s/tmp;
    proxy_temp_path %[1]s/tmp;
    fastcgi_temp_path %[1]s/tmp;
    uwsgi_temp_path %[1]s/tmp;
    scgi_temp_path %[1]s/tmp;
%[2]s}
`

// The README's nginx snippets, as written there (TestREADMESnippets
// checks): for `fail: open` and for `fail: closed`. nginxSnippet puts
// them around a test's endpoint and application.
const (
	nginxOpen = `location / {
    auth_request /logjail-auth;
    auth_request_set $logjail_decision $upstream_http_x_logjail_decision;
    auth_request_set $logjail_retry_after $upstream_http_retry_after;
    error_page 500 = @logjail;
    proxy_pass http://app;
}
location = /logjail-auth {
    internal;
    proxy_pass http://127.0.0.1:7390/auth;
    proxy_pass_request_body off;
    proxy_set_header Content-Length "";
    # The client is the peer nginx sees: both headers are replaced,
    # whatever the client sent in them.
    proxy_set_header X-Forwarded-For $remote_addr;
    proxy_set_header X-Real-IP $remote_addr;
    proxy_connect_timeout 1s;
    proxy_read_timeout 2s;
}
location @logjail {
    if ($logjail_decision = throttle) {
        add_header Retry-After $logjail_retry_after always;
        return 429;
    }
    # logjail did not answer (stopped, restarting): fail open.
    proxy_pass http://app;
}
`
	nginxClosedFallback = `location @logjail {
    if ($logjail_decision = throttle) {
        add_header Retry-After $logjail_retry_after always;
        return 429;
    }
    # logjail did not answer, or has not loaded its bans yet: fail closed.
    add_header Retry-After 1 always;
    return 503;
}
`
)

// nginxClosed is the `fail: closed` snippet: the open one with its own
// fallback.
var nginxClosed = nginxOpen[:strings.Index(nginxOpen, "location @logjail")] + nginxClosedFallback

// nginxSnippet is a README snippet asking the endpoint on epPort and
// serving upstream.
func nginxSnippet(snippet string, epPort int, upstream string) string {
	s := strings.ReplaceAll(snippet, "127.0.0.1:7390", fmt.Sprintf("127.0.0.1:%d", epPort))
	return strings.ReplaceAll(s, "http://app", "http://"+upstream)
}

// nginxServer is a server block listening on listens.
func nginxServer(snippet string, listens ...string) string {
	var b strings.Builder
	b.WriteString("server {\n")
	for _, l := range listens {
		fmt.Fprintf(&b, "    listen %s;\n", l)
	}
	b.WriteString(snippet)
	b.WriteString("}\n")
	return b.String()
}

// startNginx runs nginx with the server blocks, and waits until it
// accepts connections on listen.
func startNginx(t *testing.T, dir, listen, servers string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, nginxMain, dir, servers), 0o644); err != nil {
		t.Fatal(err)
	}
	startServer(t, listen, exec.Command("nginx", "-e", filepath.Join(dir, "error.log"), "-c", conf, "-p", dir+"/"))
}

// The README's Caddy snippet, around a test's paths.
const caddyfile = `{
	admin off
	auto_https off
}
http://%[2]s {
	log {
		output file %[1]s/access.log
		format json
	}
	forward_auth 127.0.0.1:%[3]d {
		uri /auth
	}
	reverse_proxy %[4]s
}
`

// startCaddy runs Caddy with the README's snippet for the site (one
// address, or several joined with ", http://"), and waits until it
// accepts connections on listen.
func startCaddy(t *testing.T, dir, listen string, epPort int, upstream string, site ...string) {
	t.Helper()
	file := filepath.Join(dir, "Caddyfile")
	addr := listen
	if len(site) > 0 {
		addr = strings.Join(site, ", http://")
	}
	if err := os.WriteFile(file, fmt.Appendf(nil, caddyfile, dir, addr, epPort, upstream), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("caddy", "run", "--config", file, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir+"/data", "XDG_CONFIG_HOME="+dir+"/config")
	startServer(t, listen, cmd)
}

// startServer starts a proxy and waits until it accepts connections on
// listen; it is stopped by its own PID at the test's end.
func startServer(t *testing.T, listen string, cmd *exec.Cmd) {
	t.Helper()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	proc := testenv.Start(t, cmd, os.Interrupt, 5*time.Second)
	t.Cleanup(proc.Stop)
	exited := proc.Exited
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		c, err := net.DialTimeout("tcp", listen, time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-exited:
			t.Fatalf("%s exited: %s", cmd.Path, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not listen on %s: %s", cmd.Path, listen, strings.TrimSpace(out.String()))
		}
		select {
		case <-exited:
		case <-tick.C:
		}
	}
}
