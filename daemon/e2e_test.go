package daemon_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/logjail/logjail/internal/testenv"
	"github.com/logjail/logjail/store"
)

// binary is the logjail built for the end-to-end tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "logjail-e2e")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "logjail")
	build := exec.Command("go", "build", "-race", "-o", binary, "../cmd/logjail")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building logjail: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// env is one daemon's world: a config, a log, a state directory.
type env struct {
	t     *testing.T
	dir   string
	log   string
	cfg   string
	state string
	cmd   *exec.Cmd
	out   *syncBuffer
	line  int
	t0    time.Time // log time of the first line
	extra []string  // environment of the daemon beyond the test's
}

const e2eConfig = `state_dir: %[1]s
control_socket: %[1]s/control.sock
checkpoint: 1s
metrics: ""
sources:
  - name: web
    paths: [%[2]s]
    format: combined
    timezone: UTC
    from: start
rules:
  - name: flood
    limits: ["5 per 10s"]
    ban: {for: 1h}
  # Never reached unless a line is counted twice: the tests send 6.
  - name: twice
    limits: ["6 per 10s"]
    ban: {for: 1h}
`

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{t: t, dir: dir, log: filepath.Join(dir, "access.log"), cfg: filepath.Join(dir, "logjail.yaml"), state: filepath.Join(dir, "state"),
		t0: time.Now().UTC().Add(-time.Minute).Truncate(time.Second)}
	e.writeConfig(fmt.Sprintf(e2eConfig, e.state, e.log))
	if err := os.WriteFile(e.log, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) writeConfig(text string) {
	e.t.Helper()
	if err := os.WriteFile(e.cfg, []byte(text), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

// syncBuffer collects a process's output safely.
type syncBuffer = testenv.Buffer

// start runs `logjail run` and waits until it follows the log.
func (e *env) start() {
	e.t.Helper()
	e.out = &syncBuffer{}
	e.cmd = exec.Command(binary, "run", "--config", e.cfg, "--log-level", "debug", "--poll")
	e.cmd.Stdout, e.cmd.Stderr = e.out, e.out
	e.cmd.Env = append(os.Environ(), e.extra...)
	if err := e.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		if e.cmd.ProcessState == nil {
			e.cmd.Process.Kill()
			e.cmd.Wait()
		}
	})
	e.waitFor("the daemon to follow", func() bool { return strings.Contains(e.out.String(), `"following"`) })
}

// stop sends sig and waits for the exit; it returns the exit code and how long it took.
func (e *env) stop(sig syscall.Signal) (int, time.Duration) {
	e.t.Helper()
	start := time.Now()
	e.cmd.Process.Signal(sig)
	e.cmd.Wait()
	return e.cmd.ProcessState.ExitCode(), time.Since(start)
}

func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond) // a poll of cond, not a pause
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s; daemon output:\n%s", what, e.out.String())
		}
		<-tick.C
	}
}

// append writes requests of ip, one a line, at t0 + the line's index / 10 s.
func (e *env) append(path string, ips ...string) {
	e.t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		e.t.Fatal(err)
	}
	defer f.Close()
	var b strings.Builder
	for _, ip := range ips {
		at := e.t0.Add(time.Duration(e.line) * 100 * time.Millisecond)
		fmt.Fprintf(&b, "%s - - [%s] \"GET /%d HTTP/1.1\" 200 1 \"-\" \"t\"\n", ip, at.Format("02/Jan/2006:15:04:05 -0700"), e.line)
		e.line++
	}
	if _, err := f.WriteString(b.String()); err != nil {
		e.t.Fatal(err)
	}
}

// db opens the state read-only, as an operator would.
func (e *env) db() *store.DB {
	e.t.Helper()
	db, err := store.Open(filepath.Join(e.state, "logjail.db"), store.Options{ReadOnly: true})
	if err != nil {
		e.t.Fatal(err)
	}
	return db
}

func (e *env) bans() []string {
	e.t.Helper()
	if _, err := os.Stat(filepath.Join(e.state, "logjail.db")); err != nil {
		return nil
	}
	db := e.db()
	defer db.Close()
	bs, err := db.ActiveBans()
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, b := range bs {
		out = append(out, b.Kind+" "+b.Rule+" "+b.Key)
	}
	return out
}

func (e *env) positions() []store.Position {
	db := e.db()
	defer db.Close()
	ps, err := db.Positions()
	if err != nil {
		e.t.Fatal(err)
	}
	return ps
}

func repeat(ip string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = ip
	}
	return out
}

// TestAppendedLinesAreDecided: a flood appended to a followed log is banned,
// a client under the limit is not; SIGTERM saves the state and exits 0
// within 5 s.
func TestAppendedLinesAreDecided(t *testing.T) {
	e := newEnv(t)
	e.start()
	e.append(e.log, "203.0.113.1", "203.0.113.1", "203.0.113.2")
	e.append(e.log, repeat("203.0.113.9", 6)...)
	e.waitFor("the ban of 203.0.113.9", func() bool { return slices.Contains(e.bans(), "ban flood 203.0.113.9") })
	if code, took := e.stop(syscall.SIGTERM); code != 0 || took > 5*time.Second {
		t.Errorf("SIGTERM: exit %d after %v, want 0 within 5 s; output:\n%s", code, took, e.out.String())
	}
	if got := e.bans(); len(got) != 1 {
		t.Errorf("active bans %q, want only 203.0.113.9", got)
	}
	if ps := e.positions(); len(ps) != 1 || ps[0].Line != 9 {
		t.Errorf("positions %+v, want the log read to its 9th line", ps)
	}
}

// TestSIGHUPKeepsTheRunningConfigWhenTheNewOneIsBroken.
func TestSIGHUPKeepsTheRunningConfigWhenTheNewOneIsBroken(t *testing.T) {
	e := newEnv(t)
	e.start()
	e.writeConfig("rules: [{name: flood, limits: [\"5 per fortnight\"]}]\n")
	e.cmd.Process.Signal(syscall.SIGHUP)
	e.waitFor("the reload to be refused", func() bool { return strings.Contains(e.out.String(), "reload refused") })
	e.append(e.log, repeat("203.0.113.9", 6)...)
	e.waitFor("the ban by the running config", func() bool { return slices.Contains(e.bans(), "ban flood 203.0.113.9") })
	if code, _ := e.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("exit %d; output:\n%s", code, e.out.String())
	}
}

// TestRotationLosesNothing writes a burst, rotates the log in its middle as
// logrotate does (by rename, or by copytruncate), goes on in the new file,
// and kills the daemon with SIGKILL and restarts it on the way: each of 10
// clients sends exactly 6 requests within 10 s, so that rule flood ("5 per
// 10s") bans every client only if no line was lost, and rule twice ("6 per
// 10s") bans one only if a line was counted twice.
func TestRotationLosesNothing(t *testing.T) {
	for _, mode := range []string{"rename", "copytruncate"} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t)
			e.start()
			var first, second []string
			for i := range 10 {
				ip := netip.AddrFrom4([4]byte{203, 0, 113, byte(10 + i)}).String()
				first = append(first, ip, ip, ip)
				second = append(second, ip, ip, ip)
			}
			e.append(e.log, first[:20]...)
			switch mode {
			case "rename":
				os.Rename(e.log, e.log+".1")
				e.append(e.log+".1", first[20:]...) // the server writes to the old file a moment more
			case "copytruncate":
				e.append(e.log, first[20:]...)
				e.waitFor("the first lines to be read", func() bool {
					ps := e.positionsIfAny()
					return len(ps) == 1 && ps[0].Line == 30
				})
				data, _ := os.ReadFile(e.log)
				os.WriteFile(e.log+".1", data, 0o644)
				os.Truncate(e.log, 0)
			}
			e.append(e.log, second[:15]...)
			// The kill falls after a checkpoint that holds the rotation and
			// while 3 lines more may be read but not yet saved: either way
			// the restart must count each line once.
			e.waitCheckpointed(e.log, 15)
			e.append(e.log, second[15:18]...)
			e.stop(syscall.SIGKILL)
			e.start()
			e.append(e.log, second[18:]...)
			e.waitFor("10 bans", func() bool { return len(e.bans()) >= 10 })
			// Every line read, decided and saved: a line counted late (rule
			// twice) would be in this checkpoint.
			e.waitCheckpointed(e.log, 30)
			if code, _ := e.stop(syscall.SIGTERM); code != 0 {
				t.Errorf("exit %d; output:\n%s", code, e.out.String())
			}
			got := e.bans()
			if len(got) != 10 || slices.ContainsFunc(got, func(b string) bool { return strings.Contains(b, "twice") }) {
				t.Errorf("active bans %q: want the 10 clients banned by flood only", got)
			}
			db := e.db()
			defer db.Close()
			hist, err := db.History(store.HistoryQuery{Rule: "twice"})
			if err != nil {
				t.Fatal(err)
			}
			if len(hist) != 0 {
				t.Errorf("rule twice decided %d times: a line was counted twice", len(hist))
			}
			// A replay of the same lines (the rotated file, then the
			// current one) decides the same bans.
			all, err := db.History(store.HistoryQuery{})
			if err != nil {
				t.Fatal(err)
			}
			var daemonBans []string
			for _, h := range all {
				daemonBans = append(daemonBans, h.Kind+" "+h.Rule+" "+h.Key)
			}
			out, err := exec.Command(binary, "replay", "--config", e.cfg, "--output", "json", e.log+".1", e.log).Output()
			if err != nil {
				t.Fatalf("replay: %v", err)
			}
			var doc struct {
				Decisions []struct{ Kind, Rule, Key string }
			}
			if err := json.Unmarshal(out, &doc); err != nil {
				t.Fatal(err)
			}
			var replayBans []string
			for _, d := range doc.Decisions {
				replayBans = append(replayBans, d.Kind+" "+d.Rule+" "+d.Key)
			}
			slices.Sort(daemonBans)
			slices.Sort(replayBans)
			if !slices.Equal(daemonBans, replayBans) {
				t.Errorf("the daemon decided %q, a replay of the same lines %q", daemonBans, replayBans)
			}
		})
	}
}

// waitCheckpointed waits until a checkpoint holds path read to its line-th
// line.
func (e *env) waitCheckpointed(path string, line int64) {
	e.t.Helper()
	e.waitFor(fmt.Sprintf("a checkpoint of %s at line %d", filepath.Base(path), line), func() bool {
		return slices.ContainsFunc(e.positionsIfAny(), func(p store.Position) bool { return p.Path == path && p.Line == line })
	})
}

func (e *env) positionsIfAny() []store.Position {
	if _, err := os.Stat(filepath.Join(e.state, "logjail.db")); err != nil {
		return nil
	}
	return e.positions()
}

// TestSystemdNotify runs the daemon with a NOTIFY_SOCKET the test owns, as
// systemd would for Type=notify: READY=1 once it follows the logs,
// RELOADING=1 then READY=1 around a SIGHUP, STOPPING=1 at SIGTERM, and
// watchdog pings at half of WATCHDOG_USEC.
func TestSystemdNotify(t *testing.T) {
	e := newEnv(t)
	sock := filepath.Join(e.dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	msgs := make(chan string, 100)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			msgs <- string(buf[:n])
		}
	}()
	next := func(want string) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case m := <-msgs:
				if strings.Contains(m, want) {
					return
				}
			case <-deadline:
				t.Fatalf("no %s from the daemon; output:\n%s", want, e.out.String())
			}
		}
	}
	e.extra = []string{"NOTIFY_SOCKET=" + sock, "WATCHDOG_USEC=400000"}
	e.start()
	next("READY=1")
	next("WATCHDOG=1")
	e.cmd.Process.Signal(syscall.SIGHUP)
	next("RELOADING=1")
	next("READY=1")
	if code, _ := e.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("exit %d", code)
	}
	next("STOPPING=1")
}

// TestSIGHUPReloadKeepsState: a valid new configuration takes effect at a
// SIGHUP (a new limit), and the bans and windows decided before it stay.
func TestSIGHUPReloadKeepsState(t *testing.T) {
	e := newEnv(t)
	e.start()
	e.append(e.log, repeat("203.0.113.9", 6)...)
	e.waitFor("the first ban", func() bool { return slices.Contains(e.bans(), "ban flood 203.0.113.9") })
	cfg, err := os.ReadFile(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.writeConfig(strings.Replace(string(cfg), `["5 per 10s"]`, `["7 per 10s"]`, 1))
	e.cmd.Process.Signal(syscall.SIGHUP)
	e.waitFor("the reload", func() bool { return strings.Contains(e.out.String(), "configuration reloaded") })
	// 7 requests are no longer over flood; 8 are.
	e.append(e.log, repeat("203.0.113.20", 7)...)
	e.append(e.log, repeat("203.0.113.21", 8)...)
	e.waitFor("the ban under the new limit", func() bool { return slices.Contains(e.bans(), "ban flood 203.0.113.21") })
	if code, _ := e.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("exit %d; output:\n%s", code, e.out.String())
	}
	got := e.bans()
	for _, want := range []string{"ban flood 203.0.113.9", "ban flood 203.0.113.21"} {
		if !slices.Contains(got, want) {
			t.Errorf("active bans %q lack %q", got, want)
		}
	}
	if slices.Contains(got, "ban flood 203.0.113.20") {
		t.Errorf("active bans %q: 203.0.113.20 made 7 requests, under the new limit", got)
	}
}

// TestFormatAuto: with `format: auto`, lines no format reads are rejected
// and counted, not fatal; the format is chosen from the next lines.
func TestFormatAuto(t *testing.T) {
	e := newEnv(t)
	cfg, _ := os.ReadFile(e.cfg)
	e.writeConfig(strings.Replace(string(cfg), "format: combined", "format: auto", 1))
	e.start()
	f, _ := os.OpenFile(e.log, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("garbage\nmore garbage\n")
	f.Close()
	e.waitFor("the rejected lines", func() bool {
		return strings.Contains(e.out.String(), `"format auto`) || strings.Contains(e.out.String(), "format auto")
	})
	e.append(e.log, repeat("203.0.113.9", 6)...)
	e.waitFor("the ban", func() bool { return slices.Contains(e.bans(), "ban flood 203.0.113.9") })
	if code, _ := e.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("exit %d; output:\n%s", code, e.out.String())
	}
}

// TestRestartKeepsTheCheckpointsLogTime: a daemon restarted and stopped
// before a new line keeps the log time its checkpoint had (the clock a
// restored detector, `top` and an offline ban act at), rather than saving
// none.
func TestRestartKeepsTheCheckpointsLogTime(t *testing.T) {
	e := newEnv(t)
	e.start()
	e.append(e.log, repeat("198.51.100.7", 3)...)
	e.waitCheckpointed(e.log, 3)
	if code, _ := e.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("first run exited %d:\n%s", code, e.out.String())
	}
	logTime := func() time.Time {
		db := e.db()
		defer db.Close()
		_, at, err := db.Global()
		if err != nil {
			t.Fatal(err)
		}
		return at
	}
	want := e.t0 // the third line's time, to the second the log writes
	if got := logTime(); !got.Equal(want) {
		t.Fatalf("after the first run the checkpoint's log time is %v, want %v", got, want)
	}
	e.start()
	if code, _ := e.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("second run exited %d:\n%s", code, e.out.String())
	}
	if got := logTime(); !got.Equal(want) {
		t.Errorf("after a restart without lines the checkpoint's log time is %v, want %v (kept)", got, want)
	}
}
