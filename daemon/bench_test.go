package daemon_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logjail/logjail/internal/redistest"
	"github.com/logjail/logjail/internal/testenv"
	"github.com/logjail/logjail/store"
)

// BenchmarkDecisionLatency runs the daemon (the built binary, inotify) on a
// log that a writer appends to at a steady 2,000 lines/s from 200 clients
// under the limits, and measures, for clients that cross the limit, the
// time from the write of the crossing line to the ban being recorded in the
// database (read by a read-only connection polling every millisecond).
// Reports p50 and p99 in ms.
func BenchmarkDecisionLatency(b *testing.B) {
	dir := b.TempDir()
	log, cfg, state := benchEnv(dir)
	cmd, out := startBench(b, cfg)
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	f, err := os.OpenFile(log, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	write := func(ip string, at time.Time) {
		fmt.Fprintf(f, "%s - - [%s] \"GET / HTTP/1.1\" 200 1 \"-\" \"t\"\n", ip, at.UTC().Format("02/Jan/2006:15:04:05 -0700"))
	}
	db := waitDB(b, state, out)
	defer db.Close()
	var lat []time.Duration
	attacker := 0
	b.ResetTimer()
	for b.Loop() {
		// 50 ms of normal traffic (100 lines), then a client that crosses.
		for i := range 100 {
			write(fmt.Sprintf("198.51.100.%d", i%200), time.Now())
			time.Sleep(500 * time.Microsecond)
		}
		attacker++
		ip := fmt.Sprintf("203.0.%d.%d", 113, attacker%250)
		if attacker >= 250 {
			ip = fmt.Sprintf("2001:db8::%x", attacker)
		}
		for range 5 {
			write(ip, time.Now())
		}
		start := time.Now()
		write(ip, time.Now())
		key := ip
		if strings.Contains(ip, ":") {
			key = "2001:db8::/64"
		}
		for {
			h, err := db.History(store.HistoryQuery{Key: key, Rule: "flood", Since: start.Add(-time.Minute)})
			if err != nil {
				b.Fatal(err)
			}
			if len(h) > 0 {
				lat = append(lat, time.Since(start))
				break
			}
			if time.Since(start) > 5*time.Second {
				b.Fatalf("no decision for %s after 5 s\n%s", ip, out.String())
			}
			time.Sleep(time.Millisecond)
		}
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		i := min(len(lat)-1, int(p/100*float64(len(lat))))
		return float64(lat[i].Microseconds()) / 1000
	}
	b.ReportMetric(pct(50), "p50-ms")
	b.ReportMetric(pct(99), "p99-ms")
}

// BenchmarkLiveIngest appends generated lines to a followed log (500,000
// lines from 62,500 clients, each a /64 of 2001:db8::/32, in 1,000-line
// writes) and measures how many lines/s the daemon keeps up with (until
// its saved position reaches the end), with its CPU (percent of one core)
// and peak RSS from /proc: rate=max writes as fast as the writer can;
// rate=50k paces the writes at 50,000 lines/s, for 10 s.
func BenchmarkLiveIngest(b *testing.B) {
	const lines = 500_000
	for _, rate := range []int{0, 50_000} {
		name := "rate=max"
		if rate > 0 {
			name = fmt.Sprintf("rate=%dk", rate/1000)
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			for b.Loop() {
				log, cfg, state := benchEnv(dir)
				cmd, out := startBench(b, cfg)
				db := waitDB(b, state, out)
				took := ingestPaced(b, log, db, out, lines, 62_500, rate)
				db.Close()
				cpu, rss := procStats(cmd.Process.Pid)
				cmd.Process.Kill()
				cmd.Wait()
				b.ReportMetric(float64(lines)/took.Seconds(), "lines/s")
				b.ReportMetric(cpu.Seconds()/took.Seconds()*100, "cpu-%")
				b.ReportMetric(float64(rss)/1024, "rss-MB")
			}
		})
	}
}

// ingestPaced appends lines access-log lines from clients clients (each a
// /64 of 2001:db8::/32) to log, in 1,000-line writes paced at rate lines/s
// (0: as fast as the writer can), and waits until the daemon's saved
// position (db) reaches their end: it returns the time that took from the
// first write.
func ingestPaced(b *testing.B, log string, db *store.DB, out *syncBuffer, lines, clients, rate int) time.Duration {
	f, _ := os.OpenFile(log, os.O_APPEND|os.O_WRONLY, 0)
	t0 := time.Now().UTC()
	var size int64
	start := time.Now()
	for i := 0; i < lines; i += 1000 {
		if rate > 0 {
			if wait := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))); wait > 0 {
				time.Sleep(wait)
			}
		}
		var sb strings.Builder
		for j := i; j < i+1000; j++ {
			c := j % clients
			fmt.Fprintf(&sb, "2001:db8:%x:%x::1 - - [%s] \"GET /%d HTTP/1.1\" 200 1 \"-\" \"t\"\n", c>>16, c&0xffff, t0.Add(time.Duration(j)*20*time.Microsecond).Format("02/Jan/2006:15:04:05 -0700"), j)
		}
		n, _ := f.WriteString(sb.String())
		size += int64(n)
	}
	f.Close()
	for {
		ps, _ := db.Positions()
		if len(ps) == 1 && ps[0].Offset == size {
			return time.Since(start)
		}
		if time.Since(start) > 2*time.Minute {
			b.Fatalf("the daemon did not catch up: %+v\n%s", ps, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// benchEnv writes the config and an empty log of a benchmark into dir, and
// removes the state of a previous run.
func benchEnv(dir string) (log, cfg, state string) {
	log, cfg, state = filepath.Join(dir, "access.log"), filepath.Join(dir, "logjail.yaml"), filepath.Join(dir, "state")
	os.RemoveAll(state)
	os.WriteFile(cfg, []byte(fmt.Sprintf(e2eConfig, state, log)), 0o600)
	os.WriteFile(log, nil, 0o644)
	return log, cfg, state
}

// startBench starts the benchmark binary on cfg.
func startBench(b *testing.B, cfg string) (*exec.Cmd, *syncBuffer) {
	cmd := exec.Command(benchBinary(b), "run", "--config", cfg, "--log-level", "warn")
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	return cmd, out
}

// benchBinary builds logjail without the race detector, once: timings of a
// race-instrumented binary would mean nothing.
func benchBinary(b *testing.B) string {
	benchOnce.Do(func() {
		benchPath = filepath.Join(filepath.Dir(binary), "logjail-bench")
		if out, err := exec.Command("go", "build", "-o", benchPath, "../cmd/logjail").CombinedOutput(); err != nil {
			benchErr = fmt.Errorf("%v\n%s", err, out)
		}
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchPath
}

var (
	benchOnce sync.Once
	benchPath string
	benchErr  error
)

func waitDB(b *testing.B, state string, out *syncBuffer) *store.DB {
	for deadline := time.Now().Add(10 * time.Second); ; {
		if d, err := store.Open(filepath.Join(state, "logjail.db"), store.Options{ReadOnly: true}); err == nil {
			return d
		} else if time.Now().After(deadline) {
			b.Fatalf("no database: %v\n%s", err, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// procStats reads a process's CPU time (user+system) and peak RSS (KB).
func procStats(pid int) (time.Duration, int64) {
	stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	ut, _ := strconv.ParseInt(fields[11], 10, 64)
	st, _ := strconv.ParseInt(fields[12], 10, 64)
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	var rss int64
	for _, l := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			rss, _ = strconv.ParseInt(strings.Fields(l)[1], 10, 64)
		}
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, rss
}

// fleetBenchConfig is a benchmark node's configuration: 1: its state
// directory, 2: its log, 3: the fleet: section ("" for a node alone), 4:
// flood's limit, 5: the actions.
const fleetBenchConfig = `state_dir: %[1]s
control_socket: %[1]s/control.sock
checkpoint: 1s
metrics: ""
%[3]s
sources:
  - name: web
    paths: [%[2]s]
    format: combined
    timezone: UTC
    from: start
rules:
  - name: flood
    limits: ["%[4]s"]
    ban: {for: 1h}
%[5]s`

// fleetSection is the fleet: section of node name on Redis srv.
func fleetSection(srv *redistest.Server, name string) string {
	return fmt.Sprintf("fleet:\n  redis: %s\n  node: %s\n  sync: 200ms\n", srv.URL(), name)
}

// benchDecision is an endpoint's X-Logjail-Decision for addr ("" when it
// does not answer).
func benchDecision(endpoint, addr string) string {
	req, _ := http.NewRequest("GET", "http://"+endpoint+"/auth", nil)
	req.Header.Set("X-Real-IP", addr)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.Header.Get("X-Logjail-Decision")
}

// BenchmarkFleetDecisionLatency runs two nodes (the built binary, inotify)
// on one redis-server (sync 200ms) under a fleet rule of 10 per 10s. Each
// trial writes 50 ms of traffic under the limits (100 lines, each from a
// new client, to both nodes), then 5 lines of a new client to each node
// and the crossing 11th to the first, and measures the time from the
// write of the crossing line to both nodes' decision endpoints answering
// ban (polled every millisecond): the line's way through the first node,
// its delta's exchange, the claim and the stream to the second node.
// Reports p50 and p99 in ms.
func BenchmarkFleetDecisionLatency(b *testing.B) {
	b.ReportAllocs()
	srv := redistest.Start(b, redistest.Options{})
	type node struct {
		log      *os.File
		endpoint string
	}
	var nodes []node
	for _, name := range []string{"web1", "web2"} {
		dir := filepath.Join(b.TempDir(), name)
		os.MkdirAll(dir, 0o755)
		log, cfg, state := filepath.Join(dir, "access.log"), filepath.Join(dir, "logjail.yaml"), filepath.Join(dir, "state")
		ep := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(b))
		os.WriteFile(cfg, fmt.Appendf(nil, fleetBenchConfig, state, log, fleetSection(srv, name), "10 per 10s",
			"actions:\n  - type: endpoint\n    listen: "+ep+"\n"), 0o600)
		os.WriteFile(log, nil, 0o644)
		cmd, out := startBench(b, cfg)
		defer func() { cmd.Process.Kill(); cmd.Wait() }()
		for deadline := time.Now().Add(10 * time.Second); benchDecision(ep, "203.0.113.1") != "allow"; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("%s: the endpoint does not answer allow\n%s", name, out.String())
			}
		}
		f, err := os.OpenFile(log, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		nodes = append(nodes, node{f, ep})
	}
	write := func(n node, ip string) {
		fmt.Fprintf(n.log, "%s - - [%s] \"GET / HTTP/1.1\" 200 1 \"-\" \"t\"\n", ip, time.Now().UTC().Format("02/Jan/2006:15:04:05 -0700"))
	}
	var lat []time.Duration
	trial, client := 0, 0
	b.ResetTimer()
	for b.Loop() {
		for range 100 {
			client++
			write(nodes[client%2], fmt.Sprintf("2001:db8:%x:%x::1", client>>16, client&0xffff))
			time.Sleep(500 * time.Microsecond)
		}
		trial++
		ip := fmt.Sprintf("203.0.113.%d", trial%250)
		if trial >= 250 {
			ip = fmt.Sprintf("198.51.100.%d", trial%250)
		}
		for range 5 {
			write(nodes[0], ip)
			write(nodes[1], ip)
		}
		start := time.Now()
		write(nodes[0], ip)
		for _, n := range nodes {
			for benchDecision(n.endpoint, ip) != "ban" {
				if time.Since(start) > 5*time.Second {
					b.Fatalf("%s not banned on %s after 5 s", ip, n.endpoint)
				}
				time.Sleep(time.Millisecond)
			}
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		i := min(len(lat)-1, int(p/100*float64(len(lat))))
		return float64(lat[i].Microseconds()) / 1000
	}
	b.ReportMetric(pct(50), "p50-ms")
	b.ReportMetric(pct(99), "p99-ms")
}

// redisCalls is the sum of INFO commandstats' calls, those of EVALSHA
// (the exchange's script, one per batch of up to 256 (rule, key)s), and
// the (rule, key)s those carried (the script's one HLEN per key; EXISTS
// before the batches).
func redisCalls(b *testing.B, srv *redistest.Server) (all, evalsha, keys int64) {
	info, err := srv.Client(b).Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(l), ":calls=")
		if !ok {
			continue
		}
		v, _, _ := strings.Cut(rest, ",")
		n, _ := strconv.ParseInt(v, 10, 64)
		all += n
		if name == "cmdstat_evalsha" {
			evalsha = n
		}
		if name == "cmdstat_hlen" || name == "cmdstat_exists" {
			keys += n // one per (rule, key) a script call carries
		}
	}
	return all, evalsha, keys
}

// windowKeyBytes is the mean MEMORY USAGE of up to 1,000 window keys
// (logjail:w:*) in Redis.
func windowKeyBytes(b *testing.B, srv *redistest.Server) float64 {
	ctx := context.Background()
	c := srv.Client(b)
	keys, _, err := c.Scan(ctx, 0, "logjail:w:*", 1000).Result()
	if err != nil || len(keys) == 0 {
		b.Fatalf("no window keys in Redis (%v)", err)
	}
	var sum int64
	for _, k := range keys {
		n, err := c.MemoryUsage(ctx, k).Result()
		if err != nil {
			b.Fatal(err)
		}
		sum += n
	}
	return float64(sum) / float64(len(keys))
}

// BenchmarkFleetIngest: a node's live ingest at 50,000 lines/s (500,000
// lines in 1,000-line writes, 10 s), alone (fleet=off) and in a fleet on
// a redis-server (fleet=on, sync 200ms, the rule's scope fleet), from
// clients=62500 (every line of an interval a key changed: the worst case
// for Redis) or clients=1000 distinct clients (each a /64 of
// 2001:db8::/32), under the limits. It reports the CPU per line
// (cpu-us/line, user+system of the daemon over the run, from /proc), the
// lines/s it kept up with, and with the fleet the Redis commands per
// second (redis-cmds/s: INFO commandstats' calls before and after, the
// INFOs themselves excepted, scripts' inner calls included), EVALSHA
// calls per second (evalsha/s: one per batch of up to 256 keys changed
// per sync) and the keys they carried (script-keys/s), the mean memory
// of a window key in Redis at the end (redis-B/key), and redis-server's
// CPU (INFO cpu) per key carried over the run, everything it did
// included (redis-cpu-us/key).
func BenchmarkFleetIngest(b *testing.B) {
	const lines, rate = 500_000, 50_000
	for _, clients := range []int{62_500, 1_000} {
		for _, on := range []bool{false, true} {
			b.Run(fmt.Sprintf("clients=%d/fleet=%v", clients, map[bool]string{false: "off", true: "on"}[on]), func(b *testing.B) {
				b.ReportAllocs()
				var srv *redistest.Server
				section := ""
				if on {
					srv = redistest.Start(b, redistest.Options{})
					section = fleetSection(srv, "web1")
				}
				dir := b.TempDir()
				for b.Loop() {
					log, cfg, state := filepath.Join(dir, "access.log"), filepath.Join(dir, "logjail.yaml"), filepath.Join(dir, "state")
					os.RemoveAll(state)
					os.WriteFile(cfg, fmt.Appendf(nil, fleetBenchConfig, state, log, section, "1000 per 10s", ""), 0o600)
					os.WriteFile(log, nil, 0o644)
					cmd, out := startBench(b, cfg)
					// A run that fails (b.Fatal) leaves no daemon behind.
					b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
					db := waitDB(b, state, out)
					var calls0, eval0, keys0 int64
					var rcpu0 time.Duration
					if on {
						calls0, eval0, keys0 = redisCalls(b, srv)
						rcpu0 = srv.CPU(b)
					}
					took := ingestPaced(b, log, db, out, lines, clients, rate)
					db.Close()
					cpu, _ := procStats(cmd.Process.Pid)
					if on {
						calls, eval, keys := redisCalls(b, srv)
						b.ReportMetric(float64(calls-calls0-1)/took.Seconds(), "redis-cmds/s")
						b.ReportMetric(float64(eval-eval0)/took.Seconds(), "evalsha/s")
						b.ReportMetric(float64(keys-keys0)/took.Seconds(), "script-keys/s")
						b.ReportMetric(windowKeyBytes(b, srv), "redis-B/key")
						if keys > keys0 {
							b.ReportMetric(float64((srv.CPU(b)-rcpu0).Microseconds())/float64(keys-keys0), "redis-cpu-us/key")
						}
					}
					cmd.Process.Kill()
					cmd.Wait()
					b.ReportMetric(float64(lines)/took.Seconds(), "lines/s")
					b.ReportMetric(float64(cpu.Microseconds())/lines, "cpu-us/line")
				}
			})
		}
	}
}
