package daemon_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/logjail/logjail/daemon"
)

const reconcileConfig = `state_dir: %[1]s/state
checkpoint: 1s
metrics: ""
sources:
  - name: web
    paths: [%[1]s/access.log]
    format: combined
    from: start
rules:
  - name: flood
    limits: ["5 per 10s"]
    ban: {for: 1h}
actions:
  - type: blockfile
    dir: %[1]s/blocked
  - type: nginx
    file: %[1]s/deny.conf
    settle: 0s
    min_interval: 0s
`

// TestStartReconcilesActions: the actions' state outside logjail disagrees
// with the store when the daemon starts (a block file and a deny line of a
// ban the store no longer has, a ban the store has with neither): start-up
// fixes both, and leaves a file that is not logjail's alone.
func TestStartReconcilesActions(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "logjail.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(reconcileConfig, dir)), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "access.log")
	var lines strings.Builder
	now := time.Now().Format("02/Jan/2006:15:04:05 -0700")
	for i := range 8 {
		fmt.Fprintf(&lines, "198.51.100.20 - - [%s] \"GET /%d HTTP/1.1\" 200 1 \"-\" \"t\"\n", now, i)
	}
	if err := os.WriteFile(logPath, []byte(lines.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	blocked := filepath.Join(dir, "blocked")
	denyConf := filepath.Join(dir, "deny.conf")
	blockFiles := func() []string {
		es, _ := os.ReadDir(blocked)
		var out []string
		for _, e := range es {
			out = append(out, e.Name())
		}
		return out
	}
	denies := func() []string {
		b, _ := os.ReadFile(denyConf)
		var out []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "deny ") {
				out = append(out, l)
			}
		}
		return out
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s: block files %v, deny lines %v", what, blockFiles(), denies())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	run := func() (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- daemon.Run(ctx, daemon.Options{ConfigPath: cfg, Poll: true, Logger: slog.New(slog.DiscardHandler)})
		}()
		return func() {
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("Run: %v", err)
			}
		}
	}

	// A first run bans 198.51.100.20 in both actions.
	stop := run()
	waitFor("the ban in both actions", func() bool {
		return slices.Equal(blockFiles(), []string{"198.51.100.20"}) && slices.Equal(denies(), []string{"deny 198.51.100.20;"})
	})
	stop()

	// Behind logjail's back: the ban's traces are gone, a stale ban's are
	// there, and an operator's own file sits in the directory.
	must(t, os.Remove(filepath.Join(blocked, "198.51.100.20")))
	must(t, os.WriteFile(filepath.Join(blocked, "203.0.113.9"), []byte("reason: stale\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(blocked, "README"), []byte("mine\n"), 0o644))
	must(t, os.WriteFile(denyConf, []byte("deny 203.0.113.9;\n"), 0o644))

	stop = run()
	defer stop()
	waitFor("start-up to reconcile", func() bool {
		return slices.Equal(blockFiles(), []string{"198.51.100.20", "README"}) && slices.Equal(denies(), []string{"deny 198.51.100.20;"})
	})
	b, err := os.ReadFile(filepath.Join(blocked, "198.51.100.20"))
	if err != nil || !strings.Contains(string(b), "rule: flood") {
		t.Errorf("the restored block file: %q %v", b, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestDenyListAtStartAndReload: the deny list reaches the actions when the
// daemon starts, before any log line, and a reload that removes an entry
// lifts it at once.
func TestDenyListAtStartAndReload(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "logjail.yaml")
	write := func(deny string) {
		text := fmt.Sprintf(reconcileConfig, dir) + "deny: " + deny + "\n"
		must(t, os.WriteFile(cfg, []byte(text), 0o600))
	}
	write("[203.0.113.9, 198.51.100.0/24]")
	must(t, os.WriteFile(filepath.Join(dir, "access.log"), nil, 0o644))
	reload := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(ctx, daemon.Options{ConfigPath: cfg, Poll: true, Reload: reload, Logger: slog.New(slog.DiscardHandler)})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	blocked := filepath.Join(dir, "blocked")
	denyConf := filepath.Join(dir, "deny.conf")
	state := func() string {
		es, _ := os.ReadDir(blocked)
		var names []string
		for _, e := range es {
			names = append(names, e.Name())
		}
		b, _ := os.ReadFile(denyConf)
		var denies []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "deny ") {
				denies = append(denies, l)
			}
		}
		return strings.Join(names, ",") + " | " + strings.Join(denies, " ")
	}
	waitState := func(what, want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for state() != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %q, want %q", what, state(), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitState("the deny list at start, with no log line", "198.51.100.0_24,203.0.113.9 | deny 198.51.100.0/24; deny 203.0.113.9;")
	write("[198.51.100.0/24]")
	reload <- struct{}{}
	waitState("after a reload without 203.0.113.9", "198.51.100.0_24 | deny 198.51.100.0/24;")
}
