package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRuntimeFailureExit4: a command that started and failed under it (here:
// the database file is not a database) exits 4, not 2, naming the file.
func TestRuntimeFailureExit4(t *testing.T) {
	dir := t.TempDir()
	cfg := opTestConfig(t, dir)
	for _, args := range [][]string{
		{"list"},
		{"history", "203.0.113.7"},
		{"top"},
		{"ban", "203.0.113.7", "--for", "1h"},
		{"unban", "203.0.113.7"},
		{"clean"},
		{"run"},
	} {
		t.Run(args[0], func(t *testing.T) {
			state := filepath.Join(dir, "state")
			if err := os.MkdirAll(state, 0o750); err != nil {
				t.Fatal(err)
			}
			db := filepath.Join(state, "logjail.db")
			// A file that was never a database (a disk error, a stray copy).
			if err := os.WriteFile(db, []byte(strings.Repeat("not a database\n", 512)), 0o600); err != nil {
				t.Fatal(err)
			}
			code, out, stderr := run(t, "", append(args, "--config", cfg)...)
			if code != exitRuntime || !strings.Contains(stderr, db) {
				t.Errorf("exit %d, stderr %q (stdout %q); want %d naming %s", code, stderr, out, exitRuntime, db)
			}
		})
	}
}
