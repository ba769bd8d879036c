package daemon

import (
	"context"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/ops"
	"github.com/logjail/logjail/state"
)

// Lists that follow their files (DESIGN.md, "Lists, ranges and safety").
//
// The `file:` lists the configuration read (allow, deny, trusted_proxies,
// ranges' cidrs: rules.Config.ListFiles) are polled every listPoll for
// their inode, size and modification time; a change seen on one poll and
// unchanged on the next (an editor's write is over) reloads the whole
// configuration, as SIGHUP does. A file changed, removed or made unreadable
// is a reload all the same: a broken list refuses the reload, says why in
// the log, and the running lists stay. The configuration file itself is not
// watched: a changed rule takes an operator's SIGHUP. So a list change is
// applied 1 to 2 polls after the file's last write, under a second; polling
// is simpler than inotify and follows an editor's rename, a symlink swap
// (a configuration-management tool's) and a file on any file system alike.
const listPoll = 400 * time.Millisecond

// allowReason is the reason of the unban of a rule's ban whose key an
// allow list now covers.
const allowReason = "allow list"

// fileStamp is what a poll compares of one list file.
type fileStamp struct {
	ok    bool // the file could be stat'ed
	ino   uint64
	dev   uint64
	size  int64
	mtime time.Time
}

func stampOf(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	s := fileStamp{ok: true, size: fi.Size(), mtime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.ino, s.dev = st.Ino, uint64(st.Dev)
	}
	return s
}

// listWatcher polls the list files that files returns (the running
// configuration's, which a reload may change).
type listWatcher struct {
	files   func() []string
	names   []string
	stamps  map[string]fileStamp
	pending bool // a change seen on the last poll
}

// newListWatcher takes the files' stamps now: a change made after this is
// seen.
func newListWatcher(files func() []string) *listWatcher {
	w := &listWatcher{files: files}
	w.rebase(files())
	return w
}

func (w *listWatcher) rebase(names []string) {
	w.names, w.stamps, w.pending = names, map[string]fileStamp{}, false
	for _, n := range names {
		w.stamps[n] = stampOf(n)
	}
}

// poll reports whether a change has settled: seen on the previous poll,
// nothing more on this one.
func (w *listWatcher) poll() bool {
	if now := w.files(); !slices.Equal(now, w.names) {
		w.rebase(now) // a reload changed the lists: start over
		return false
	}
	moved := false
	for _, n := range w.names {
		if s := stampOf(n); s != w.stamps[n] {
			w.stamps[n] = s
			moved = true
		}
	}
	if moved {
		w.pending = true
		return false
	}
	settled := w.pending
	w.pending = false
	return settled
}

// run polls until ctx is done and sends on changed (without blocking: one
// pending reload is enough) once a change has settled.
func (w *listWatcher) run(ctx context.Context, changed chan<- struct{}) {
	tick := time.NewTicker(listPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if w.poll() {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}
}

// listFiles returns the running configuration's list files.
func (d *decider) listFiles() []string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.cfg.ListFiles()
}

// liftAllowed lifts the rule bans (the detector's) whose keys the allow
// list now covers wholly (rules.Config.AllowedKey), with an unban whose
// reason is "allow list", recorded in the history and handed to every
// action. An operator's ban (`ban --force`) stays, and so do deny-list and
// banned-range bans (static handles them). At start it is given the bans
// startActions found allowed; after a reload that changed the allow list
// (bans nil) it reads the active bans from the database after a
// checkpoint, so that it sees every ban decided so far.
func (d *decider) liftAllowed(bans []state.Ban) {
	if bans == nil {
		if err := d.sync(); err != nil {
			d.log.Error("allow list: bans not checked", "err", err)
			return
		}
		var err error
		if bans, err = d.db.ActiveBans(); err != nil {
			d.log.Error("allow list: bans not checked", "err", err)
			return
		}
	}
	t := d.last
	if t.IsZero() {
		t = d.now()
	}
	var out []detector.Decision
	for _, b := range bans {
		if b.Origin != state.OriginDetector || !d.cfg.AllowedKey(b.Key) {
			continue
		}
		n := len(out)
		if r := d.cfg.Rule(b.Rule); r != nil {
			out = d.det.Lift(t, r, b.Key, out)
		}
		if len(out) == n { // a throttle, or a rule no longer configured
			out = append(out, detector.Decision{Rule: b.Rule, Key: b.Key, Kind: detector.Unban, Time: t,
				Addresses: b.Addresses, LogOnly: b.LogOnly})
		}
		for i := n; i < len(out); i++ {
			out[i].Reason = allowReason
		}
	}
	if len(out) == 0 {
		return
	}
	d.dl.Decisions(ops.SourceAllow, out)
	d.w.Decisions(out)
	d.acts.Decisions(out)
	d.dirty = true
	d.soon = time.After(decisionFlush)
}
