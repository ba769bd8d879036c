// Package testenv is how a test says it cannot run here: it skips on a
// user's machine that lacks a tool, root or the shared corpus, and fails
// under CI=true, where scripts/deps.sh has installed every tool the tests
// use and ../shared is always present, so that nothing is skipped in CI
// without anyone noticing.
//
// What may still skip, under CI too, and why:
//
//   - -short: the long tests (hundreds of thousands of bans or
//     connections, a day of checkpoints, the built binary) skip with
//     `go test -short`; CI does not pass -short.
//   - fuzz inputs out of a fuzzer's domain (a header longer than a proxy
//     sends, a byte no header holds) skip that input only, not the fuzzer.
//   - a scenario a test cannot use (TestOneLineCannotMoveTheClock wants one
//     log per scenario) skips that subtest; none does today.
//
// Nothing else skips. A test that a parent test runs as a child process
// (a lock holder, a client run as nobody, a process to kill) returns at
// once when run alone, without skipping, so that a run's skips are only
// tests that could not run; `go test -json ./... | grep '"Action":"skip"'`
// under CI=true lists none.
//
// Start runs a server a test needs (nginx, haproxy, a proxy) and stops it
// by its own PID.
//
// Boundaries: It is the one place a test skips from; it never installs
// anything (scripts/deps.sh does) and imports nothing of logjail's.
package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
)

// CI reports whether the tests run in CI (CI=true, or any value
// strconv.ParseBool reads as true).
func CI() bool {
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	return ci
}

// Skip skips t saying why, or fails it under CI.
func Skip(t testing.TB, format string, args ...any) {
	t.Helper()
	if CI() {
		t.Fatalf("under CI=true this must not be skipped: "+format, args...)
	}
	t.Skipf(format, args...)
}

// Need skips (or, under CI, fails) t unless every command is on PATH (or
// in /usr/sbin and /sbin, which a non-root user's PATH may lack); it
// returns their paths, in order.
func Need(t testing.TB, commands ...string) []string {
	t.Helper()
	out := make([]string, 0, len(commands))
	for _, c := range commands {
		p, err := LookPath(c)
		if err != nil {
			Skip(t, "%s is not installed (scripts/deps.sh installs it as root): %v", c, err)
		}
		out = append(out, p)
	}
	return out
}

// LookPath finds a command on PATH, then in /usr/sbin and /sbin.
func LookPath(c string) (string, error) {
	p, err := exec.LookPath(c)
	if err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin"} {
		if q, err2 := exec.LookPath(filepath.Join(dir, c)); err2 == nil {
			return q, nil
		}
	}
	return "", err
}

// Root skips (or, under CI, fails) t unless it runs as root.
func Root(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Skip(t, "needs root (%s): run the tests as root, as CI does", why)
	}
}

// Shared returns the project's shared directory (../shared beside the
// repository), skipping (or, under CI, failing) t when it is absent: a
// user's clone has none.
func Shared(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "..", "shared")
	if _, err := os.Stat(dir); err != nil {
		Skip(t, "../shared not found at %s (it lives beside the repository, not in it; CI has it): %v", dir, err)
	}
	return dir
}
