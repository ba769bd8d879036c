package redistest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestCluster: three primaries serve every slot; a key lives on the
// primary Owner names; a primary stopped and restarted rejoins with its
// slots (nodes.conf kept) and, without persistence, without its keys.
func TestCluster(t *testing.T) {
	c := StartCluster(t, 3, Options{})
	cl := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	keys := []string{"logjail:bans", "logjail:events", "logjail:nodes", "logjail:epoch", "a", "b", "c", "d"}
	owners := map[*Server]bool{}
	for _, k := range keys {
		if err := cl.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
		o := c.Owner(t, k)
		owners[o] = true
		if got, err := o.Client(t).Get(ctx, k).Result(); err != nil || got != "v" {
			t.Errorf("GET %s on its owner %s: %q, %v", k, o.Addr(), got, err)
		}
	}
	if len(owners) < 2 {
		t.Errorf("%d keys on %d primaries: want them spread", len(keys), len(owners))
	}
	victim := c.Owner(t, "logjail:bans")
	victim.Stop()
	victim.Restart()
	c.WaitOK(t)
	if err := cl.Get(ctx, "logjail:bans").Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("GET logjail:bans after its primary restarted without persistence: %v, want redis.Nil", err)
	}
	for _, k := range keys {
		if c.Owner(t, k) == victim {
			continue
		}
		if got, err := cl.Get(ctx, k).Result(); err != nil || got != "v" {
			t.Errorf("GET %s (another primary's) after the restart: %q, %v", k, got, err)
		}
	}
}

// TestClusterTLS: a cluster with TLS and a password answers a client that
// trusts its CA.
func TestClusterTLS(t *testing.T) {
	c := StartCluster(t, 3, Options{TLS: true, Password: "s3cret"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := c.Client(t)
	for _, k := range []string{"a", "b", "c"} {
		if err := cl.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
	}
}
