package daemon_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/logjail/logjail/control"
	"github.com/logjail/logjail/daemon"
	"github.com/logjail/logjail/internal/testenv"
	"github.com/logjail/logjail/store"
)

// listsConfig: allow and deny from files that the daemon watches, a rule
// that bans the fourth request in 10 s for an hour, and three actions: block
// files, an nginx deny file and the decision endpoint.
const listsConfig = `state_dir: %[1]s/state
checkpoint: 1s
metrics: ""
sources:
  - name: web
    paths: [%[1]s/access.log]
    format: combined
    from: start
allow: ["file:%[1]s/allow.txt"]
deny: ["file:%[1]s/deny.txt"]
rules:
  - name: flood
    limits: ["3 per 10s"]
    ban: {for: 1h}
actions:
  - type: blockfile
    dir: %[1]s/blocked
  - type: nginx
    file: %[1]s/deny.conf
    settle: 0s
    min_interval: 0s
  - type: endpoint
    listen: 127.0.0.1:%[2]d
`

// TestListFilesTakeEffect: the allow and deny files are followed without a
// SIGHUP. An address a rule banned and that the allow file then lists is
// let through by every action (its block file removed, its nginx line
// gone, /auth 200) within 2 s of the write, with an unban "allow list" in
// the history; an operator's ban --force of an address then allowed stays.
// An address removed from the deny file is unbanned; one added is banned.
// A broken allow file keeps the running lists and the log says why.
func TestListFilesTakeEffect(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "blocked"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) {
		t.Helper()
		// Written whole and renamed, as an editor or a deployment tool does.
		tmp := filepath.Join(dir, name+".tmp")
		if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	write("allow.txt", "# nobody yet\n")
	write("deny.txt", "203.0.113.50\n")
	ts := time.Now().UTC().Format("02/Jan/2006:15:04:05 +0000")
	var log strings.Builder
	for range 5 {
		fmt.Fprintf(&log, "203.0.113.9 - - [%s] \"GET / HTTP/1.1\" 200 1 \"-\" \"test\"\n", ts)
	}
	write("access.log", log.String())
	port := testenv.FreePort(t)
	cfgPath := filepath.Join(dir, "logjail.yaml")
	if err := os.WriteFile(cfgPath, fmt.Appendf(nil, listsConfig, dir, port), 0o600); err != nil {
		t.Fatal(err)
	}
	ctl := daemon.NewControl()
	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan struct{})
	var runErr error
	go func() {
		defer close(exited)
		runErr = daemon.Run(ctx, daemon.Options{ConfigPath: cfgPath, Control: ctl, Poll: true,
			Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	}()
	t.Cleanup(func() {
		cancel()
		<-exited
		if runErr != nil {
			t.Errorf("Run: %v", runErr)
		}
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs.String())
		}
	})

	blocked := func(addr string) bool {
		_, err := os.Stat(filepath.Join(dir, "blocked", addr))
		return err == nil
	}
	inNginx := func(addr string) bool {
		b, _ := os.ReadFile(filepath.Join(dir, "deny.conf"))
		return strings.Contains(string(b), "deny "+addr+";")
	}
	// state waits until addr is blocked (or not) by every action.
	state := func(addr string, want bool, within time.Duration) time.Duration {
		t.Helper()
		start := time.Now()
		deadline := start.Add(within)
		for {
			select {
			case <-exited:
				t.Fatalf("%s: the daemon exited", addr)
			default:
			}
			a, err := askAuth(port, addr)
			if err == nil && blocked(addr) == want && inNginx(addr) == want && (a.code == 403) == want {
				return time.Since(start)
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: after %v: block file %v, nginx %v, /auth %+v (%v); want blocked=%v",
					addr, within, blocked(addr), inNginx(addr), a, err, want)
			}
		}
	}
	state("203.0.113.9", true, time.Minute)  // the rule's ban
	state("203.0.113.50", true, time.Minute) // the deny file's

	// An operator bans an address by force; the allow file lists it next.
	if _, err := ctl.Ban(ctx, control.BanRequest{Key: "198.51.100.20", For: "1h", Force: true}, "test"); err != nil {
		t.Fatal(err)
	}
	state("198.51.100.20", true, 10*time.Second)

	write("allow.txt", "203.0.113.9\n198.51.100.20\n")
	took := state("203.0.113.9", false, 2*time.Second)
	t.Logf("allow file written -> unbanned in every action: %v", took)
	state("198.51.100.20", true, 0) // ban --force wins over allow
	state("203.0.113.50", true, 0)
	// The decision log said it before the actions did it.
	if want := `msg=unban rule=flood key=203.0.113.9 kind=unban until="" reason="allow list" source=allow`; !strings.Contains(logs.String(), want) {
		t.Errorf("the daemon log lacks the lift's decision line %s", want)
	}

	db, err := store.Open(filepath.Join(dir, "state", "logjail.db"), store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		hist, err := db.History(store.HistoryQuery{Key: "203.0.113.9"})
		if err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for _, e := range hist {
			kinds = append(kinds, e.Kind+" "+e.Reason)
		}
		if slices.Contains(kinds, "unban allow list") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("history of 203.0.113.9: %q, want an unban \"allow list\"", kinds)
		}
	}

	// The deny file loses one address and gains another.
	write("deny.txt", "203.0.113.51\n")
	state("203.0.113.50", false, 2*time.Second)
	state("203.0.113.51", true, 2*time.Second)

	// A broken allow file: the reload is refused, with the file and line,
	// and the running lists stay.
	write("allow.txt", "203.0.113.9\nnot-an-address\n")
	deadlineLog := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), "allow.txt:2") {
		if time.Now().After(deadlineLog) {
			t.Fatalf("no log line names allow.txt:2")
		}
		runtime.Gosched()
	}
	if !strings.Contains(logs.String(), "reload refused") {
		t.Errorf("the log does not say the reload was refused")
	}
	state("203.0.113.9", false, 0)
	state("203.0.113.51", true, 0)
}

// TestAllowedWhileDownLiftedAtStart: a rule's ban of an address that the
// allow file lists when the daemon starts again is lifted at start, its
// block file and nginx line removed, with an unban "allow list" in the
// history and in the decision log (source allow).
func TestAllowedWhileDownLiftedAtStart(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "blocked"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("allow.txt", "")
	write("deny.txt", "")
	ts := time.Now().UTC().Format("02/Jan/2006:15:04:05 +0000")
	write("access.log", strings.Repeat(fmt.Sprintf("203.0.113.9 - - [%s] \"GET / HTTP/1.1\" 200 1 \"-\" \"test\"\n", ts), 5))
	cfgPath := filepath.Join(dir, "logjail.yaml")
	if err := os.WriteFile(cfgPath, fmt.Appendf(nil, listsConfig, dir, testenv.FreePort(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs.String())
		}
	})
	blockFile := filepath.Join(dir, "blocked", "203.0.113.9")
	run := func(until func() bool, what string) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- daemon.Run(ctx, daemon.Options{ConfigPath: cfgPath, Poll: true,
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		}()
		deadline := time.Now().Add(30 * time.Second)
		for !until() {
			select {
			case err := <-done:
				cancel()
				t.Fatalf("%s: Run returned first: %v", what, err)
			default:
			}
			if time.Now().After(deadline) {
				cancel()
				<-done
				t.Fatalf("%s: not within 30s", what)
			}
			runtime.Gosched()
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
	}
	exists := func() bool { _, err := os.Stat(blockFile); return err == nil }
	run(exists, "the rule's ban")
	write("allow.txt", "203.0.113.9\n")
	// A new port: the first run's may be some other process's ephemeral
	// port by now (on a busy host it was: the start failed, EADDRINUSE).
	if err := os.WriteFile(cfgPath, fmt.Appendf(nil, listsConfig, dir, testenv.FreePort(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	// The decision log's line of the lift (ops.SourceAllow).
	lifted := `msg=unban rule=flood key=203.0.113.9 kind=unban until="" reason="allow list" source=allow`
	run(func() bool { return !exists() && strings.Contains(logs.String(), lifted) }, "the lift at start")
	db, err := store.Open(filepath.Join(dir, "state", "logjail.db"), store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	bans, err := db.ActiveBans()
	if err != nil {
		t.Fatal(err)
	}
	if len(bans) != 0 {
		t.Errorf("active bans after the start: %+v", bans)
	}
	hist, err := db.History(store.HistoryQuery{Key: "203.0.113.9", Kind: "unban"})
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 1 || hist[0].Reason != "allow list" {
		t.Errorf("unbans of 203.0.113.9: %+v, want one \"allow list\"", hist)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "deny.conf")); strings.Contains(string(b), "203.0.113.9") {
		t.Errorf("deny.conf still lists 203.0.113.9:\n%s", b)
	}
}
