package main

// End-to-end tests of the fleet's ban ladder (issue 20): escalation
// (ban.factor) counted over the fleet, a throttle, the deny list and an
// operator's unban, each decided on one node and in effect on another's
// decision endpoint; real redis-server, real `logjail run` daemons (the
// helpers of fleet_e2e_test.go).
//
// Each test logs the latencies it measured as lines
// "fleet latency KIND: DURATION" (go test -v), from the line that crosses
// or the command to the effect on the other node's endpoint.

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/logjail/logjail/control"
	"github.com/logjail/logjail/internal/redistest"
	"github.com/logjail/logjail/internal/testenv"
)

// ladderConfig is one node's configuration for the ladder tests: 1: its
// directory, 2: the Redis URL, 3: its name, 4: the endpoint's port, 5:
// the metrics port, 6: esc's scope. Each rule sees its own paths, so that
// a test's traffic reaches one rule only:
//
//   - esc (/esc…): a ban of escBan, doubled by each earlier ban;
//   - slow (/slow…): throttles first (initial delay slowDelay), bans only
//     after many violations; scope node, so that the other node can learn
//     of the throttle only from the fleet;
//   - hold (/hold…): a ban of an hour, scope node likewise.
//
// The deny list is a file, followed by the daemon.
const ladderConfig = `state_dir: %[1]s/state
control_socket: %[1]s/run/control.sock
checkpoint: 1s
metrics: 127.0.0.1:%[5]d
allow: [127.0.0.0/8]
deny: ["file:%[1]s/deny.txt"]
fleet:
  redis: %[2]s
  node: %[3]s
  sync: 200ms
sources:
  - name: web
    paths: [%[1]s/access.log]
    format: combined
    timezone: UTC
rules:
  - name: esc
    scope: %[6]s
    match: {path: '^/esc'}
    limits: ["5 per second"]
    ban: {for: 3s, factor: 2, max: 1h}
  - name: slow
    scope: node
    match: {path: '^/slow'}
    limits: ["5 per second"]
    throttle: {initial_delay: 2s, max_delay: 8s, quiet: 1s}
    ban: {after: 100, for: 1h}
  - name: hold
    scope: node
    match: {path: '^/hold'}
    limits: ["5 per second"]
    ban: {for: 1h}
actions:
  - type: endpoint
    listen: 127.0.0.1:%[4]d
`

const (
	escBan    = 3 * time.Second // esc's ban: {for:}
	slowDelay = 2 * time.Second // slow's throttle: {initial_delay:}
	// fleetBound is the bound: a decision of one node is in
	// effect on every node's endpoint within 1 s.
	fleetBound = time.Second
)

// newLadderNode writes a node's configuration for the ladder tests (scope:
// esc's) and an empty deny file.
func newLadderNode(t *testing.T, name, redisURL, scope string) *fleetNode {
	t.Helper()
	e := newOpEnv(t)
	ep, mp := testenv.FreePort(t), testenv.FreePort(t)
	if err := os.WriteFile(e.cfg, fmt.Appendf(nil, ladderConfig, e.dir, redisURL, name, ep, mp, scope), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, "deny.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return &fleetNode{opEnv: e, name: name, endpoint: fmt.Sprintf("127.0.0.1:%d", ep), metrics: fmt.Sprintf("127.0.0.1:%d", mp)}
}

// burst appends n requests of ip to path at one wall-clock time (one
// write) and returns that time: the nth line is the one that crosses a
// `5 per second` limit when n is 6.
func (n *fleetNode) burst(ip, path string, count int) time.Time {
	n.t.Helper()
	at := time.Now()
	var b strings.Builder
	for i := range count {
		fmt.Fprintf(&b, "%s - - [%s] \"GET %s/%d HTTP/1.1\" 200 1 \"-\" \"t\"\n", ip, at.UTC().Format("02/Jan/2006:15:04:05 -0700"), path, i)
	}
	f, err := os.OpenFile(n.log, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		n.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(b.String()); err != nil {
		n.t.Fatal(err)
	}
	return at
}

// retryAfter is the endpoint's Retry-After for addr in seconds (-1 when
// it has none or does not answer).
func (n *fleetNode) retryAfter(addr string) int {
	req, err := http.NewRequest("GET", "http://"+n.endpoint+"/auth", nil)
	if err != nil {
		n.t.Fatal(err)
	}
	req.Header.Set("X-Real-IP", addr)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	s, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil {
		return -1
	}
	return s
}

// activeBan is the node's listed ban or throttle of (rule, key); ok false
// when there is none.
func (n *fleetNode) activeBan(rule, key string) (control.Ban, bool) {
	for _, b := range n.list().Bans {
		if b.Rule == rule && b.Key == key {
			return b, true
		}
	}
	return control.Ban{}, false
}

// agreedBan waits until every node lists one ban of (rule, key), decided
// by the same node and with the same until, and returns it.
func agreedBan(t *testing.T, rule, key string, nodes ...*fleetNode) control.Ban {
	t.Helper()
	var got []string
	deadline := time.Now().Add(5 * time.Second)
	for {
		got = got[:0]
		var first control.Ban
		same := true
		for i, n := range nodes {
			b, ok := n.activeBan(rule, key)
			if !ok || b.Until == nil {
				same = false
				got = append(got, n.name+": none")
				continue
			}
			got = append(got, fmt.Sprintf("%s: %s by %s until %s", n.name, b.Kind, b.Node, b.Until.Format(time.StampMilli)))
			if i == 0 {
				first = b
			} else if b.Node != first.Node || !b.Until.Equal(*first.Until) || b.Kind != first.Kind {
				same = false
			}
		}
		if same {
			return first
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s: the nodes' lists do not agree: %v", rule, key, got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pastLogTime waits until the lines written now carry a log time (whole
// seconds) after until, so that the detector reads them after the ban.
func pastLogTime(until time.Time) {
	for !time.Now().Truncate(time.Second).After(until) {
		untilNextSecond()
	}
}

// logLatency logs a measured latency in the form the report collects.
func logLatency(t *testing.T, kind string, d time.Duration) {
	t.Helper()
	t.Logf("fleet latency %s: %v", kind, d.Round(time.Millisecond))
}

// escalate bans ip through a's traffic, lets the ban end, then crosses
// esc again through b's traffic alone, and returns the second ban as
// both nodes list it and its length from the crossing line.
func escalate(t *testing.T, ip string, a, b *fleetNode) (control.Ban, time.Duration) {
	t.Helper()
	cross := a.burst(ip, "/esc", 6)
	waitDecision(t, ip, "ban", cross.Add(5*time.Second), a, b)
	logLatency(t, "rule ban, other node", time.Since(cross))
	first := agreedBan(t, "esc", ip, a, b)
	if l := first.Until.Sub(cross); l < escBan || l > escBan+time.Second {
		t.Errorf("the first ban lasts %v from its line, want %v (+ up to 1 s to read it)", l, escBan)
	}
	waitDecision(t, ip, "allow", first.Until.Add(3*time.Second), a, b)
	pastLogTime(*first.Until)

	cross = b.burst(ip, "/esc", 6)
	waitDecision(t, ip, "ban", cross.Add(5*time.Second), a, b)
	logLatency(t, "second rule ban, both nodes", time.Since(cross))
	second := agreedBan(t, "esc", ip, a, b)
	t.Logf("the second ban: by %s, %v from its line", second.Node, second.Until.Sub(cross).Round(time.Millisecond))
	return second, second.Until.Sub(cross)
}

// TestFleetLadderEscalation: a scope: fleet rule's ban counts for
// escalation on every node. A client banned through web1's traffic for
// escBan, then, once that ban has ended, again through web2's traffic
// alone: the second ban lasts 2·escBan (factor 2: web2 counted web1's
// ban), and both nodes list it with the same node and until, and their
// endpoints give the same Retry-After.
func TestFleetLadderEscalation(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	a := newLadderNode(t, "web1", srv.URL(), "fleet")
	b := newLadderNode(t, "web2", srv.URL(), "fleet")
	startFleet(a, b)

	const ip = "198.51.100.40"
	ban, length := escalate(t, ip, a, b)
	if length < 2*escBan || length > 2*escBan+time.Second {
		t.Errorf("the second ban lasts %v from its line, want %v (escBan × factor 2, + up to 1 s to read it)", length, 2*escBan)
	}
	if ban.Node != "web2" {
		// Both nodes would decide the same length; web2 reads the
		// crossing line before web1 has its units.
		t.Logf("the second ban was decided by %s", ban.Node)
	}
	ra, rb := a.retryAfter(ip), b.retryAfter(ip)
	if ra < 1 || rb < 1 || ra-rb > 1 || rb-ra > 1 {
		t.Errorf("Retry-After: web1 %d, web2 %d; want the same ban's seconds left on both (±1)", ra, rb)
	}
}

// TestFleetLadderScopeNode: a scope: node rule's windows and ladder are
// the node's own: another node's ban of the key is enforced here (bans are
// shared whatever the scope) but is not an earlier ban of this node's for
// escalation, so web2's first ban of the key lasts escBan after web1's.
func TestFleetLadderScopeNode(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	a := newLadderNode(t, "web1", srv.URL(), "node")
	b := newLadderNode(t, "web2", srv.URL(), "node")
	startFleet(a, b)

	const ip = "198.51.100.41"
	ban, length := escalate(t, ip, a, b)
	if length < escBan || length > escBan+time.Second {
		t.Errorf("web2's ban under scope: node lasts %v from its line, want %v (not escalated by web1's ban)", length, escBan)
	}
	if ban.Node != "web2" {
		t.Errorf("the second ban was decided by %s, want web2 (scope: node: web1 never saw the lines)", ban.Node)
	}
}

// TestFleetThrottle: a throttle decided on web1 (slow throttles first;
// scope node, so web2 can learn of it only from the fleet) is in effect
// on web2's endpoint within 1 s of the crossing line (429, decision
// throttle, Retry-After the delay), both list it with the same until, and
// it ends on both.
func TestFleetThrottle(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	a := newLadderNode(t, "web1", srv.URL(), "fleet")
	b := newLadderNode(t, "web2", srv.URL(), "fleet")
	startFleet(a, b)

	const ip = "203.0.113.42"
	cross := a.burst(ip, "/slow", 6)
	waitDecision(t, ip, "throttle", cross.Add(5*time.Second), b)
	lat := time.Since(cross)
	logLatency(t, "throttle, other node", lat)
	if lat > fleetBound {
		t.Errorf("web2 throttles %s %v after web1's crossing line, want within %v", ip, lat, fleetBound)
	}
	if got := a.decision(ip); got != "throttle" {
		t.Errorf("web1: %s is %q, want throttle", ip, got)
	}
	if ra := b.retryAfter(ip); ra < 1 || ra > int(slowDelay/time.Second) {
		t.Errorf("web2's Retry-After: %d, want 1..%d (the throttle's delay left)", ra, slowDelay/time.Second)
	}
	th := agreedBan(t, "slow", ip, a, b)
	if th.Kind != "throttle" || th.Node != "web1" {
		t.Errorf("the listed throttle: %s by %s, want a throttle by web1", th.Kind, th.Node)
	}
	if l := th.Until.Sub(cross); l < slowDelay || l > slowDelay+time.Second {
		t.Errorf("the throttle lasts %v from its line, want %v", l, slowDelay)
	}
	// It ends on both once its until has passed.
	waitDecision(t, ip, "allow", th.Until.Add(3*time.Second), a, b)
	logLatency(t, "throttle end after until", time.Since(*th.Until))
}

// TestFleetDeny: an address added to web1's deny file (web2's stays
// empty) is banned on web2's endpoint within 1 s of web1's ban, until
// lifted, listed as the deny list's by web1; removed from the file, it is
// let through on both. An address both files list from the start is
// banned on both, and neither node skips the other's deny ban as a rule
// it lacks.
func TestFleetDeny(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	a := newLadderNode(t, "web1", srv.URL(), "fleet")
	b := newLadderNode(t, "web2", srv.URL(), "fleet")
	const both = "203.0.113.45"
	for _, n := range []*fleetNode{a, b} {
		if err := os.WriteFile(filepath.Join(n.dir, "deny.txt"), []byte(both+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	startFleet(a, b)
	waitDecision(t, both, "ban", time.Now().Add(5*time.Second), a, b)

	const ip = "203.0.113.43"
	writeDeny := func(text string) time.Time {
		t.Helper()
		// Written whole and renamed, as a deployment tool does.
		tmp := filepath.Join(a.dir, "deny.txt.tmp")
		if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		at := time.Now()
		if err := os.Rename(tmp, filepath.Join(a.dir, "deny.txt")); err != nil {
			t.Fatal(err)
		}
		return at
	}

	// The latency counts from web1's decision (its list's since: the wall
	// clock of the reload that read the file), not from the write: web1
	// looks at the file every listPoll.
	wrote := writeDeny(both + "\n" + ip + "\n")
	waitDecision(t, ip, "ban", wrote.Add(5*time.Second), a, b)
	seen := time.Now()
	logLatency(t, "deny, other node, from the file", seen.Sub(wrote))
	for _, n := range []*fleetNode{a, b} {
		d, ok := n.activeBan("deny", ip)
		if !ok || d.Until != nil || d.Origin != "deny" || d.Node != "web1" {
			t.Fatalf("%s's list: %+v (listed %v), want the deny list's ban by web1, until lifted", n.name, d, ok)
		}
		if n == a {
			lat := seen.Sub(d.Since)
			logLatency(t, "deny, other node, from web1's decision", lat)
			if lat > fleetBound {
				t.Errorf("web2 bans %s %v after web1 decided it from its deny list, want within %v", ip, lat, fleetBound)
			}
		}
	}

	wrote = writeDeny(both + "\n")
	waitDecision(t, ip, "allow", wrote.Add(5*time.Second), a, b)
	seen = time.Now()
	logLatency(t, "deny removed, both nodes, from the file", seen.Sub(wrote))
	for _, n := range []*fleetNode{a, b} {
		if _, ok := n.activeBan("deny", ip); ok {
			t.Errorf("%s still lists the deny list's ban of %s", n.name, ip)
		}
	}
	var ended *time.Time
	for _, d := range a.list("--expired").Bans {
		if d.Rule == "deny" && d.Key == ip {
			ended = d.Ended
		}
	}
	if ended == nil {
		t.Fatalf("web1's list --expired has no ended deny ban of %s", ip)
	}
	lat := seen.Sub(*ended)
	logLatency(t, "deny removed, both nodes, from web1's unban", lat)
	if lat > fleetBound {
		t.Errorf("%s let through on both %v after web1 lifted it (removed from its deny list), want within %v", ip, lat, fleetBound)
	}

	for _, n := range []*fleetNode{a, b} {
		if d, ok := n.activeBan("deny", both); !ok || d.Until != nil {
			t.Errorf("%s: the deny ban of %s both lists hold: %+v (listed %v)", n.name, both, d, ok)
		}
		if strings.Contains(n.out.String(), "not in this configuration") {
			t.Errorf("%s skipped a decision of the fleet as a rule it lacks:\n%s", n.name, n.out.String())
		}
	}
}

// TestFleetUnban: an operator's unban on web2 lifts a rule's ban that
// web1 decided (hold, scope node: web2 never saw the lines), on both
// endpoints within 1 s of the command; the next crossing on web1 bans
// again, on both, not suppressed by a stale record in Redis or in either
// node.
func TestFleetUnban(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	a := newLadderNode(t, "web1", srv.URL(), "fleet")
	b := newLadderNode(t, "web2", srv.URL(), "fleet")
	startFleet(a, b)

	const ip = "198.51.100.44"
	cross := a.burst(ip, "/hold", 6)
	waitDecision(t, ip, "ban", cross.Add(5*time.Second), a, b)
	logLatency(t, "rule ban, other node", time.Since(cross))
	agreedBan(t, "hold", ip, a, b)

	// The command runs beside the wait: a binary built with -race
	// sleeps 1 s at its exit (GORACE atexit_sleep_ms), after the unban is
	// done; the latency counts from the command's start.
	cmd := time.Now()
	unbanned := make(chan error, 1)
	go func() {
		out, err := exec.Command(b.bin, "unban", ip, "--config", b.cfg).CombinedOutput()
		if err != nil {
			err = fmt.Errorf("logjail unban %s: %w\n%s", ip, err, out)
		}
		unbanned <- err
	}()
	waitDecision(t, ip, "allow", cmd.Add(5*time.Second), a, b)
	lat := time.Since(cmd)
	if err := <-unbanned; err != nil {
		t.Fatal(err)
	}
	logLatency(t, "operator unban, both nodes, from the command", lat)
	if lat > fleetBound {
		t.Errorf("%s let through on both %v after the unban on web2, want within %v", ip, lat, fleetBound)
	}
	for _, n := range []*fleetNode{a, b} {
		if _, ok := n.activeBan("hold", ip); ok {
			t.Errorf("%s still lists hold's ban of %s after the unban", n.name, ip)
		}
	}

	// The next crossing on web1, in a later second than the first (a new
	// window): banned again, on both.
	untilNextSecond()
	cross = a.burst(ip, "/hold", 6)
	waitDecision(t, ip, "ban", cross.Add(5*time.Second), a, b)
	lat = time.Since(cross)
	logLatency(t, "rule ban again after unban, both nodes", lat)
	if lat > fleetBound {
		t.Errorf("%s banned again on both %v after web1's crossing line, want within %v", ip, lat, fleetBound)
	}
	if ban := agreedBan(t, "hold", ip, a, b); ban.Node != "web1" {
		t.Errorf("the new ban was decided by %s, want web1", ban.Node)
	}
}
