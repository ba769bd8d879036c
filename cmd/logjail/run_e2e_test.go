package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestSecondRunSaysWhoRuns: a second `logjail run` on the same database
// says that logjail already runs, with the first one's pid, before it
// binds anything (not "address already in use"), and exits 2.
func TestSecondRunSaysWhoRuns(t *testing.T) {
	e := newOpEnv(t)
	e.start()
	code, _, stderr := e.cmd("run")
	want := fmt.Sprintf("logjail: already running: pid %d holds the database %s/logjail.db", e.daemon.Process.Pid, e.state)
	if code != exitUsage || !strings.Contains(stderr, want) || strings.Contains(stderr, "address already in use") {
		t.Errorf("second run: exit %d, stderr %q; want exit %d and %q", code, stderr, exitUsage, want)
	}
	e.stop()
}

// TestVersion: `logjail version` and `logjail --version` print the same
// three lines: the version, the commit, Go's release and the platform.
func TestVersion(t *testing.T) {
	code, out, _ := run(t, "", "version")
	code2, out2, _ := run(t, "", "--version")
	if code != exitOK || code2 != exitOK || out != out2 {
		t.Fatalf("version: exit %d %q; --version: exit %d %q; want both 0 and the same", code, out, code2, out2)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "logjail ") || !strings.HasPrefix(lines[1], "commit ") || !strings.HasPrefix(lines[2], "go1.") {
		t.Errorf("version printed %q, want logjail VERSION / commit ... / goVERSION OS/ARCH", out)
	}
}
