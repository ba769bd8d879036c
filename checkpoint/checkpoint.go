// Package checkpoint joins the detector and the state. A Writer turns
// decisions into history and into the table of active bans, collects the key
// states the detector changed and the source positions that fed them, and
// writes them all as one checkpoint (one state.Checkpoint, all or nothing)
// into a state.CheckpointSink. Restore gives a
// fresh detector back the state of the last checkpoint, with the positions,
// so that reading the logs again from there rebuilds exactly the state a
// crash lost: no line counted twice, none lost. Restore, KeyStates and
// RestoreGuard read a state.RestoreSource. Both are interfaces, so that
// a state other than the SQLite store (package store) plugs in.
//
// The invariant that makes this exact: a checkpoint holds the detector state
// after some entry and the positions just past the lines that produced the
// entries before it, never more, never less. The daemon keeps it by checkpointing
// between lines (so does internal/feedtest, the tests' reading loop). A line a file's guard holds
// (pipeline.Guard) is not in the state yet: the position saved is the one
// before it, and the guard's newest time is saved with it (SaveGuard).
//
// Two clocks: the active bans end on the wall clock (Resume at start, the
// cleaner's passes), the detector's bans on log time. One unban reaches
// the history per ban: the one of the clock that ends it first; Keep drops
// the other.
//
// Cost: a checkpoint has the detector encode the changed states straight
// into one buffer of data (detector.ChangesAppend, whose keys are views)
// and copies their keys into one string, so
// that taking it allocates a few times, not once a state; the state
// (package store: key runs) writes them as one sorted run of compact
// entries, not a row each (store's doc, "Key runs"; docs/performance.md).
// A restore reads the runs merged, newest wins, which give back exactly
// the rows a table of one row per (rule, key) held (TestRunsRestoreAsRows).
// Where every state the detector tracks changes between marks (a daemon
// whose keys all come back), a checkpoint says so (state.Checkpoint's
// Mark and Cover, Writer.cover) and the store drops its runs from before
// the mark unread instead of merging them (store's doc, "Key runs";
// TestCoversRestoreAsRows).
//
// Boundaries: It owns turning the detector's state and the logs' positions
// into state rows and back. It must not know the implementation of the
// state (it takes state's interfaces, never *store.DB), speak SQL (store
// does), nor decide anything.
package checkpoint

import (
	"errors"
	"fmt"
	"iter"
	"maps"
	"strings"
	"time"

	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/internal/pool"
	"github.com/logjail/logjail/pipeline"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/state"
)

// Writer gathers what the next checkpoint writes. It is used by one
// goroutine (the one that runs the pipeline).
type Writer struct {
	db        state.CheckpointSink
	events    []state.Event
	bans      map[state.BanKey]*state.Ban // nil: delete
	throttles map[state.BanKey]time.Time  // active throttles, by end: they end silently
	positions map[string]state.Position
	meta      map[string]string
	// held are the bans (not throttles) the store's active bans hold,
	// including those recorded since the last checkpoint: what a ban's
	// unban must find to reach the history (Keep). Set by Resume.
	held    map[state.BanKey]struct{}
	resumed bool

	async       bool
	inflight    chan error        // the checkpoint being written, if any
	failedAsync *state.Checkpoint // set by the writing goroutine on error
	failed      *state.Checkpoint // a checkpoint that failed: the next one writes it too
	arena       int               // bytes of key state data the last checkpoint collected
	keyBytes    int               // bytes of key text the last checkpoint collected
	keyRows     int               // and the key states it collected
	// rows and data are collect's buffers of the key rows and their
	// states' bytes, lent to the checkpoint they went into until it is in
	// the database (lent), then used again: a live daemon checkpoints
	// several times a second, and a new pair each time was a tenth of
	// its garbage (issue 23). A checkpoint that failed keeps its pair
	// (the next one writes it again), and collect makes a new one.
	rows []state.KeyRow
	data []byte
	lent bool
	// The cover (state.Checkpoint's Mark and Cover: Writer.cover): whether
	// a checkpoint was marked, and covered since, the key states written
	// since (the marked one's included), and how many before the detector
	// is asked again.
	marked, covered bool
	sinceMark       int
	nextAsk         int
	// prepared is closed once Prepare's goroutine has made prepRows and
	// prepData, which the next collect takes; nil when none was asked.
	prepared chan struct{}
	prepRows []state.KeyRow
	prepData []byte
}

// NewWriter returns a Writer that checkpoints into db, on the caller's
// goroutine.
func NewWriter(db state.CheckpointSink) *Writer {
	return &Writer{
		db:        db,
		bans:      map[state.BanKey]*state.Ban{},
		throttles: map[state.BanKey]time.Time{},
		positions: map[string]state.Position{},
		meta:      map[string]string{},
		held:      map[state.BanKey]struct{}{},
	}
}

// NewAsyncWriter returns a Writer that writes each checkpoint on its own
// goroutine, beside the reading of the logs. Call Close at the end.
func NewAsyncWriter(db state.CheckpointSink) *Writer {
	w := NewWriter(db)
	w.async = true
	return w
}

// Resume picks up the active bans of the last checkpoint, which det (just
// restored from it) holds too. Throttles, which end silently, are watched
// so that they leave the table of active bans as if there had been no
// restart. A detector ban of a rule that cfg no longer has cannot end by
// itself (its state was dropped at restore): it is lifted at the
// checkpoint's time, with an unban in the history that says why.
//
// With a non-zero now (the wall clock at start), a ban whose wall-clock
// until passed while logjail was not running leaves the active bans (and
// so the actions) with an unban in the history, once. A ban the detector
// made stays in det, on log time: det lifts it itself when the logs it
// reads reach the ban's log-time until, as a replay of the same lines
// would (DESIGN.md, "Time"), and that later unban is not recorded again
// (Keep). An operator's ban, which the detector holds on the wall clock's
// word, is lifted in det too.
func (w *Writer) Resume(cfg *rules.Config, det *detector.Detector, now time.Time) error {
	bans, err := w.db.ActiveBans()
	if err != nil {
		return err
	}
	_, at, err := w.db.Global()
	if err != nil {
		return err
	}
	w.resumed = true
	for _, b := range bans {
		if b.Kind == state.PhaseBan {
			w.held[state.BanKey{Rule: b.Rule, Key: b.Key}] = struct{}{}
		}
	}
	var out []detector.Decision
	for _, b := range bans {
		k := state.BanKey{Rule: b.Rule, Key: b.Key}
		rule := cfg.Rule(b.Rule)
		switch {
		case b.Origin == state.OriginDetector && rule == nil:
			w.bans[k] = nil
			delete(w.held, k)
			w.events = append(w.events, state.Event{
				Time: at, Rule: b.Rule, Key: b.Key, Kind: string(detector.Unban), Addresses: b.Addresses,
				Reason: "rule " + b.Rule + " is no longer in the configuration", Origin: b.Origin, LogOnly: b.LogOnly,
			})
		case b.Kind == string(detector.Throttle):
			w.throttles[k] = b.Until
		case !now.IsZero() && rule != nil && !b.Until.IsZero() && !b.Until.After(now):
			n := len(out)
			if b.Origin != state.OriginDetector {
				out = det.Lift(b.Until, rule, b.Key, out)
			}
			if len(out) == n {
				out = append(out, detector.Decision{Rule: b.Rule, Key: b.Key, Kind: detector.Unban, Time: b.Until,
					Addresses: b.Addresses, Origin: b.Origin, LogOnly: b.LogOnly})
			}
			for i := n; i < len(out); i++ {
				out[i].Reason = "ban expired while logjail was not running"
			}
		}
	}
	w.Decisions(out)
	return nil
}

// Keep records ds as Decisions does and returns the decisions recorded,
// in place: ds without the unbans that would end a ban the store's active
// bans no longer hold. Those are the detector's own unbans, on log time,
// of bans whose wall-clock end has already been recorded (by the cleaner,
// or by Resume after downtime): the history has one unban per ban, and
// the actions are not told twice. An operator's unban (Who set) and the
// unbans of a Writer never resumed are always kept.
func (w *Writer) Keep(ds []detector.Decision) []detector.Decision {
	kept := ds[:0]
	for i := range ds {
		if w.record(&ds[i]) {
			kept = append(kept, ds[i])
		}
	}
	clear(ds[len(kept):])
	return ds[:len(kept)]
}

// Decisions records decisions, in the order made, for the next checkpoint:
// each goes to the history; throttles and bans into the active bans, unbans
// out of them.
func (w *Writer) Decisions(ds []detector.Decision) {
	for i := range ds {
		w.record(&ds[i])
	}
}

// record records d, unless it is an unban Keep drops; it reports whether
// it did.
func (w *Writer) record(d *detector.Decision) bool {
	k := state.BanKey{Rule: d.Rule, Key: d.Key}
	if d.Kind == detector.Unban && w.resumed && d.Who == "" {
		if _, ok := w.held[k]; !ok {
			return false
		}
	}
	w.events = append(w.events, state.Event{
		Time: d.Time, Rule: d.Rule, Key: d.Key, Kind: string(d.Kind), Until: d.Until,
		Reason: d.Reason, Violations: d.Violations, Addresses: d.Addresses, Origin: d.Origin, Who: d.Who, LogOnly: d.LogOnly,
		Node: d.Node,
	})
	switch d.Kind {
	case detector.Throttle, detector.Ban:
		w.bans[k] = &state.Ban{
			Rule: d.Rule, Key: d.Key, Kind: string(d.Kind), Since: d.Time, Until: d.Until,
			Reason: d.Reason, Violations: d.Violations, Addresses: d.Addresses, Origin: d.Origin, Who: d.Who, LogOnly: d.LogOnly,
			Node: d.Node,
		}
		if d.Kind == detector.Throttle {
			w.throttles[k] = d.Until
			delete(w.held, k)
		} else {
			delete(w.throttles, k)
			w.held[k] = struct{}{}
		}
	case detector.Unban:
		w.bans[k] = nil
		delete(w.throttles, k)
		delete(w.held, k)
	}
	return true
}

// Meta records a value for the meta table, written with the next
// checkpoint (the daemon's per-file guard state).
func (w *Writer) Meta(k, v string) { w.meta[k] = v }

// GuardKey is the meta key under which the newest time of the guard of
// the file at path (pipeline.Guard) is saved, in RFC 3339 with
// nanoseconds, with the checkpoint that holds the position it goes with.
func GuardKey(path string) string { return "guard " + path }

// SaveGuard records g's newest time for path with the next checkpoint.
func (w *Writer) SaveGuard(path string, g *pipeline.Guard) {
	if t := g.Newest(); !t.IsZero() {
		w.Meta(GuardKey(path), t.Format(time.RFC3339Nano))
	}
}

// RestoreGuard gives g the newest time saved for path, if any.
func RestoreGuard(db state.RestoreSource, path string, g *pipeline.Guard) error {
	v, ok, err := db.Meta(GuardKey(path))
	if err != nil || !ok {
		return err
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return fmt.Errorf("meta %q: %w", GuardKey(path), err)
	}
	g.Resume(t)
	return nil
}

// Position records how far a source file has been read: the lines before
// Offset are all in the detector state the next checkpoint writes.
func (w *Writer) Position(p state.Position) { w.positions[p.Path] = p }

// Flush takes one checkpoint at log time t: the key states det changed
// since the last one, its global state, the decisions and positions
// recorded since. A throttle that ended by t (throttles end silently) leaves
// the active bans. Taking it costs the caller only the detector's Changes
// (about 0.1 µs a changed key); an asynchronous Writer then writes it on its
// own goroutine while the caller reads on, one checkpoint at a time, and
// returns here the error of the previous write, if any. On error nothing is
// lost: the next Flush writes the failed checkpoint's content with its own.
func (w *Writer) Flush(det *detector.Detector, t time.Time) error {
	// The previous checkpoint is written before this one is taken, so that
	// its rows (a few hundred bytes a changed key, a million keys in a
	// catch-up) are garbage before this one's are made: one checkpoint's
	// rows in memory at a time, not two. The caller waited for it here
	// either way.
	prevErr := w.wait()
	if w.failed == nil {
		w.lent = false // the previous checkpoint is in the database
	}
	c := w.collect(det, t)
	if w.failed != nil {
		c = merge(w.failed, c)
		w.failed = nil
	}
	if !w.async {
		if err := w.db.Checkpoint(c); err != nil {
			w.failed = c
			return err
		}
		return prevErr
	}
	done := make(chan error, 1)
	w.inflight = done
	go func() {
		err := w.db.Checkpoint(c)
		if err != nil {
			w.failedAsync = c
		}
		done <- err
	}()
	return prevErr
}

// Close waits for a checkpoint being written and, if it failed, tries it
// once more. The Writer may not be used after.
func (w *Writer) Close() error {
	err := w.wait()
	if w.failed != nil {
		if err = w.db.Checkpoint(w.failed); err == nil {
			w.failed = nil
		}
	}
	return err
}

// Wait waits until the checkpoints taken so far are in the database (or
// have failed: the error, and the next Flush writes them again). Readers of
// the database see them after it returns.
func (w *Writer) Wait() error { return w.wait() }

// wait waits for the checkpoint being written, if any.
func (w *Writer) wait() error {
	if w.inflight == nil {
		return nil
	}
	err := <-w.inflight
	w.inflight = nil
	if err != nil {
		w.failed, w.failedAsync = w.failedAsync, nil
	}
	return err
}

// What collect sizes its buffers by when it has no last checkpoint's
// size: bytes of a state's Data, and of a key's text (an IPv6 address is
// up to 39), both above most.
const (
	arenaGuess = 256
	keyGuess   = 40
	// dataTouch is how many bytes of Data a state Prepare writes ahead:
	// about what the states of a few rules take (the genlog's three rules
	// average 60 to 70 bytes); arenaGuess, the capacity, would fault in
	// several times the memory used.
	dataTouch = 96
)

// Prepare has the buffers of the next checkpoint made ready for about
// states key states, on a goroutine of its own, while the caller goes on:
// made and written once, a byte a page, so that the checkpoint's collect
// does not fault their memory in on the caller's path. A replay calls it
// near its end with the states then pending (replay.Preparer): its one
// checkpoint, after the last line, collected on the merging goroutine,
// spent half its time in those faults (docs/performance.md, "Row 5: the
// end of replay --db"). The next collect waits for the goroutine and takes
// the buffers if they are larger than its own; it sizes them as before
// otherwise. What it prepares is never read before it is written, as the
// collect's own would be.
func (w *Writer) Prepare(states int) {
	if states <= 0 || w.prepared != nil {
		return
	}
	done := make(chan struct{})
	w.prepared = done
	go func() {
		defer close(done)
		// Room for an eighth more than asked, written for what was asked:
		// room never written is never faulted in (nor held).
		n := states + states/8
		w.prepRows = make([]state.KeyRow, 0, n)
		pool.Touch(w.prepRows[:states])
		w.prepData = make([]byte, 0, min(n*arenaGuess, maxArena))
		pool.Touch(w.prepData[:min(states*dataTouch, cap(w.prepData))])
	}()
}

// takePrepared waits for Prepare's buffers, if it was called, and returns
// whichever of them and rows, arena is the larger.
func (w *Writer) takePrepared(rows []state.KeyRow, arena []byte) ([]state.KeyRow, []byte) {
	if w.prepared == nil {
		return rows, arena
	}
	<-w.prepared
	w.prepared = nil
	if cap(w.prepRows) > cap(rows) {
		rows = w.prepRows
	}
	if cap(w.prepData) > cap(arena) {
		arena = w.prepData
	}
	w.prepRows, w.prepData = nil, nil
	return rows, arena
}

// maxArena bounds the buffer of states' Data collect sizes by a guess.
const maxArena = 8 << 20

// collect takes what the next checkpoint writes and starts afresh.
func (w *Writer) collect(det *detector.Detector, t time.Time) *state.Checkpoint {
	c := &state.Checkpoint{Time: t, Global: det.SaveGlobal(), Events: w.events}
	// The states' Data go into one buffer (sized by the last checkpoint's),
	// not one allocation each.
	rows, arena := w.rows[:0], w.data[:0]
	if w.lent {
		rows, arena = nil, nil
	}
	rows, arena = w.takePrepared(rows, arena)
	pending := det.Pending()
	if pending > cap(rows) {
		rows = make([]state.KeyRow, 0, pending)
	}
	// The first checkpoint (a replay's only one) has no last to size its
	// buffers by: they are sized by the states pending, generously (a
	// capacity never written is never faulted in), not grown by doubling
	// from nothing, each growth a copy into fresh memory (docs/performance.md,
	// "A checkpoint's cost a state").
	n := w.arena
	if n == 0 {
		n = pending * arenaGuess
	}
	if n = min(n, maxArena); n > cap(arena) {
		arena = make([]byte, 0, n)
	}
	c.Keys = rows
	w.cover(det, c)
	// The keys are copied into one string too, each a piece of it. A
	// strings.Builder never changes the bytes it holds (it only appends,
	// into new memory once full), so a piece of what String returns
	// stays the key's text: no second copy of the keys, nor a second pass
	// over the rows to point them at it. Sized as the last checkpoint's
	// keys, an eighth more (a state's key text averaged), or generously
	// for the first.
	per := keyGuess
	if w.keyRows > 0 {
		per = w.keyBytes/w.keyRows + 1
	}
	var text strings.Builder
	text.Grow(min(pending*per+pending*per/8, 8<<20))
	// The detector encodes each state's Data straight into arena.
	arena = det.ChangesAppend(arena, func(ks *detector.KeyState) {
		start := text.Len()
		text.WriteString(ks.Key)
		c.Keys = append(c.Keys, state.KeyRow{
			Rule: ks.Rule, Key: text.String()[start:], Data: ks.Data, LastSeen: ks.LastSeen,
			Requests: ks.Requests, Blocked: ks.Blocked, CPU: ks.CPU, Phase: string(ks.Phase), Until: ks.Until,
		})
	})
	w.arena = len(arena)
	w.rows, w.data, w.lent = c.Keys, arena, true
	if cap(w.rows) > 1<<16 || cap(w.data) > maxArena { // a catch-up's, kept no longer
		w.rows, w.data, w.lent = nil, nil, false
	}
	w.keyBytes, w.keyRows = text.Len(), len(c.Keys)
	w.sinceMark += len(c.Keys)
	for k, until := range w.throttles {
		if !until.After(t) {
			if b, pending := w.bans[k]; !pending || b == nil || b.Kind == string(detector.Throttle) {
				w.bans[k] = nil
			}
			delete(w.throttles, k)
		}
	}
	for k, b := range w.bans {
		if b == nil {
			c.DelBans = append(c.DelBans, k)
		} else {
			c.SetBans = append(c.SetBans, *b)
		}
	}
	for _, p := range w.positions {
		c.Positions = append(c.Positions, p)
	}
	if len(w.meta) > 0 {
		c.Meta = maps.Clone(w.meta)
	}
	w.events = nil // the checkpoint owns them now
	clear(w.bans)
	clear(w.positions)
	clear(w.meta)
	return c
}

// Covers (state.Checkpoint's Mark and Cover; store's doc, "Key runs"). A
// cover is ready once every state the detector tracks was reported since
// the mark (detector.CoverReady); after it, every checkpoint covers too
// (the states reported since the mark stay reported), until the next
// mark. A cover marks again once the states written since the mark exceed
// the states tracked by an eighth (coverMark: enough for the next cover to
// drop); a mark is given up for a new one once they exceed them by a
// quarter with no cover (coverSlack: a detector with idle keys, whose
// states do not all change). So the runs since the mark, which a store
// weighs as its base, hold at most a quarter more states than there are,
// plus one checkpoint's.
const (
	coverMark  = 8
	coverSlack = 4
)

// cover decides c's Cover and Mark, before det's changes are taken (a
// mark is set, and a cover readied, before them).
func (w *Writer) cover(det *detector.Detector, c *state.Checkpoint) {
	live := det.Stats().Keys
	switch {
	case !w.marked:
	case w.covered:
		c.Cover = true
	case w.sinceMark > 0 && w.sinceMark+det.Pending() >= max(live, w.nextAsk) && w.sinceMark <= live+live/coverSlack:
		// A pass over det's states: asked again only after an eighth more.
		if c.Cover = det.CoverReady(); !c.Cover {
			w.nextAsk = w.sinceMark + det.Pending() + max(live/8, 1)
		}
	}
	switch {
	case !w.marked,
		c.Cover && w.sinceMark > live+live/coverMark,
		!c.Cover && w.sinceMark > live+live/coverSlack:
		det.MarkCover()
		c.Mark, w.marked, w.covered = true, true, false
		w.sinceMark, w.nextAsk = 0, 0
	case c.Cover:
		w.covered = true
	}
}

// merge is the checkpoint that writes old then c: c's rows win, and c
// keeps old's Mark and Cover.
func merge(old, c *state.Checkpoint) *state.Checkpoint {
	m := *c
	m.Mark, m.Cover = old.Mark || c.Mark, old.Cover || c.Cover
	m.Events = append(append([]state.Event(nil), old.Events...), c.Events...)
	seen := map[state.BanKey]bool{}
	for _, r := range c.Keys {
		seen[state.BanKey{Rule: r.Rule, Key: r.Key}] = true
	}
	for _, r := range old.Keys {
		if !seen[state.BanKey{Rule: r.Rule, Key: r.Key}] {
			m.Keys = append(m.Keys, r)
		}
	}
	clear(seen)
	for _, b := range c.SetBans {
		seen[state.BanKey{Rule: b.Rule, Key: b.Key}] = true
	}
	for _, k := range c.DelBans {
		seen[k] = true
	}
	for _, b := range old.SetBans {
		if !seen[state.BanKey{Rule: b.Rule, Key: b.Key}] {
			m.SetBans = append(m.SetBans, b)
		}
	}
	for _, k := range old.DelBans {
		if !seen[k] {
			m.DelBans = append(m.DelBans, k)
		}
	}
	paths := map[string]bool{}
	for _, p := range c.Positions {
		paths[p.Path] = true
	}
	for _, p := range old.Positions {
		if !paths[p.Path] {
			m.Positions = append(m.Positions, p)
		}
	}
	if len(old.Meta) > 0 {
		m.Meta = maps.Clone(old.Meta)
		maps.Copy(m.Meta, c.Meta)
	}
	return &m
}

// Restore loads the last checkpoint of db into det, which must be fresh
// (pipeline.NewDetector), and returns the saved positions by path. A
// database without a checkpoint leaves det empty.
func Restore(db state.RestoreSource, cfg *rules.Config, det *detector.Detector) (map[string]state.Position, detector.RestoreStats, error) {
	global, _, err := db.Global()
	if err != nil {
		return nil, detector.RestoreStats{}, err
	}
	pos := map[string]state.Position{}
	if global == nil {
		return pos, detector.RestoreStats{}, nil
	}
	var readErr error
	st, err := det.Restore(cfg, global, KeyStates(db, &readErr))
	if err == nil {
		err = readErr
	}
	if err != nil {
		return nil, st, fmt.Errorf("restoring the checkpoint: %w", err)
	}
	ps, err := db.Positions()
	if err != nil {
		return nil, st, err
	}
	for _, p := range ps {
		pos[p.Path] = p
	}
	return pos, st, nil
}

// KeyStates reads the key states of db's last checkpoint as the detector
// restores them (Detector.Restore), one at a time and reusing one value; an
// error that ends the reading early is stored in *readErr.
func KeyStates(db state.RestoreSource, readErr *error) iter.Seq[*detector.KeyState] {
	return func(yield func(*detector.KeyState) bool) {
		errStop := errors.New("stop")
		var ks detector.KeyState
		err := db.Keys(func(r *state.KeyRow) error {
			ks = detector.KeyState{Rule: r.Rule, Key: r.Key, Data: r.Data, LastSeen: r.LastSeen,
				Requests: r.Requests, Blocked: r.Blocked, CPU: r.CPU, Phase: detector.Kind(r.Phase), Until: r.Until}
			if !yield(&ks) {
				return errStop
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStop) {
			*readErr = err
		}
	}
}

// PruneOptions returns what the cleaner prunes at now under cfg: key states
// idle for twice the longest window of any rule (their windows are empty),
// unless banned within the longest `remember` (their earlier bans still count
// for escalation); history older than history_retention; and vacuumPages
// free pages given back.
func PruneOptions(cfg *rules.Config, now time.Time, vacuumPages int) state.PruneOptions {
	var window, remember time.Duration
	for _, r := range cfg.Rules {
		for _, l := range r.Limits {
			window = max(window, l.Window)
		}
		remember = max(remember, r.Ban.Remember)
	}
	p := state.PruneOptions{KeysBefore: now.Add(-2 * window), VacuumPages: vacuumPages}
	if remember > 0 {
		p.KeepBannedSince = now.Add(-remember)
	}
	if cfg.HistoryRetention > 0 {
		p.HistoryBefore = now.Add(-cfg.HistoryRetention)
	}
	return p
}
