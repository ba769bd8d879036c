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
// (Options.Poll, or when inotify cannot be had: a path whose directory
// inotify refuses, or a host where no inotify instance can be made, which
// trackerReady finds before nxadm/tail's tracker would end the process).
//
// Why not nxadm/tail's Tail itself: it cannot say which file (inode) a line
// came from once it has reopened a rotated or truncated file, it reopens a
// renamed file without reading the rest of the old one, its offsets come
// from Tell() and race with its reopening (its issues #77, #78 and #60), and
// it numbers lines from 1 again after a seek. Exact positions through
// rotation need all of that, so this package reads and counts itself and
// uses the library for what it does well: inotify first, polling after.
//
// Which files are a path's rotated siblings, in which order they were
// rotated, and how a compressed one is read is package rotation's model
// (numbered, dateext with or without a dateformat, gz/bz2/xz/zst, the
// source's olddir: Options.OldDir). A file is known by its device and
// inode, and a copy by the fingerprint of its first line (decompressed).
//
// What happens to a path:
//   - Rotation by rename (logrotate's create, nginx's and Apache's mv +
//     reopen, dateext, olddir; compressed at once or delayed): the old
//     file is read to its end through the descriptor held open, then every
//     file rotated after it (when more than one rotation happened between
//     two looks), then the new file. The new file's lines are held until
//     the old file is finished, which is when the new file has data (the
//     writer has switched) or the old file has not grown for a minute. So
//     the lines of one path come in file order, old file first. The
//     workers of one server reopen one after the other (nginx's do): what
//     the last ones still write to the finished file is read too, until it
//     has not grown for a second, and handed out with the new file's
//     identity and position (saving it changes nothing: a restart neither
//     loses nor repeats a line; these lines come after some of the new
//     file's, within the configured skew).
//   - Copytruncate (the file shrinks below the offset read, or its first
//     line changes): the lines between the offset read and the copy point
//     are read from the rotated copy (the sibling with the same first
//     line, compressed or not, at least as long as the offset), then the
//     file is read again from its start. Lines written between
//     logrotate's copy and its truncation are in neither file: logrotate
//     itself loses them.
//   - A file that disappears is finished like a rotated one; when a file
//     appears at the path again it is read from its start, as is a new file
//     that a glob (re-scanned every Options.Rescan) finds.
//   - Rotated siblings of a followed path are never followed as files of
//     their own, even when a glob matches them.
//   - A path that is no regular file (a FIFO, a device, a directory), or
//     whose file starts as binary or compressed content, is not opened for
//     reading (a FIFO is never waited on: shutdown is never blocked); it is
//     logged once ("cannot read", ErrNotRegular, ErrBinary) and looked at
//     again on every poll. An unreadable or vanished file is logged once
//     the same way.
//
// Start positions. A path met for the first time uses its saved position
// (Options.Positions) when the file at the path continues the saved one
// (source.FileID.Continues): reading starts at the saved offset and line.
// When the path holds another file, the saved file is looked for among
// the path's rotated siblings (by device and inode, or else by the
// fingerprint of its first line and at least the saved length, compressed
// copies decompressed); its rest is read from the saved offset, then every
// sibling rotated after it from its start, oldest first, then the file at
// the path from its start: every line written while logjail was stopped
// is read once, across any number of rotations (a globbed file that was
// rotated away without a new file at its name is tracked by its saved
// position all the same). A file without a saved position starts at the
// end of its last whole line when Follow starts, or at its start with
// Options.FromStart; a file that appears later starts at its start.
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
// line handed out cut to source.MaxLine), and with Options.Texts the
// buffers its free list keeps (NewTexts' n, 68 KiB each, shared by the
// sources) and those the batches in flight hold. Follow blocks on its channel:
// nothing queues without bound. Lines share one allocation per read chunk
// (64 KiB), as in package source: clone a small piece kept for long. A
// consumer that hands the batches' line slices back (Options.Spare,
// Recycle) has them used again. With Options.Texts the chunks are
// buffers used again too, once every batch with a line in one is
// recycled: then nothing may read a line's text, nor a string cut from
// it, after its batch is recycled, unless the batch was pinned first
// (Pin: the daemon pins a batch whose line the guard of package pipeline
// holds past it). Without Texts the chunks are strings of their own.
//
// Limits: a copytruncate that is rewritten past the old offset before it
// is noticed, with an unchanged first line, cannot be told from appending.
// Lines that a writer still appends to a rotated file more than a second
// after its last growth, once the new file has data, are not read, nor are
// late lines written while logjail is stopped after it had read the new
// file. A saved file that rotation has deleted (past logrotate's `rotate`
// count) cannot be finished: the file at the path is read from its start,
// and a warning says so. Rotated names that package rotation does not know
// (logrotate's `extension`, which puts the number before the suffix) are
// not found.
//
// Boundaries: It owns following a source's files live with exact offsets,
// through rotation. It must not parse lines (the daemon's pipeline does) nor
// decide anything.
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
	"syscall"
	"time"

	"github.com/logjail/logjail/rotation"
	"github.com/logjail/logjail/source"
	"github.com/logjail/logjail/state"
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
	// Cursors is set by the sources that are no files (package stream):
	// for a journald source, the journal cursor of each line, saved as
	// the position's HeadHash (Batch.After). Nil for files.
	Cursors []string
	// texts are the buffers of Options.Texts that the lines' texts are
	// in, one reference each (Recycle drops them).
	texts []*text
}

// After is the position to save once line i of the batch has been
// processed: Path at the line's Offset and Line with File's identity, and
// for a journald batch the line's cursor in HeadHash.
func (b *Batch) After(i int) state.Position {
	l := b.Lines[i]
	p := state.PositionAt(b.Path, b.File, l.Offset, l.Line)
	if b.Cursors != nil {
		p.HeadHash = b.Cursors[i]
	}
	return p
}

// Options say what to follow and how.
type Options struct {
	Paths     []string                  // files and globs of one source
	Positions map[string]state.Position // saved positions by path (may be nil)
	FromStart bool                      // a file never seen before starts at its start
	Poll      bool                      // poll instead of inotify
	Rescan    time.Duration             // glob re-scan interval (default 10s)
	// MaxBatch is the most lines per batch (default 512). A batch is sent
	// as soon as no more lines are ready, without waiting to fill it.
	MaxBatch int
	// OldDir is the source's olddir (rules.Source.OldDir): rotated files
	// are looked for there as well as beside their log.
	OldDir string
	Logger *slog.Logger // may be nil
	// Spare, when set, holds the line slices of batches the consumer is
	// done with (Recycle): a batch's lines go into one of them, not a new
	// one, so that following makes no garbage a batch beyond the lines'
	// text. Nil: every batch has its own slice.
	Spare chan []Line
	// Texts, when set, gives the buffers the lines' texts are read into,
	// used again once every batch with lines in one is recycled (Recycle;
	// see Texts for the contract). Nil: each read's lines share a string
	// of their own, left to the collector.
	Texts *Texts
}

// Recycle gives the slice of lines of b, a batch of Follow's that the
// caller is done with, back to spare (Options.Spare) for a later batch,
// and drops b's references to the buffers its lines' texts are in
// (Options.Texts): a buffer no batch holds any more is used again,
// unless it was pinned (Pin). Nothing may read b.Lines, nor a string cut
// from a line's text, after it (Texts). A full spare drops the slice (the
// collector takes it). The texts are let go at once: a slice kept in
// spare holds no line's text. Each batch is recycled at most once.
func Recycle(spare chan []Line, b Batch) {
	for _, t := range b.texts {
		t.release()
	}
	if spare == nil || cap(b.Lines) == 0 {
		return
	}
	clear(b.Lines)
	select {
	case spare <- b.Lines[:0]:
	default:
	}
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
	// finished when it has not grown for this long. settle: a finished
	// renamed file is read on until it has not grown for this long (the
	// workers of one server reopen their logs one after the other).
	drainIdle = time.Minute
	settle    = time.Second
	// readSlice is how much one file may read in one step before the
	// others get their turn; readBuf is one read.
	readSlice = 4 << 20
	readBuf   = 64 << 10
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
		buf:     make([]byte, readBuf),
		now:     time.Now,
	}
	defer f.closeAll()

	wake := make(chan struct{}, 1)
	every := pollEvery
	if !o.Poll {
		if err := trackerReady(); err != nil {
			// Without an inotify instance nxadm/tail's tracker would end
			// the process (tracker_linux.go): every path is polled.
			f.log.Warn("inotify unavailable: polling every followed file", "every", pollEvery.String(), "err", err)
			o.Poll = true
		}
	}
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
	wake    chan struct{}
	watched map[string]bool
	order   []string // keys of tracked, sorted
	buf     []byte   // the read buffer
	now     func() time.Time
	// unwatchable are the paths inotify refused, said once each.
	unwatchable map[string]bool
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
	// late are renamed files already finished, read a moment more for
	// what the writers that reopen last still write to them.
	late    []*reader
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
	if initial {
		// A globbed file with a saved position that rotation took away
		// while logjail was stopped (no new file at its name yet): it is
		// tracked all the same, so that its rest is found and read.
		for p := range f.o.Positions {
			if _, err := os.Lstat(p); err != nil && slices.ContainsFunc(f.o.Paths, func(g string) bool {
				ok, _ := filepath.Match(g, p)
				return hasMeta(g) && ok
			}) {
				names = append(names, p)
			}
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	seen := map[string]bool{}
	for _, name := range names {
		if !literal[name] && slices.ContainsFunc(names, func(base string) bool {
			return base != name && rotation.Rotated(name, base, f.o.OldDir)
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
// directory is watched, and the events named path wake the loop (through
// the process's one subscription for the path, which wakes every
// follower of it: watches.go). Without inotify the loop goes on polling.
func (f *follower) watch(path string) {
	if f.watched[path] {
		return
	}
	if err := subscribe(path, f.wake); err != nil {
		// Said once a path. A missing directory is no fault (the example
		// config names Apache's logs beside nginx's): the file is polled
		// for, and watched once its directory exists.
		if f.unwatchable == nil {
			f.unwatchable = map[string]bool{}
		}
		if !f.unwatchable[path] {
			f.unwatchable[path] = true
			if errors.Is(err, fs.ErrNotExist) {
				f.log.Debug("no such directory yet: polling for the file", "path", path)
			} else {
				f.log.Warn("inotify unavailable for this path: polling it", "path", path, "err", err)
			}
		}
		return
	}
	f.watched[path] = true
}

func (f *follower) unwatch(path string) {
	delete(f.watched, path)
	if err := unsubscribe(path, f.wake); err != nil {
		f.log.Warn("inotify remove", "path", path, "err", err)
	}
}

func (f *follower) unwatchAll() {
	for path := range f.watched {
		f.unwatch(path)
	}
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
	var rotated *reader
	if t.cur != nil && (serr != nil || !sameFile(fi, t.cur.id)) {
		if serr == nil {
			f.log.Info("rotated", "path", t.path)
		} else {
			f.log.Info("removed", "path", t.path)
		}
		rotated, t.cur = t.cur, nil
		rotated.lastGrowth = f.now()
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
	} else if t.cur == nil && serr == nil {
		f.fail(t, fmt.Errorf("%s (%s): %w", t.path, kind(fi.Mode()), ErrNotRegular))
	}
	if rotated != nil {
		// The rotated file is read to its end, then every file rotated
		// after it (more than one rotation between two looks), then the
		// new file. The new file was opened first: a rotation racing this
		// look leaves it out of the list, not read twice.
		var skip uint64
		if t.cur != nil {
			skip = t.cur.id.Inode
		}
		_, newer, _ := f.locate(t.path, rotated.id, rotated.off, rotated.line, skip, false)
		f.queue(t, append([]*reader{rotated}, newer...))
	}
	if t.cur != nil && t.cur.truncated() {
		f.copied(t)
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
		if !o.done && !newData && f.now().Sub(o.lastGrowth) < drainIdle {
			return false, nil // the new file's lines wait for the old file's end
		}
		f.log.Info("finished rotated file", "path", t.path, "inode", o.id.Inode, "offset", o.off)
		t.olds = t.olds[1:]
		if !o.done && len(t.olds) == 0 {
			// Other workers of the server may write to it a moment more.
			o.lastGrowth = f.now()
			t.late = append(t.late, o)
		} else {
			f.closeOld(t, o)
		}
	}
	if t.cur == nil {
		for _, o := range t.late {
			f.closeOld(t, o)
		}
		t.late = nil
		return false, nil
	}
	more, err = f.drain(ctx, t.path, t.cur)
	if err != nil {
		return more, err
	}
	return more, f.drainLate(ctx, t)
}

// closeOld closes a rotated file that is finished.
func (f *follower) closeOld(t *tracked, o *reader) {
	if o.partLen > 0 {
		f.log.Warn("rotated file ends in a partial line: dropped", "path", t.path, "inode", o.id.Inode, "bytes", o.partLen)
	}
	o.close()
}

// drainLate reads what the writers that reopened last still wrote to the
// renamed files finished last (t.late), up to settle after their last
// growth. Their lines go out with the identity and position of the file at
// the path, as far as it was read: saving that position changes nothing, so
// a restart after them neither loses nor repeats a line of either file.
func (f *follower) drainLate(ctx context.Context, t *tracked) error {
	for i := 0; i < len(t.late); {
		o := t.late[i]
		var lines []Line
		for {
			n, rerr := o.f.ReadAt(f.buf, o.pos)
			if n > 0 {
				o.pos += int64(n)
				o.lastGrowth = f.now()
				o.lines(f.buf[:n], nil, func(l Line) error {
					l.Offset, l.Line = t.cur.off, t.cur.line
					lines = append(lines, l)
					return nil
				})
			}
			if rerr != nil || n < len(f.buf) {
				break
			}
		}
		if len(lines) > 0 {
			f.log.Info("late lines of a rotated file", "path", t.path, "inode", o.id.Inode, "lines", len(lines))
			id := t.cur.id
			id.Size = t.cur.lastSize
			for len(lines) > 0 {
				k := min(len(lines), f.o.MaxBatch)
				select {
				// lines[:k:k]: a batch recycled (Recycle) must not
				// reach into the next batch's lines.
				case f.out <- Batch{Path: t.path, File: id, Lines: lines[:k:k]}:
				case <-ctx.Done():
					return ctx.Err()
				}
				lines = lines[k:]
			}
		}
		if f.now().Sub(o.lastGrowth) >= settle { // read once more before closing
			f.closeOld(t, o)
			t.late = slices.Delete(t.late, i, i+1)
			continue
		}
		i++
	}
	return nil
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
	t.fresh, t.lastErr = false, ""
	pos, saved := f.o.Positions[t.path]
	if saved {
		sid := pos.File()
		if cur != nil && cur.id.Continues(sid, pos.Offset) {
			cur.seek(pos.Offset, pos.Line)
			t.cur = cur
			f.log.Debug("resuming", "path", t.path, "offset", pos.Offset, "line", pos.Line)
			return true
		}
		var skip uint64
		if cur != nil {
			skip = cur.id.Inode
		}
		if rest, newer, found := f.locate(t.path, sid, pos.Offset, pos.Line, skip, true); found {
			f.queue(t, append([]*reader{rest}, newer...))
			f.log.Info("finishing files rotated while stopped", "path", t.path, "file", rest.name, "offset", pos.Offset, "newer", len(newer))
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

// queue appends rotated files to t's, to be read before the file at the
// path, oldest first. Every one but the last is done at its end (a newer
// one follows it); so is a copy or a compressed file. The last one, a
// renamed file, may still be written until the writer reopens its log.
func (f *follower) queue(t *tracked, rs []*reader) {
	for i, r := range rs {
		if i < len(rs)-1 {
			r.done = true
		}
	}
	if len(t.olds) > 0 && len(rs) > 0 {
		t.olds[len(t.olds)-1].done = true
	}
	t.olds = append(t.olds, rs...)
}

// copied handles the truncation of the file at t's path (copytruncate):
// the lines between the offset read and the copy point are read from the
// rotated copy (the file with the same first line, compressed or not), and
// any copy made after it, before the file at the path is read again from
// its start. Lines written between logrotate's copy and its truncation are
// in neither file: lost by logrotate itself.
func (f *follower) copied(t *tracked) {
	c := t.cur
	rest, newer, found := f.locate(t.path, c.id, c.off, c.line, c.id.Inode, true)
	if found {
		rest.done = true
		f.queue(t, append([]*reader{rest}, newer...))
		f.log.Info("truncated: reading the rest from the rotated copy, then the file from its start", "path", t.path, "copy", rest.name, "offset", c.off)
	} else {
		f.log.Info("truncated: reading from the start (no rotated copy holds more than was read)", "path", t.path, "offset", c.off)
	}
	c.seek(0, 0)
	c.lastSize = 0
	if err := c.identify(); err != nil {
		f.log.Warn("identify", "path", t.path, "err", err)
	}
}

// locate finds the file id, read up to off after line lines, among path's
// rotated siblings (package rotation): by device and inode while it has
// them, else by the fingerprint of its first line (of the decompressed
// stream, for a compressed copy) and a length of at least off, the newest
// such file first. It returns that file opened at off (when open; else
// nil), the siblings rotated after it opened at their start (oldest
// first), and whether it was found. A sibling with inode skip (the file now
// at the path) is left out.
func (f *follower) locate(path string, id source.FileID, off, line int64, skip uint64, open bool) (rest *reader, newer []*reader, found bool) {
	sibs, err := rotation.Siblings(path, f.o.OldDir)
	if err != nil {
		f.log.Warn("listing rotated files", "path", path, "err", err)
	}
	inodes := make([]uint64, len(sibs))
	devs := make([]uint64, len(sibs))
	for i, n := range sibs {
		if fi, err := os.Stat(n.Path); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				inodes[i], devs[i] = st.Ino, uint64(st.Dev)
			}
		}
	}
	try := func(i int) *reader {
		r, err := openSibling(sibs[i].Path, f.now())
		if err != nil {
			return nil
		}
		if r.id.HeadHash != id.HeadHash {
			r.close()
			return nil
		}
		if err := r.skipTo(off, line); err != nil {
			r.close()
			return nil
		}
		return r
	}
	k := -1
	for i := len(sibs) - 1; i >= 0 && k < 0; i-- {
		if inodes[i] == id.Inode && devs[i] == id.Dev && inodes[i] != skip {
			if rest = try(i); rest != nil {
				k = i
			}
		}
	}
	for i := len(sibs) - 1; i >= 0 && k < 0 && id.HeadHash != ""; i-- {
		if inodes[i] != skip {
			if rest = try(i); rest != nil {
				k = i
			}
		}
	}
	if k < 0 {
		return nil, nil, false
	}
	if !open {
		rest.close()
		rest = nil
	}
	for i := k + 1; i < len(sibs); i++ {
		if inodes[i] == skip && skip != 0 {
			continue
		}
		r, err := openSibling(sibs[i].Path, f.now())
		if err != nil {
			f.log.Warn("cannot read rotated file: skipped", "path", path, "file", sibs[i].Path, "err", err)
			continue
		}
		newer = append(newer, r)
	}
	return rest, newer, true
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
		for _, o := range t.late {
			o.close()
		}
	}
}
