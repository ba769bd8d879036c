package main

// End-to-end tests of the operator's commands: the built binary, a real
// daemon (`logjail run`), real SQLite, real actions (a block file
// directory and an nginx deny list file).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/logjail/logjail/control"

	"github.com/logjail/logjail/internal/testenv"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// logjailBinary builds logjail (with the race detector) once per test run,
// in a directory any user may read, for the permission test.
func logjailBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary: not with -short")
	}
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "logjail-bin")
		if err != nil {
			binErr = err
			return
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "logjail")
		out, err := exec.Command("go", "build", "-race", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("building logjail: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	// The commands and daemons the tests start are built with -race, whose
	// runtime sleeps 1 s at exit (GORACE atexit_sleep_ms): every `list` or
	// `ban` a test runs or polls would take a second more than it does.
	if g := os.Getenv("GORACE"); !strings.Contains(g, "atexit_sleep_ms") {
		os.Setenv("GORACE", strings.TrimSpace(g+" atexit_sleep_ms=0"))
	}
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// opEnv is one daemon's world: a directory others may read (the
// permission test runs commands as nobody), a config, a log, the actions'
// files.
type opEnv struct {
	t       *testing.T
	bin     string
	dir     string
	cfg     string
	log     string
	blocked string // the block file directory
	deny    string // the nginx deny list
	socket  string
	state   string
	daemon  *exec.Cmd
	out     *testenv.Buffer
}

const opConfig = `state_dir: %[1]s/state
control_socket: %[1]s/run/control.sock
checkpoint: 1s
metrics: ""
allow: [127.0.0.0/8]
sources:
  - name: web
    paths: [%[1]s/access.log]
    format: combined
    timezone: UTC
rules:
  - name: flood
    limits: ["5 per 10s"]
    ban: {for: 1h}
  - name: slow
    limits: ["1000 per hour"]
    ban: {for: 1h}
actions:
  - type: blockfile
    dir: %[1]s/blocked
  - type: nginx
    file: %[1]s/deny.conf
    style: deny
    settle: 0s
    min_interval: 0s
`

func newOpEnv(t *testing.T) *opEnv {
	t.Helper()
	bin := logjailBinary(t)
	dir, err := os.MkdirTemp("", "logjail-op")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	e := &opEnv{t: t, bin: bin, dir: dir, cfg: filepath.Join(dir, "logjail.yaml"), log: filepath.Join(dir, "access.log"),
		blocked: filepath.Join(dir, "blocked"), deny: filepath.Join(dir, "deny.conf"),
		socket: filepath.Join(dir, "run", "control.sock"), state: filepath.Join(dir, "state")}
	if err := os.WriteFile(e.cfg, fmt.Appendf(nil, opConfig, dir), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.log, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return e
}

// start runs the daemon and waits until it follows the log and answers.
func (e *opEnv) start() {
	e.t.Helper()
	e.out = &testenv.Buffer{}
	cmd := exec.Command(e.bin, "run", "--config", e.cfg, "--poll", "--log-level", "debug")
	cmd.Stdout, cmd.Stderr = e.out, e.out
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.daemon = cmd
	e.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	e.waitFor("the daemon to follow and answer", func() bool {
		if !strings.Contains(e.out.String(), `"following"`) {
			return false
		}
		code, out, _ := e.cmd("status")
		return code == 0 && strings.Contains(out, "running (pid")
	})
}

// stop stops the daemon with SIGTERM, by its own pid.
func (e *opEnv) stop() {
	e.t.Helper()
	e.daemon.Process.Signal(syscall.SIGTERM)
	if err := e.daemon.Wait(); err != nil {
		e.t.Fatalf("daemon: %v\n%s", err, e.out.String())
	}
}

func (e *opEnv) waitFor(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			out := ""
			if e.out != nil {
				out = e.out.String()
			}
			e.t.Fatalf("timed out waiting for %s; daemon output:\n%s", what, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cmd runs a logjail command with the env's config (as root, or as
// nobody when args start with "as-nobody").
func (e *opEnv) cmd(args ...string) (code int, stdout, stderr string) {
	e.t.Helper()
	var c *exec.Cmd
	if len(args) > 0 && args[0] == "as-nobody" {
		c = exec.Command("setpriv", append([]string{"--reuid=nobody", "--regid=nogroup", "--clear-groups", e.bin}, append(args[1:], "--config", e.cfg)...)...)
	} else {
		c = exec.Command(e.bin, append(args, "--config", e.cfg)...)
	}
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			e.t.Fatalf("%v: %v", args, err)
		}
	}
	return c.ProcessState.ExitCode(), out.String(), errb.String()
}

// must runs a command that must exit with code.
func (e *opEnv) must(code int, args ...string) string {
	e.t.Helper()
	got, out, stderr := e.cmd(args...)
	if got != code {
		e.t.Fatalf("logjail %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), got, code, out, stderr)
	}
	return out
}

// appendLines writes n requests of ip at the wall clock.
func (e *opEnv) appendLines(ip string, n int) {
	e.t.Helper()
	f, err := os.OpenFile(e.log, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	defer f.Close()
	now := time.Now().UTC().Format("02/Jan/2006:15:04:05 -0700")
	for i := range n {
		fmt.Fprintf(f, "%s - - [%s] \"GET /%d HTTP/1.1\" 200 1 \"-\" \"t\"\n", ip, now, i)
	}
}

func (e *opEnv) list(args ...string) control.BanList {
	e.t.Helper()
	out := e.must(0, append([]string{"list", "--output", "json"}, args...)...)
	var l control.BanList
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		e.t.Fatalf("list --output json: %v\n%s", err, out)
	}
	return l
}

func banKeys(l control.BanList) []string {
	var ks []string
	for _, b := range l.Bans {
		ks = append(ks, b.Rule+" "+b.Key)
	}
	slices.Sort(ks)
	return ks
}

func (e *opEnv) blockFile(name string) bool {
	_, err := os.Stat(filepath.Join(e.blocked, name))
	return err == nil
}

func (e *opEnv) denied(addr string) bool {
	b, err := os.ReadFile(e.deny)
	return err == nil && strings.Contains(string(b), "deny "+addr+";")
}

func TestOperatorCommandsLive(t *testing.T) {
	e := newOpEnv(t)
	e.start()

	// Usage errors, before anything changes.
	e.must(exitUsage, "ban", "300.1.1.1", "--for", "1h")
	e.must(exitUsage, "ban", "203.0.113.7", "--for", "soon")
	e.must(exitUsage, "unban", "--all", "203.0.113.7")

	// A ban: in both actions when the command returns.
	out := e.must(0, "ban", "203.0.113.7", "--for", "1h", "--reason", "credential stuffing")
	if !strings.Contains(out, "banned 203.0.113.7 (rule operator)") || !strings.Contains(out, "applied by the daemon") {
		t.Errorf("ban said:\n%s", out)
	}
	if !e.blockFile("203.0.113.7") || !e.denied("203.0.113.7") {
		t.Errorf("after ban returned: block file %v, deny line %v; want both", e.blockFile("203.0.113.7"), e.denied("203.0.113.7"))
	}
	// An allowed address: refused, unless forced.
	if code, _, stderr := e.cmd("ban", "127.0.0.5", "--for", "10m"); code != exitNegative || !strings.Contains(stderr, "allow list") {
		t.Errorf("ban of an allowed address: exit %d, %s", code, stderr)
	}
	if e.blockFile("127.0.0.5") {
		t.Errorf("a refused ban made a block file")
	}
	out = e.must(0, "ban", "127.0.0.5", "--for", "10m", "--force")
	if !strings.Contains(out, "forced") || !e.blockFile("127.0.0.5") {
		t.Errorf("forced ban: block file %v; said:\n%s", e.blockFile("127.0.0.5"), out)
	}
	// A detector's ban, from the log.
	e.appendLines("198.51.100.9", 6)
	e.waitFor("the flood ban", func() bool { return slices.Contains(banKeys(e.list()), "flood 198.51.100.9") })
	e.waitFor("its block file", func() bool { return e.blockFile("198.51.100.9") })

	// list: JSON.
	l := e.list()
	if diff := cmpStrings([]string{"flood 198.51.100.9", "operator 127.0.0.5", "operator 203.0.113.7"}, banKeys(l)); diff != "" {
		t.Errorf("list (-want +got):\n%s", diff)
	}
	for _, b := range l.Bans {
		switch b.Key {
		case "203.0.113.7":
			if b.Kind != "ban" || b.Who != "uid 0 (root)" || b.Reason != "credential stuffing" || b.Origin != "operator" ||
				b.Until == nil || b.LeftSeconds == nil || *b.LeftSeconds < 3500 || *b.LeftSeconds > 3600 {
				t.Errorf("the operator's ban: %+v", b)
			}
		case "198.51.100.9":
			if b.Kind != "ban" || b.Origin != "detector" || !strings.Contains(b.Reason, "rate 6 per 10s > 5") || b.Who != "" {
				t.Errorf("the detector's ban: %+v", b)
			}
		}
	}
	// list: text, one ban a line (not a terminal: tabs, no header),
	// sorted by until.
	out = e.must(0, "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "127.0.0.5\toperator\tban\t") {
		t.Errorf("list:\n%s", out)
	}
	for _, ln := range lines {
		if f := strings.Split(ln, "\t"); len(f) != 9 {
			t.Errorf("list line with %d fields: %q", len(f), ln)
		}
	}
	if !strings.Contains(out, "credential stuffing (by uid 0 (root))") {
		t.Errorf("list does not say who:\n%s", out)
	}
	// list --key: an address finds the CIDR's keys, a CIDR the addresses in it.
	if got := banKeys(e.list("--key", "203.0.113.0/24")); !slices.Equal(got, []string{"operator 203.0.113.7"}) {
		t.Errorf("list --key 203.0.113.0/24 = %v", got)
	}
	e.must(exitNegative, "list", "--key", "192.0.2.1")

	// unban: gone from both actions when the command returns.
	out = e.must(0, "unban", "203.0.113.7", "--reason", "a customer")
	if !strings.Contains(out, "unbanned 203.0.113.7 (rule operator, ban)") || !strings.Contains(out, "lifted in every action") {
		t.Errorf("unban said:\n%s", out)
	}
	if e.blockFile("203.0.113.7") || e.denied("203.0.113.7") {
		t.Errorf("after unban returned: block file %v, deny line %v; want neither", e.blockFile("203.0.113.7"), e.denied("203.0.113.7"))
	}
	if slices.Contains(banKeys(e.list()), "operator 203.0.113.7") {
		t.Errorf("list after unban still shows it")
	}
	out = e.must(0, "unban", "198.51.100.9")
	if !strings.Contains(out, "unbanned 198.51.100.9 (rule flood, ban)") {
		t.Errorf("unban of the flood ban said:\n%s", out)
	}
	if e.blockFile("198.51.100.9") || e.denied("198.51.100.9") {
		t.Errorf("after unban returned, 198.51.100.9 is still blocked")
	}
	e.must(exitNegative, "unban", "203.0.113.7")

	// history: oldest first, with who and why.
	out = e.must(0, "history", "203.0.113.7", "--output", "json")
	var h control.History
	if err := json.Unmarshal([]byte(out), &h); err != nil {
		t.Fatal(err)
	}
	var evs []string
	for _, ev := range h.Events {
		evs = append(evs, ev.Kind+" "+ev.Rule+" "+ev.Who+" "+ev.Reason)
	}
	want := []string{"ban operator uid 0 (root) credential stuffing", "unban operator uid 0 (root) a customer"}
	if diff := cmpStrings(want, evs); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	out = e.must(0, "history", "198.51.100.9")
	if ls := strings.Split(strings.TrimSpace(out), "\n"); len(ls) != 2 || !strings.Contains(ls[0], "\tban\tflood\t") || !strings.Contains(ls[1], "\tunban\tflood\t") {
		t.Errorf("history of the flood ban:\n%s", out)
	}

	// top: the live windows (1000 per hour: the flood's 6 requests).
	e.appendLines("192.0.2.44", 3)
	e.waitFor("192.0.2.44 in top", func() bool {
		var top control.Top
		json.Unmarshal([]byte(e.must(0, "top", "--rule", "slow", "--output", "json")), &top)
		for _, k := range top.Keys {
			if k.Key == "192.0.2.44" {
				return top.Live && k.Limits[0].Value != nil && *k.Limits[0].Value == 3 && k.Ratio == 0.003
			}
		}
		return false
	})
	if out := e.must(0, "top"); !strings.Contains(out, "198.51.100.9") {
		t.Errorf("top:\n%s", out)
	}

	// status.
	out = e.must(0, "status", "--output", "json")
	var st control.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	if !st.Live || st.Logjail == "" || st.PID != e.daemon.Process.Pid || st.Started == nil || st.UptimeSeconds <= 0 || st.Config != e.cfg {
		t.Errorf("status: %+v", st)
	}
	if len(st.Sources) != 1 || len(st.Sources[0].Files) != 1 || st.Sources[0].Files[0].Path != e.log || st.Sources[0].LastLine == nil || st.Sources[0].LagSeconds == nil {
		t.Errorf("status sources: %+v", st.Sources)
	}
	if len(st.Actions) != 2 || st.Actions[0].Type != "blockfile" || st.Actions[1].Type != "nginx" || st.Actions[0].LastError != "" {
		t.Errorf("status actions: %+v", st.Actions)
	}
	if st.Database.Bytes <= 0 || st.Breaker.Open {
		t.Errorf("status database, breaker: %+v %+v", st.Database, st.Breaker)
	}
	rulesByName := map[string]control.RuleStatus{}
	for _, r := range st.Rules {
		rulesByName[r.Name] = r
	}
	if rulesByName["operator"].Bans != 1 || rulesByName["flood"].Bans != 0 {
		t.Errorf("status rules: %+v", st.Rules)
	}
	out = e.must(0, "status")
	for _, w := range []string{"running (pid", "config:    " + e.cfg, "blockfile (blockfile)", "nginx (nginx)", "breaker:   closed", e.log + ": line 9"} {
		if !strings.Contains(out, w) {
			t.Errorf("status does not say %q:\n%s", w, out)
		}
	}
	// Eventually the socket is removed when the daemon stops.
	e.stop()
	if _, err := os.Stat(e.socket); err == nil {
		t.Errorf("the socket is left after the daemon stopped")
	}
}

// TestOperatorCommandsOffline: with the daemon stopped, ban and unban
// write to the database and say so; the daemon applies them when it
// starts; list, history, top and status read the database.
func TestOperatorCommandsOffline(t *testing.T) {
	e := newOpEnv(t)
	out := e.must(0, "ban", "203.0.113.8", "--for", "1h", "--reason", "offline")
	if !strings.Contains(out, "applied when the daemon starts") {
		t.Errorf("offline ban said:\n%s", out)
	}
	if e.blockFile("203.0.113.8") {
		t.Errorf("an offline ban made a block file")
	}
	if got := banKeys(e.list()); !slices.Equal(got, []string{"operator 203.0.113.8"}) {
		t.Errorf("list = %v", got)
	}
	out = e.must(0, "status")
	if !strings.Contains(out, "not running") || !strings.Contains(out, "operator: 0 throttled, 1 banned") {
		t.Errorf("offline status:\n%s", out)
	}
	e.must(0, "top")
	if out := e.must(0, "history", "203.0.113.8"); !strings.Contains(out, "uid 0 (root)\toffline") {
		t.Errorf("history:\n%s", out)
	}

	// The daemon starts: the ban reaches the actions (they sync at start,
	// beside the following).
	e.start()
	e.waitFor("the offline ban's block file", func() bool { return e.blockFile("203.0.113.8") && e.denied("203.0.113.8") })
	e.stop()

	// An offline unban: the daemon lifts it when it starts.
	out = e.must(0, "unban", "203.0.113.8", "--reason", "done")
	if !strings.Contains(out, "unbanned 203.0.113.8") || !strings.Contains(out, "applied when the daemon starts") {
		t.Errorf("offline unban said:\n%s", out)
	}
	if got := banKeys(e.list()); len(got) != 0 {
		t.Errorf("list after the offline unban = %v", got)
	}
	e.start()
	e.waitFor("the block file gone", func() bool { return !e.blockFile("203.0.113.8") && !e.denied("203.0.113.8") })

	// A daemon holding the database without answering on the socket the
	// command knows: exit 3, nothing written.
	other := filepath.Join(e.dir, "other.yaml")
	cfg, _ := os.ReadFile(e.cfg)
	os.WriteFile(other, bytes.Replace(cfg, []byte("run/control.sock"), []byte("elsewhere.sock"), 1), 0o644)
	c := exec.Command(e.bin, "ban", "203.0.113.9", "--for", "1h", "--config", other)
	msg, _ := c.CombinedOutput()
	if c.ProcessState.ExitCode() != exitUnreachable || !strings.Contains(string(msg), "does not answer") {
		t.Errorf("ban with the daemon unreachable: exit %d: %s", c.ProcessState.ExitCode(), msg)
	}
	e.stop()
}

// TestOperatorPermissions: a user outside root and the logjail group
// changes nothing, through the socket (refused at connect, or 403 when the
// socket is opened to all) or through the database (its directory is
// root's, 0750).
func TestOperatorPermissions(t *testing.T) {
	testenv.Root(t, "runs commands as nobody through setpriv")
	testenv.Need(t, "setpriv")
	e := newOpEnv(t)
	e.start()
	fi, err := os.Stat(e.socket)
	if err != nil {
		t.Fatal(err)
	}
	if mode := fi.Mode().Perm(); mode != 0o660 {
		t.Errorf("socket mode %o, want 660", mode)
	}
	code, _, stderr := e.cmd("as-nobody", "ban", "203.0.113.9", "--for", "1h")
	if code != exitUnreachable || !strings.Contains(stderr, "permission denied") {
		t.Errorf("ban as nobody through the socket: exit %d: %s", code, stderr)
	}
	// Even with the socket open to all, the daemon refuses (403) by uid.
	if err := os.Chmod(e.socket, 0o666); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = e.cmd("as-nobody", "ban", "203.0.113.9", "--for", "1h")
	if code != exitUnreachable || !strings.Contains(stderr, "may not change anything") {
		t.Errorf("ban as nobody with the socket open: exit %d: %s", code, stderr)
	}
	code, _, stderr = e.cmd("as-nobody", "unban", "--all")
	if code != exitUnreachable || !strings.Contains(stderr, "may not change anything") {
		t.Errorf("unban as nobody with the socket open: exit %d: %s", code, stderr)
	}
	if got := banKeys(e.list()); len(got) != 0 || e.blockFile("203.0.113.9") {
		t.Errorf("nobody's ban went through: %v", got)
	}
	if !strings.Contains(e.out.String(), "may not change anything") {
		t.Errorf("the daemon did not log the refusal")
	}
	e.stop()

	// No daemon: the database is root's.
	code, _, stderr = e.cmd("as-nobody", "ban", "203.0.113.9", "--for", "1h")
	if code == 0 || !strings.Contains(stderr, "permission denied") {
		t.Errorf("offline ban as nobody: exit %d: %s", code, stderr)
	}
	code, _, stderr = e.cmd("as-nobody", "list")
	if code == 0 {
		t.Errorf("list as nobody: exit 0: %s", stderr)
	}
	if got := banKeys(e.list()); len(got) != 0 {
		t.Errorf("nobody's offline ban went through: %v", got)
	}
	out := e.must(exitNegative, "history", "203.0.113.9")
	if strings.TrimSpace(out) != "" {
		t.Errorf("history of nobody's ban: %s", out)
	}
}

func cmpStrings(want, got []string) string {
	if slices.Equal(want, got) {
		return ""
	}
	return fmt.Sprintf("- %q\n+ %q", want, got)
}
