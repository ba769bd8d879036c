package main

// End-to-end tests of fleet mode (issue 20): a real redis-server
// (internal/redistest) and two or three real `logjail run` daemons built
// from this tree, each with its own state_dir, log, control socket and
// decision endpoint on a free loopback port, all stopped by their PIDs.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logjail/logjail/internal/redistest"
	"github.com/logjail/logjail/internal/testenv"
)

// fleetConfig is one node's configuration: 1: its directory, 2: the
// Redis URL, 3: its name, 4: the endpoint's port, 5: the metrics port,
// 6: flood's scope, 7: extra fleet keys (ca_file).
const fleetConfig = `state_dir: %[1]s/state
control_socket: %[1]s/run/control.sock
checkpoint: 1s
metrics: 127.0.0.1:%[5]d
allow: [127.0.0.0/8]
fleet:
  redis: %[2]s
  node: %[3]s
  sync: 200ms
%[7]s
sources:
  - name: web
    paths: [%[1]s/access.log]
    format: combined
    timezone: UTC
rules:
  - name: flood
    scope: %[6]s
    limits: ["10 per second"]
    ban: {for: 1h}
actions:
  - type: endpoint
    listen: 127.0.0.1:%[4]d
`

// fleetNode is one daemon of the fleet.
type fleetNode struct {
	*opEnv
	name     string
	endpoint string // host:port
	metrics  string // host:port
}

// newFleetNode writes a node's configuration (scope: flood's scope; extra:
// more lines of the fleet: section, indented).
func newFleetNode(t *testing.T, name, redisURL, scope, extra string) *fleetNode {
	t.Helper()
	e := newOpEnv(t)
	ep, mp := testenv.FreePort(t), testenv.FreePort(t)
	if err := os.WriteFile(e.cfg, fmt.Appendf(nil, fleetConfig, e.dir, redisURL, name, ep, mp, scope, extra), 0o644); err != nil {
		t.Fatal(err)
	}
	return &fleetNode{opEnv: e, name: name, endpoint: fmt.Sprintf("127.0.0.1:%d", ep), metrics: fmt.Sprintf("127.0.0.1:%d", mp)}
}

// startFleet starts the nodes one after the other.
func startFleet(nodes ...*fleetNode) {
	for _, n := range nodes {
		n.start()
	}
}

// kill9 kills the daemon with SIGKILL, by its pid.
func (n *fleetNode) kill9() {
	n.t.Helper()
	n.daemon.Process.Kill()
	n.daemon.Wait()
}

// decision is the endpoint's answer for addr: allow, ban, throttle or
// unready ("" when it does not answer).
func (n *fleetNode) decision(addr string) string {
	req, err := http.NewRequest("GET", "http://"+n.endpoint+"/auth", nil)
	if err != nil {
		n.t.Fatal(err)
	}
	req.Header.Set("X-Real-IP", addr)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.Header.Get("X-Logjail-Decision")
}

// healthz is /healthz's status and body.
func (n *fleetNode) healthz() (int, string) {
	resp, err := http.Get("http://" + n.metrics + "/healthz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metric is the value of an unlabelled metric (-1 when absent).
func (n *fleetNode) metric(name string) float64 {
	resp, err := http.Get("http://" + n.metrics + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var v float64
		if k, _ := fmt.Sscanf(sc.Text(), name+" %g", &v); k == 1 {
			return v
		}
	}
	return -1
}

// writeLine appends one request of ip at the wall clock to the node's log.
func (n *fleetNode) writeLine(ip string, at time.Time, i int) {
	n.t.Helper()
	f, err := os.OpenFile(n.log, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		n.t.Fatal(err)
	}
	defer f.Close()
	fmt.Fprintf(f, "%s - - [%s] \"GET /%d HTTP/1.1\" 200 1 \"-\" \"t\"\n", ip, at.UTC().Format("02/Jan/2006:15:04:05 -0700"), i)
}

// bans is the node's `list` as "rule key node" lines, sorted.
func (n *fleetNode) bans() []string {
	var ks []string
	for _, b := range n.list().Bans {
		ks = append(ks, b.Rule+" "+b.Key+" "+b.Node)
	}
	slices.Sort(ks)
	return ks
}

// untilNextSecond waits until the next wall-clock second has begun (the lines'
// time has a resolution of one second).
func untilNextSecond() time.Time {
	now := time.Now()
	next := now.Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(next) + 5*time.Millisecond)
	return next
}

// spread writes, interleaved over the nodes, perNode lines of ip to each
// node, spaced evenly over one wall-clock second starting now. It returns
// the time the line numbered cross (1-based, over all nodes) was written,
// also sent on crossed when it is not nil, as soon as it is written.
func spread(ip string, perNode, cross int, crossed chan<- time.Time, nodes ...*fleetNode) time.Time {
	start := time.Now()
	total := perNode * len(nodes)
	step := time.Second / time.Duration(total+1)
	var at0 time.Time
	for i := range total {
		if d := time.Until(start.Add(time.Duration(i) * step)); d > 0 {
			time.Sleep(d) // pacing the traffic, not waiting on the daemons
		}
		at := time.Now()
		nodes[i%len(nodes)].writeLine(ip, at, i)
		if i+1 == cross {
			at0 = at
			if crossed != nil {
				crossed <- at
			}
		}
	}
	return at0
}

// waitDecision waits until every node's endpoint answers want for addr,
// at most until deadline, and fails naming the nodes that did not.
func waitDecision(t *testing.T, addr, want string, deadline time.Time, nodes ...*fleetNode) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		var late []string
		for _, n := range nodes {
			if got := n.decision(addr); got != want {
				late = append(late, n.name+": "+got)
			}
		}
		if len(late) == 0 {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not %s on every node by the deadline: %v", addr, want, late)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fleetEvents counts the stream's announcements of kind for key.
func fleetEvents(t *testing.T, srv *redistest.Server, kind, key string) int {
	t.Helper()
	msgs, err := srv.Client(t).XRange(context.Background(), "logjail:events", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	for _, m := range msgs {
		var d struct {
			Kind string `json:"kind"`
			Key  string `json:"key"`
		}
		s, _ := m.Values["d"].(string)
		if err := json.Unmarshal([]byte(s), &d); err != nil {
			t.Fatalf("event %s: %v: %s", m.ID, err, s)
		}
		if strings.EqualFold(d.Kind, kind) && d.Key == key {
			count++
		}
	}
	return count
}

// TestFleetSharedWindow: an address sending 8 requests a second to each of
// two nodes under a fleet `10 per second` rule is banned on both within
// 1 s of the line that crosses the limit, once for the fleet (one node in
// both nodes' list, the same, and one announcement); under `scope: node`
// nobody bans it.
func TestFleetSharedWindow(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	a := newFleetNode(t, "web1", srv.URL(), "fleet", "")
	b := newFleetNode(t, "web2", srv.URL(), "fleet", "")
	startFleet(a, b)

	const ip = "198.51.100.20"
	untilNextSecond()
	// 16 lines in one second: the 11th crosses 10 per second.
	crossed := make(chan time.Time, 1)
	done := make(chan struct{})
	go func() { defer close(done); spread(ip, 8, 11, crossed, a, b) }()
	defer func() { <-done }()
	// The traffic goes on while the ban is awaited; the deadline counts
	// from the crossing line.
	cross := <-crossed
	waitDecision(t, ip, "ban", cross.Add(time.Second), a, b)
	t.Logf("banned on both nodes %v after the crossing line", time.Since(cross))

	// Both nodes may decide in the same exchange (each sees the sum): each
	// bans at once on its own word, and the claim at the next sync makes
	// the loser adopt the winner's record. So the lists agree within a few
	// syncs of the ban, not at its first moment.
	la, lb := a.bans(), b.bans()
	for deadline := time.Now().Add(2 * time.Second); (len(la) != 1 || !slices.Equal(la, lb)) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		la, lb = a.bans(), b.bans()
	}
	if len(la) != 1 || !slices.Equal(la, lb) || (la[0] != "flood "+ip+" web1" && la[0] != "flood "+ip+" web2") {
		t.Errorf("list: web1 %q, web2 %q; want one flood ban of %s, by the same node on both", la, lb, ip)
	}
	if got := fleetEvents(t, srv, "ban", ip); got != 1 {
		t.Errorf("the fleet announced %d bans of %s, want 1", got, ip)
	}
}

func TestFleetScopeNode(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	a := newFleetNode(t, "web1", srv.URL(), "node", "")
	b := newFleetNode(t, "web2", srv.URL(), "node", "")
	startFleet(a, b)

	const ip = "198.51.100.21"
	// Three seconds of 8 a second to each node, then two syncs more.
	for range 3 {
		untilNextSecond()
		spread(ip, 8, 0, nil, a, b)
	}
	// A marker over the limit on each node alone: once a node has banned
	// its own, it has read everything before it.
	at := time.Now()
	for i := range 12 {
		a.writeLine("198.51.100.22", at, i)
		b.writeLine("198.51.100.23", at, i)
	}
	waitDecision(t, "198.51.100.22", "ban", time.Now().Add(10*time.Second), a)
	waitDecision(t, "198.51.100.23", "ban", time.Now().Add(10*time.Second), b)
	for _, n := range []*fleetNode{a, b} {
		if got := n.decision(ip); got != "allow" {
			t.Errorf("%s: %s is %q under scope: node, want allow", n.name, ip, got)
		}
	}
	for _, n := range []*fleetNode{a, b} {
		for _, l := range n.bans() {
			if strings.Contains(l, ip) {
				t.Errorf("%s lists %q under scope: node", n.name, l)
			}
		}
	}
}

// TestFleetOperatorBan: a ban made on one node's socket is enforced by the
// other node's endpoint within 1 s, and its unban likewise; the other
// node's list names the node that decided it. status shows the fleet.
func TestFleetOperatorBan(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	a := newFleetNode(t, "web1", srv.URL(), "fleet", "")
	b := newFleetNode(t, "web2", srv.URL(), "fleet", "")
	startFleet(a, b)

	const ip = "203.0.113.30"
	a.must(0, "ban", ip, "--for", "1h", "--reason", "fleet test")
	waitDecision(t, ip, "ban", time.Now().Add(time.Second), b)
	if got := b.bans(); !slices.Equal(got, []string{"operator " + ip + " web1"}) {
		t.Errorf("web2's list: %q, want the operator's ban by web1", got)
	}
	a.must(0, "unban", ip)
	waitDecision(t, ip, "allow", time.Now().Add(time.Second), b)
	if got := b.bans(); len(got) != 0 {
		t.Errorf("web2's list after the unban: %q", got)
	}

	// status: this node's link, and both nodes with their last sync and lag.
	var out string
	a.waitFor("status to show both nodes", func() bool {
		_, out, _ = a.cmd("status")
		return strings.Contains(out, "\n  web1: last sync ") && strings.Contains(out, "\n  web2: last sync ")
	})
	if !strings.Contains(out, "fleet:     node web1 on redis://"+srv.Addr()) || !strings.Contains(out, ": ok, last sync ") || !strings.Contains(out, ", lag ") {
		t.Errorf("status:\n%s", out)
	}
}

// TestFleetTLS: the nodes reach Redis on rediss:// (redis-server
// --tls-port), trusting the CA of ca_file, and share a window.
func TestFleetTLS(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{TLS: true})
	if !strings.HasPrefix(srv.URL(), "rediss://") {
		t.Fatalf("URL %s: want rediss://", srv.URL())
	}
	extra := "  ca_file: " + srv.CAFile
	a := newFleetNode(t, "web1", srv.URL(), "fleet", extra)
	b := newFleetNode(t, "web2", srv.URL(), "fleet", extra)
	startFleet(a, b)

	const ip = "2001:db8::20"
	untilNextSecond()
	cross := spread(ip, 8, 11, nil, a, b)
	waitDecision(t, ip, "ban", cross.Add(time.Second), a, b)
	_, out, _ := a.cmd("status")
	if !strings.Contains(out, "fleet:     node web1 on rediss://") || !strings.Contains(out, ": ok, last sync ") {
		t.Errorf("status:\n%s", out)
	}
}

// tcpProxy forwards a loopback port to Redis; cut closes the listener and
// every connection, heal listens again on the same port.
type tcpProxy struct {
	t      *testing.T
	target string
	addr   string
	mu     sync.Mutex
	l      net.Listener
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	p := &tcpProxy{t: t, target: target}
	p.listen("127.0.0.1:0")
	p.addr = p.l.Addr().String()
	t.Cleanup(func() { p.cut(); p.wg.Wait() })
	return p
}

func (p *tcpProxy) listen(addr string) {
	p.t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.l = l
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			p.wg.Add(2)
			go func() { defer p.wg.Done(); io.Copy(s, c); s.Close() }()
			go func() { defer p.wg.Done(); io.Copy(c, s); c.Close() }()
		}
	}()
}

// cut stops forwarding: the listener and every connection close.
func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l != nil {
		p.l.Close()
		p.l = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// heal forwards again, on the same port.
func (p *tcpProxy) heal() { p.listen(p.addr) }

// replayBans is `logjail replay` of the logs merged: the set of "rule key"
// it bans.
func replayBans(t *testing.T, n *fleetNode, logs ...string) []string {
	t.Helper()
	out := n.must(0, append([]string{"replay", "--output", "json"}, logs...)...)
	var r struct {
		Rules []struct {
			Name string `json:"name"`
			Keys []struct {
				Key  string            `json:"key"`
				Bans []json.RawMessage `json:"bans"`
			} `json:"keys"`
		} `json:"rules"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("replay --output json: %v\n%s", err, out)
	}
	var ks []string
	for _, rule := range r.Rules {
		for _, k := range rule.Keys {
			if len(k.Bans) > 0 {
				ks = append(ks, rule.Name+" "+k.Key)
			}
		}
	}
	slices.Sort(ks)
	return ks
}

// ruleBans is a list's bans of rules (not the operator's), as "rule key".
func ruleBans(n *fleetNode) []string {
	var ks []string
	for _, b := range n.list().Bans {
		if b.Rule != "operator" {
			ks = append(ks, b.Rule+" "+b.Key)
		}
	}
	slices.Sort(ks)
	return ks
}

// TestFleetFailures: kill -9 a node and restart it, stop and restart Redis
// (without persistence), partition a node; then no ban is lost and the
// fleet's rule bans are those of a replay of all nodes' logs merged.
//
// The traffic is built so that the expected set does not depend on sync
// timing: a key is banned by 8+8 a second on two nodes only while the
// fleet is whole, by 12 in one second on one node while it is not, and
// every other key sends 2 a second or fewer.
func TestFleetFailures(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	proxy := newTCPProxy(t, srv.Addr())
	a := newFleetNode(t, "web1", srv.URL(), "fleet", "")
	b := newFleetNode(t, "web2", srv.URL(), "fleet", "")
	c := newFleetNode(t, "web3", "redis://"+proxy.addr+"/0", "fleet", "")
	startFleet(a, b, c)
	all := []*fleetNode{a, b, c}
	deadline := func() time.Time { return time.Now().Add(3 * time.Second) }

	// Quiet traffic on every node, never banned.
	quiet := func() {
		at := time.Now()
		for i, n := range all {
			n.writeLine(fmt.Sprintf("203.0.113.%d", 100+i), at, 0)
		}
	}
	// A fleet ban (8+8 a second on web1 and web2) and an operator's ban.
	quiet()
	untilNextSecond()
	spread("198.51.100.31", 8, 0, nil, a, b)
	waitDecision(t, "198.51.100.31", "ban", deadline(), all...)
	a.must(0, "ban", "203.0.113.31", "--for", "1h")
	waitDecision(t, "203.0.113.31", "ban", deadline(), all...)

	// kill -9 web2; a ban decided meanwhile (8+8 on web1 and web3); web2
	// restarts and holds every ban.
	b.kill9()
	quiet()
	untilNextSecond()
	spread("198.51.100.32", 8, 0, nil, a, c)
	waitDecision(t, "198.51.100.32", "ban", deadline(), a, c)
	b.start()
	waitDecision(t, "198.51.100.32", "ban", deadline(), b)
	for _, ip := range []string{"198.51.100.31", "203.0.113.31"} {
		if got := b.decision(ip); got != "ban" {
			t.Errorf("web2 after kill -9 and restart: %s is %q, want ban", ip, got)
		}
	}

	// Redis stopped: every node degraded (status, /healthz, the metric),
	// working alone; bans decided now reach the others once Redis is back
	// (restarted empty: the nodes republish).
	srv.Stop()
	for _, n := range all {
		var out, body string
		var code int
		var metric float64
		for end := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			_, out, _ = n.cmd("status")
			code, body = n.healthz()
			metric = n.metric("logjail_fleet_degraded")
			if strings.Contains(out, "DEGRADED") && code == 200 && strings.HasPrefix(body, "ok\n") &&
				strings.Contains(body, "fleet: degraded") && metric == 1 {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("%s, Redis stopped: status %q; /healthz %d %q; logjail_fleet_degraded %v; want DEGRADED, 200 ok + fleet: degraded, 1",
					n.name, out, code, body, metric)
			}
		}
	}
	quiet()
	untilNextSecond()
	at := time.Now()
	for i := range 12 {
		b.writeLine("198.51.100.33", at, i) // over the limit on web2 alone
	}
	waitDecision(t, "198.51.100.33", "ban", deadline(), b)
	c.must(0, "ban", "203.0.113.33", "--for", "1h")
	srv.Restart()
	waitDecision(t, "198.51.100.33", "ban", deadline(), all...)
	waitDecision(t, "203.0.113.33", "ban", deadline(), all...)
	for _, n := range all {
		// The metric follows at the next sync.
		n.waitFor(n.name+" to be back (/healthz, logjail_fleet_degraded)", func() bool {
			code, body := n.healthz()
			return code == 200 && strings.TrimSpace(body) == "ok" && n.metric("logjail_fleet_degraded") == 0
		})
	}

	// Partition web3 (its proxy to Redis cut): it works alone; its ban
	// reaches the others when the proxy is back, and theirs reach it.
	proxy.cut()
	c.waitFor("web3 to say it is degraded", func() bool {
		_, out, _ := c.cmd("status")
		return strings.Contains(out, "DEGRADED")
	})
	quiet()
	untilNextSecond()
	at = time.Now()
	for i := range 12 {
		c.writeLine("198.51.100.34", at, i)
		a.writeLine("198.51.100.35", at, i)
	}
	waitDecision(t, "198.51.100.34", "ban", deadline(), c)
	waitDecision(t, "198.51.100.35", "ban", deadline(), a, b)
	if got := c.decision("198.51.100.35"); got != "allow" {
		t.Errorf("web3 partitioned: 198.51.100.35 is %q, want allow (it cannot know)", got)
	}
	proxy.heal()
	waitDecision(t, "198.51.100.34", "ban", deadline(), all...)
	waitDecision(t, "198.51.100.35", "ban", deadline(), all...)

	// No ban lost; the fleet's rule bans are a replay's of the logs merged.
	want := replayBans(t, a, a.log, b.log, c.log)
	if len(want) != 5 {
		t.Errorf("replay of the merged logs bans %q, want 5 keys", want)
	}
	for _, n := range all {
		if got := ruleBans(n); !slices.Equal(got, want) {
			t.Errorf("%s's rule bans %q, want the replay's %q", n.name, got, want)
		}
		for _, ip := range []string{"203.0.113.31", "203.0.113.33"} {
			if got := n.decision(ip); got != "ban" {
				t.Errorf("%s: the operator's ban of %s is %q", n.name, ip, got)
			}
		}
	}
}
