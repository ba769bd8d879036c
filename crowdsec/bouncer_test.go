package crowdsec_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/logjail/logjail/actions"
	"github.com/logjail/logjail/crowdsec"
	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/internal/nstest"
	"github.com/logjail/logjail/internal/testenv"
	"github.com/logjail/logjail/state"
	"github.com/logjail/logjail/store"
)

// logjail is the part of the daemon a bouncer talks to: the database, the
// API and the actions manager that drives it, started and stopped as the
// daemon starts and stops them.
type logjail struct {
	t      *testing.T
	path   string
	listen string // fixed after the first start: a restart listens there again
	db     *store.DB
	m      *actions.Manager
	stop   func()
}

func (lj *logjail) start(bans []state.Ban) {
	t := lj.t
	t.Helper()
	db, err := store.Open(lj.path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := actions.CrowdsecConfig{Name: "crowdsec", Listen: lj.listen, ThrottleAs: "throttle", Kinds: []actions.Kind{actions.KindThrottle, actions.KindBan}}
	api, err := crowdsec.New(cfg, crowdsec.Options{DB: db})
	if err != nil {
		t.Fatal(err)
	}
	l, err := crowdsec.Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lj.listen = l.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- api.Serve(ctx, l) }()
	m := actions.NewManager([]actions.Configured{{Backend: api, Type: "crowdsec", Kinds: cfg.Kinds}}, actions.ManagerOptions{})
	m.Load(bans, nil)
	m.Start(context.Background())
	lj.db, lj.m = db, m
	lj.stop = func() {
		m.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		db.Close()
	}
}

func (lj *logjail) addBouncer(name string) string {
	lj.t.Helper()
	key, hash, err := crowdsec.NewKey()
	if err != nil {
		lj.t.Fatal(err)
	}
	if err := lj.db.AddBouncer(state.Bouncer{Name: name, KeyHash: hash, Created: time.Now()}); err != nil {
		lj.t.Fatal(err)
	}
	return key
}

// decide hands the manager a decision, as the daemon's decider does, and
// waits until the API holds it.
func (lj *logjail) decide(d detector.Decision) {
	lj.t.Helper()
	lj.m.Decisions([]detector.Decision{d})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := lj.m.Wait(ctx); err != nil {
		lj.t.Fatal(err)
	}
}

func ban(key string) detector.Decision {
	return detector.Decision{Rule: "flood", Key: key, Kind: detector.Ban, Until: time.Now().Add(time.Hour), Reason: "test", Origin: "detector"}
}

func unban(key string) detector.Decision {
	return detector.Decision{Rule: "flood", Key: key, Kind: detector.Unban, Origin: "detector"}
}

// proc is a bouncer run by the test with its own config file, stopped by
// its own PID.
type proc struct {
	cmd *exec.Cmd
	out *testenv.Buffer
}

func startBouncer(t *testing.T, bin, config string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, "-c", config), out: &testenv.Buffer{}}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.stop(t) })
	return p
}

func (p *proc) stop(t *testing.T) {
	if p.cmd.ProcessState != nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
	t.Logf("%s said:\n%s", filepath.Base(p.cmd.Path), p.out.String())
}

// waitFor checks cond every 20 ms until it holds or timeout passes; it
// returns how long it took.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Since(start) > timeout {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		<-tick.C
	}
	return time.Since(start)
}

// TestFirewallBouncerNftables runs the real crowdsec-firewall-bouncer
// (Debian's), nftables mode, in a network namespace of the test's, pulling
// from the API: a ban is in its set within its update_frequency, an unban
// removes it, and a restart of logjail or of the bouncer loses nothing.
// (Its nftables sets of version 0.0.25 hold addresses, not intervals: a
// Range decision would block its first address only, so the range is
// tested in iptables mode.)
func TestFirewallBouncerNftables(t *testing.T) {
	if !nstest.Enter(t, "crowdsec-firewall-bouncer", "nft") {
		return
	}
	testFirewallBouncer(t, "nftables", "198.51.100.30", func() (string, error) {
		out, err := exec.Command("nft", "list", "table", "ip", "crowdsec").CombinedOutput()
		return string(out), err
	})
}

// TestFirewallBouncerIptables: the same in iptables mode (an ipset of
// type hash:net, which holds ranges).
func TestFirewallBouncerIptables(t *testing.T) {
	if !nstest.Enter(t, "crowdsec-firewall-bouncer", "iptables", "ipset") {
		return
	}
	testFirewallBouncer(t, "iptables", "203.0.113.0/24", func() (string, error) {
		out, err := exec.Command("ipset", "list", "crowdsec-blacklists").CombinedOutput()
		return string(out), err
	})
}

func testFirewallBouncer(t *testing.T, mode, whileDown string, list func() (string, error)) {
	bin := testenv.Need(t, "crowdsec-firewall-bouncer")[0]
	dir := t.TempDir()
	lj := &logjail{t: t, path: filepath.Join(dir, "logjail.db"), listen: "127.0.0.1:0"}
	lj.start(nil)
	defer func() { lj.stop() }()
	key := lj.addBouncer("firewall")

	// The bouncer's update_frequency: 1 s, or LOGJAIL_BOUNCER_EVERY (its
	// default, 10s, for the figure in the README).
	every := time.Second
	if v := os.Getenv("LOGJAIL_BOUNCER_EVERY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			t.Fatalf("LOGJAIL_BOUNCER_EVERY=%q: want a duration of 1s or more", v)
		}
		every = d
	}
	config := filepath.Join(dir, "crowdsec-firewall-bouncer.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`mode: %s
update_frequency: %v
log_mode: stdout
log_level: info
pid_dir: %s
api_url: http://%s/
api_key: %s
disable_ipv6: true
deny_action: DROP
supported_decisions_types: [ban]
blacklists_ipv4: crowdsec-blacklists
blacklists_ipv6: crowdsec6-blacklists
ipset_type: nethash
iptables_chains: [INPUT]
nftables:
  ipv4:
    enabled: true
    set-only: false
    table: crowdsec
    chain: crowdsec-chain
    priority: -10
  ipv6:
    enabled: false
nftables_hooks: [input]
`, mode, every, dir, lj.listen, key)), 0o600); err != nil {
		t.Fatal(err)
	}
	has := func(addr string) bool {
		out, err := list()
		if err != nil {
			return false
		}
		for _, f := range strings.FieldsFunc(out, func(r rune) bool { return strings.ContainsRune(" \t\n,{}", r) }) {
			if f == addr {
				return true
			}
		}
		return false
	}
	inSet := func(addr string) func() bool { return func() bool { return has(addr) } }
	notInSet := func(addr string) func() bool { return func() bool { return !has(addr) } }
	dump := func() string { out, _ := list(); return out }

	fw := startBouncer(t, bin, config)
	waitFor(t, "the bouncer's set", 10*time.Second, func() bool { _, err := list(); return err == nil })

	// Ban to set, measured: from the manager's decision to the element.
	// Each ban is made a fifth of the interval later than the last in the
	// bouncer's cycle (its pull came just before the last element showed):
	// the times span the interval, as bans that come at any moment do.
	var took []time.Duration
	for i, a := range []string{"198.51.100.7", "198.51.100.8", "198.51.100.9", "198.51.100.10", "198.51.100.11"} {
		<-time.After(time.Duration(i) * every / 5) // the ban's phase against the bouncer's ticker, not a wait for a condition
		start := time.Now()
		lj.m.Decisions([]detector.Decision{ban(a)})
		waitFor(t, a+" in the set", every+3*time.Second, inSet(a))
		took = append(took, time.Since(start))
	}
	t.Logf("%s: ban to set (update_frequency %v), phases 0 to 4/5 of it: %v", mode, every, took)
	for _, d := range took {
		if d > every+time.Second {
			t.Errorf("a ban reached the set after %v: want within update_frequency %v (+1 s)", d, every)
		}
	}
	start := time.Now()
	lj.m.Decisions([]detector.Decision{unban("198.51.100.8")})
	waitFor(t, "198.51.100.8 gone from the set", every+3*time.Second, notInSet("198.51.100.8"))
	t.Logf("%s: unban to removal from the set: %v", mode, time.Since(start))

	// A restart of logjail: while it is down 198.51.100.9's ban is lifted
	// (the database no longer has it) and whileDown is banned; the
	// bouncer, still running, gets both on its next pull.
	lj.stop()
	lj.start([]state.Ban{
		{Rule: "flood", Key: "198.51.100.7", Kind: state.KindBan, Until: time.Now().Add(time.Hour)},
		{Rule: "flood", Key: whileDown, Kind: state.KindBan, Until: time.Now().Add(time.Hour)},
	})
	waitFor(t, whileDown+" in the set after logjail's restart", every+9*time.Second, inSet(whileDown))
	waitFor(t, "198.51.100.9 gone after logjail's restart", every+9*time.Second, notInSet("198.51.100.9"))
	if !has("198.51.100.7") {
		t.Errorf("198.51.100.7 left the set over logjail's restart:\n%s", dump())
	}

	// A restart of the bouncer: it starts afresh (startup=true) with
	// everything active.
	fw.stop(t)
	lj.decide(ban("198.51.100.20"))
	startBouncer(t, bin, config)
	for _, a := range []string{"198.51.100.7", whileDown, "198.51.100.20"} {
		waitFor(t, a+" in the set after the bouncer's restart", every+9*time.Second, inSet(a))
	}
	if has("198.51.100.9") || has("198.51.100.8") {
		t.Errorf("a lifted ban is back in the set after the bouncer's restart:\n%s", dump())
	}
	bs, err := lj.db.ListBouncers()
	if err != nil || len(bs) != 1 || bs[0].LastPull.IsZero() || !strings.Contains(bs[0].UserAgent, "firewall-bouncer") {
		t.Fatalf("the bouncer's last pull: %+v %v", bs, err)
	}
	t.Logf("bouncer: %s from %s, last pull %v", bs[0].UserAgent, bs[0].IP, bs[0].LastPull)
}

// TestCustomBouncer runs the real crowdsec-custom-bouncer with a script
// that appends its arguments to a file: a ban calls it with add, an unban
// with del.
func TestCustomBouncer(t *testing.T) {
	bin := testenv.Need(t, "crowdsec-custom-bouncer")[0]
	dir := t.TempDir()
	lj := &logjail{t: t, path: filepath.Join(dir, "logjail.db"), listen: fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))}
	lj.start(nil)
	defer func() { lj.stop() }()
	key := lj.addBouncer("custom")

	calls := filepath.Join(dir, "calls.txt")
	script := filepath.Join(dir, "record.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"$@\" >> "+calls+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "crowdsec-custom-bouncer.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`bin_path: %s
feed_via_stdin: false
total_retries: 0
piddir: %s
update_frequency: 1s
cache_retention_duration: 10s
daemonize: false
log_mode: stdout
log_level: info
api_url: http://%s/
api_key: %s
prometheus:
  enabled: false
`, script, dir, lj.listen, key)), 0o600); err != nil {
		t.Fatal(err)
	}
	startBouncer(t, bin, config)
	read := func() string { b, _ := os.ReadFile(calls); return string(b) }
	lj.decide(ban("198.51.100.7"))
	waitFor(t, "add 198.51.100.7", 10*time.Second, func() bool { return strings.Contains(read(), "add 198.51.100.7 ") })
	lj.decide(unban("198.51.100.7"))
	waitFor(t, "del 198.51.100.7", 10*time.Second, func() bool { return strings.Contains(read(), "del 198.51.100.7 ") })
	t.Logf("the script was called:\n%s", read())
	if n := strings.Count(read(), "add 198.51.100.7 "); n != 1 {
		t.Errorf("add 198.51.100.7 called %d times, want 1", n)
	}
}
