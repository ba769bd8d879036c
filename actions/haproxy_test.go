package actions

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/logjail/logjail/internal/testenv"
)

// hpConf is a real haproxy's configuration, the package doc's snippet: the
// ACL files of a haproxy action in front of an upstream on loopback. The
// test, on 127.0.0.1, poses as any client through X-Forwarded-For
// (set-src), so that no packet leaves the loopback.
const hpConf = `global
    pidfile %[1]shaproxy.pid
defaults
    mode http
    timeout connect 5s
    timeout client 5s
    timeout server 5s
frontend web
    bind 127.0.0.1:%[2]d
    http-request set-src hdr(X-Forwarded-For)
    acl banned src -f %[1]slogjail.acl
    acl allowed src -f %[1]slogjail-allow.acl
    http-request deny if banned !allowed
    default_backend upstream
backend upstream
    server up %[3]s
`

// hpServer is a real haproxy a test started, in master-worker mode in the
// foreground (-W -db) as the test's child: SIGUSR2 to its master reloads
// it, as `systemctl reload haproxy` does.
type hpServer struct {
	haproxy string
	conf    string
	port    int
	out     *bytes.Buffer
	proc
}

// hpStart starts haproxy in front of a tiny upstream; the ACL files must
// be in place. Both are stopped, haproxy by its PID, when the test ends.
func hpStart(t *testing.T, prefix string) *hpServer {
	t.Helper()
	haproxy := testenv.Need(t, "haproxy")[0]
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "upstream")
	}))
	t.Cleanup(up.Close)
	upAddr := strings.TrimPrefix(up.URL, "http://")
	var lastErr string
	for range 5 { // a free port may be taken before haproxy binds it
		s := &hpServer{haproxy: haproxy, conf: prefix + "haproxy.cfg", port: testenv.FreePort(t), out: new(bytes.Buffer)}
		if err := os.WriteFile(s.conf, fmt.Appendf(nil, hpConf, prefix, s.port, upAddr), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(haproxy, "-W", "-db", "-f", s.conf)
		cmd.Stdout, cmd.Stderr = s.out, s.out
		if err := s.start(cmd); err != nil {
			t.Fatal(err)
		}
		err := s.waitReady("haproxy", func() error { _, err := s.get("198.51.100.1"); return err })
		if err == nil {
			t.Cleanup(s.stop)
			return s
		}
		s.stop()
		lastErr = fmt.Sprintf("%v\n%s", err, s.out)
		if !strings.Contains(lastErr, "Address already in use") && !strings.Contains(lastErr, "cannot bind") {
			break
		}
	}
	t.Fatalf("haproxy did not start: %s", lastErr)
	return nil
}

// get requests / as client, on a new connection each time, so that a
// request never lands on a worker a reload has retired.
func (s *hpServer) get(client string) (int, error) {
	req, err := http.NewRequest("GET", fmt.Sprintf("http://127.0.0.1:%d/", s.port), nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("X-Forwarded-For", client)
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// expect waits (a reload takes effect asynchronously) until every client
// gets its status; it fails the test after 10s.
func (s *hpServer) expect(t *testing.T, what string, want map[string]int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var wrong []string
		for client, status := range want {
			if got, err := s.get(client); err != nil || got != status {
				wrong = append(wrong, fmt.Sprintf("%s: %d %v, want %d", client, got, err, status))
			}
		}
		if len(wrong) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: after 10s still\n%s\nhaproxy:\n%s", what, strings.Join(wrong, "\n"), s.out)
		}
		<-tick.C
	}
}

// TestHAProxy runs a real haproxy on the haproxy action's two ACL files:
// `haproxy -c` is the action's check (it reads the files as written,
// comments included), a SIGUSR2 to the master its reload, and a request
// from each client gets the status the bans and exemptions give it.
func TestHAProxy(t *testing.T) {
	ctx := context.Background()
	prefix := t.TempDir() + "/"
	file, allowFile := prefix+"logjail.acl", prefix+"logjail-allow.acl"
	// The files haproxy reads exist before it starts: as at an install,
	// an action without commands writes them.
	if err := lfBuild(t, "haproxy", map[string]any{"file": file, "allow_file": allowFile}).Sync(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
	s := hpStart(t, prefix)
	reloads := prefix + "reloads"
	l := lfBuild(t, "haproxy", map[string]any{
		"file":       file,
		"allow_file": allowFile,
		"check":      []any{s.haproxy, "-c", "-q", "-f", s.conf},
		"reload":     []any{"sh", "-c", `echo run >> "$0"; exec kill -USR2 "$1"`, reloads, fmt.Sprint(s.cmd.Process.Pid)},
	})
	s.expect(t, "nothing banned", map[string]int{"198.51.100.7": 200, "2001:db8:1::1": 200})

	entries := lfEntries("198.51.100.7", "203.0.113.0/24", "2001:db8:1::/64")
	allow := lfPrefixes("203.0.113.9", "2001:db8:1::5", "198.51.100.200")
	if err := l.Sync(ctx, entries, allow); err != nil {
		t.Fatalf("ban: %v", err)
	}
	if n := ngCount(t, reloads); n != 1 {
		t.Errorf("ban: %d reloads, want 1", n)
	}
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

	if err := l.Apply(ctx, []Change{{Entry: Entry{Prefix: lfEntry("198.51.100.7").Prefix}, Delete: true}}); err != nil {
		t.Fatalf("unban: %v", err)
	}
	banned["198.51.100.7"] = 200
	s.expect(t, "198.51.100.7 unbanned", banned)

	// haproxy -c reads the ACL files the action writes: a file it cannot
	// read fails the check, so the check is not one that always passes.
	if err := os.WriteFile(file, []byte("not-an-address\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(s.haproxy, "-c", "-q", "-f", s.conf).CombinedOutput(); err == nil {
		t.Errorf("haproxy -c accepted an ACL file holding not-an-address:\n%s", out)
	}
	if err := l.Sync(ctx, entries, allow); err != nil {
		t.Fatalf("Sync over a broken file: %v", err)
	}
	if out, err := exec.Command(s.haproxy, "-c", "-q", "-f", s.conf).CombinedOutput(); err != nil {
		t.Errorf("haproxy -c on the action's files: %v\n%s", err, out)
	}
	banned["198.51.100.7"] = 403
	s.expect(t, "after the broken file was rewritten", banned)
}
