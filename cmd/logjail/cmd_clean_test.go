package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logjail/logjail/control"
	"github.com/logjail/logjail/internal/feedtest"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/state"
	"github.com/logjail/logjail/store"
)

// cleanSetup writes a config whose state_dir is a temp directory and a
// database in it holding two bans made from a log that ends 89 minutes
// ago: 203.0.113.1's (rule short) ended half an hour ago, 203.0.113.2's
// (rule long) ends in an hour and a half.
func cleanSetup(t *testing.T) (cfgPath, dbPath string) {
	t.Helper()
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	cfgPath = filepath.Join(dir, "logjail.yaml")
	log := filepath.Join(dir, "access.log")
	cfgText := fmt.Sprintf(`state_dir: %s
sources: [{name: web, paths: [%s], format: combined}]
rules:
  - name: short
    match: {path: '^/a'}
    limits: ["5 per 10s"]
    ban: {for: 1h, remember: 1h}
  - name: long
    match: {path: '^/b'}
    limits: ["5 per 10s"]
    ban: {for: 3h, remember: 1h}
`, state, log)
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	var b strings.Builder
	for _, r := range []struct {
		ip, path string
		at       time.Time
	}{{"203.0.113.1", "/a", now.Add(-90 * time.Minute)}, {"203.0.113.2", "/b", now.Add(-89 * time.Minute)}} {
		for i := range 20 {
			at := r.at.Add(time.Duration(i) * 100 * time.Millisecond)
			fmt.Fprintf(&b, "%s - - [%s] \"GET %s HTTP/1.1\" 200 1 \"-\" \"t\"\n", r.ip, at.Format("02/Jan/2006:15:04:05 -0700"), r.path)
		}
	}
	if err := os.WriteFile(log, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := rules.Load(cfgPath, rules.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dbPath = filepath.Join(state, "logjail.db")
	db, err := store.Open(dbPath, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := feedtest.Feed(context.Background(), cfg, db, log, feedtest.Options{}); err != nil {
		t.Fatal(err)
	}
	if bans, _ := db.ActiveBans(); len(bans) != 2 {
		t.Fatalf("setup: %d active bans, want 2", len(bans))
	}
	return cfgPath, dbPath
}

func TestClean(t *testing.T) {
	cfgPath, dbPath := cleanSetup(t)
	code, out, stderr := run(t, "", "clean", "--config", cfgPath, "--vacuum-pages", "-1")
	if code != exitOK {
		t.Fatalf("exit %d, want 0; stderr: %s", code, stderr)
	}
	// 203.0.113.1's ban ended on the wall clock, not yet on log time (the
	// log ends before it): its state is kept, as the detector still holds it.
	for _, want := range []string{"1 ban expired", "pruned 0 key states", "unban short 203.0.113.1"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	db, err := store.Open(dbPath, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	bans, err := db.ActiveBans()
	if err != nil {
		t.Fatal(err)
	}
	if len(bans) != 1 || bans[0].Key != "203.0.113.2" {
		t.Errorf("active bans after clean: %+v, want only 203.0.113.2", bans)
	}
	unbans, err := db.History(state.HistoryQuery{Kind: state.KindUnban})
	if err != nil {
		t.Fatal(err)
	}
	if len(unbans) != 1 || unbans[0].Key != "203.0.113.1" || unbans[0].Reason != "ban expired" {
		t.Errorf("unbans: %+v, want the expiry of 203.0.113.1", unbans)
	}

	// Again, as JSON: nothing left to do.
	code, out, stderr = run(t, "", "clean", "--config", cfgPath, "--output", "json")
	if code != exitOK {
		t.Fatalf("second clean: exit %d; stderr: %s", code, stderr)
	}
	var r control.CleanReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if r.Expired != 0 || r.Keys != 0 || r.Database != dbPath {
		t.Errorf("second clean: %+v, want nothing done on %s", r, dbPath)
	}
}

func TestCleanWhileTheDaemonRuns(t *testing.T) {
	cfgPath, dbPath := cleanSetup(t)
	db, err := store.Open(dbPath, store.Options{}) // the daemon holds the writer lock
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	code, _, stderr := run(t, "", "clean", "--config", cfgPath)
	if code != exitUnreachable || !strings.Contains(stderr, "the daemon runs: it cleans on its own schedule") {
		t.Errorf("exit %d, stderr %q; want 3 and the daemon named", code, stderr)
	}
}

func TestCleanRefuses(t *testing.T) {
	dir := t.TempDir()
	broken := filepath.Join(dir, "broken.yaml")
	if err := os.WriteFile(broken, []byte("rules: [{name: x, limits: [\"5 per fortnight\"]}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"missing config", []string{"clean", "--config", filepath.Join(dir, "none.yaml")}, exitUsage, "none.yaml"},
		{"invalid config", []string{"clean", "--config", broken}, exitUsage, "fortnight"},
		{"bad output", []string{"clean", "--output", "xml"}, exitUsage, "--output"},
		{"arguments", []string{"clean", "x"}, exitUsage, "unknown command"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := run(t, "", tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, tt.code, tt.want)
			}
		})
	}
}

func TestCleanWithoutDatabase(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	cfgPath := filepath.Join(dir, "logjail.yaml")
	if err := os.WriteFile(cfgPath, []byte("state_dir: "+state+"\nsources: [{name: web, paths: [/x.log], format: combined}]\nrules: [{name: f, limits: [\"5 per 10s\"]}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := run(t, "", "clean", "--config", cfgPath)
	if code != exitOK || !strings.Contains(out, "nothing to clean") {
		t.Errorf("exit %d, out %q, stderr %q; want 0 and nothing to clean", code, out, stderr)
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("clean made %s: %v", state, err)
	}
}
