package daemon_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

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
// lines from 62,500 clients, in 1,000-line writes) and measures how many
// lines/s the daemon keeps up with (until its saved position reaches the
// end), with its CPU (percent of one core) and peak RSS from /proc:
// rate=max writes as fast as the writer can; rate=50k paces the writes at
// 50,000 lines/s, for 10 s.
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
						fmt.Fprintf(&sb, "198.51.%d.%d - - [%s] \"GET /%d HTTP/1.1\" 200 1 \"-\" \"t\"\n", j/250%250, j%250, t0.Add(time.Duration(j)*20*time.Microsecond).Format("02/Jan/2006:15:04:05 -0700"), j)
					}
					n, _ := f.WriteString(sb.String())
					size += int64(n)
				}
				f.Close()
				for {
					ps, _ := db.Positions()
					if len(ps) == 1 && ps[0].Offset == size {
						break
					}
					if time.Since(start) > 2*time.Minute {
						b.Fatalf("the daemon did not catch up: %+v\n%s", ps, out.String())
					}
					time.Sleep(10 * time.Millisecond)
				}
				took := time.Since(start)
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
