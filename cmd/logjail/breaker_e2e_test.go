package main

// End-to-end tests of the circuit breaker: the built binary's daemon trips
// it on real log lines; `logjail breaker` shows and resets it live
// through the control socket and offline on the database.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/logjail/logjail/control"
)

// newBreakerEnv is an opEnv whose breaker trips at the third ban within a
// minute, with its metrics served on a free loopback port.
func newBreakerEnv(t *testing.T, maxBans int) *opEnv {
	t.Helper()
	e := newOpEnv(t)
	cfg := strings.Replace(fmt.Sprintf(opConfig, e.dir), `metrics: ""`, fmt.Sprintf("metrics: 127.0.0.1:0\nmax_bans_per_minute: %d", maxBans), 1)
	if err := os.WriteFile(e.cfg, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return e
}

// logRecords returns the daemon's JSON log records whose message starts
// with msg.
func (e *opEnv) logRecords(msg string) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(e.out.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r map[string]any
		if json.Unmarshal(sc.Bytes(), &r) == nil {
			if m, _ := r["msg"].(string); strings.HasPrefix(m, msg) {
				out = append(out, r)
			}
		}
	}
	return out
}

// breakerRecords are the decision log's breaker lines of kind
// (breaker-trip, breaker-open, breaker-reset).
func (e *opEnv) breakerRecords(kind string) []map[string]any {
	var out []map[string]any
	for _, r := range e.logRecords("breaker") {
		if r["msg"] == "breaker" && r["kind"] == kind {
			out = append(out, r)
		}
	}
	return out
}

// metric reads one sample of the daemon's /metrics.
func (e *opEnv) metric(name string) string {
	e.t.Helper()
	rs := e.logRecords("metrics listening")
	if len(rs) == 0 {
		e.t.Fatalf("the daemon logged no metrics address:\n%s", e.out.String())
	}
	resp, err := http.Get("http://" + rs[len(rs)-1]["addr"].(string) + "/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}

func (e *opEnv) breaker() control.BreakerStatus {
	e.t.Helper()
	out := e.must(0, "breaker", "status", "-o", "json")
	var b control.BreakerStatus
	if err := json.Unmarshal([]byte(out), &b); err != nil {
		e.t.Fatalf("breaker status -o json: %v\n%s", err, out)
	}
	return b
}

func eventKinds(es []control.Event) []string {
	var ks []string
	for _, ev := range es {
		ks = append(ks, ev.Kind)
	}
	return ks
}

// TestBreakerLive: three bans within a minute trip a breaker of 2; the
// trip is logged at ERROR, counted, shown, recorded; the fourth ban is
// log-only; `logjail breaker reset` through the socket makes the rules
// act again; a reload that raises the limit leaves it open and says so.
func TestBreakerLive(t *testing.T) {
	e := newBreakerEnv(t, 2)
	e.start()
	if b := e.breaker(); b.Breaker.Open || !b.Live || b.Breaker.MaxBansPerMinute != 2 || b.Breaker.Tripped != nil || len(b.Events) != 0 {
		t.Errorf("before any ban: %+v", b)
	}

	for _, ip := range []string{"198.51.100.1", "198.51.100.2", "198.51.100.3"} {
		e.appendLines(ip, 6)
	}
	e.waitFor("the trip's log line", func() bool { return len(e.breakerRecords("breaker-trip")) > 0 })
	rec := e.breakerRecords("breaker-trip")[0]
	if rec["level"] != "ERROR" || rec["bans"] != 3.0 || rec["window"] != "1m0s" || rec["max_bans_per_minute"] != 2.0 ||
		fmt.Sprint(rec["log_only_rules"]) != "[flood slow good_bots]" || rec["rule"] != "flood" || rec["key"] != "198.51.100.3" || rec["trips"] != 1.0 {
		t.Errorf("the trip's log record: %v", rec)
	}
	if note, _ := rec["note"].(string); !strings.Contains(note, "logjail breaker reset") || rec["source"] != "web" {
		t.Errorf("the trip's line does not say what to do, or its source: %v", rec)
	}

	// Shown: breaker status, status, the metrics.
	b := e.breaker()
	br := b.Breaker
	if !br.Open || br.Trips != 1 || br.Tripped == nil || br.Bans != 3 || br.WindowSeconds != 60 || br.Limit != 2 ||
		br.TripRule != "flood" || br.TripKey != "198.51.100.3" || !slices.Equal(br.LogOnlyRules, []string{"flood", "slow", "good_bots"}) || br.Reset != nil {
		t.Errorf("breaker status after the trip: %+v", br)
	}
	if got := eventKinds(b.Events); !slices.Equal(got, []string{"breaker-trip"}) || !strings.Contains(b.Events[0].Reason, "3 bans within 1m > max_bans_per_minute 2") {
		t.Errorf("breaker events: %+v", b.Events)
	}
	out := e.must(0, "breaker", "status")
	for _, want := range []string{"breaker:   OPEN since ", "rules flood, slow, good_bots are log-only until `logjail breaker reset` (tripped 1 time)",
		"3 bans within 1m0s > max_bans_per_minute 2; the last: 198.51.100.3, rule flood", "reset:     never", "breaker-trip: 3 bans"} {
		if !strings.Contains(out, want) {
			t.Errorf("breaker status lacks %q:\n%s", want, out)
		}
	}
	var st control.Status
	if err := json.Unmarshal([]byte(e.must(0, "status", "-o", "json")), &st); err != nil || !st.Breaker.Open || st.Breaker.Bans != 3 {
		t.Errorf("status -o json breaker: %+v, %v", st.Breaker, err)
	}
	if out := e.must(0, "status"); !strings.Contains(out, "breaker:   OPEN since") {
		t.Errorf("status:\n%s", out)
	}
	if got := e.metric("logjail_circuit_breaker_trips_total"); got != "1" {
		t.Errorf("logjail_circuit_breaker_trips_total = %q, want 1", got)
	}
	e.waitFor("the open gauge", func() bool { return e.metric("logjail_circuit_breaker_open") == "1" })

	// Open: the third ban and a fourth are recorded, acted on by nothing.
	e.appendLines("198.51.100.4", 6)
	e.waitFor("the fourth ban", func() bool { return slices.Contains(banKeys(e.list()), "flood 198.51.100.4") })
	for _, bn := range e.list().Bans {
		if want := bn.Key == "198.51.100.3" || bn.Key == "198.51.100.4"; bn.LogOnly != want {
			t.Errorf("%s: log_only %v, want %v", bn.Key, bn.LogOnly, want)
		}
	}
	if !e.blockFile("198.51.100.1") || e.blockFile("198.51.100.3") || e.blockFile("198.51.100.4") {
		t.Errorf("block files: .1 %v .3 %v .4 %v, want only .1", e.blockFile("198.51.100.1"), e.blockFile("198.51.100.3"), e.blockFile("198.51.100.4"))
	}

	// A reload that raises the limit does not close it, and says so.
	cfg, _ := os.ReadFile(e.cfg)
	os.WriteFile(e.cfg, []byte(strings.Replace(string(cfg), "max_bans_per_minute: 2", "max_bans_per_minute: 50", 1)), 0o644)
	e.daemon.Process.Signal(syscall.SIGHUP)
	e.waitFor("the reload's warning", func() bool { return len(e.logRecords("reload: the circuit breaker stays open")) > 0 })
	if rec := e.logRecords("reload: the circuit breaker stays open")[0]; rec["level"] != "WARN" || rec["max_bans_per_minute"] != 50.0 || rec["was"] != 2.0 ||
		!strings.Contains(rec["msg"].(string), "logjail breaker reset") {
		t.Errorf("the reload's record: %v", rec)
	}
	if b := e.breaker(); !b.Breaker.Open || b.Breaker.MaxBansPerMinute != 50 {
		t.Errorf("after the reload: %+v", b.Breaker)
	}

	// The reset, through the socket: who made it is in the history.
	out = e.must(0, "breaker", "reset")
	if !strings.Contains(out, "circuit breaker reset: rules flood, slow, good_bots act again") {
		t.Errorf("breaker reset said:\n%s", out)
	}
	b = e.breaker()
	if b.Breaker.Open || b.Breaker.Trips != 1 || b.Breaker.Reset == nil || b.Breaker.Reset.Who != "uid 0 (root)" || len(b.Breaker.LogOnlyRules) != 0 {
		t.Errorf("after the reset: %+v", b.Breaker)
	}
	if got := eventKinds(b.Events); !slices.Equal(got, []string{"breaker-trip", "breaker-reset"}) || b.Events[1].Who != "uid 0 (root)" {
		t.Errorf("events after the reset: %+v", b.Events)
	}
	if got := e.metric("logjail_circuit_breaker_open"); got != "0" {
		t.Errorf("logjail_circuit_breaker_open after the reset = %q", got)
	}
	var again control.BreakerResetResult
	if err := json.Unmarshal([]byte(e.must(0, "breaker", "reset", "-o", "json")), &again); err != nil || again.WasOpen || !again.Live {
		t.Errorf("a second reset: %+v, %v", again, err)
	}
	// The rules act again.
	e.appendLines("198.51.100.5", 6)
	e.waitFor("the ban after the reset to be acted on", func() bool { return e.blockFile("198.51.100.5") })
	e.stop()
	if rs := e.breakerRecords("breaker-reset"); len(rs) != 1 || rs[0]["who"] != "uid 0 (root)" || rs[0]["source"] != "operator" {
		t.Errorf("the daemon did not log the reset: %v", e.breakerRecords("breaker-reset"))
	}
}

// TestBreakerOffline: a breaker tripped by the daemon stays open across a
// restart (which says so at ERROR); `logjail breaker reset` with no daemon
// writes the reset to the database, and the next daemon starts closed and
// acts. With the daemon holding the database but not answering, exit 3.
func TestBreakerOffline(t *testing.T) {
	e := newBreakerEnv(t, 2)
	e.start()
	for _, ip := range []string{"198.51.100.1", "198.51.100.2", "198.51.100.3"} {
		e.appendLines(ip, 6)
	}
	e.waitFor("the trip", func() bool { return len(e.breakerRecords("breaker-trip")) > 0 })
	e.stop()

	// Offline status: open, from the checkpoint.
	b := e.breaker()
	if b.Live || !b.Breaker.Open || b.Breaker.Bans != 3 || b.Breaker.TripKey != "198.51.100.3" || !slices.Equal(eventKinds(b.Events), []string{"breaker-trip"}) {
		t.Errorf("offline breaker status: %+v", b)
	}
	if out := e.must(0, "status"); !strings.Contains(out, "not running") || !strings.Contains(out, "breaker:   OPEN since") {
		t.Errorf("offline status:\n%s", out)
	}

	// A restart keeps it open and says so.
	e.start()
	rs := e.breakerRecords("breaker-open")
	if len(rs) != 1 || rs[0]["level"] != "ERROR" || rs[0]["bans"] != 3.0 || fmt.Sprint(rs[0]["log_only_rules"]) != "[flood slow good_bots]" {
		t.Errorf("the restart's breaker records: %v", rs)
	}
	if b := e.breaker(); !b.Live || !b.Breaker.Open {
		t.Errorf("after the restart: %+v", b.Breaker)
	}
	if got := e.metric("logjail_circuit_breaker_open"); got != "1" {
		t.Errorf("logjail_circuit_breaker_open after the restart = %q", got)
	}

	// Another daemon's socket: the database is held, no daemon answers.
	other := filepath.Join(e.dir, "other.yaml")
	cfg, _ := os.ReadFile(e.cfg)
	os.WriteFile(other, []byte(strings.Replace(string(cfg), "run/control.sock", "elsewhere.sock", 1)), 0o644)
	c := exec.Command(e.bin, "breaker", "reset", "--config", other)
	msg, _ := c.CombinedOutput()
	if c.ProcessState.ExitCode() != exitUnreachable || !strings.Contains(string(msg), "does not answer") {
		t.Errorf("reset with the daemon unreachable: exit %d: %s", c.ProcessState.ExitCode(), msg)
	}
	e.stop()

	// The offline reset.
	out := e.must(0, "breaker", "reset")
	if !strings.Contains(out, "written to the database; the daemon starts with it closed") {
		t.Errorf("offline reset said:\n%s", out)
	}
	b = e.breaker()
	if b.Live || b.Breaker.Open || b.Breaker.Reset == nil || b.Breaker.Reset.Who != "uid 0 (root)" ||
		!slices.Equal(eventKinds(b.Events), []string{"breaker-trip", "breaker-reset"}) {
		t.Errorf("after the offline reset: %+v", b)
	}

	// The next daemon restores it closed and acts.
	e.start()
	if rs := e.breakerRecords("breaker-open"); len(rs) != 0 {
		t.Errorf("the daemon restored an open breaker after the offline reset: %v", rs)
	}
	if b := e.breaker(); !b.Live || b.Breaker.Open || b.Breaker.Trips != 1 {
		t.Errorf("after the restart: %+v", b.Breaker)
	}
	e.appendLines("198.51.100.4", 6)
	e.waitFor("the ban after the offline reset to be acted on", func() bool { return e.blockFile("198.51.100.4") })
	e.stop()
}
