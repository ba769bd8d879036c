package follow

import (
	"sync"
	"syscall"
)

// tracker says whether nxadm/tail's shared inotify tracker has started.
// The tracker makes its inotify instance the first time a path is watched
// (watch.WatchCreate), on a goroutine of its own, and ends the process
// (util.Fatal, exit status 1) when it cannot: on a host at its
// fs.inotify.max_user_instances, say. So before the first watch
// trackerReady makes an instance itself and closes it: where none can be
// had, the followers poll instead (the package doc's promise), and ask
// again at their next Follow. Once a watch was made the tracker holds its
// own instance for the life of the process. (A process that takes the
// last instance between the probe and the tracker's start, microseconds
// apart, is the one case left.)
var tracker struct {
	mu      sync.Mutex
	started bool
}

// trackerReady returns nil if the tracker has started or can start (an
// inotify instance can be had), else why not. A nil return marks it
// started: the caller watches a path at once.
func trackerReady() error {
	tracker.mu.Lock()
	defer tracker.mu.Unlock()
	if tracker.started {
		return nil
	}
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC)
	if err != nil {
		return err
	}
	syscall.Close(fd)
	tracker.started = true
	return nil
}
