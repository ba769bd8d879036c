package fleet

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/logjail/logjail/internal/redistest"
)

// benchNode opens a node on srv without Run (the benchmark makes the
// exchanges) and drains its Events.
func benchNode(b *testing.B, srv *redistest.Server) *Node {
	b.Helper()
	n, err := Open(context.Background(), Config{URL: srv.URL(), Node: "web1"})
	if err != nil {
		b.Fatal(err)
	}
	// The benchmark measures the work, not the deadlines: on a machine
	// whose cores are shared, an exchange may wait longer than a node's.
	n.timeout = 30 * time.Second
	go func() {
		for range n.events {
		}
	}()
	b.Cleanup(func() {
		n.Close()
		close(n.events)
	})
	return n
}

// BenchmarkExchange1000Keys: one exchange of 1,000 changed keys (one
// delta each), on a real Redis on loopback.
func BenchmarkExchange1000Keys(b *testing.B) {
	srv := redistest.Start(b, redistest.Options{})
	n := benchNode(b, srv)
	cpu0 := srv.CPU(b)
	keys := benchExchanges(b, n)
	b.StopTimer()
	b.ReportMetric(float64((srv.CPU(b)-cpu0).Nanoseconds())/1e3/float64(b.N*keys), "redis-cpu-us/key")
}

// benchExchanges runs b's loop of exchanges of 1,000 changed keys, each
// a delta in a new bucket, and says how many keys an exchange sends.
func benchExchanges(b *testing.B, n *Node) int {
	ctx := context.Background()
	ds := make([]Delta, 1000)
	for i := range ds {
		ds[i] = Delta{Rule: "flood", Key: "198.51.100." + strconv.Itoa(i%256) + "/" + strconv.Itoa(i), Units: 3, TTL: time.Minute}
	}
	bucket := uint64(1_764_000_000)
	b.ReportAllocs()
	for b.Loop() {
		bucket++
		for i := range ds {
			ds[i].Bucket = bucket
		}
		n.Send(ds)
		if _, err := n.exchange(ctx); err != nil {
			b.Fatal(err)
		}
	}
	return len(ds)
}

// scriptInternal are the commands only the window script runs inside
// Redis; the others are what a node sends.
var scriptInternal = map[string]bool{"hincrby": true, "pexpire": true, "pttl": true, "hmget": true, "hkeys": true, "exists": true, "hdel": true,
	"hlen": true, "hgetall": true}

// BenchmarkCommandsPerNode: one node charging 50,000 deltas a second
// (25,000 lines a second, each counted by a rule with two limits) over
// 20,000 client addresses with a Zipf spread (a few heavy clients, a long
// tail), exchanging every 200 ms. Each iteration is one interval (10,000
// deltas, then one exchange). Reported per simulated second: the
// commands the node sends (sent-cmds/s), the script calls among them
// (evalsha/s), every command Redis runs including those inside the script
// (redis-cmds/s), and the distinct keys per interval.
func BenchmarkCommandsPerNode(b *testing.B) {
	srv := redistest.Start(b, redistest.Options{})
	n := benchNode(b, srv)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(rng, 1.2, 1, 19_999)
	keys := make([]string, 20_000)
	for i := range keys {
		keys[i] = "203.0.113." + strconv.Itoa(i%256) + "#" + strconv.Itoa(i/256) // distinct clients
	}
	const perInterval, interval = 10_000, 200 * time.Millisecond
	ds := make([]Delta, perInterval)
	logTime := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	distinct := 0
	if err := srv.Client(b).ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	cpu0 := srv.CPU(b)
	b.ReportAllocs()
	intervals := 0
	for b.Loop() {
		seen := map[string]bool{}
		for i := 0; i < perInterval; i += 2 {
			k := keys[zipf.Uint64()]
			seen[k] = true
			sec := uint64(logTime.Unix())
			ds[i] = Delta{Rule: "flood", Key: k, Limit: 0, Bucket: sec, Units: 1, TTL: 2 * time.Second}
			ds[i+1] = Delta{Rule: "flood", Key: k, Limit: 1, Bucket: sec, Units: 1, TTL: 61 * time.Second}
		}
		distinct += len(seen)
		n.Send(ds)
		if _, err := n.exchange(ctx); err != nil {
			b.Fatal(err)
		}
		logTime = logTime.Add(interval)
		intervals++
	}
	b.StopTimer()
	st := commandStats(b, srv)
	var sent, all int
	for c, calls := range st {
		if c == "config|resetstat" || c == "info" {
			continue
		}
		all += calls
		if !scriptInternal[c] {
			sent += calls
		}
	}
	secs := float64(intervals) * interval.Seconds()
	b.ReportMetric(float64(sent)/secs, "sent-cmds/s")
	b.ReportMetric(float64(st["evalsha"])/secs, "evalsha/s")
	b.ReportMetric(float64(all)/secs, "redis-cmds/s")
	b.ReportMetric(float64(distinct)/float64(intervals), "keys/interval")
	// Every (rule, key) a script call carries runs one HLEN (EXISTS before
	// calls carried many keys).
	if keys := st["hlen"] + st["exists"]; keys > 0 {
		b.ReportMetric(float64((srv.CPU(b)-cpu0).Nanoseconds())/1e3/float64(keys), "redis-cpu-us/key")
	}
}
