package follow

import (
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/nxadm/tail/watch"
)

// watches holds the process's one subscription to nxadm/tail's inotify
// tracker for each followed path, shared by every follower of the path
// (two sources naming one file, or overlapping globs). The tracker keeps
// one event channel a path: two followers each reading it took turns at
// its events (each event woke one of them), and the first to stop
// watching closed it under the other, which then read the path only on
// its safety poll. Here one forwarder a path wakes every follower of it,
// and the tracker's watch is removed with the path's last follower.
//
// mu serializes subscribe and unsubscribe, and is held across their calls
// into the tracker; a forwarder never takes it (it reads its path's wake
// channels through an atomic pointer, replaced whole under mu), so the
// tracker, which waits for a forwarder to take each event, never waits
// behind mu.
var watches = struct {
	mu    sync.Mutex
	paths map[string]*pathWatch
}{paths: map[string]*pathWatch{}}

// pathWatch is one path's subscription.
type pathWatch struct {
	wakes atomic.Pointer[[]chan<- struct{}] // its followers' wake channels
	done  chan struct{}                     // closed when its forwarder ends
}

// subscribe has the events of path wake wake (a send that never blocks:
// a full channel already has its wake-up), watching path through the
// tracker if no follower does yet.
func subscribe(path string, wake chan<- struct{}) error {
	path = filepath.Clean(path)
	watches.mu.Lock()
	defer watches.mu.Unlock()
	pw := watches.paths[path]
	if pw == nil {
		if err := watch.WatchCreate(path); err != nil {
			return err
		}
		events := watch.Events(path)
		pw = &pathWatch{done: make(chan struct{})}
		pw.wakes.Store(&[]chan<- struct{}{})
		watches.paths[path] = pw
		go func() {
			defer close(pw.done)
			for range events { // closed by RemoveWatchCreate
				for _, w := range *pw.wakes.Load() {
					select {
					case w <- struct{}{}:
					default:
					}
				}
			}
		}()
	}
	ws := append(slices.Clone(*pw.wakes.Load()), wake)
	pw.wakes.Store(&ws)
	return nil
}

// unsubscribe undoes subscribe(path, wake). With the path's last
// follower gone, its watch is removed from the tracker and its forwarder
// has ended when unsubscribe returns.
func unsubscribe(path string, wake chan<- struct{}) error {
	path = filepath.Clean(path)
	watches.mu.Lock()
	defer watches.mu.Unlock()
	pw := watches.paths[path]
	if pw == nil {
		return nil
	}
	ws := slices.Clone(*pw.wakes.Load())
	if i := slices.Index(ws, wake); i >= 0 {
		ws = slices.Delete(ws, i, i+1)
	}
	pw.wakes.Store(&ws)
	if len(ws) > 0 {
		return nil
	}
	delete(watches.paths, path)
	err := watch.RemoveWatchCreate(path)
	<-pw.done
	return err
}
