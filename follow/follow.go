// Package follow follows the files of one source live and hands out their
// whole lines in batches, each line with the exact byte offset just past it,
// so that the daemon can save a position and, after a restart, go on exactly
// there: no line lost, none read twice.
//
// Files are read by this package itself, with pread at a byte offset it
// counts: the offset after a line is the offset before it plus the line's
// bytes and its ending ("\n" or "\r\n"). A last line without its newline yet
// is held until the newline arrives; it is never handed out and never
// counted in an offset. Change notification comes from inotify, through
// github.com/nxadm/tail's shared tracker (watch.WatchCreate: the directory
// of each followed path is watched, and the events named after the path
// wake the reader), with a slow poll as a safety net, or from polling alone
// (Options.Poll, or when inotify cannot be had).
//
// Why not nxadm/tail's Tail itself: it cannot say which file (inode) a line
// came from once it has reopened a rotated or truncated file, it reopens a
// renamed file without reading the rest of the old one, its offsets come
// from Tell() and race with its reopening (its issues #77, #78 and #60), and
// it numbers lines from 1 again after a seek. Exact positions through
// rotation need all of that, so this package reads and counts itself and
// uses the library for what it does well: inotify first, polling after.
//
// What happens to a path:
//   - Rotation by rename (access.log → access.log.1, a new access.log): the
//     old file is read to its end first; the new file's lines are held until
//     the old file is finished, which is when the new file has data (the
//     writer has switched) or the old file has not grown for a minute. So
//     the lines of one path come in file order, old file first.
//   - Copytruncate (the file shrinks below the offset read, or its first line
//     changes): the file is read again from its start.
//   - A file that disappears is finished like a rotated one; when a file
//     appears at the path again it is read from its start, as is a new file
//     that a glob (re-scanned every Options.Rescan) finds.
//   - Rotated siblings (source.RotatedFrom) of a followed path are never
//     followed as files of their own, even when a glob matches them.
//
// Start positions. A path met for the first time uses its saved position
// (Options.Positions) when the file at the path continues the saved one
// (source.FileID.Continues): reading starts at the saved offset and line.
// When the path holds another file, the saved file is looked for beside it
// (a rotated sibling with the saved device and inode, or else with the saved
// first-line hash and at least the saved size); its rest is read from the
// saved offset, then the new file from its start. A file without a saved
// position starts at the end of its last whole line when Follow starts, or
// at its start with Options.FromStart; a file that appears later starts at
// its start.
//
// Positions: Batch.File always identifies the file the lines came from
// (device, inode, first-line hash). The position to save after a batch is
// Batch.Path at the last line's Offset and Line, with Batch.File's
// identity. While the rest of a rotated file is read, batches carry the
// rotated-from path and the OLD file's identity: a restart then finds the
// old file beside the path by its inode and finishes it. Once the old file
// is finished, batches carry the new file's identity, and a saved position
// describes the new file.
//
// Memory: one batch (at most Options.MaxBatch lines) and one read buffer
// per source, plus per file the held partial line (at most source.MaxLine
// bytes kept; the rest of an over-long line is counted and skipped, the
// line handed out cut to source.MaxLine). Follow blocks on its channel:
// nothing queues without bound. Lines share one allocation per read chunk
// (64 KiB), as in package source: clone a small piece kept for long.
//
// Limits: a copytruncate that is rewritten past the old offset before it
// is noticed, with an unchanged first line, cannot be told from appending.
// Lines that a second writer still appends to a rotated file after the new
// file has data are not read.
package follow

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/logjail/logjail/source"
	"github.com/logjail/logjail/store"
	"github.com/nxadm/tail/watch"
)

// Line is one whole line of a followed file.
type Line struct {
	Text   string // without its line ending
	Line   int64  // 1-based line number in its file
	Offset int64  // byte offset just past the line and its ending: the position to save
	// Truncated says the line was longer than source.MaxLine: Text holds
	// its head only (Offset counts all of it).
	Truncated bool
}

// Batch is consecutive lines of one file, in order. The daemon processes a
// batch, then may save Batch.Path at the last line's Offset.
type Batch struct {
	// Path is the path as configured or globbed; for a rotated file being
	// finished, the path it rotated from (positions are per configured
	// path).
	Path string
	// File is the file the lines came from (device, inode, first-line
	// hash). Size is the file's size when the lines were read.
	File  source.FileID
	Lines []Line
}

// Options say what to follow and how.
type Options struct {
	Paths     []string                  // files and globs of one source
	Positions map[string]store.Position // saved positions by path (may be nil)
	FromStart bool                      // a file never seen before starts at its start
	Poll      bool                      // poll instead of inotify
	Rescan    time.Duration             // glob re-scan interval (default 10s)
	// MaxBatch is the most lines per batch (default 512). A batch is sent
	// as soon as no more lines are ready, without waiting to fill it.
	MaxBatch int
	Logger   *slog.Logger // may be nil
}

// Defaults and intervals.
const (
	DefaultRescan   = 10 * time.Second
	DefaultMaxBatch = 512

	// pollEvery is the poll interval when polling; safetyEvery the poll
	// that backs inotify up (a lost event, a queue overflow).
	pollEvery   = 50 * time.Millisecond
	safetyEvery = time.Second
	// drainIdle: a rotated or removed file whose replacement stays empty is
	// finished when it has not grown for this long.
	drainIdle = time.Minute
	// readSlice is how much one file may read in one step before the
	// others get their turn.
	readSlice = 4 << 20
)

// ErrNoPaths is returned by Follow for options without paths.
var ErrNoPaths = errors.New("follow: no paths")

// Follow follows the files until ctx is done, sending batches on out (it
// never closes out). It returns ctx.Err() on cancellation, or an error that
// makes following impossible (a bad glob). Errors on one file (permission
// denied, vanished) are logged and retried, not fatal.
func Follow(ctx context.Context, o Options, out chan<- Batch) error {
	if len(o.Paths) == 0 {
		return ErrNoPaths
	}
	for _, p := range o.Paths {
		if _, err := filepath.Match(p, ""); err != nil {
			return fmt.Errorf("follow: path %q: %w", p, err)
		}
	}
	if o.Rescan <= 0 {
		o.Rescan = DefaultRescan
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &follower{
		o: o, out: out, log: log,
		tracked: map[string]*tracked{},
		buf:     make([]byte, 64<<10),
		now:     time.Now,
	}
	defer f.closeAll()

	wake := make(chan struct{}, 1)
	every := pollEvery
	if !o.Poll {
		// nxadm/tail's shared inotify tracker tells when a followed path
		// changes (written, created, renamed, removed); the reading and the
		// counting of bytes stay here (see the package doc for why).
		f.wake, f.watched = wake, map[string]bool{}
		every = safetyEvery
		defer f.unwatchAll()
	}
	f.rescan(true)
	poll := time.NewTicker(every)
	defer poll.Stop()
	rescan := time.NewTicker(o.Rescan)
	defer rescan.Stop()
	for {
		more, err := f.step(ctx)
		if err != nil {
			return err
		}
		if more {
			if err := ctx.Err(); err != nil {
				return err
			}
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		case <-poll.C:
		case <-rescan.C:
			f.rescan(false)
		}
	}
}

// follower is the state of one Follow call; one goroutine uses it.
type follower struct {
	o       Options
	out     chan<- Batch
	log     *slog.Logger
	tracked map[string]*tracked
	// With inotify: the paths watched through nxadm/tail's tracker, and
	// where their events wake the loop.
	wake     chan struct{}
	watched  map[string]bool
	forwards sync.WaitGroup
	order    []string // keys of tracked, sorted
	buf      []byte   // the read buffer
	now      func() time.Time
}

// tracked is one path: the file at it, and rotated files still being
// finished (oldest first).
type tracked struct {
	path    string
	literal bool // configured as is (not globbed): kept while missing
	fresh   bool // not begun: its saved position still applies
	initial bool // found by the first scan: "from end" applies
	cur     *reader
	olds    []*reader
	lastErr string // the last error logged, to log each error once
}

// hasMeta reports whether p is a glob.
func hasMeta(p string) bool { return strings.ContainsAny(p, `*?[\`) }

// rescan expands the paths and starts tracking new ones.
func (f *follower) rescan(initial bool) {
	var names []string
	literal := map[string]bool{}
	for _, p := range f.o.Paths {
		if !hasMeta(p) {
			p = filepath.Clean(p)
			names = append(names, p)
			literal[p] = true
			continue
		}
		m, _ := filepath.Glob(p) // the pattern was checked
		for _, name := range m {
			if fi, err := os.Stat(name); err == nil && fi.Mode().IsRegular() {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	seen := map[string]bool{}
	for _, name := range names {
		if !literal[name] && slices.ContainsFunc(names, func(base string) bool {
			return base != name && source.RotatedFrom(name, base)
		}) {
			continue // an archive of a followed file
		}
		seen[name] = true
		if f.tracked[name] == nil {
			f.tracked[name] = &tracked{path: name, literal: literal[name], fresh: true, initial: initial}
		}
	}
	for name, t := range f.tracked {
		if !seen[name] && !t.literal && t.cur == nil && len(t.olds) == 0 {
			delete(f.tracked, name)
		}
	}
	f.order = f.order[:0]
	for name := range f.tracked {
		f.order = append(f.order, name)
	}
	slices.Sort(f.order)
	if f.wake != nil {
		for _, name := range f.order {
			f.watch(name)
		}
		for name := range f.watched {
			if f.tracked[name] == nil {
				f.unwatch(name)
			}
		}
	}
}

// watch has nxadm/tail's inotify tracker report the changes of path: its
// directory is watched, and the events named path wake the loop. Without
// inotify the loop goes on polling.
func (f *follower) watch(path string) {
	if f.watched[path] {
		return
	}
	if err := watch.WatchCreate(path); err != nil {
		f.log.Warn("inotify unavailable for this path: polling it", "path", path, "err", err)
		return
	}
	f.watched[path] = true
	events := watch.Events(path)
	f.forwards.Go(func() {
		for range events { // closed by RemoveWatchCreate
			select {
			case f.wake <- struct{}{}:
			default:
			}
		}
	})
}

func (f *follower) unwatch(path string) {
	delete(f.watched, path)
	if err := watch.RemoveWatchCreate(path); err != nil {
		f.log.Warn("inotify remove", "path", path, "err", err)
	}
}

func (f *follower) unwatchAll() {
	for path := range f.watched {
		f.unwatch(path)
	}
	f.forwards.Wait()
}

// step reads what is ready in every tracked path. more says that some file
// has more to read right away.
func (f *follower) step(ctx context.Context) (more bool, err error) {
	for _, name := range f.order {
		m, err := f.stepPath(ctx, f.tracked[name])
		if err != nil {
			return false, err
		}
		more = more || m
	}
	return more, nil
}

// stepPath notices a rotation, truncation, removal or creation at t's
// path and reads what is ready, old files first.
func (f *follower) stepPath(ctx context.Context, t *tracked) (more bool, err error) {
	if t.fresh && !f.begin(t) {
		return false, nil
	}
	fi, serr := os.Stat(t.path)
	if t.cur != nil && (serr != nil || !sameFile(fi, t.cur.id)) {
		if serr == nil {
			f.log.Info("rotated", "path", t.path)
		} else {
			f.log.Info("removed", "path", t.path)
		}
		t.cur.lastGrowth = f.now()
		t.olds = append(t.olds, t.cur)
		t.cur = nil
	}
	if t.cur == nil && serr == nil && fi.Mode().IsRegular() {
		r, err := openReader(t.path, f.now())
		if err != nil {
			f.fail(t, err)
		} else {
			f.log.Info("following", "path", t.path, "inode", r.id.Inode)
			t.cur = r
			t.lastErr = ""
		}
	} else if serr != nil && !errors.Is(serr, fs.ErrNotExist) {
		f.fail(t, serr)
	}
	// The new file's size is looked at before the old file is read to
	// its end: a writer that has written to the new file has finished the
	// old one, so what the old file holds now is all it will hold.
	newData := false
	if t.cur != nil {
		if fi, err := t.cur.f.Stat(); err == nil && fi.Size() > 0 {
			newData = true
		}
	}
	for len(t.olds) > 0 {
		o := t.olds[0]
		m, err := f.drain(ctx, t.path, o)
		if err != nil || m {
			return m, err
		}
		if !newData && f.now().Sub(o.lastGrowth) < drainIdle {
			return false, nil // the new file's lines wait for the old file's end
		}
		if o.partLen > 0 {
			f.log.Warn("rotated file ends in a partial line: dropped", "path", t.path, "inode", o.id.Inode, "bytes", o.partLen)
		}
		f.log.Info("finished rotated file", "path", t.path, "inode", o.id.Inode, "offset", o.off)
		o.close()
		t.olds = t.olds[1:]
	}
	if t.cur == nil {
		return false, nil
	}
	return f.drain(ctx, t.path, t.cur)
}

// fail logs err for t, once until another error (or success) comes.
func (f *follower) fail(t *tracked, err error) {
	if s := err.Error(); s != t.lastErr {
		t.lastErr = s
		f.log.Warn("cannot read", "path", t.path, "err", err)
	}
}

// begin opens t's path for the first time, applying its saved position.
// It reports false when it must be tried again (an error other than a
// missing file).
func (f *follower) begin(t *tracked) bool {
	cur, err := openReader(t.path, f.now())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		f.fail(t, err)
		return false
	}
	t.fresh = false
	pos, saved := f.o.Positions[t.path]
	if saved {
		sid := pos.File()
		if cur != nil && cur.id.Continues(sid, pos.Offset) {
			cur.seek(pos.Offset, pos.Line)
			t.cur = cur
			f.log.Debug("resuming", "path", t.path, "offset", pos.Offset, "line", pos.Line)
			return true
		}
		if old := f.findRotated(t.path, sid, pos.Offset); old != nil {
			old.seek(pos.Offset, pos.Line)
			t.olds = append(t.olds, old)
			f.log.Info("finishing file rotated while stopped", "path", t.path, "file", old.name, "offset", pos.Offset)
		} else {
			f.log.Warn("saved file not found: reading the file at the path from its start", "path", t.path, "offset", pos.Offset)
		}
		t.cur = cur
		return true
	}
	if cur == nil {
		return true // it starts at its start when it appears
	}
	if t.initial && !f.o.FromStart {
		if err := cur.toEnd(f.buf); err != nil {
			cur.close()
			t.fresh = true
			f.fail(t, err)
			return false
		}
	}
	f.log.Debug("following", "path", t.path, "offset", cur.off, "line", cur.line)
	t.cur = cur
	return true
}

// findRotated looks beside path for the file a position was saved for: a
// rotated sibling (not compressed) with the saved device and inode (and
// first line), or else with the saved first line, at least off bytes long.
func (f *follower) findRotated(path string, saved source.FileID, off int64) *reader {
	dir := filepath.Dir(path)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var byHead *reader
	for _, e := range ents {
		name := filepath.Join(dir, e.Name())
		if name == path || !source.RotatedFrom(name, path) || strings.HasSuffix(name, ".gz") || !e.Type().IsRegular() {
			continue
		}
		r, err := openReader(name, f.now())
		if err != nil {
			continue
		}
		switch {
		case r.id.Continues(saved, off):
			if byHead != nil {
				byHead.close()
			}
			return r
		case byHead == nil && saved.HeadHash != "" && r.id.HeadHash == saved.HeadHash && r.id.Size >= off:
			byHead = r
		default:
			r.close()
		}
	}
	return byHead
}

// closeAll closes every open file.
func (f *follower) closeAll() {
	for _, t := range f.tracked {
		if t.cur != nil {
			t.cur.close()
		}
		for _, o := range t.olds {
			o.close()
		}
	}
}
