//go:build !linux

package follow

// trackerReady is nil where nxadm/tail's tracker is not inotify's
// (tracker_linux.go says why Linux needs a probe).
func trackerReady() error { return nil }
