package fleet

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/logjail/logjail/internal/redistest"
)

// The fleet's core on a real Redis Cluster of three primaries
// (internal/redistest): the same exchanges, claims, reconcile and stream
// as on one Redis, and a primary that restarts without its data.

func clusterCfg(c *redistest.Cluster, node string) Config {
	return Config{URL: c.URL(), Cluster: true, Node: node}
}

// clusterKeys lists the keys matching pattern on every primary (KEYS on
// each: a cluster has no command that sees them all).
func clusterKeys(t *testing.T, cl *redis.ClusterClient, pattern string) []string {
	t.Helper()
	var mu sync.Mutex
	var keys []string
	err := cl.ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
		k, err := m.Keys(ctx, pattern).Result()
		mu.Lock()
		keys = append(keys, k...)
		mu.Unlock()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	return keys
}

// TestKeySlot: the node's hash slots are the cluster's (CLUSTER KEYSLOT),
// hash tags included; the stream's epoch key is on the stream's slot.
func TestKeySlot(t *testing.T) {
	c := redistest.StartCluster(t, 3, redistest.Options{})
	cl := c.Primaries[0].Client(t)
	keys := []string{keyBans, keyEvents, keyNodes, keyEpoch, streamEpochKey(), epochKey(0), epochKey(12345),
		banKey(rk{"flood", "198.51.100.7"}), windowKey(rk{"flood", "2001:db8::/64"}), "a{}b", "{}", "x{y", "é{ü}"}
	for _, k := range keys {
		want, err := cl.ClusterKeySlot(context.Background(), k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := keySlot(k); got != int(want) {
			t.Errorf("keySlot(%q) = %d, want %d", k, got, want)
		}
	}
	if a, b := keySlot(streamEpochKey()), keySlot(keyEvents); a != b {
		t.Errorf("the stream's epoch on slot %d, the stream on %d", a, b)
	}
}

// TestClusterCore: on a cluster, two nodes' deltas are summed (each gets
// the other's 8), a ban reaches the other node within 1 s and its unban
// likewise, two claims of one (rule, key) leave one record and one Lost,
// and a node started later gets every active ban from its first
// reconcile.
func TestClusterCore(t *testing.T) {
	c := redistest.StartCluster(t, 3, redistest.Options{})
	a, sa := start(t, clusterCfg(c, "web1"))
	b, sb := start(t, clusterCfg(c, "web2"))
	waitFor(t, 5*time.Second, "both nodes connected", func() bool { return !a.Status().Degraded && !b.Status().Degraded })
	if !a.cluster {
		t.Fatal("the node has no cluster client")
	}
	cl := c.Client(t)
	ctx := context.Background()

	t.Run("deltas summed", func(t *testing.T) {
		const bucket = 1_764_000_000
		// Keys on every primary: each (rule, key)'s hash on its own slot.
		var ks []string
		owners := map[*redistest.Server]bool{}
		for _, k := range []string{"203.0.113.7", "203.0.113.8", "203.0.113.9", "2001:db8::1", "2001:db8::2", "198.51.100.3"} {
			ks = append(ks, k)
			owners[c.Owner(t, windowKey(rk{"flood", k}))] = true
		}
		if len(owners) != 3 {
			t.Logf("the keys are on %d primaries", len(owners))
		}
		var d []Delta
		for _, k := range ks {
			d = append(d, Delta{Rule: "flood", Key: k, Limit: 0, Bucket: bucket, Units: 8, TTL: 10 * time.Second})
		}
		a.Send(d)
		b.Send(d)
		took := waitFor(t, 2*a.cfg.Sync+300*time.Millisecond, "each node's Adds of the other's 8", func() bool {
			for _, k := range ks {
				if sa.units("flood", k, 0, bucket) != 8 || sb.units("flood", k, 0, bucket) != 8 {
					return false
				}
			}
			return true
		})
		t.Logf("every Add after %s (sync %s), keys on %d primaries", took, a.cfg.Sync, len(owners))
		for _, k := range ks {
			h, err := cl.HGetAll(ctx, windowKey(rk{"flood", k})).Result()
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"0:1764000000": "16", "0:1764000000:web1": "8", "0:1764000000:web2": "8"}
			if diff := cmp.Diff(want, h); diff != "" {
				t.Errorf("%s's hash (-want +got):\n%s", k, diff)
			}
		}
	})

	t.Run("ban and unban reach the other", func(t *testing.T) {
		d := ban("web1", "flood", "203.0.113.0/24", false)
		d.Addresses = []netip.Addr{netip.MustParseAddr("203.0.113.7")}
		a.Publish(d)
		took := waitFor(t, time.Second, "the ban on web2", func() bool { return len(sb.find(is("ban", "flood", "203.0.113.0/24"))) > 0 })
		t.Logf("ban reached web2 after %s", took)
		if diff := cmp.Diff(d, sb.find(is("ban", "flood", "203.0.113.0/24"))[0], cmpAddr); diff != "" {
			t.Errorf("web2's ban (-published +got):\n%s", diff)
		}
		a.Publish(Decision{Kind: "unban", Rule: "flood", Key: "203.0.113.0/24", Node: "web1", Time: time.Now().Round(0), Origin: "operator"})
		took = waitFor(t, time.Second, "the unban on web2", func() bool { return len(sb.find(is("unban", "flood", "203.0.113.0/24"))) > 0 })
		t.Logf("unban reached web2 after %s", took)
		if n, _ := cl.Exists(ctx, banKey(rk{"flood", "203.0.113.0/24"})).Result(); n != 0 {
			t.Error("the unbanned record is still in Redis")
		}
		if n, _ := cl.ZCard(ctx, keyBans).Result(); n != 0 {
			t.Errorf("%s holds %d entries after the unban, want 0", keyBans, n)
		}
	})

	t.Run("claimed once", func(t *testing.T) {
		xlen, _ := cl.XLen(ctx, keyEvents).Result()
		da, db := ban("web1", "flood", "198.51.100.4", true), ban("web2", "flood", "198.51.100.4", true)
		lost := claimRace(t, a, b, sa, sb, da, db)
		keys := clusterKeys(t, cl, "logjail:ban:*")
		if len(keys) != 1 {
			t.Fatalf("ban records %v, want one", keys)
		}
		rec, _ := cl.Get(ctx, keys[0]).Result()
		if !strings.Contains(rec, `"node":"`+lost[0].Node+`"`) {
			t.Errorf("the record in Redis is %s, want the winner's (%s)", rec, lost[0].Node)
		}
		if n, _ := cl.XLen(ctx, keyEvents).Result(); n != xlen+1 {
			t.Errorf("logjail:events grew by %d entries, want the winner's one", n-xlen)
		}
	})

	t.Run("reconcile at start", func(t *testing.T) {
		deny := Decision{Kind: "ban", Rule: "deny", Key: "203.0.113.66", Node: "web1", Time: time.Now().Round(0), Origin: "deny"}
		heavy := ban("web1", "heavy", "2001:db8:1:2::/64", false)
		a.Publish(deny)
		a.Publish(heavy)
		waitFor(t, 2*time.Second, "three records indexed", func() bool {
			n, _ := cl.ZCard(ctx, keyBans).Result()
			return n == 3 && a.Status().Queued == 0
		})
		_, sc := start(t, clusterCfg(c, "web3"))
		waitFor(t, 2*time.Second, "web3's three bans", func() bool { return len(sc.find(func(Decision) bool { return true })) >= 3 })
		var got []string
		for _, d := range sc.find(func(Decision) bool { return true }) {
			got = append(got, d.Kind+" "+d.Rule+" "+d.Key)
		}
		slices.Sort(got)
		want := []string{"ban deny 203.0.113.66", "ban flood 198.51.100.4", "ban heavy 2001:db8:1:2::/64"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("web3's decisions at start (-want +got):\n%s", diff)
		}
	})
}

// TestClusterPrimaryRestartedEmpty: the primary holding a ban's record
// stops: the nodes are degraded (the exchange's commands of its slots
// fail; once the cluster marks it failed, every command does) and keep
// working alone, their publications queued; it restarts with its
// nodes.conf and no data: its epoch is gone, so the nodes republish what
// they know: the ban is in Redis again, nobody is told to unban it, and
// the ban queued during the outage reaches the other node.
func TestClusterPrimaryRestartedEmpty(t *testing.T) {
	c := redistest.StartCluster(t, 3, redistest.Options{})
	var la logs
	ca := clusterCfg(c, "web1")
	ca.Logf = la.logf
	a, sa := start(t, ca)
	b, sb := start(t, clusterCfg(c, "web2"))
	waitFor(t, 5*time.Second, "both nodes connected", func() bool { return !a.Status().Degraded && !b.Status().Degraded })
	cl := c.Client(t)
	ctx := context.Background()
	before := ban("web2", "flood", "198.51.100.10", true)
	b.Publish(before)
	rec := banKey(rk{"flood", "198.51.100.10"})
	waitFor(t, time.Second, "the ban in Redis and on web1", func() bool {
		n, _ := cl.Exists(ctx, rec).Result()
		return n == 1 && len(sa.find(is("ban", "flood", "198.51.100.10"))) == 1
	})

	victim := c.Owner(t, rec)
	victim.Stop()
	took := waitFor(t, 2*a.cfg.Sync+3*a.timeout+2*time.Second, "both nodes degraded", func() bool {
		return a.Status().Degraded && b.Status().Degraded
	})
	t.Logf("degraded %s after the primary stopped: %s", took, a.Status().Err)
	during := ban("web1", "flood", "203.0.113.20", true)
	a.Publish(during)

	victim.Restart()
	c.WaitOK(t)
	took = waitFor(t, 5*time.Second, "both nodes back, web1's queue published", func() bool {
		return !a.Status().Degraded && !b.Status().Degraded && a.Status().Queued == 0
	})
	t.Logf("both nodes back %s after the cluster was ok", took)
	waitFor(t, 3*time.Second, "the ban republished in Redis, with its own node", func() bool {
		r, _ := cl.Get(ctx, rec).Result()
		s, _ := cl.ZScore(ctx, keyBans, rec).Result()
		return strings.Contains(r, `"node":"web2"`) && s > 0
	})
	waitFor(t, 2*time.Second, "the ban queued during the outage on web2", func() bool {
		return len(sb.find(is("ban", "flood", "203.0.113.20"))) == 1
	})
	if n := la.count("fleet: Redis lost its data"); n == 0 {
		t.Errorf("web1 did not notice the primary's loss: %q", la.lines)
	}
	// A node that comes back reconciles before it says so (not
	// degraded): an unban for a ban taken for gone would be delivered by
	// now.
	_, sc := start(t, clusterCfg(c, "web3"))
	waitFor(t, 3*time.Second, "web3 sees both bans", func() bool {
		return len(sc.find(is("ban", "flood", "198.51.100.10"))) == 1 && len(sc.find(is("ban", "flood", "203.0.113.20"))) == 1
	})
	for name, s := range map[string]*sink{"web1": sa, "web2": sb, "web3": sc} {
		if got := s.find(func(d Decision) bool { return d.Kind == "unban" }); len(got) != 0 {
			t.Errorf("%s was told to unban: %+v", name, got)
		}
	}
}

// TestClusterTLS: rediss:// with the test's CA and a password file, on a
// cluster: the node reaches every primary over TLS.
func TestClusterTLS(t *testing.T) {
	c := redistest.StartCluster(t, 3, redistest.Options{TLS: true, Password: "s3cret pass"})
	if !strings.HasPrefix(c.URL(), "rediss://") {
		t.Fatalf("URL %s", c.URL())
	}
	pw := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pw, []byte("s3cret pass\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	u := "rediss://" + c.Primaries[0].Addr() + "?addr=" + c.Primaries[1].Addr()
	a, _ := start(t, Config{URL: u, Cluster: true, PasswordFile: pw, CAFile: c.Primaries[0].CAFile, Node: "web1"})
	b, sb := start(t, Config{URL: c.URL(), Cluster: true, CAFile: c.Primaries[0].CAFile, Node: "web2"})
	waitFor(t, 5*time.Second, "both nodes connected over TLS", func() bool { return !a.Status().Degraded && !b.Status().Degraded })
	for _, k := range []string{"203.0.113.50", "203.0.113.51", "203.0.113.52", "203.0.113.53"} {
		a.Publish(ban("web1", "flood", k, true))
	}
	waitFor(t, time.Second, "the bans on web2", func() bool { return len(sb.find(func(d Decision) bool { return d.Kind == "ban" })) == 4 })
}

// TestClusterOpenErrors: a cluster has database 0 only; its seeds are
// host:port.
func TestClusterOpenErrors(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"redis://127.0.0.1:1/2", "database 2: a Redis Cluster has database 0 only"},
		{"redis://127.0.0.1:1?addr=nohost", "addr"},
		{"redis://127.0.0.1:1?bogus=1", "bogus"},
	} {
		_, err := Open(context.Background(), Config{URL: c.url, Cluster: true, Node: "a"})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%s): %v, want an error containing %q", c.url, err, c.want)
		}
	}
	for _, u := range []string{"redis://127.0.0.1:1", "redis://127.0.0.1:1/0?addr=127.0.0.1:2&addr=127.0.0.1:3", "rediss://h:1/"} {
		n, err := Open(context.Background(), Config{URL: u, Cluster: true, Node: "a"})
		if err != nil {
			t.Errorf("Open(%s): %v", u, err)
			continue
		}
		n.Close()
	}
}

// BenchmarkClusterExchange1000Keys: BenchmarkExchange1000Keys on a
// three-primary cluster: one exchange of 1,000 changed keys (one delta
// each), the pipeline split over the primaries, with the epochs a node
// reads at each exchange.
func BenchmarkClusterExchange1000Keys(b *testing.B) {
	c := redistest.StartCluster(b, 3, redistest.Options{})
	n, err := Open(context.Background(), Config{URL: c.URL(), Cluster: true, Node: "web1"})
	if err != nil {
		b.Fatal(err)
	}
	n.timeout = 30 * time.Second // the work, not the deadlines (as benchNode)
	go func() {
		for range n.events {
		}
	}()
	b.Cleanup(func() {
		n.Close()
		close(n.events)
	})
	ctx := context.Background()
	if err := n.readEpochKeys(ctx); err != nil {
		b.Fatal(err)
	}
	if len(n.epochKeys) != 4 {
		b.Fatalf("epoch keys %q, want logjail:epoch and one per primary", n.epochKeys)
	}
	benchExchanges(b, n)
}
