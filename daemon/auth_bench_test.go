package daemon_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/logjail/logjail/internal/testenv"
)

// authBenchConfig: one source, a rate rule the benchmark's clients stay
// under, and a decision endpoint.
const authBenchConfig = `state_dir: %[1]s
checkpoint: 10s
metrics: ""
sources:
  - name: web
    paths: [%[2]s]
    format: combined
    timezone: UTC
rules:
  - name: flood
    limits: ["30 per 10s"]
    ban: {for: 1h}
actions:
  - type: endpoint
    listen: 127.0.0.1:%[3]d
`

// BenchmarkAuthUnderIngest is issue 23's "decisions never wait behind
// ingest" in one process tree: the built daemon pinned to one core
// (taskset -c 0) serves /auth to one client asking over one keep-alive
// connection, as fast as it is answered, first idle, then while a writer
// appends 50,000 lines/s to the followed log (2,500-line writes every
// 50 ms, from 20,000 clients under the limit). It reports the idle p50,
// the p99 under ingest and their ratio (the bound: ≤ 25), for the
// daemon as it runs (procs=auto: a second P on one core, cmd_run.go) and
// with GOMAXPROCS=1 forced (procs=1: the one P polls the network only
// when idle or every 10 ms). Run with -benchtime=1x; the host's other
// load shows in the figures.
func BenchmarkAuthUnderIngest(b *testing.B) {
	taskset := testenv.Need(b, "taskset")[0]
	for _, procs := range []string{"auto", "1"} {
		b.Run("procs="+procs, func(b *testing.B) {
			for b.Loop() {
				idle, busy, lines := authUnderIngest(b, taskset, procs)
				b.ReportMetric(idle, "idle-p50-ms")
				b.ReportMetric(busy, "ingest-p99-ms")
				b.ReportMetric(busy/idle, "ratio")
				b.ReportMetric(lines, "written-lines/s")
			}
		})
	}
}

// authUnderIngest runs one measurement: the idle p50 and the p99 under
// ingest of /auth in ms, and the lines/s written while it was measured.
func authUnderIngest(b *testing.B, taskset, procs string) (idle, busy, lines float64) {
	dir := b.TempDir()
	log, cfg, state := filepath.Join(dir, "access.log"), filepath.Join(dir, "logjail.yaml"), filepath.Join(dir, "state")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	if err := os.WriteFile(cfg, fmt.Appendf(nil, authBenchConfig, state, log, port), 0o600); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(log, nil, 0o644); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(taskset, "-c", "0", benchBinary(b), "run", "--config", cfg, "--log-level", "warn")
	cmd.Env = os.Environ()
	if procs != "auto" {
		cmd.Env = append(cmd.Env, "GOMAXPROCS="+procs)
	}
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}}
	url := fmt.Sprintf("http://127.0.0.1:%d/auth", port)
	ask := func() (string, error) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("X-Forwarded-For", "203.0.113.7")
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.Header.Get("X-Logjail-Decision"), nil
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		if d, err := ask(); err == nil && d == "allow" {
			break
		} else if time.Now().After(deadline) {
			b.Fatalf("the endpoint did not answer allow: %q %v\n%s", d, err, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	measure := func(d time.Duration) []time.Duration {
		var lat []time.Duration
		for end := time.Now().Add(d); time.Now().Before(end); {
			t := time.Now()
			if dec, err := ask(); err != nil || dec != "allow" {
				b.Fatalf("/auth: %q %v\n%s", dec, err, out.String())
			}
			lat = append(lat, time.Since(t))
		}
		slices.Sort(lat)
		return lat
	}
	pct := func(lat []time.Duration, p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p/100*float64(len(lat))))].Microseconds()) / 1000
	}
	idle = pct(measure(3*time.Second), 50)

	f, err := os.OpenFile(log, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	stop, written := make(chan struct{}), make(chan int)
	go func() {
		const burst, every = 2500, 50 * time.Millisecond // 50,000 lines/s
		n := 0
		tick := time.NewTicker(every)
		defer tick.Stop()
		var sb strings.Builder
		for {
			select {
			case <-stop:
				written <- n
				return
			case <-tick.C:
			}
			ts := time.Now().UTC().Format("02/Jan/2006:15:04:05 -0700")
			sb.Reset()
			for i := range burst {
				c := (n + i) % 20_000
				fmt.Fprintf(&sb, "2001:db8:8000:%x::1 - - [%s] \"GET /y HTTP/1.1\" 200 1 \"-\" \"bench\"\n", c, ts)
			}
			if _, err := f.WriteString(sb.String()); err != nil {
				panic(err)
			}
			n += burst
		}
	}()
	start := time.Now()
	busyLat := measure(5 * time.Second)
	close(stop)
	n := <-written
	return idle, pct(busyLat, 99), float64(n) / time.Since(start).Seconds()
}
