package daemon_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/logjail/logjail/control"
	"github.com/logjail/logjail/daemon"
	"github.com/logjail/logjail/internal/nstest"
	"github.com/logjail/logjail/internal/testenv"
)

// allowLiftConfig: a rule that bans the sixth request in 10 s for an hour,
// an allow file the daemon watches, and the action under test.
const allowLiftConfig = `state_dir: %[1]s/state
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
%[2]s`

// liftAction is one action under TestAllowLiftsEveryAction: its YAML, the
// address a rule bans (banned) and the one an operator bans with --force
// (forced), and how a user sees whether the action blocks an address.
type liftAction struct {
	yaml           string
	banned, forced netip.Addr
	blocked        func(addr netip.Addr) (bool, error)
	afterLift      func(t *testing.T) // more checks once the lift is seen
	// synced, if set, waits until the action has taken in the daemon's
	// first sync, before the test's lines come.
	synced func(t *testing.T)
}

// TestAllowLiftsEveryAction: for every action type that runs here (the
// endpoint, block files and the nginx deny file are TestListFilesTakeEffect's),
// an address a rule banned is let through by the action within 2 s of the
// allow file listing it, without a SIGHUP; an address an operator banned
// with --force, listed in the same write, stays blocked. Firewalls are
// checked by a client connecting from another network namespace, HAProxy by
// a real haproxy answering a request, exec by the argv its commands ran
// with, Apache by its list file (no Apache here).
func TestAllowLiftsEveryAction(t *testing.T) {
	for _, c := range []struct {
		name  string
		ns    []string // the commands of a firewall test in a namespace; nil: none
		setup func(t *testing.T, dir string) liftAction
	}{
		{"iptables-rules", []string{"iptables", "ip6tables"}, liftFirewall("iptables", "REJECT", "")},
		{"iptables-ipset", []string{"iptables", "ip6tables", "ipset"}, liftFirewall("iptables", "REJECT", "    mode: ipset\n")},
		{"nftables", []string{"nft"}, liftFirewall("nftables", "reject", "")},
		{"exec", nil, liftExec},
		{"apache", nil, liftApache},
		{"haproxy", nil, liftHAProxy},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.ns != nil && !nstest.Enter(t, append(c.ns, "ip")...) {
				return
			}
			testAllowLift(t, c.setup)
		})
	}
}

func testAllowLift(t *testing.T, setup func(t *testing.T, dir string) liftAction) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		// Written whole and renamed, as an editor or a deployment tool does.
		tmp := filepath.Join(dir, "."+name+".tmp")
		if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	write("allow.txt", "# nobody yet\n")
	write("access.log", "")
	a := setup(t, dir)
	cfgPath := filepath.Join(dir, "logjail.yaml")
	if err := os.WriteFile(cfgPath, fmt.Appendf(nil, allowLiftConfig, dir, a.yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	ctl := daemon.NewControl()
	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan struct{})
	var runErr error
	go func() {
		defer close(exited)
		runErr = daemon.Run(ctx, daemon.Options{ConfigPath: cfgPath, Control: ctl, Poll: true,
			Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	}()
	t.Cleanup(func() {
		cancel()
		<-exited
		if runErr != nil {
			t.Errorf("Run: %v", runErr)
		}
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs.String())
		}
	})
	// state waits until the action blocks addr (or not); within 0 checks
	// once.
	state := func(addr netip.Addr, want bool, within time.Duration, what string) time.Duration {
		t.Helper()
		start := time.Now()
		deadline := start.Add(within)
		for {
			select {
			case <-exited:
				t.Fatalf("%s: the daemon exited", what)
			default:
			}
			got, err := a.blocked(addr)
			if err == nil && got == want {
				return time.Since(start)
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s after %v: blocked %v (%v), want %v", what, addr, within, got, err, want)
			}
		}
	}
	// Before any ban both get through (waited for: a new link's first SYN
	// can be lost on a busy machine).
	state(a.banned, false, 15*time.Second, "before any ban")
	state(a.forced, false, 15*time.Second, "before any ban")
	if a.synced != nil {
		a.synced(t)
	}

	f, err := os.OpenFile(filepath.Join(dir, "access.log"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Format("02/Jan/2006:15:04:05 -0700")
	for i := range 8 {
		fmt.Fprintf(f, "%s - - [%s] \"GET /%d HTTP/1.1\" 200 1 \"-\" \"t\"\n", a.banned, now, i)
	}
	f.Close()
	state(a.banned, true, 30*time.Second, "the rule's ban")
	if _, err := ctl.Ban(ctx, control.BanRequest{Key: a.forced.String(), For: "1h", Force: true}, "test"); err != nil {
		t.Fatal(err)
	}
	state(a.forced, true, 10*time.Second, "the operator's ban --force")

	write("allow.txt", a.banned.String()+"\n"+a.forced.String()+"\n")
	took := state(a.banned, false, 2*time.Second, "the rule's ban once allowed")
	t.Logf("allow file written -> let through: %v", took)
	state(a.forced, true, 0, "ban --force once allowed")
	if a.afterLift != nil {
		a.afterLift(t)
	}
}

// liftFirewall: a firewall action on the ports of two servers in the
// test's namespace; the peer's IPv4 address is the one a rule bans, its
// IPv6 address the one an operator bans by force.
func liftFirewall(typ, target, extra string) func(t *testing.T, dir string) liftAction {
	return func(t *testing.T, dir string) liftAction {
		peer := nstest.NewPeer(t)
		l4 := nstest.Listen(t, netip.AddrPortFrom(peer.Local4, 0))
		l6 := nstest.Listen(t, netip.AddrPortFrom(peer.Local6, 0))
		return liftAction{
			yaml:   fmt.Sprintf("  - type: %s\n    target: %s\n    ports: [%d, %d]\n%s", typ, target, l4.Port(), l6.Port(), extra),
			banned: peer.Remote4, forced: peer.Remote6,
			blocked: func(addr netip.Addr) (bool, error) {
				to := l4
				if addr.Is6() {
					to = l6
				}
				return peer.Dial(to, 200*time.Millisecond) != nil, nil
			},
		}
	}
}

// liftExec: an exec action whose commands record their argv, one line a
// run (the arguments joined by |).
func liftExec(t *testing.T, dir string) liftAction {
	rec := filepath.Join(dir, "runs")
	cmd := func(verb string) string {
		return fmt.Sprintf(`[sh, -c, 'printf "%%s|" "$@" >> "$0"; echo >> "$0"', %s, %s, "{address}", "{rule}", "{key}"]`, rec, verb)
	}
	runs := func() []string {
		b, err := os.ReadFile(rec)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	banned, forced := netip.MustParseAddr("203.0.113.9"), netip.MustParseAddr("198.51.100.20")
	return liftAction{
		yaml:   fmt.Sprintf("  - type: exec\n    ban: %s\n    unban: %s\n", cmd("ban"), cmd("unban")),
		banned: banned, forced: forced,
		blocked: func(addr netip.Addr) (bool, error) {
			last := ""
			for _, r := range runs() {
				if f := strings.Split(r, "|"); len(f) > 1 && f[1] == addr.String() {
					last = f[0]
				}
			}
			return last == "ban", nil
		},
		afterLift: func(t *testing.T) {
			var unbans []string
			for _, r := range runs() {
				if strings.HasPrefix(r, "unban|") {
					unbans = append(unbans, r)
				}
			}
			if want := "unban|203.0.113.9|flood|203.0.113.9|"; len(unbans) != 1 || unbans[0] != want {
				t.Errorf("unban commands run: %q, want one, argv %q", unbans, want)
			}
		},
	}
}

// liftApache: the Apache list file, as Apache includes it.
func liftApache(t *testing.T, dir string) liftAction {
	file := filepath.Join(dir, "logjail-apache.conf")
	return liftAction{
		yaml:   fmt.Sprintf("  - type: apache\n    file: %s\n    settle: 0s\n    min_interval: 0s\n", file),
		banned: netip.MustParseAddr("203.0.113.9"), forced: netip.MustParseAddr("198.51.100.20"),
		blocked: func(addr netip.Addr) (bool, error) {
			b, err := os.ReadFile(file)
			if os.IsNotExist(err) {
				return false, nil
			}
			return bytes.Contains(b, []byte("Require not ip "+addr.String()+"\n")), err
		},
	}
}

// liftHAProxyConf is a real haproxy in front of an upstream, reading the
// action's two ACL files; the test on loopback poses as any client through
// X-Forwarded-For (set-src), so that no packet leaves the loopback.
const liftHAProxyConf = `global
    pidfile %[1]s/haproxy.pid
defaults
    mode http
    timeout connect 5s
    timeout client 5s
    timeout server 5s
frontend web
    bind 127.0.0.1:%[2]d
    http-request set-src hdr(X-Forwarded-For)
    acl banned src -f %[1]s/logjail.acl
    acl allowed src -f %[1]s/logjail-allow.acl
    http-request deny if banned !allowed
    default_backend upstream
backend upstream
    server up %[3]s
`

// liftHAProxy starts a real haproxy (master-worker, in the foreground, the
// test's child; stopped by its PID) that the action checks with
// `haproxy -c` and reloads with SIGUSR2 to its master.
func liftHAProxy(t *testing.T, dir string) liftAction {
	haproxy := testenv.Need(t, "haproxy")[0]
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "upstream")
	}))
	t.Cleanup(up.Close)
	for _, name := range []string{"logjail.acl", "logjail-allow.acl"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	conf := filepath.Join(dir, "haproxy.cfg")
	var port int
	get := func(client string) (int, error) {
		req, err := http.NewRequest("GET", fmt.Sprintf("http://127.0.0.1:%d/", port), nil)
		if err != nil {
			return 0, err
		}
		req.Header.Set("X-Forwarded-For", client)
		// A new connection each time, never one to a worker a reload retired.
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	var cmd *exec.Cmd
	var out syncBuffer
	for try := 0; ; try++ { // a free port may be taken before haproxy binds it
		port = testenv.FreePort(t)
		if err := os.WriteFile(conf, fmt.Appendf(nil, liftHAProxyConf, dir, port, strings.TrimPrefix(up.URL, "http://")), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd = exec.Command(haproxy, "-W", "-db", "-f", conf)
		cmd.Stdout, cmd.Stderr = &out, &out
		proc := testenv.Start(t, cmd, syscall.SIGTERM, 10*time.Second)
		exited, stop := proc.Exited, proc.Stop
		err := func() error {
			deadline := time.Now().Add(10 * time.Second)
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				_, err := get("198.51.100.1")
				if err == nil || time.Now().After(deadline) {
					return err
				}
				select {
				case <-exited:
					return errors.New("haproxy exited")
				case <-tick.C:
				}
			}
		}()
		if err == nil {
			t.Cleanup(stop)
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("haproxy's output:\n%s", out.String())
				}
			})
			break
		}
		stop()
		if try == 4 || !strings.Contains(out.String(), "cannot bind") && !strings.Contains(out.String(), "Address already in use") {
			t.Fatalf("haproxy did not start: %v\n%s", err, out.String())
		}
	}
	return liftAction{
		yaml: fmt.Sprintf("  - type: haproxy\n    file: %[1]s/logjail.acl\n    allow_file: %[1]s/logjail-allow.acl\n"+
			"    settle: 0s\n    min_interval: 0s\n    check: [%[2]s, -c, -q, -f, %[3]s]\n    reload: [kill, -USR2, %[4]d]\n",
			dir, haproxy, conf, cmd.Process.Pid),
		banned: netip.MustParseAddr("203.0.113.9"), forced: netip.MustParseAddr("198.51.100.20"),
		blocked: func(addr netip.Addr) (bool, error) {
			code, err := get(addr.String())
			if err == nil && code != 200 && code != 403 {
				err = fmt.Errorf("haproxy answered %d", code)
			}
			return code == 403, err
		},
		// The daemon's first sync writes the ACL files (their header) and
		// reloads haproxy. With min_interval 0s the ban's reload could
		// follow it within milliseconds, and a SIGUSR2 that reaches the
		// master while it re-executes itself for the one before is lost:
		// on a loaded host the ban was never read (CI, and 1 run in ~20
		// beside three busy loops). So the lines come once haproxy has
		// loaded the sync's files: its second "Loading success.", its
		// start's being the first.
		synced: func(t *testing.T) {
			deadline := time.Now().Add(15 * time.Second)
			for strings.Count(out.String(), "Loading success.") < 2 {
				if time.Now().After(deadline) {
					t.Fatalf("haproxy did not reload for the daemon's first sync in 15 s:\n%s", out.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
		},
	}
}
