package daemon_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/logjail/logjail/internal/journaltest"
	"github.com/logjail/logjail/internal/testenv"
	"github.com/logjail/logjail/store"
)

const journaldConfig = `state_dir: %[1]s
control_socket: %[1]s/control.sock
checkpoint: 1s
metrics: ""
sources:
  - name: web
    type: journald
    journal_directory: %[2]s
    match: [_SYSTEMD_UNIT=nginx.service]
    format: combined
    timezone: UTC
    from: start
rules:
  - name: flood
    limits: ["5 per 10s"]
    ban: {for: 1h}
  # Never reached unless a line is counted twice: the test logs 6.
  - name: twice
    limits: ["6 per 10s"]
    ban: {for: 1h}
`

// journalLines logs requests of ip to the journal file as nginx.service
// would, at e's log times (env.append's), with another unit's line in
// between that the match leaves out.
func (e *env) journalLines(file string, ips ...string) {
	e.t.Helper()
	var es []journaltest.Entry
	for _, ip := range ips {
		at := e.t0.Add(time.Duration(e.line) * 100 * time.Millisecond)
		line := fmt.Sprintf("%s - - [%s] \"GET /%d HTTP/1.1\" 200 1 \"-\" \"t\"", ip, at.Format("02/Jan/2006:15:04:05 -0700"), e.line)
		e.line++
		es = append(es, journaltest.Message(line, "_SYSTEMD_UNIT", "nginx.service", "SYSLOG_IDENTIFIER", "nginx"),
			journaltest.Message(strings.Replace(line, ip, "198.51.100.200", 1), "_SYSTEMD_UNIT", "other.service"))
	}
	journaltest.Write(e.t, file, es...)
}

// journaldPosition is the saved position of the journald source web.
func (e *env) journaldPosition() (store.Position, bool) {
	for _, p := range e.positionsIfAny() {
		if p.Path == "journald:web" {
			return p, true
		}
	}
	return store.Position{}, false
}

// TestJournaldRestartExactlyOnce: a journald source (a real journal file
// written by systemd-journal-remote; no systemd-journald runs here) is
// read by the daemon through its match; the cursor is saved with the
// checkpoint; the lines logged while the daemon is stopped are read after
// its restart, each once: five before the stop and one after ban at six
// (flood), and no line counted twice (twice, at seven, stays unbanned).
func TestJournaldRestartExactlyOnce(t *testing.T) {
	journaltest.Remote(t)
	e := newEnv(t)
	jdir := filepath.Join(e.dir, "journal")
	if err := os.Mkdir(jdir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(jdir, "system.journal")
	e.writeConfig(fmt.Sprintf(journaldConfig, e.state, jdir))
	e.journalLines(file, repeat("198.51.100.7", 3)...)
	e.start()
	e.journalLines(file, repeat("198.51.100.7", 2)...)
	e.waitFor("the checkpoint of five lines", func() bool { p, ok := e.journaldPosition(); return ok && p.Line == 5 })
	if code, _ := e.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d\n%s", code, e.out.String())
	}
	p5, _ := e.journaldPosition()
	if got := lastCursor(t, jdir); p5.HeadHash != got {
		t.Fatalf("saved cursor %q, want the fifth entry's %q", p5.HeadHash, got)
	}
	if len(e.bans()) != 0 {
		t.Fatalf("bans before the sixth line: %v", e.bans())
	}

	e.journalLines(file, "198.51.100.7") // while the daemon is down
	e.start()
	e.waitFor("the ban of the sixth line", func() bool { return slices.Contains(e.bans(), "ban flood 198.51.100.7") })
	e.waitFor("the checkpoint of six lines", func() bool { p, ok := e.journaldPosition(); return ok && p.Line == 6 })
	if code, _ := e.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d\n%s", code, e.out.String())
	}
	if got := e.bans(); !slices.Equal(got, []string{"ban flood 198.51.100.7"}) {
		t.Errorf("bans %v, want flood's only (twice bans a line read twice)", got)
	}
	p6, _ := e.journaldPosition()
	if want := lastCursor(t, jdir); p6.HeadHash != want {
		t.Errorf("saved cursor %q, want the last entry's %q", p6.HeadHash, want)
	}
}

// lastCursor is the cursor of the last nginx.service entry in dir, as
// journalctl tells it.
func lastCursor(t *testing.T, dir string) string {
	t.Helper()
	out, err := exec.Command("journalctl", "--directory="+dir, "--merge", "-o", "json", "-n", "1", "_SYSTEMD_UNIT=nginx.service").Output()
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		Cursor string `json:"__CURSOR"`
	}
	if err := json.Unmarshal(out, &e); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return e.Cursor
}

const syslogConfig = `state_dir: %[1]s
control_socket: %[1]s/control.sock
checkpoint: 1s
metrics: ""
sources:
  - name: web
    type: syslog
    listen: udp://127.0.0.1:%[2]d
    tag: nginx
    format: combined
rules:
  - name: flood
    limits: ["5 per 10s"]
    ban: {for: 1h}
`

// The nginx of TestSyslogNginx: access lines to the syslog source, the
// client's address from X-Forwarded-For when the peer is loopback.
const syslogNginx = `worker_processes 1;
%[1]s
daemon off;
pid %[2]s/nginx.pid;
error_log %[2]s/error.log notice;
events { worker_connections 64; }
http {
    client_body_temp_path %[2]s/tmp;
    proxy_temp_path %[2]s/tmp;
    fastcgi_temp_path %[2]s/tmp;
    uwsgi_temp_path %[2]s/tmp;
    scgi_temp_path %[2]s/tmp;
    set_real_ip_from 127.0.0.1;
    real_ip_header X-Forwarded-For;
    access_log syslog:server=127.0.0.1:%[3]d,tag=nginx combined;
    server {
        listen 127.0.0.1:%[4]d;
        location / { return 200 "ok\n"; }
    }
}
`

// TestSyslogNginx: a real nginx logs its requests to the daemon's syslog
// source (access_log syslog:server=..., RFC 3164, tag nginx); the client
// over the rule's limit is banned, the one under it is not.
func TestSyslogNginx(t *testing.T) {
	nginx := testenv.Need(t, "nginx")[0]
	e := newEnv(t)
	udpPort := freeUDPPort(t)
	e.writeConfig(fmt.Sprintf(syslogConfig, e.state, udpPort))
	e.start()
	e.waitFor("the syslog source to listen", func() bool {
		return strings.Contains(e.out.String(), fmt.Sprintf(`"syslog source listening","source":"web","addr":"127.0.0.1:%d"`, udpPort))
	})
	httpPort := startSyslogNginx(t, nginx, e.dir, udpPort)
	get := func(client string) {
		t.Helper()
		req, _ := http.NewRequest("GET", fmt.Sprintf("http://127.0.0.1:%d/", httpPort), nil)
		req.Header.Set("X-Forwarded-For", client)
		req.Close = true
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	for range 6 {
		get("198.51.100.9")
	}
	for range 2 {
		get("198.51.100.10")
	}
	e.waitFor("the ban of 198.51.100.9", func() bool { return slices.Contains(e.bans(), "ban flood 198.51.100.9") })
	// The lines of both clients were read: the checkpoint's count.
	e.waitFor("eight lines read", func() bool {
		for _, p := range e.positionsIfAny() {
			if p.Path == "syslog:web" && p.Line == 8 {
				return true
			}
		}
		return false
	})
	if code, _ := e.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d\n%s", code, e.out.String())
	}
	if got := e.bans(); !slices.Equal(got, []string{"ban flood 198.51.100.9"}) {
		t.Errorf("bans %v, want 198.51.100.9's only", got)
	}
}

func freeUDPPort(t *testing.T) int {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// startSyslogNginx runs nginx logging to the UDP port and returns the
// port it serves HTTP on; it is stopped by its own PID at the test's end.
func startSyslogNginx(t *testing.T, nginx, dir string, udpPort int) int {
	t.Helper()
	ndir := filepath.Join(dir, "nginx")
	if err := os.MkdirAll(filepath.Join(ndir, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	user := "" // as root the workers would run as nobody, who cannot reach the test's directory
	if os.Geteuid() == 0 {
		user = "user root;"
	}
	var lastErr string
	for range 5 { // a free port may be taken before nginx binds it
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		conf := filepath.Join(ndir, "nginx.conf")
		if err := os.WriteFile(conf, fmt.Appendf(nil, syslogNginx, user, ndir, udpPort, port), 0o644); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		cmd := exec.Command(nginx, "-e", filepath.Join(ndir, "error.log"), "-c", conf, "-p", ndir+"/")
		cmd.Stdout, cmd.Stderr = &out, &out
		proc := testenv.Start(t, cmd, syscall.SIGQUIT, 10*time.Second)
		exited, stop := proc.Exited, proc.Stop
		deadline := time.Now().Add(10 * time.Second)
		tick := time.NewTicker(20 * time.Millisecond) // a poll of the port, not a pause
		for {
			c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
			if err == nil {
				c.Close()
				tick.Stop()
				t.Cleanup(stop)
				return port
			}
			select {
			case <-exited:
			case <-tick.C:
				if time.Now().Before(deadline) {
					continue
				}
			}
			break
		}
		tick.Stop()
		stop()
		log, _ := os.ReadFile(filepath.Join(ndir, "error.log"))
		lastErr = fmt.Sprintf("%s%s", out.Bytes(), log)
		if !strings.Contains(lastErr, "Address already in use") {
			break
		}
	}
	t.Fatalf("nginx did not start: %s", lastErr)
	return 0
}

// TestSourceFailureEndsDaemon: a source that cannot start (here a syslog
// source whose UDP port another socket holds) ends the daemon with its
// error, instead of leaving it running without the source (its parsing
// goroutine once waited for a batch that never came, and kept the
// followers' Wait from returning).
func TestSourceFailureEndsDaemon(t *testing.T) {
	held, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	e := newEnv(t)
	e.writeConfig(fmt.Sprintf(syslogConfig, e.state, held.LocalAddr().(*net.UDPAddr).Port))
	e.out = &syncBuffer{}
	e.cmd = exec.Command(binary, "run", "--config", e.cfg, "--log-level", "debug", "--poll")
	e.cmd.Stdout, e.cmd.Stderr = e.out, e.out
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { e.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		e.cmd.Process.Kill()
		<-done
		t.Fatalf("the daemon still ran 30 s after its source failed; output:\n%s", e.out.String())
	}
	if code := e.cmd.ProcessState.ExitCode(); code == 0 {
		t.Fatalf("exit code 0 after a source failed; output:\n%s", e.out.String())
	}
	if out := e.out.String(); !strings.Contains(out, "address already in use") {
		t.Fatalf("the error does not say the address is in use:\n%s", out)
	}
}
