package daemon_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/logjail/logjail/daemon"
	"github.com/logjail/logjail/store"
)

// TestDecisionLogOfLiftsAtStart: the bans the daemon lifts as it resumes
// its state write their decision-log line (msg unban, source resume), with
// the reason the history records: a ban of a rule no longer configured,
// and a ban whose until passed while the daemon was down. A ban still
// running gets no line.
func TestDecisionLogOfLiftsAtStart(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o750); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "access.log")
	if err := os.WriteFile(log, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "logjail.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, declogConfig, state, log, 100), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func() *declogDaemon {
		dd := &declogDaemon{t: t, log: log, cfg: cfg, ctl: daemon.NewControl(), done: make(chan error, 1), reload: make(chan struct{}, 1)}
		var ctx context.Context
		ctx, dd.cancel = context.WithCancel(context.Background())
		go func() {
			dd.done <- daemon.Run(ctx, daemon.Options{ConfigPath: cfg, Poll: true, Control: dd.ctl, Reload: dd.reload,
				Logger: slog.New(slog.NewJSONHandler(&dd.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		}()
		t.Cleanup(func() {
			if dd.cancel != nil {
				dd.stop()
			}
		})
		return dd
	}
	// A first run makes the database, as a daemon leaves it.
	dd := start()
	if _, err := dd.ctl.Status(context.Background()); err != nil {
		t.Fatal(err)
	}
	dd.stop()

	// While it was down: bans as the detector records them.
	now := time.Now().UTC()
	db, err := store.Open(filepath.Join(state, "logjail.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	global, at, err := db.Global()
	if err != nil {
		t.Fatal(err)
	}
	ban := func(rule, key string, since, until time.Time) store.Ban {
		return store.Ban{Rule: rule, Key: key, Kind: store.PhaseBan, Since: since, Until: until,
			Reason: "over the limit", Origin: store.OriginDetector}
	}
	bans := []store.Ban{
		ban("gone", "203.0.113.1", now.Add(-10*time.Minute), now.Add(time.Hour)),
		ban("flood", "203.0.113.2", now.Add(-2*time.Hour), now.Add(-time.Hour)),
		ban("flood", "203.0.113.3", now.Add(-10*time.Minute), now.Add(time.Hour)),
	}
	var events []store.Event
	for _, b := range bans {
		events = append(events, store.Event{Time: b.Since, Rule: b.Rule, Key: b.Key, Kind: store.KindBan, Until: b.Until,
			Reason: b.Reason, Origin: b.Origin})
	}
	if err := db.Checkpoint(&store.Checkpoint{Time: at, Global: global, Events: events, SetBans: bans}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	dd = start()

	want := map[string]string{
		"203.0.113.1": "rule gone is no longer in the configuration",
		"203.0.113.2": "ban expired while logjail was not running",
	}
	rule := map[string]string{"203.0.113.1": "gone", "203.0.113.2": "flood"}
	for key, reason := range want {
		dd.wait("unban", map[string]any{"key": key, "rule": rule[key], "source": "resume", "reason": reason, "kind": "unban"})
	}
	// The daemon is running and has logged what it lifted: a checkpoint
	// makes the history readable.
	if _, err := dd.ctl.Status(context.Background()); err != nil {
		t.Fatal(err)
	}
	dd.stop()
	if rs := dd.records("unban", map[string]any{"key": "203.0.113.3"}); len(rs) != 0 {
		t.Errorf("an unban line for the running ban: %v", rs)
	}
	for key := range want {
		if rs := dd.records("unban", map[string]any{"key": key}); len(rs) != 1 {
			t.Errorf("%s: %d unban lines, want 1: %v", key, len(rs), rs)
		}
	}

	// The history says the same: one unban each, with the same reason.
	db, err = store.Open(filepath.Join(state, "logjail.db"), store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for key, reason := range want {
		hist, err := db.History(store.HistoryQuery{Key: key, Kind: store.KindUnban})
		if err != nil {
			t.Fatal(err)
		}
		if len(hist) != 1 || hist[0].Reason != reason {
			t.Errorf("unbans of %s in the history: %+v, want one %q", key, hist, reason)
		}
	}
}
