package actions

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/logjail/logjail/internal/testenv"
)

// ngServer is a real nginx a test started: its master process runs in the
// foreground (daemon off) as the test's child, everything it touches lies
// in prefix, and it listens on a free loopback port. Behind it stands the
// realip module: the test, on 127.0.0.1, poses as any client with
// X-Forwarded-For, and no packet leaves the loopback.
type ngServer struct {
	nginx  string
	prefix string // with a trailing /
	conf   string
	errlog string
	port   int
	proc
}

// proc is a server a test started as its child, stopped by its own PID:
// nginx and haproxy.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

// start starts cmd and notes when it exits.
func (p *proc) start(cmd *exec.Cmd) error {
	p.cmd, p.exited = cmd, make(chan struct{})
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { cmd.Wait(); close(p.exited) }()
	return nil
}

// waitReady waits until probe succeeds, the server exits, or 10s pass.
func (p *proc) waitReady(name string, probe func() error) error {
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := probe(); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			return err
		}
		select {
		case <-p.exited:
			return errors.New(name + " exited")
		case <-tick.C:
		}
	}
}

// stop stops the server by its own PID: SIGTERM, then a kill.
func (p *proc) stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// ngConf is the server's configuration: the deny file in the location
// that serves /, the geo file at http level, tested in /geo. Both serve a
// static file, since `return` would answer before access checks.
const ngConf = `worker_processes 1;
%s
daemon off;
master_process on;
pid %[2]snginx.pid;
error_log %[2]serror.log notice;
events { worker_connections 64; }
http {
    access_log %[2]saccess.log;
    client_body_temp_path %[2]stmp/body;
    proxy_temp_path %[2]stmp/proxy;
    fastcgi_temp_path %[2]stmp/fastcgi;
    uwsgi_temp_path %[2]stmp/uwsgi;
    scgi_temp_path %[2]stmp/scgi;
    default_type text/plain;
    set_real_ip_from 127.0.0.1;
    real_ip_header X-Forwarded-For;
    include %[2]sgeo.conf;
    server {
        listen 127.0.0.1:%[3]d;
        root %[2]shtml;
        location / {
            include %[2]sdeny.conf;
        }
        location = /geo {
            if ($logjail_banned) { return 403; }
        }
        # The README's block file snippet.
        location = /blockfile {
            if (-f %[2]sblocked/$remote_addr) {
                add_header Retry-After 60 always;
                return 503;
            }
        }
    }
}
`

// ngStart starts nginx; the files it includes must be in place. It is
// stopped, by its PID, when the test ends.
func ngStart(t *testing.T, prefix string) *ngServer {
	t.Helper()
	nginx := testenv.Need(t, "nginx")[0]
	for _, d := range []string{"html", "tmp"} {
		if err := os.MkdirAll(filepath.Join(prefix, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"index.html", "geo", "blockfile"} {
		if err := os.WriteFile(filepath.Join(prefix, "html", f), []byte("ok\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	user := "" // as root the workers would run as nobody, who cannot read the test's directory
	if os.Geteuid() == 0 {
		user = "user root;"
	}
	var lastErr string
	for range 5 { // a free port may be taken before nginx binds it
		s := &ngServer{nginx: nginx, prefix: prefix, conf: prefix + "nginx.conf", errlog: prefix + "error.log"}
		s.port = testenv.FreePort(t)
		if err := os.WriteFile(s.conf, fmt.Appendf(nil, ngConf, user, prefix, s.port), 0o644); err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd := exec.Command(nginx, "-e", s.errlog, "-c", s.conf, "-p", prefix)
		cmd.Stdout, cmd.Stderr = &stderr, &stderr
		if err := s.start(cmd); err != nil {
			t.Fatal(err)
		}
		err := s.waitReady("nginx", func() error { _, err := s.get("/", "198.51.100.1"); return err })
		if err == nil {
			t.Cleanup(s.stop)
			return s
		}
		s.stop()
		log, _ := os.ReadFile(s.errlog)
		lastErr = fmt.Sprintf("%v\n%s%s", err, stderr.Bytes(), log)
		if !strings.Contains(lastErr, "Address already in use") {
			break
		}
	}
	t.Fatalf("nginx did not start: %s", lastErr)
	return nil
}

// get requests path as client: a new connection each time, so that a
// request never lands on a worker a reload has retired.
func (s *ngServer) get(path, client string) (int, error) {
	code, _, err := s.getHeader(path, client, "")
	return code, err
}

// getHeader is get, returning the response's header h too.
func (s *ngServer) getHeader(path, client, h string) (int, string, error) {
	req, err := http.NewRequest("GET", fmt.Sprintf("http://127.0.0.1:%d%s", s.port, path), nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("X-Forwarded-For", client)
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get(h), nil
}

// expect waits (a reload takes effect asynchronously) until every client
// gets its status on both paths, / (the deny file) and /geo (the geo map);
// it fails the test after 10s.
func (s *ngServer) expect(t *testing.T, what string, want map[string]int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var wrong []string
		for client, status := range want {
			for _, path := range []string{"/", "/geo"} {
				got, err := s.get(path, client)
				if err != nil || got != status {
					wrong = append(wrong, fmt.Sprintf("%s %s: %d %v, want %d", client, path, got, err, status))
				}
			}
		}
		if len(wrong) == 0 {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(s.errlog)
			t.Fatalf("%s: after 10s still\n%s\nerror log:\n%s", what, strings.Join(wrong, "\n"), log)
		}
		<-tick.C
	}
}

// reloadArgv is `nginx -s reload` as an operator would run it, behind a
// sh that counts its runs in a file (a test's wrapper, not logjail's).
func (s *ngServer) reloadArgv(counter string) []any {
	return []any{"sh", "-c", `echo run >> "$0"; exec "$@"`, counter,
		s.nginx, "-e", s.errlog, "-c", s.conf, "-p", s.prefix, "-s", "reload"}
}

func (s *ngServer) checkArgv() []any {
	return []any{s.nginx, "-t", "-q", "-e", s.errlog, "-c", s.conf, "-p", s.prefix}
}

func ngCount(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(data, []byte("\n"))
}

// TestNginx runs a real nginx on the deny file and the geo map, reloaded by
// the actions themselves with its own check and reload commands.
func TestNginx(t *testing.T) {
	ctx := context.Background()
	prefix := t.TempDir() + "/"
	deny, geo := prefix+"deny.conf", prefix+"geo.conf"
	// The files nginx includes exist before it starts: as at an install,
	// an action without commands writes them.
	for _, o := range []map[string]any{{"file": deny}, {"file": geo, "style": "geo"}} {
		if err := lfBuild(t, "nginx", o).Sync(ctx, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	s := ngStart(t, prefix)
	denyRuns, geoRuns := prefix+"deny.reloads", prefix+"geo.reloads"
	d := lfBuild(t, "nginx", map[string]any{"file": deny, "check": s.checkArgv(), "reload": s.reloadArgv(denyRuns)})
	g := lfBuild(t, "nginx", map[string]any{"file": geo, "style": "geo", "check": s.checkArgv(), "reload": s.reloadArgv(geoRuns)})
	both := func(what string, f func(l *listFile) error) {
		t.Helper()
		for _, l := range []*listFile{d, g} {
			if err := f(l); err != nil {
				t.Fatalf("%s: %s: %v", what, l.style, err)
			}
		}
	}
	reloads := func(what string, want int) {
		t.Helper()
		if nd, ng := ngCount(t, denyRuns), ngCount(t, geoRuns); nd != want || ng != want {
			t.Errorf("%s: %d and %d reloads (deny, geo), want %d", what, nd, ng, want)
		}
	}

	both("start", func(l *listFile) error { return l.Sync(ctx, nil, nil) })
	reloads("a Sync to the files nginx has", 0)
	s.expect(t, "nothing banned", map[string]int{"198.51.100.7": 200, "2001:db8:1::1": 200})

	entries := lfEntries("198.51.100.7", "203.0.113.0/24", "2001:db8:1::/64")
	allow := lfPrefixes("203.0.113.9", "2001:db8:1::5", "198.51.100.200")
	both("ban", func(l *listFile) error { return l.Sync(ctx, entries, allow) })
	reloads("ban", 1)
	banned := map[string]int{
		"198.51.100.7":    403, // a single address
		"198.51.100.8":    200,
		"203.0.113.50":    403, // inside a banned /24
		"203.0.113.9":     200, // allowed inside the /24
		"2001:db8:1::abc": 403, // inside a banned /64
		"2001:db8:1::5":   200, // allowed inside the /64
		"2001:db8:2::1":   200,
	}
	s.expect(t, "banned", banned)

	both("unban", func(l *listFile) error {
		return l.Apply(ctx, []Change{{Entry: Entry{Prefix: lfEntry("198.51.100.7").Prefix}, Delete: true}})
	})
	reloads("unban", 2)
	banned["198.51.100.7"] = 200
	s.expect(t, "198.51.100.7 unbanned", banned)

	// A burst of a thousand bans in one Apply (the manager's Pacer gathers
	// them): one check, one write, one reload.
	var burst []Change
	for i := range 1000 {
		a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0x10, 14: byte(i >> 8), 15: byte(i)})
		burst = append(burst, Change{Entry: lfEntry(a.String())})
	}
	both("burst", func(l *listFile) error { return l.Apply(ctx, burst) })
	reloads("a burst of 1,000 bans", 3)
	banned["2001:db8:10::3e7"], banned["2001:db8:10::"], banned["2001:db8:10::3e8"] = 403, 403, 200
	s.expect(t, "the burst banned", banned)
	if n := strings.Count(lfRead(t, deny), "\ndeny "); n != 1002 {
		t.Errorf("the deny file has %d deny lines, want 1002", n)
	}

	// A check that fails: the previous file stays, nothing is reloaded,
	// nginx keeps the bans it has.
	before := lfRead(t, deny)
	broken := lfBuild(t, "nginx", map[string]any{"file": deny, "check": []any{"false"}, "reload": s.reloadArgv(denyRuns)})
	err := broken.Sync(ctx, lfEntries("198.51.100.66"), nil)
	if err == nil || !strings.Contains(err.Error(), deny) || !strings.Contains(err.Error(), `["false"]`) {
		t.Errorf("a failed check: %v, want an error naming %s and [\"false\"]", err, deny)
	}
	if lfRead(t, deny) != before {
		t.Error("a failed check left the new file in place")
	}
	reloads("a failed check", 3)
	banned["198.51.100.66"] = 200
	s.expect(t, "the bans before the failed check", banned)

	// Flush empties the lists and reloads; nginx still loads its
	// configuration, which includes them.
	both("flush", func(l *listFile) error { return l.Flush(ctx) })
	reloads("flush", 4)
	for c := range banned {
		banned[c] = 200
	}
	s.expect(t, "flushed", banned)
	for _, f := range []string{deny, geo} {
		if got := lfRead(t, f); !strings.Contains(got, "0 blocked prefixes") {
			t.Errorf("%s after Flush:\n%s", f, got)
		}
	}
	if n, err := strconv.Atoi(strings.TrimSpace(lfRead(t, prefix+"nginx.pid"))); err != nil || n != s.cmd.Process.Pid {
		t.Errorf("nginx.pid says %d (%v): the reloads went to another nginx than the test's %d", n, err, s.cmd.Process.Pid)
	}
}
