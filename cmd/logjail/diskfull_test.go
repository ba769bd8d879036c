package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/logjail/logjail/control"
	"github.com/logjail/logjail/internal/testenv"
)

// The environment of a test run again in a mount namespace of its own:
// the test's name, this process's mount namespace (which the child must
// not be in), and the logjail binary already built.
const (
	envMountNS     = "LOGJAIL_TEST_MOUNTNS"
	envMountOrigin = "LOGJAIL_TEST_MOUNTNS_ORIGIN"
	envMountBin    = "LOGJAIL_TEST_MOUNTNS_BIN"
)

// enterMountNS runs the calling test again in a new, private mount
// namespace (unshare -m), where it may mount a file system that neither
// the host nor any other process sees, and which disappears with it. It
// returns true in that namespace (run the test), false in the parent (the
// child's result is the test's).
func enterMountNS(t *testing.T) bool {
	t.Helper()
	if os.Getenv(envMountNS) == t.Name() {
		self, err := os.Readlink("/proc/self/ns/mnt")
		if err != nil {
			t.Fatal(err)
		}
		// PID 1's, where it can be read (not in every container).
		pid1, _ := os.Readlink("/proc/1/ns/mnt")
		if self == os.Getenv(envMountOrigin) || self == pid1 {
			t.Fatalf("refusing to mount: not in a mount namespace of the test's own (%s)", self)
		}
		// The parent's binary, copied: this process's TestMain removes
		// the directory of the binary it used.
		binOnce.Do(func() {
			dir, err := os.MkdirTemp("", "logjail-bin")
			if err != nil {
				binErr = err
				return
			}
			binPath = filepath.Join(dir, "logjail")
			binErr = copyExecutable(os.Getenv(envMountBin), binPath)
		})
		return true
	}
	testenv.Root(t, "mount namespaces")
	testenv.Need(t, "unshare")
	bin := logjailBinary(t)
	origin, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "--",
		os.Args[0], "-test.run", "^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), envMountNS+"="+t.Name(), envMountOrigin+"="+origin, envMountBin+"="+bin)
	out, err := cmd.CombinedOutput()
	t.Logf("in a new mount namespace:\n%s", out)
	if err != nil {
		t.Fatalf("the test failed in its mount namespace: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("the test did not pass in its mount namespace (no PASS line)")
	}
	return false
}

func copyExecutable(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

// TestStatusDiskFull: the daemon's database is on a real file system that
// fills up (a 2 MB tmpfs, mounted in a mount namespace the test makes, so
// that nothing of the host fills). `logjail status` then says so in its
// first line, with SQLite's "database or disk is full", shows the sources,
// rules, actions and breaker all the same, and exits 1 (degraded); the
// JSON has the error in its database section. Once there is room again,
// status is clean and exits 0.
func TestStatusDiskFull(t *testing.T) {
	if !enterMountNS(t) {
		return
	}
	e := newOpEnv(t)
	if err := os.Mkdir(e.state, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", e.state, "tmpfs", 0, "size=2m,mode=0750"); err != nil {
		t.Fatalf("mounting a tmpfs on %s: %v", e.state, err)
	}
	t.Cleanup(func() { unix.Unmount(e.state, unix.MNT_DETACH) })
	e.start()
	e.appendLines("203.0.113.1", 2)
	e.waitFor("the position written", func() bool {
		code, out, _ := e.cmd("status")
		return code == 0 && strings.Contains(out, "access.log: line 2,")
	})

	// The file system fills up.
	filler := filepath.Join(e.state, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 4096)
	for {
		if _, err = f.Write(chunk); err != nil {
			break
		}
	}
	f.Close()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling the tmpfs: %v, want ENOSPC", err)
	}
	// New clients: key states, positions and bans the daemon must write.
	for i := range 200 {
		e.appendLines(fmt.Sprintf("2001:db8:%x::1", i), 6)
	}
	var out string
	e.waitFor("status to say the database cannot be written", func() bool {
		var code int
		code, out, _ = e.cmd("status")
		return code == 1
	})
	first, _, _ := strings.Cut(out, "\n")
	if !strings.HasPrefix(first, "DATABASE ERROR: ") || !strings.Contains(first, "database or disk is full") ||
		!strings.Contains(first, "free space") {
		t.Errorf("status's first line: %q, want the database error: disk full, free space", first)
	}
	for _, want := range []string{"daemon:    running (pid", "breaker:   ", "sources:\n  web", "access.log: line ", "rules:\n  flood", "actions:\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("status on a full disk lacks %q:\n%s", want, out)
		}
	}

	code, js, stderr := e.cmd("status", "--output", "json")
	var st control.Status
	if err := json.Unmarshal([]byte(js), &st); err != nil || code != 1 {
		t.Fatalf("status --output json: exit %d, %v\n%s%s", code, err, js, stderr)
	}
	if !strings.Contains(st.Database.Error, "database or disk is full") {
		t.Errorf("JSON database.error: %q, want the disk full", st.Database.Error)
	}
	if !st.Live || len(st.Sources) != 1 || len(st.Sources[0].Files) != 1 || len(st.Rules) < 2 || len(st.Actions) != 2 {
		t.Errorf("JSON status on a full disk is not whole: live %v, sources %+v, rules %+v, actions %+v",
			st.Live, st.Sources, st.Rules, st.Actions)
	}

	// Room again: the daemon writes, status is clean.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	e.waitFor("status to be clean once there is room", func() bool {
		var code int
		code, out, _ = e.cmd("status")
		return code == 0
	})
	if strings.Contains(out, "DATABASE ERROR") {
		t.Errorf("status with room again:\n%s", out)
	}
	e.stop()
}
