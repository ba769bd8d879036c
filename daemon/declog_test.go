package daemon_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logjail/logjail/control"
	"github.com/logjail/logjail/daemon"
)

const declogConfig = `state_dir: %[1]s
checkpoint: 1s
cleaner: "@every 1s"
metrics: ""
max_bans_per_minute: %[3]d
deny: [203.0.113.250]
sources:
  - name: web
    paths: [%[2]s]
    format: combined
    timezone: UTC
    from: start
rules:
  - name: flood
    limits: ["5 per 10s"]
    ban: {for: 2s}
  - name: polite
    limits: ["3 per 10s"]
    throttle: {initial_delay: 10s, max_delay: 60s, quiet: 3s}
    ban: {after: 10, for: 1h}
`

// declogDaemon is a daemon run in this process whose log is JSON lines in
// a buffer, as journald gets them.
type declogDaemon struct {
	t      *testing.T
	log    string // the access log
	cfg    string // the configuration file
	reload chan struct{}
	ctl    *daemon.Control
	logs   syncBuffer
	done   chan error
	cancel context.CancelFunc
}

func startDeclog(t *testing.T, maxBans int, backlog []logLine) *declogDaemon {
	t.Helper()
	dir := t.TempDir()
	dd := &declogDaemon{t: t, log: filepath.Join(dir, "access.log"), ctl: daemon.NewControl(), done: make(chan error, 1),
		cfg: filepath.Join(dir, "logjail.yaml"), reload: make(chan struct{}, 1)}
	if err := os.WriteFile(dd.log, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	appendLines(t, dd.log, backlog)
	cfg := dd.cfg
	if err := os.WriteFile(cfg, fmt.Appendf(nil, declogConfig, filepath.Join(dir, "state"), dd.log, maxBans), 0o600); err != nil {
		t.Fatal(err)
	}
	var ctx context.Context
	ctx, dd.cancel = context.WithCancel(context.Background())
	go func() {
		dd.done <- daemon.Run(ctx, daemon.Options{ConfigPath: cfg, Poll: true, Control: dd.ctl, Reload: dd.reload,
			Logger: slog.New(slog.NewJSONHandler(&dd.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	}()
	t.Cleanup(func() {
		if dd.cancel != nil {
			dd.stop()
		}
	})
	return dd
}

// stop stops the daemon and waits for Run to return.
func (dd *declogDaemon) stop() {
	dd.cancel()
	dd.cancel = nil
	if err := <-dd.done; err != nil {
		dd.t.Errorf("Run: %v", err)
	}
}

// records are the daemon's log lines whose msg is msg and whose
// attributes include every one of want.
func (dd *declogDaemon) records(msg string, want map[string]any) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(dd.logs.String()))
	sc.Buffer(nil, 1<<20)
next:
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			dd.t.Fatalf("a log line that is not JSON: %q", sc.Text())
		}
		if r["msg"] != msg {
			continue
		}
		for k, v := range want {
			if r[k] != v {
				continue next
			}
		}
		out = append(out, r)
	}
	return out
}

// wait waits up to 30 s for a line of msg with want, and returns it.
func (dd *declogDaemon) wait(msg string, want map[string]any) map[string]any {
	dd.t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if rs := dd.records(msg, want); len(rs) > 0 {
			return rs[0]
		}
		select {
		case err := <-dd.done:
			dd.cancel = nil
			dd.t.Fatalf("Run returned (%v) before a %q line with %v:\n%s", err, msg, want, dd.logs.String())
		case <-deadline.C:
			dd.t.Fatalf("no %q line with %v in 30 s:\n%s", msg, want, dd.logs.String())
		case <-tick.C:
		}
	}
}

// checkUntil checks that a line's until is RFC 3339 and within d of want.
func checkUntil(t *testing.T, r map[string]any, want time.Time, d time.Duration) {
	t.Helper()
	u, err := time.Parse(time.RFC3339, fmt.Sprint(r["until"]))
	if err != nil || u.Sub(want).Abs() > d {
		t.Errorf("until %v: want %v ± %v (%v): %v", r["until"], want, d, err, r)
	}
}

// TestDecisionLog: a live daemon writes one line for each kind of
// decision and operator action, with rule, key, kind, until, reason and
// source.
func TestDecisionLog(t *testing.T) {
	now := time.Now().UTC()
	// A backlog burst an hour old: its ban is over when read.
	dd := startDeclog(t, 2, burst("198.51.100.40", now.Add(-time.Hour), 6))

	// The deny list, at start.
	r := dd.wait("deny", map[string]any{"key": "203.0.113.250"})
	if r["level"] != "INFO" || r["rule"] != "deny" || r["kind"] != "ban" || r["until"] != "" || r["reason"] != "deny list" || r["source"] != "deny" {
		t.Errorf("deny line: %v", r)
	}
	// The backlog's ban: recorded, not applied, logged with log_only.
	r = dd.wait("ban", map[string]any{"key": "198.51.100.40", "rule": "flood"})
	if r["log_only"] != true || !strings.Contains(fmt.Sprint(r["reason"]), "already over when read (backlog): not applied") || r["source"] != "web" {
		t.Errorf("backlog ban line: %v", r)
	}

	// A live ban, its throttle by the other rule, and its unban when it expires.
	// Lines of now: a ban of 2 s is still in force when read, however
	// slow the machine was to start the daemon.
	start := time.Now()
	appendLines(t, dd.log, burst("198.51.100.1", start.UTC(), 6))
	r = dd.wait("ban", map[string]any{"key": "198.51.100.1", "rule": "flood"})
	if r["level"] != "INFO" || r["kind"] != "ban" || r["source"] != "web" || r["log_only"] != nil ||
		!strings.Contains(fmt.Sprint(r["reason"]), "(rule flood)") {
		t.Errorf("ban line: %v", r)
	}
	checkUntil(t, r, start.Add(2*time.Second), 2*time.Second)
	r = dd.wait("throttle", map[string]any{"key": "198.51.100.1", "rule": "polite"})
	if r["level"] != "DEBUG" || r["kind"] != "throttle" || r["delay"] == nil || r["source"] != "web" {
		t.Errorf("throttle line: %v", r)
	}
	r = dd.wait("unban", map[string]any{"key": "198.51.100.1", "rule": "flood"})
	if r["level"] != "INFO" || r["kind"] != "unban" || r["until"] != "" || (r["source"] != "cleaner" && r["source"] != "web") {
		t.Errorf("unban line: %v", r)
	}

	// An operator's ban and unban, through daemon.Control.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := dd.ctl.Ban(ctx, control.BanRequest{Key: "203.0.113.77", For: "1h", Reason: "scraper"}, "uid 0 (root)"); err != nil {
		t.Fatal(err)
	}
	r = dd.wait("ban", map[string]any{"key": "203.0.113.77"})
	if r["rule"] != "operator" || r["source"] != "operator" || r["who"] != "uid 0 (root)" || r["reason"] != "scraper" {
		t.Errorf("operator ban line: %v", r)
	}
	checkUntil(t, r, time.Now().Add(time.Hour), 30*time.Second)
	if _, err := dd.ctl.Lift(ctx, control.UnbanRequest{Key: "203.0.113.77", Reason: "customer"}, "uid 0 (root)"); err != nil {
		t.Fatal(err)
	}
	r = dd.wait("unban", map[string]any{"key": "203.0.113.77"})
	if r["rule"] != "operator" || r["source"] != "operator" || r["who"] != "uid 0 (root)" || r["reason"] != "customer" {
		t.Errorf("operator unban line: %v", r)
	}

	// Two more bans within the minute trip a breaker of 2.
	now = time.Now().UTC()
	appendLines(t, dd.log, append(burst("198.51.100.2", now, 6), burst("198.51.100.3", now, 6)...))
	r = dd.wait("breaker", map[string]any{"kind": "breaker-trip"})
	if r["level"] != "ERROR" || r["rule"] != "flood" || r["key"] != "198.51.100.3" || r["source"] != "web" ||
		!strings.Contains(fmt.Sprint(r["reason"]), "3 bans within 1m > max_bans_per_minute 2") || !strings.Contains(fmt.Sprint(r["note"]), "logjail breaker reset") {
		t.Errorf("breaker line: %v", r)
	}
	// The ban that tripped it is log-only, and says so.
	if r = dd.wait("ban", map[string]any{"key": "198.51.100.3", "rule": "flood"}); r["log_only"] != true {
		t.Errorf("the ban that tripped the breaker: %v", r)
	}
	// The deny entry removed, and a reload: its ban is lifted.
	text, err := os.ReadFile(dd.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dd.cfg, []byte(strings.Replace(string(text), "deny: [203.0.113.250]", "deny: []", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	dd.reload <- struct{}{}
	r = dd.wait("allow-lift", map[string]any{"key": "203.0.113.250"})
	if r["level"] != "INFO" || r["rule"] != "deny" || r["kind"] != "unban" || r["source"] != "deny" || r["reason"] != "removed from config" {
		t.Errorf("allow-lift line: %v", r)
	}
	// One line each.
	for _, c := range []struct {
		msg  string
		want map[string]any
	}{
		{"deny", map[string]any{"key": "203.0.113.250"}},
		{"ban", map[string]any{"key": "198.51.100.1", "rule": "flood"}},
		{"unban", map[string]any{"key": "198.51.100.1", "rule": "flood"}},
		{"ban", map[string]any{"key": "203.0.113.77"}},
		{"unban", map[string]any{"key": "203.0.113.77"}},
		{"breaker", map[string]any{"kind": "breaker-trip"}},
		{"allow-lift", map[string]any{"key": "203.0.113.250"}},
	} {
		if rs := dd.records(c.msg, c.want); len(rs) != 1 {
			t.Errorf("%d %q lines with %v, want 1: %v", len(rs), c.msg, c.want, rs)
		}
	}
	if t.Failed() {
		t.Logf("daemon log:\n%s", dd.logs.String())
	}
	// What an operator reads (go test -v): a ban, its unban, the trip.
	for _, l := range strings.Split(dd.logs.String(), "\n") {
		if strings.Contains(l, `"key":"198.51.100.1"`) && (strings.Contains(l, `"msg":"ban"`) || strings.Contains(l, `"msg":"unban"`)) ||
			strings.Contains(l, `"msg":"breaker"`) {
			t.Log(l)
		}
	}
}

// TestDecisionLogStorm: a storm of 400 bans writes at most 50 ban lines a
// second; every other ban is counted in a "suppressed" line, so that the
// lines and the counts add up to the 400 bans the history holds.
func TestDecisionLogStorm(t *testing.T) {
	dd := startDeclog(t, 100000, nil)
	dd.wait("following", nil)
	now := time.Now().UTC()
	var ls []logLine
	for i := 1; i <= 200; i++ {
		ls = append(ls, burst(fmt.Sprintf("198.51.100.%d", i), now, 6)...)
		ls = append(ls, burst(fmt.Sprintf("203.0.113.%d", i), now, 6)...)
	}
	start := time.Now()
	appendLines(t, dd.log, ls)
	count := func() (lines, suppressed int) {
		lines = len(dd.records("ban", map[string]any{"rule": "flood"}))
		for _, r := range dd.records("suppressed", map[string]any{"of": "ban"}) {
			suppressed += int(r["count"].(float64))
		}
		return lines, suppressed
	}
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for l, s := count(); l+s < 400; l, s = count() {
		select {
		case <-deadline.C:
			t.Fatalf("%d ban lines + %d suppressed after 60 s, want 400:\n%s", l, s, dd.logs.String())
		case <-tick.C:
		}
	}
	elapsed := time.Since(start)
	dd.stop()
	lines, suppressed := count()
	if lines+suppressed != 400 || suppressed == 0 {
		t.Errorf("%d ban lines + %d suppressed, want 400 with some suppressed", lines, suppressed)
	}
	if max := 50 * (int(elapsed/time.Second) + 2); lines > max {
		t.Errorf("%d ban lines in %v: more than 50 a second", lines, elapsed)
	}
	for _, r := range dd.records("suppressed", nil) {
		level := "WARN"
		if r["of"] == "throttle" { // throttles are logged at DEBUG, and so is their count
			level = "DEBUG"
		}
		if r["level"] != level || r["operator"] != false || r["per_second"] != 50.0 || r["count"].(float64) < 1 {
			t.Errorf("suppressed line: %v", r)
		}
	}
	t.Logf("%d ban lines, %d suppressed in %v", lines, suppressed, elapsed)
}
