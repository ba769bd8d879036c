package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestHeld: Held names the writer holding a database (this process's pid)
// and says nothing once it is closed, or for a database never opened; it
// leaves the lock to its holder.
func TestHeld(t *testing.T) {
	path := filepath.Join(t.TempDir(), "logjail.db")
	if err := Held(path); err != nil {
		t.Fatalf("Held of a database never opened: %v", err)
	}
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var le *LockedError
	if err := Held(path); !errors.As(err, &le) || le.PID != os.Getpid() || le.Path != path || !errors.Is(err, ErrLocked) {
		t.Errorf("Held while open: %v, want a LockedError naming pid %d and %s", err, os.Getpid(), path)
	}
	if _, err := Open(path, Options{}); !errors.Is(err, ErrLocked) {
		t.Errorf("a second writer after Held: %v, want ErrLocked", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := Held(path); err != nil {
		t.Errorf("Held after Close: %v", err)
	}
}
