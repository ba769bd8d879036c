package main

// End-to-end test of fleet mode on a Redis Cluster (issue 20): three
// redis-server primaries (internal/redistest) and real `logjail run`
// daemons, with the helpers of fleet_e2e_test.go.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/logjail/logjail/internal/redistest"
)

// TestFleetCluster: on a three-primary Redis Cluster, an address sending 8
// requests a second to each of two nodes under a fleet `10 per second`
// rule is banned on both within 1 s of the crossing line; an operator's
// ban on one node is enforced by the other's endpoint within 1 s. Then
// the primary holding the operator's ban record stops (SIGTERM): both
// nodes go degraded (status, /healthz) and keep enforcing every ban
// alone; it restarts on the same port with its nodes.conf and without its
// data: the nodes come back, republish, and no active ban is lost: both
// are in Redis again (a node started afterwards gets them) and enforced
// on every node.
func TestFleetCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3, redistest.Options{})
	seed := "redis://" + cl.Primaries[0].Addr()
	// web1 names the other seeds in addrs:, web2 in the URL's addr=.
	a := newFleetNode(t, "web1", seed, "fleet",
		"  cluster: true\n  addrs: ["+cl.Primaries[1].Addr()+", "+cl.Primaries[2].Addr()+"]")
	b := newFleetNode(t, "web2", cl.URL(), "fleet", "  cluster: true")
	startFleet(a, b)
	both := []*fleetNode{a, b}

	const ip = "198.51.100.40"
	untilNextSecond()
	// 16 lines in one second: the 11th crosses 10 per second.
	crossed := make(chan time.Time, 1)
	done := make(chan struct{})
	go func() { defer close(done); spread(ip, 8, 11, crossed, a, b) }()
	cross := <-crossed
	waitDecision(t, ip, "ban", cross.Add(time.Second), both...)
	t.Logf("banned on both nodes %v after the crossing line", time.Since(cross))
	<-done
	la, lb := a.bans(), b.bans()
	if len(la) != 1 || !slices.Equal(la, lb) {
		t.Errorf("list: web1 %q, web2 %q; want one flood ban of %s, by the same node on both", la, lb, ip)
	}

	const op = "203.0.113.40"
	began := time.Now()
	a.must(0, "ban", op, "--for", "1h", "--reason", "fleet cluster test")
	took := waitDecision(t, op, "ban", time.Now().Add(time.Second), b)
	t.Logf("the operator's ban enforced by web2 %v after the command returned (%v after it began)", took, time.Since(began))
	if got := b.bans(); !slices.Contains(got, "operator "+op+" web1") {
		t.Errorf("web2's list: %q, want the operator's ban by web1", got)
	}
	_, out, _ := a.cmd("status")
	if !strings.Contains(out, ": ok, last sync ") || !strings.Contains(out, "\n  web2: last sync ") {
		t.Errorf("status before the outage:\n%s", out)
	}

	// The primary that holds the operator's ban record stops.
	rec := "logjail:ban:{operator|" + op + "}"
	victim := cl.Owner(t, rec)
	t.Logf("stopping the primary %s (it holds %s)", victim.Addr(), rec)
	victim.Stop()
	for _, n := range both {
		n.waitFor(n.name+" degraded (status, /healthz)", func() bool {
			_, out, _ := n.cmd("status")
			code, body := n.healthz()
			return strings.Contains(out, "DEGRADED") && code == 200 && strings.Contains(body, "fleet: degraded")
		})
		for _, addr := range []string{ip, op} {
			if got := n.decision(addr); got != "ban" {
				t.Errorf("%s while the primary is away: %s is %q, want ban", n.name, addr, got)
			}
		}
	}

	victim.Restart()
	cl.WaitOK(t)
	for _, n := range both {
		n.waitFor(n.name+" back (/healthz ok)", func() bool {
			code, body := n.healthz()
			return code == 200 && strings.TrimSpace(body) == "ok"
		})
	}
	rc := cl.Client(t)
	var inRedis string
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		r1, err1 := rc.Get(ctx, rec).Result()
		r2, err2 := rc.Get(ctx, "logjail:ban:{flood|"+ip+"}").Result()
		z, err3 := rc.ZRangeWithScores(ctx, "logjail:bans", 0, -1).Result()
		cancel()
		if err1 == nil && err2 == nil && err3 == nil && len(z) == 2 {
			break
		}
		inRedis = fmt.Sprintf("%s: %q %v; flood: %q %v; logjail:bans: %v %v", rec, r1, err1, r2, err2, z, err3)
		if time.Now().After(end) {
			t.Fatalf("both bans not in Redis 10 s after the restart: %s", inRedis)
		}
	}
	c := newFleetNode(t, "web3", cl.URL(), "fleet", "  cluster: true")
	c.start()
	all := append(both, c)
	waitDecision(t, ip, "ban", time.Now().Add(3*time.Second), all...)
	waitDecision(t, op, "ban", time.Now().Add(3*time.Second), all...)
	for _, n := range all {
		if got := n.bans(); len(got) != 2 {
			t.Errorf("%s's list after the primary's restart: %q, want the flood and the operator's ban", n.name, got)
		}
	}
}
