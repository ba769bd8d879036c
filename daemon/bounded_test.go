package daemon_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logjail/logjail/daemon"
	"github.com/logjail/logjail/store"
)

// TestCatchUpCheckpointsInSlices: a backlog of 40,000 new clients, read
// with a checkpoint interval of ten minutes and no decision to record, is
// still checkpointed as it is read, a slice of changed key states at a
// time (daemon.checkpointRows, 16,384), rather than held as one batch of
// rows until the interval (or the cleaner's pass) ends: before the daemon stops, the database
// already holds most of the keys and a position past most of the log.
func TestCatchUpCheckpointsInSlices(t *testing.T) {
	const clients = 40_000
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	logPath := filepath.Join(dir, "access.log")
	now := time.Now().UTC().Truncate(time.Second)
	var b strings.Builder
	var want int64 // the end of the line of the second slice's last key
	for i := range clients {
		if i == 2*16_384 {
			want = int64(b.Len())
		}
		at := now.Add(-time.Minute + time.Duration(i)*time.Millisecond)
		fmt.Fprintf(&b, "2001:db8:%x:%x::1 - - [%s] \"GET / HTTP/1.1\" 200 1 \"-\" \"t\"\n", i>>16, i&0xffff, at.Format("02/Jan/2006:15:04:05 -0700"))
	}
	if err := os.WriteFile(logPath, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "logjail.yaml")
	cfg := fmt.Sprintf(`state_dir: %[1]s
control_socket: %[1]s/control.sock
checkpoint: 10m
cleaner: "@every 10m"
metrics: ""
ipv6_prefix: 128
sources:
  - name: web
    paths: [%[2]s]
    format: combined
    timezone: UTC
    from: start
rules:
  - name: flood
    limits: ["1000 per 10s"]
    ban: {for: 10m}
`, state, logPath)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ctl := daemon.NewControl()
	go func() {
		done <- daemon.Run(ctx, daemon.Options{ConfigPath: cfgPath, Poll: true, Control: ctl,
			Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	}()
	stop := func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v\n%s", err, logs.String())
		}
	}
	// Wait, reading only the database (a status would take a checkpoint),
	// until a checkpoint has recorded the lines of two slices.
	size := int64(b.Len())
	deadline := time.Now().Add(30 * time.Second)
	var off int64
	for off = savedOffset(t, state, logPath); off < want; off = savedOffset(t, state, logPath) {
		select {
		case err := <-done:
			t.Fatalf("Run returned early: %v\n%s", err, logs.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("after 30 s, the saved position is %d of %d bytes: no checkpoint of the backlog before the interval (10m) ends", off, size)
		}
	}
	db, err := store.Open(filepath.Join(state, "logjail.db"), store.Options{ReadOnly: true})
	if err != nil {
		stop()
		t.Fatal(err)
	}
	keys := 0
	err = db.Keys(func(*store.KeyRow) error { keys++; return nil })
	db.Close()
	stop()
	if err != nil {
		t.Fatal(err)
	}
	// The key states that go with that position: two slices at least.
	if keys < 2*16_384 {
		t.Errorf("%d key states in the database with a position of %d bytes, want %d at least\n%s", keys, off, 2*16_384, logs.String())
	}
}
