package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/logjail/logjail/daemon"
)

// TestCheckWarnsAndRefuses: `logjail check` passes (exit 0) a configuration
// with metrics on every address and a public endpoint, and prints a warning
// for each on stderr, with how to silence it; silenced, it prints none; a
// deny of a whole address family is refused (exit 1).
func TestCheckWarnsAndRefuses(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const base = "sources: [{name: web, paths: [/var/log/nginx/access.log]}]\n"
	risky := write("risky.yaml", base+"metrics: 0.0.0.0:9390\nactions:\n  - {type: endpoint, listen: '0.0.0.0:7390', allow_remote: true}\n")
	code, out, stderr := run(t, "", "check", "--config", risky)
	if code != exitOK || !strings.Contains(out, "valid") {
		t.Fatalf("check: exit %d, want 0\n%s%s", code, out, stderr)
	}
	for _, want := range []string{
		"warning: " + risky + `:2: metrics: "0.0.0.0:9390" is not a loopback address`,
		"add metrics_remote to silence:",
		"warning: " + risky + `:4: actions[0].listen: "0.0.0.0:7390" is a public address`,
		"add endpoint_public to silence:",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	quiet := write("quiet.yaml", base+"metrics: 0.0.0.0:9390\nsilence: [metrics_remote, endpoint_public]\nactions:\n  - {type: endpoint, listen: '0.0.0.0:7390', allow_remote: true}\n")
	if code, out, stderr := run(t, "", "check", "--config", quiet); code != exitOK || strings.Contains(stderr, "warning") {
		t.Errorf("check of the silenced config: exit %d, stderr %q (want 0, no warning)\n%s", code, stderr, out)
	}
	deny := write("deny.yaml", base+"deny: [0.0.0.0/0]\n")
	code, _, stderr = run(t, "", "check", "--config", deny)
	if code != exitNegative || !strings.Contains(stderr, "deny[0]: 0.0.0.0/0: every IPv4 address") {
		t.Errorf("check of deny 0.0.0.0/0: exit %d, want 1; stderr:\n%s", code, stderr)
	}
}

// TestBannedRangeOfEveryAddressRefused: a `banned` range of a whole
// address family, inline or from a file, is refused by check (exit 1) and
// by the daemon's start-up (exit 2, a config that cannot be loaded), as a
// deny of it is.
func TestBannedRangeOfEveryAddressRefused(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const base = "sources: [{name: web, paths: [/var/log/nginx/access.log]}]\nstate_dir: %s\n"
	write("everything.txt", "# all of IPv6 by mistake\n::/0\n")
	for _, c := range []struct{ name, cidrs, want string }{
		{"inline", "[203.0.113.0/24, 0.0.0.0/0]", "ranges.bad.cidrs[1]: 0.0.0.0/0: every IPv4 address: a banned range of it bans every client"},
		{"file", `["file:everything.txt"]`, "everything.txt:2: ranges.bad.cidrs[0]: ::/0: every IPv6 address: a banned range of it bans every client"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := write(c.name+".yaml", strings.ReplaceAll(base, "%s", filepath.Join(dir, "state"))+
				"ranges:\n  bad:\n    cidrs: "+c.cidrs+"\n    limits: banned\n")
			if code, out, stderr := run(t, "", "check", "--config", cfg); code != exitNegative || !strings.Contains(stderr, c.want) {
				t.Errorf("check: exit %d, want 1 and %q\n%s%s", code, c.want, out, stderr)
			}
			if code, out, stderr := run(t, "", "run", "--config", cfg); code != exitUsage || !strings.Contains(stderr, c.want) {
				t.Errorf("run: exit %d, want 2 and %q\n%s%s", code, c.want, out, stderr)
			}
			if _, err := os.Stat(filepath.Join(dir, "state")); err == nil {
				t.Errorf("run made its state directory before refusing the configuration")
			}
		})
	}
}

// wrongTwiceConfig is a configuration wrong in a rule (line 5) and in an
// action's option (line 11, where its action starts on line 9), with
// everything it names under dir.
func wrongTwiceConfig(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "logjail.yaml")
	text := fmt.Sprintf(`state_dir: %[1]s/state
sources: [{name: web, paths: [%[1]s/access.log]}]
rules:
  - name: flood
    limits: ["20 per fortnight"]
actions:
  - type: blockfile
    dir: %[1]s/blocked
  - type: nginx
    file: %[1]s/deny.conf
    style: map
control_socket: %[1]s/control.sock
metrics: ""
`, dir)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// checkProblems returns the problems `logjail check` lists for a
// configuration it refuses, one a line, without their indent.
func checkProblems(t *testing.T, cfg string) []string {
	t.Helper()
	code, out, stderr := run(t, "", "check", "--config", cfg)
	list, ok := strings.CutPrefix(stderr, "logjail: invalid configuration:\n")
	if code != exitNegative || !ok {
		t.Fatalf("check: exit %d, want 1 and a list of problems\n%s%s", code, out, stderr)
	}
	var out2 []string
	for _, l := range strings.Split(strings.TrimSuffix(list, "\n"), "\n") {
		out2 = append(out2, strings.TrimPrefix(l, "  "))
	}
	return out2
}

// TestEveryCommandOnePass: a configuration wrong in a rule and in an
// action's option is refused in one round by check (exit 1) and by every
// command that loads it, acting or not (run, replay, parse, list: exit 2,
// a config that cannot be loaded), each listing the same problems in the
// order of the file, the option's at the line of its value; run makes
// nothing (no state directory) before refusing it.
func TestEveryCommandOnePass(t *testing.T) {
	dir := t.TempDir()
	cfg := wrongTwiceConfig(t, dir)
	log := filepath.Join(dir, "access.log")
	if err := os.WriteFile(log, []byte(combinedLine+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := []string{
		cfg + `:5: rules[0].limits[0]: "20 per fortnight": unknown period`,
		cfg + `:11: actions[1].style: "map": want deny, geo`,
	}
	if diff := cmp.Diff(want, checkProblems(t, cfg)); diff != "" {
		t.Errorf("check's problems (-want +got):\n%s", diff)
	}
	wantText := "logjail: invalid configuration:\n  " + strings.Join(want, "\n  ") + "\n"
	for _, args := range [][]string{
		{"run", "--config", cfg},
		{"replay", "--config", cfg, log},
		{"parse", "--config", cfg, log},
		{"list", "--config", cfg},
	} {
		t.Run(args[0], func(t *testing.T) {
			code, out, stderr := run(t, "", args...)
			if code != exitUsage || stderr != wantText {
				t.Errorf("exit %d, stderr:\n%s\nwant exit 2 and:\n%s(stdout %q)", code, stderr, wantText, out)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "state")); err == nil {
		t.Errorf("run made its state directory before refusing the configuration")
	}
}

// TestReloadRefusesWhatCheckRefuses: a reload of a file whose action
// option (and a rule) went wrong is refused with the problems `logjail
// check` lists for the file, word for word; the daemon goes on with its
// running configuration, and takes the next good one.
func TestReloadRefusesWhatCheckRefuses(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "access.log"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := wrongTwiceConfig(t, dir)
	badText, err := os.ReadFile(bad)
	if err != nil {
		t.Fatal(err)
	}
	good := strings.NewReplacer(`"20 per fortnight"`, `"20 per minute"`, "style: map", "style: geo").Replace(string(badText))
	cfg := filepath.Join(dir, "running.yaml")
	if err := os.WriteFile(cfg, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	reload := make(chan struct{}, 1)
	ready := make(chan struct{})
	reloaded := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(ctx, daemon.Options{ConfigPath: cfg, Poll: true, Reload: reload, Logger: slog.New(slog.DiscardHandler),
			Hooks: daemon.Hooks{Ready: func() { close(ready) }, Reloaded: func(err error) { reloaded <- err }}})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	wait := func(what string, ch <-chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case err := <-done:
			t.Fatalf("%s: Run returned %v", what, err)
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: not within 30s", what)
		}
	}
	wait("start", ready)
	reloadWith := func(text string) error {
		t.Helper()
		if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		reload <- struct{}{}
		select {
		case err := <-reloaded:
			return err
		case <-time.After(30 * time.Second):
			t.Fatal("no reload within 30s")
		}
		return nil
	}
	err = reloadWith(string(badText))
	if err == nil {
		t.Fatal("the reload of a broken action option was accepted")
	}
	want := []string{
		cfg + `:5: rules[0].limits[0]: "20 per fortnight": unknown period`,
		cfg + `:11: actions[1].style: "map": want deny, geo`,
	}
	if diff := cmp.Diff(want, strings.Split(err.Error(), "\n")); diff != "" {
		t.Errorf("the reload's problems (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(checkProblems(t, cfg), strings.Split(err.Error(), "\n")); diff != "" {
		t.Errorf("the reload's problems against check's (-check +reload):\n%s", diff)
	}
	if err := reloadWith(good); err != nil {
		t.Errorf("the reload of the good configuration after it: %v", err)
	}
}
