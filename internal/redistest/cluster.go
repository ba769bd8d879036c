package redistest

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/logjail/logjail/internal/testenv"
)

// clusterNodeTimeout is the cluster's node timeout: how long a primary
// may be silent before the others mark it failed (and, with no replica
// to take its slots, say cluster_state:fail). Short, so that an outage a
// test makes is seen by the cluster within the test's time.
const clusterNodeTimeout = 1000 * time.Millisecond

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// Cluster is a Redis Cluster of primaries without replicas: one
// redis-server per primary, each on 127.0.0.1 on its own free client and
// cluster bus ports, in its own directory (nodes.conf kept there), the
// slots split evenly in order (primary 0 holds the lowest). Each is the
// test's own process, stopped by its PID when the test ends.
type Cluster struct {
	t testing.TB
	// Primaries are the cluster's servers, in slot order. Stop and
	// Restart one to make an outage: it comes back with its nodes.conf
	// (same identity, same slots) and, without Persist, no data.
	Primaries []*Server
}

// StartCluster starts a cluster of n primaries (at least 3, as Redis
// Cluster needs a majority of primaries to mark one failed) with opts,
// assigns the slots, joins them, and returns once every primary says
// cluster_state:ok and knows the whole slot map.
func StartCluster(t testing.TB, n int, opts Options) *Cluster {
	t.Helper()
	if n < 3 {
		t.Fatalf("redistest: a cluster of %d primaries: at least 3", n)
	}
	bin := testenv.Need(t, "redis-server")[0]
	c := &Cluster{t: t}
	var ca, certs string
	if opts.TLS {
		// One CA and one certificate (for 127.0.0.1) for every primary.
		certs = t.TempDir()
		ca = testenv.WriteCerts(t, certs).CA
	}
	for range n {
		s := &Server{t: t, bin: bin, dir: t.TempDir(), opts: opts, CAFile: ca, tls: certs}
		s.startFree(true)
		c.Primaries = append(c.Primaries, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	per := clusterSlots / n
	for i, s := range c.Primaries {
		cl := s.Client(t)
		lo, hi := i*per, (i+1)*per-1
		if i == n-1 {
			hi = clusterSlots - 1
		}
		if err := cl.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			t.Fatalf("redistest: %s: CLUSTER SET-CONFIG-EPOCH: %v", s.Addr(), err)
		}
		if err := cl.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			t.Fatalf("redistest: %s: CLUSTER ADDSLOTSRANGE %d %d: %v", s.Addr(), lo, hi, err)
		}
	}
	first := c.Primaries[0].Client(t)
	for _, s := range c.Primaries[1:] {
		if err := first.Do(ctx, "CLUSTER", "MEET", "127.0.0.1", s.port, s.bus).Err(); err != nil {
			t.Fatalf("redistest: CLUSTER MEET %s: %v", s.Addr(), err)
		}
	}
	c.WaitOK(t)
	return c
}

// WaitOK waits (at most 20 s) until every primary that runs says
// cluster_state:ok, knows every primary and has every slot assigned: after
// StartCluster, or after a Restart, so that a test begins from a whole
// cluster.
func (c *Cluster) WaitOK(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond) // a poll of the servers, not a pause
	defer tick.Stop()
	var last string
	for {
		last = ""
		for _, s := range c.Primaries {
			if !s.running() {
				continue
			}
			cl := redis.NewClient(s.options())
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			info, err := cl.ClusterInfo(ctx).Result()
			cancel()
			cl.Close()
			switch {
			case err != nil:
				last = fmt.Sprintf("%s: %v", s.Addr(), err)
			case !strings.Contains(info, "cluster_state:ok"),
				!strings.Contains(info, "cluster_slots_assigned:"+strconv.Itoa(clusterSlots)),
				!strings.Contains(info, "cluster_slots_ok:"+strconv.Itoa(clusterSlots)),
				!strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(len(c.Primaries))):
				last = fmt.Sprintf("%s: %s", s.Addr(), strings.Join(strings.Fields(info), " "))
			}
			if last != "" {
				break
			}
		}
		if last == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: the cluster is not ok after 20s: %s\n%s", last, c.Primaries[0].Log())
		}
		<-tick.C
	}
}

// URL is the cluster's address as the fleet configuration writes it: the
// first primary as the seed URL, the others as addr= parameters (the form
// go-redis's ParseClusterURL reads), with the password when there is one.
func (c *Cluster) URL() string {
	u, err := url.Parse(c.Primaries[0].URL())
	if err != nil {
		c.t.Fatal(err)
	}
	u.Path = ""
	q := url.Values{}
	for _, s := range c.Primaries[1:] {
		q.Add("addr", s.Addr())
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// Client returns a cluster client (closed at the test's end).
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	o := c.Primaries[0].options()
	addrs := make([]string, len(c.Primaries))
	for i, s := range c.Primaries {
		addrs[i] = s.Addr()
	}
	cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, Password: o.Password, MaxRetries: -1, Protocol: 2,
		DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout, TLSConfig: o.TLSConfig})
	t.Cleanup(func() { cl.Close() })
	return cl
}

// Owner returns the primary that holds key's slot.
func (c *Cluster) Owner(t testing.TB, key string) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	slot, err := c.Primaries[0].Client(t).ClusterKeySlot(ctx, key).Result()
	if err != nil {
		t.Fatalf("redistest: CLUSTER KEYSLOT %s: %v", key, err)
	}
	per := clusterSlots / len(c.Primaries)
	return c.Primaries[min(int(slot)/per, len(c.Primaries)-1)]
}

// running says whether s's process runs.
func (s *Server) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}
