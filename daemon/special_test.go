package daemon_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/logjail/logjail/internal/testenv"
)

// TestSpecialFilesNeverBlockShutdown: a FIFO, a device, a directory, a
// binary file and a file the daemon may not read, all named as logs, each
// get one clear log line and are not followed; a followed file that
// vanishes is logged; the real log beside them is read; and SIGTERM stops
// the daemon at once (a FIFO opened for reading would wait for a writer
// forever). The daemon runs as nobody (setpriv), so that a file mode can
// refuse it.
func TestSpecialFilesNeverBlockShutdown(t *testing.T) {
	testenv.Root(t, "runs the daemon as nobody through setpriv")
	testenv.Need(t, "setpriv")
	nobody, err := user.Lookup("nobody")
	if err != nil {
		testenv.Skip(t, "no user nobody")
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)

	dir, err := os.MkdirTemp("", "logjail-special")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// nobody must reach the binary and the logs.
	for _, d := range []string{dir, filepath.Dir(binary)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(state, uid, gid); err != nil {
		t.Fatal(err)
	}
	path := func(n string) string { return filepath.Join(dir, n) }
	if err := syscall.Mkfifo(path("fifo.log"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path("dir.log"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(n, s string, mode os.FileMode) {
		if err := os.WriteFile(path(n), []byte(s), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path(n), mode); err != nil {
			t.Fatal(err)
		}
	}
	line := func(i int) string {
		return fmt.Sprintf("203.0.113.%d - u%d [%s] \"GET / HTTP/1.1\" 200 1 \"-\" \"t\"\n", i, i, time.Now().UTC().Format("02/Jan/2006:15:04:05 -0700"))
	}
	write("binary.log", "\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x03\x00>\x00", 0o644)
	write("secret.log", line(1), 0o600) // root's, unreadable for nobody
	write("vanish.log", line(2), 0o644)
	write("access.log", line(3)+line(4), 0o644)
	cfg := path("logjail.yaml")
	paths := []string{path("fifo.log"), "/dev/null", path("dir.log"), path("binary.log"), path("secret.log"), path("vanish.log"), path("access.log")}
	if err := os.WriteFile(cfg, fmt.Appendf(nil, rotationConfig, state, strings.Join(paths, ", "), ""), 0o644); err != nil {
		t.Fatal(err)
	}

	out := &syncBuffer{}
	cmd := exec.Command("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", binary, "run", "--config", cfg, "--poll", "--log-level", "debug")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &daemonProc{cmd, out}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for what, want := range map[string]string{
		"the FIFO":          "fifo.log (fifo): not a regular file",
		"the device":        "/dev/null (device): not a regular file",
		"the directory":     "dir.log (directory): not a regular file",
		"the binary file":   "binary.log: binary or compressed content",
		"the unreadable":    "secret.log: permission denied",
		"the real log":      `"path":"` + path("access.log") + `"`,
		"the vanishing log": `"path":"` + path("vanish.log") + `"`,
	} {
		if err := waitUntil(ctx, what+" to be logged", p, func() bool { return strings.Contains(out.String(), want) }); err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
	}
	if err := waitUntil(ctx, "the real log to be read", p, func() bool { return readToEnd(state, path("access.log")) }); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if err := os.Remove(path("vanish.log")); err != nil {
		t.Fatal(err)
	}
	if err := waitUntil(ctx, "the vanished log to be logged", p, func() bool { return strings.Contains(out.String(), `"msg":"removed"`) }); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, s := range []string{"fifo.log (fifo)", "/dev/null (device)", "dir.log (directory)", "binary.log: binary"} {
		if n := strings.Count(out.String(), s); n != 1 {
			t.Errorf("%q logged %d times, want once", s, n)
		}
	}
	began := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v\n%s", err, out.String())
		}
		if took := time.Since(began); took > 5*time.Second {
			t.Errorf("SIGTERM took %v", took)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("SIGTERM did not stop the daemon in 10 s\n%s", out.String())
	}
}
