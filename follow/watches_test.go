package follow

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/nxadm/tail/watch"
)

// woken waits for a wake-up on w (inotify's: nothing else sends on it
// here).
func woken(t *testing.T, w chan struct{}, who string) {
	t.Helper()
	select {
	case <-w:
	case <-time.After(wait):
		t.Fatalf("%s: no wake-up from inotify in %v", who, wait)
	}
}

// TestWatchesShared: two followers of one path both wake at a write
// (the tracker's one channel a path woke one of them an event); when
// one stops following it the other still wakes (the tracker closed the
// shared channel under it); when the last stops, the tracker no longer
// watches the path.
func TestWatchesShared(t *testing.T) {
	if err := trackerReady(); err != nil {
		t.Fatalf("inotify: %v", err)
	}
	path := filepath.Join(t.TempDir(), "access.log")
	appendFile(t, path, "")
	a, b := make(chan struct{}, 1), make(chan struct{}, 1)
	for _, w := range []chan struct{}{a, b} {
		if err := subscribe(path, w); err != nil {
			t.Fatal(err)
		}
	}
	appendFile(t, path, "one\n")
	woken(t, a, "a")
	woken(t, b, "b")
	if err := unsubscribe(path, a); err != nil {
		t.Fatal(err)
	}
	for len(b) > 0 { // a wake-up of the first write's later events
		<-b
	}
	appendFile(t, path, "two\n")
	woken(t, b, "b, after a stopped")
	select {
	case <-a:
		t.Error("a woken after it stopped following the path")
	default:
	}
	if err := unsubscribe(path, b); err != nil {
		t.Fatal(err)
	}
	if watch.Events(filepath.Clean(path)) != nil {
		t.Error("the tracker still has a channel for the path after its last follower")
	}
	watches.mu.Lock()
	n := len(watches.paths)
	watches.mu.Unlock()
	if n != 0 {
		t.Errorf("%d paths still subscribed", n)
	}
}

// TestTwoFollowersOneFile: two Follows of one file (two sources naming
// it) both read every line, and the second goes on reading after the
// first stops.
func TestTwoFollowersOneFile(t *testing.T) {
	name := filepath.Join(t.TempDir(), "access.log")
	appendFile(t, name, "")
	r1 := start(t, Options{Paths: []string{name}, FromStart: true})
	r2 := start(t, Options{Paths: []string{name}, FromStart: true})
	appendFile(t, name, "first\nsecond\n")
	r1.waitLines(2)
	r2.waitLines(2)
	r1.stop()
	appendFile(t, name, "third\n")
	lines := r2.waitLines(3)
	if got := onlyLines(lines); got[2].Text != "third" {
		t.Errorf("lines: %+v", got)
	}
}
