package stream_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/logjail/logjail/follow"
	"github.com/logjail/logjail/internal/journaltest"
	"github.com/logjail/logjail/internal/testenv"
	"github.com/logjail/logjail/state"
	"github.com/logjail/logjail/stream"
)

// The tests read real journal files that systemd-journal-remote writes
// (internal/journaltest): no systemd-journald runs on this machine or in
// CI, so nothing can be logged through one.

const nginxUnit = "_SYSTEMD_UNIT=nginx.service"

func nginx(text string) journaltest.Entry {
	return journaltest.Message(text, "_SYSTEMD_UNIT", "nginx.service", "SYSLOG_IDENTIFIER", "nginx")
}

// reader runs a journald source in the background and collects its lines.
type reader struct {
	batches
	cancel context.CancelFunc
	done   chan error
	pids   chan int
	logs   *testenv.Buffer
}

func startJournald(t *testing.T, o stream.JournaldOptions) *reader {
	t.Helper()
	r := &reader{batches: batches{t: t}, done: make(chan error, 1), pids: make(chan int, 16), logs: &testenv.Buffer{}}
	o.Started = func(pid int) { r.pids <- pid }
	o.Logger = slog.New(slog.NewTextHandler(r.logs, nil))
	if o.Name == "" {
		o.Name = "web"
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	out := make(chan follow.Batch)
	go func() { r.done <- stream.Journald(ctx, o, out) }()
	r.collect(ctx, out, true)
	t.Cleanup(r.stop)
	return r
}

func (r *reader) stop() {
	r.cancel()
	select {
	case err := <-r.done:
		if err != context.Canceled {
			r.t.Errorf("Journald returned %v, want context.Canceled", err)
		}
		r.done <- err
	case <-time.After(10 * time.Second):
		r.t.Error("Journald did not return within 10 s of its context's end")
	}
}

// waitLines waits until n lines have come (or 10 s), and returns them.
func (r *reader) waitLines(n int) []string {
	r.t.Helper()
	return r.batches.waitLines(n, func() string { return "logs:\n" + r.logs.String() })
}

// TestJournaldMatchAndFollow: the source reads the entries of its match
// only (one unit, and within it one identifier), from the journal's
// start with from: start, then what is appended, including a new journal
// file in the directory; each line carries its entry's cursor.
func TestJournaldMatchAndFollow(t *testing.T) {
	dir := t.TempDir()
	journaltest.Write(t, filepath.Join(dir, "a.journal"),
		nginx("one"), journaltest.Message("sshd line", "_SYSTEMD_UNIT", "ssh.service"), nginx("two"),
		journaltest.Message("error line", "_SYSTEMD_UNIT", "nginx.service", "SYSLOG_IDENTIFIER", "nginx-error"))
	r := startJournald(t, stream.JournaldOptions{Directory: dir, FromStart: true,
		Matches: []string{nginxUnit, "SYSLOG_IDENTIFIER=nginx"}})
	if diff := cmp.Diff([]string{"one", "two"}, r.waitLines(2)); diff != "" {
		t.Fatalf("lines (-want +got):\n%s", diff)
	}
	journaltest.Write(t, filepath.Join(dir, "a.journal"), nginx("three"), journaltest.Message("other", "_SYSTEMD_UNIT", "cron.service"))
	journaltest.Write(t, filepath.Join(dir, "b.journal"), nginx("four"))
	if diff := cmp.Diff([]string{"one", "two", "three", "four"}, r.waitLines(4)); diff != "" {
		t.Fatalf("lines (-want +got):\n%s", diff)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	for i, c := range r.cursor {
		if !strings.HasPrefix(c, "s=") || seen[c] {
			t.Errorf("line %d: cursor %q, want a new journal cursor", i, c)
		}
		seen[c] = true
		if r.lines[i].Line != int64(i+1) {
			t.Errorf("line %d numbered %d", i, r.lines[i].Line)
		}
	}
	if !r.paths["journald:web"] || len(r.paths) != 1 {
		t.Errorf("batch paths %v, want journald:web", r.paths)
	}
}

// TestJournaldResumesAfterCursor: a source started from a saved position
// reads exactly the entries after its cursor: none before, none twice.
func TestJournaldResumesAfterCursor(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "system.journal")
	journaltest.Write(t, file, nginx("one"), nginx("two"), nginx("three"))
	r := startJournald(t, stream.JournaldOptions{Directory: dir, FromStart: true, Matches: []string{nginxUnit}})
	r.waitLines(3)
	r.stop()
	r.mu.Lock()
	saved := state.Position{Path: stream.JournaldPath("web"), HeadHash: r.cursor[1], Line: r.lines[1].Line, Offset: r.lines[1].Offset}
	r.mu.Unlock()

	journaltest.Write(t, file, nginx("four")) // while "logjail" was down
	r2 := startJournald(t, stream.JournaldOptions{Directory: dir, From: saved, Matches: []string{nginxUnit}})
	if diff := cmp.Diff([]string{"three", "four"}, r2.waitLines(2)); diff != "" {
		t.Fatalf("after the cursor of two (-want +got):\n%s", diff)
	}
	journaltest.Write(t, file, nginx("five"))
	if diff := cmp.Diff([]string{"three", "four", "five"}, r2.waitLines(3)); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	r2.mu.Lock()
	if got := r2.lines[0].Line; got != 3 {
		t.Errorf("the first line after the cursor is numbered %d, want 3 (the saved count goes on)", got)
	}
	r2.mu.Unlock()
}

// TestJournaldFromEnd: without a cursor or from: start, the entries
// already in the journal are not read; new ones are.
func TestJournaldFromEnd(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "system.journal")
	journaltest.Write(t, file, nginx("old one"), nginx("old two"))
	r := startJournald(t, stream.JournaldOptions{Directory: dir, Matches: []string{nginxUnit}})
	<-r.pids
	// journalctl seeks to the end after it starts: entries written before
	// it has may count as old. Write new ones until one comes.
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; len(r.texts()) == 0; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("no new entry read in 10 s\n%s", r.logs.String())
		}
		journaltest.Write(t, file, nginx(fmt.Sprintf("new %d", i)))
	}
	for _, l := range r.texts() {
		if !strings.HasPrefix(l, "new ") {
			t.Errorf("read %q: an entry from before the start", l)
		}
	}
}

// TestJournaldRestartsJournalctl: a journalctl that dies (killed) is
// started again after the back-off, from the last cursor read: nothing is
// read twice, nothing lost; the restart is logged.
func TestJournaldRestartsJournalctl(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "system.journal")
	journaltest.Write(t, file, nginx("one"), nginx("two"))
	r := startJournald(t, stream.JournaldOptions{Directory: dir, FromStart: true, Matches: []string{nginxUnit},
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	pid := <-r.pids
	r.waitLines(2)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	journaltest.Write(t, file, nginx("three"))
	select {
	case pid2 := <-r.pids:
		if pid2 == pid {
			t.Fatalf("restarted with the same pid %d", pid)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("journalctl was not started again in 10 s\n%s", r.logs.String())
	}
	if diff := cmp.Diff([]string{"one", "two", "three"}, r.waitLines(3)); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	if logs := r.logs.String(); !strings.Contains(logs, "journalctl exited: starting it again") || !strings.Contains(logs, "signal: killed") {
		t.Errorf("the restart is not logged with its cause:\n%s", logs)
	}
}

// TestJournaldBackoffOnFailure: a journalctl that cannot run (a missing
// journal directory) is retried with a growing wait, each failure logged
// with journalctl's own words; Journald still ends with its context.
func TestJournaldBackoffOnFailure(t *testing.T) {
	journaltest.Remote(t)
	r := startJournald(t, stream.JournaldOptions{Directory: filepath.Join(t.TempDir(), "missing"),
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond})
	var starts []time.Time
	for len(starts) < 5 {
		select {
		case <-r.pids:
			starts = append(starts, time.Now())
		case <-time.After(10 * time.Second):
			t.Fatalf("%d starts in 10 s, want 5\n%s", len(starts), r.logs.String())
		}
	}
	// The waits double to the maximum: 10, 20, 40, 40 ms at least.
	for i, want := range []time.Duration{10, 20, 40, 40} {
		if gap := starts[i+1].Sub(starts[i]); gap < want*time.Millisecond {
			t.Errorf("start %d came %v after the one before, want at least %v ms", i+2, gap, want)
		}
	}
	if logs := r.logs.String(); !strings.Contains(logs, "journalctl exited") || !strings.Contains(logs, "missing") {
		t.Errorf("the failure is not logged with journalctl's words:\n%s", logs)
	}
}

// TestJournaldBinaryMessage: a MESSAGE that is no text (a control
// character, or a trailing newline) is written by journalctl as an array
// of bytes; it is read as its bytes, the newline dropped.
func TestJournaldBinaryMessage(t *testing.T) {
	dir := t.TempDir()
	journaltest.Write(t, filepath.Join(dir, "system.journal"),
		nginx("tab\tand \x01 control"), nginx("198.51.100.7 - - line\n"), nginx("plain"))
	r := startJournald(t, stream.JournaldOptions{Directory: dir, FromStart: true, Matches: []string{nginxUnit}})
	if diff := cmp.Diff([]string{"tab\tand \x01 control", "198.51.100.7 - - line", "plain"}, r.waitLines(3)); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

func TestCheckMatch(t *testing.T) {
	for m, ok := range map[string]bool{
		"_SYSTEMD_UNIT=nginx.service": true,
		"SYSLOG_IDENTIFIER=nginx":     true,
		"PRIORITY=6":                  true,
		"_SYSTEMD_UNIT=":              true,
		"--output=cat":                false,
		"-f":                          false,
		"nginx.service":               false,
		"_systemd_unit=nginx.service": false,
		"1FIELD=x":                    false,
		"=x":                          false,
		"MESSAGE=a\nb":                false,
		"+":                           false,
	} {
		if err := stream.CheckMatch(m); (err == nil) != ok {
			t.Errorf("CheckMatch(%q) = %v, want ok %v", m, err, ok)
		}
	}
}
