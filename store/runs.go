package store

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/logjail/logjail/internal/prefetch"
)

// The key runs as the writer's connection reads and writes them, inside
// its transaction.

// runs lists the runs, oldest first.
func (w *conn) runs() ([]runInfo, error) {
	rows, err := w.c.Query(runsQuery, nil)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var rs []runInfo
	dest := make([]driver.Value, 4)
	for {
		if err := rows.Next(dest); err == io.EOF {
			return rs, nil
		} else if err != nil {
			return nil, err
		}
		var r runInfo
		for i, p := range []*int64{&r.run, &r.tier, &r.parts, &r.bytes} {
			v, ok := dest[i].(int64)
			if !ok {
				return nil, fmt.Errorf("key runs: column %d is %T", i, dest[i])
			}
			*p = v
		}
		rs = append(rs, r)
	}
}

// partLabel names the part id in an error: its run and its place in it.
func partLabel(id int64) string {
	return fmt.Sprintf("key run %d part %d", id>>runShift, id&(1<<runShift-1))
}

// loadPart reads the part id, in new memory.
func (w *conn) loadPart(id int64) ([]byte, error) {
	v, err := w.queryOne(sReadPart, id)
	if err == io.EOF {
		return nil, errors.New("missing")
	} else if err != nil {
		return nil, err
	}
	b, ok := v.([]byte)
	if !ok {
		return nil, fmt.Errorf("data is %T", v)
	}
	return b, nil
}

// insertPart writes a part and its first (rule, key).
func (w *conn) insertPart(id, tier, n int64, pruneMS any, data, rule, key []byte) error {
	if err := w.execArgs(sInsertPart, id, tier, n, int64(len(data)), pruneMS, data); err != nil {
		return err
	}
	return w.execArgs(sInsertPartKey, id, rule, key)
}

// How far ahead of the row it adds addOrdered asks for a row, and for its
// key's text and its data; rowSize is a row's bytes.
const (
	rowAhead  = 8
	dataAhead = 4
	rowSize   = int(unsafe.Sizeof(KeyRow{}))
)

// writeRun writes rows (each (rule, key) once, the last mention: a nil
// Data a tombstone) as a new run after runs, then takes a step of the
// merges (mergeStep).
func (db *DB) writeRun(w *conn, rows []KeyRow) error {
	for i := range rows {
		if k := &rows[i]; k.Rule == "" || k.Key == "" {
			return fmt.Errorf("keys[%d]: empty rule or key (%q, %q)", i, k.Rule, k.Key)
		}
	}
	runs, err := w.runs()
	if err != nil {
		return fmt.Errorf("key runs: %w", err)
	}
	next, err := db.nextRun(w)
	if err != nil {
		return err
	}
	db.order, db.sortKeys = sortRows(rows, db.order, db.sortKeys)
	rw := &runWriter{run: next, tier: tierCheckpoint, insert: w.insertPart, buf: db.part[:0]}
	if err := addOrdered(rw, rows, db.order); err != nil {
		return err
	}
	err = rw.flush()
	db.part = rw.buf[:0]
	if err != nil {
		return err
	}
	if rw.part > 0 {
		runs = append(runs, runInfo{run: rw.run, tier: rw.tier, parts: rw.part, bytes: rw.bytes})
	}
	return db.mergeStep(w, runs, db.stepBudget(rw.bytes))
}

// addOrdered adds rows to rw in order (sortRows'). The rows are read in
// the order of their keys, not the order they were collected in: a row,
// its key's text and its data are each a cache miss. Asked for ahead:
// the row rowAhead rows before it is added, every cache line of it (a
// KeyRow is 144 bytes: three lines, where asking for its first alone
// left two misses a row; BenchmarkAddOrdered 1.22-1.33 -> 0.76-0.84 ms),
// its text and data dataAhead before.
func addOrdered(rw *runWriter, rows []KeyRow, order []int32) error {
	for k, i := range order {
		if j := k + rowAhead; j < len(order) {
			p := unsafe.Pointer(&rows[order[j]])
			prefetch.Line(p)
			prefetch.Line(unsafe.Add(p, 64))
			prefetch.Line(unsafe.Add(p, rowSize-1))
		}
		if j := k + dataAhead; j < len(order) {
			r := &rows[order[j]]
			prefetch.Line(unsafe.Pointer(unsafe.StringData(r.Key)))
			if len(r.Data) > 0 {
				prefetch.Line(unsafe.Pointer(unsafe.SliceData(r.Data)))
			}
		}
		if err := rw.add(&rows[i]); err != nil {
			return err
		}
	}
	return nil
}

// pruneKeys deletes every key state last seen before p.KeysBefore (or
// never) that is neither throttled nor banned at now (see Prune), and
// returns how many. It reads only the parts that may hold one: those
// whose prune_ms (the least last-seen time of their states, not counting
// those throttled or banned for good) is before p.KeysBefore. An entry of
// such a part last seen before then is the key's state only when no newer
// run holds the key: each is looked up in the newer runs, a part of each
// (key_parts: each part's first key). Each part read is written again in
// place:
//
//   - an entry that a newer run replaces is left out (that run's entry
//     or tombstone still says what the key is);
//   - an idle state not held (one query of the bans and the history) is
//     left out in the oldest run, and replaced by a tombstone in a newer
//     one (an older run may hold the key);
//   - the rest as it was; prune_ms is the least of what is left.
//
// So the keys read afterwards are those a merge of every run, tombstoning
// each idle state, would leave (TestPruneReadsOldParts), and a part
// pruned once is not read again until one of its states goes idle.
func (db *DB) pruneKeys(w *conn, now time.Time, p PruneOptions) (int64, error) {
	before := p.KeysBefore.UnixMilli()
	old, err := w.oldParts(before)
	if err != nil || len(old) == 0 {
		return 0, err
	}
	if db.finishBeforePrune(old) {
		// A prune gave up a merge since the last one ended: this one
		// finishes it first, so that merges end however often Prune runs.
		if err := db.stepOn(w, db.merge, -1); err != nil {
			return 0, err
		}
		db.pruneFinished++
		if old, err = w.oldParts(before); err != nil || len(old) == 0 {
			return 0, err
		}
	}
	runs, err := w.runs()
	if err != nil {
		return 0, fmt.Errorf("key runs: %w", err)
	}
	firsts, err := w.partKeys(runs)
	if err != nil {
		return 0, err
	}
	nowMS := now.UnixMilli()
	keep := any(nil) // no ban since: none kept for it
	if !p.KeepBannedSince.IsZero() {
		keep = p.KeepBannedSince.UnixMilli()
	}
	seekers := make([]partSeeker, len(runs))
	for i := range runs {
		seekers[i] = partSeeker{run: runs[i].run, firsts: firsts[i], load: w.loadPart, id: -1}
	}
	pw := &runWriter{buf: db.part[:0]}
	defer func() { db.part = pw.buf[:0] }()
	var n int64
	for _, id := range old {
		ri, ok := slices.BinarySearchFunc(runs, id>>runShift, func(r runInfo, run int64) int { return cmp.Compare(r.run, run) })
		if !ok {
			return 0, fmt.Errorf("%s: no such run", partLabel(id))
		}
		data, err := w.loadPart(id)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", partLabel(id), err)
		}
		pw.empty()
		changed := false
		c := cursor{blob: data}
		for len(c.blob) > 0 {
			if err := c.decode(); err != nil {
				return 0, fmt.Errorf("%s: %w: %w", partLabel(id), errCorruptRun, err)
			}
			e := &c.e
			if !e.tomb {
				if err := e.parse(); err != nil {
					return 0, err
				}
			}
			if e.tomb || e.hasSeen && e.lastSeen >= before {
				if err := pw.put(e); err != nil {
					return 0, err
				}
				continue
			}
			// A state seen before p.KeysBefore, or never: is it the key's?
			replaced := false
			for j := ri + 1; j < len(runs) && !replaced; j++ {
				if replaced, err = seekers[j].holds(e); err != nil {
					return 0, err
				}
			}
			switch {
			case replaced:
				changed = true
				continue
			case len(e.phase) != 0 && (!e.hasUntil || e.until > nowMS):
				// throttled or banned
			default:
				held, err := w.held(e, nowMS, keep)
				if err != nil {
					return 0, err
				}
				if held {
					break
				}
				n++
				changed = true
				if ri == 0 {
					continue // nothing older to hide
				}
				t := *e
				t.tomb, t.body = true, []byte{entTomb}
				e = &t
			}
			if err := pw.put(e); err != nil {
				return 0, err
			}
		}
		if !changed {
			continue
		}
		if err := db.cancelMergeOf(w, id>>runShift); err != nil {
			return 0, err
		}
		var prune any
		if pw.hasPrune {
			prune = pw.pruneMS
		}
		data = pw.buf
		if data == nil {
			data = []byte{}
		}
		if err := w.execArgs(sUpdatePart, id, pw.n, int64(len(data)), prune, data); err != nil {
			return 0, fmt.Errorf("%s: %w", partLabel(id), err)
		}
	}
	if n == 0 {
		return 0, nil
	}
	// A prune of an eighth of the entries or more merges every run into
	// a new base without the tombstones, so that a vacuum can give their
	// pages back; fewer wait for the next merge into a new base.
	total, err := w.queryInt(`SELECT coalesce(sum(n), 0) FROM key_runs WHERE id >> 20 NOT IN (SELECT run FROM key_hidden)`)
	if err != nil || n*8 < total+n {
		return n, err
	}
	if runs, err = w.runs(); err != nil {
		return 0, fmt.Errorf("key runs: %w", err)
	}
	return n, db.mergeAll(w, runs)
}

// oldParts lists the parts whose prune_ms is before ms, in id order.
func (w *conn) oldParts(ms int64) ([]int64, error) {
	rows, err := w.c.Query(`SELECT id FROM key_runs WHERE prune_ms < `+fmt.Sprint(ms)+`
		AND id >> 20 NOT IN (SELECT run FROM key_hidden) ORDER BY id`, nil)
	if err != nil {
		return nil, fmt.Errorf("key runs: %w", err)
	}
	defer rows.Close()
	var ids []int64
	dest := make([]driver.Value, 1)
	for {
		if err := rows.Next(dest); err == io.EOF {
			return ids, nil
		} else if err != nil {
			return nil, fmt.Errorf("key runs: %w", err)
		}
		id, ok := dest[0].(int64)
		if !ok {
			return nil, fmt.Errorf("key runs: id is %T", dest[0])
		}
		ids = append(ids, id)
	}
}

// partName is the first (rule, key) of a part.
type partName struct {
	rule, key []byte
}

// partKeys returns the first (rule, key) of each part of each run, in
// runs' order: a name for each 64 KiB of states.
func (w *conn) partKeys(runs []runInfo) ([][]partName, error) {
	rows, err := w.c.Query(`SELECT id, rule, key FROM key_parts
		WHERE id >> 20 NOT IN (SELECT run FROM key_hidden) ORDER BY id`, nil)
	if err != nil {
		return nil, fmt.Errorf("key parts: %w", err)
	}
	defer rows.Close()
	out := make([][]partName, len(runs))
	dest := make([]driver.Value, 3)
	i := 0
	for {
		if err := rows.Next(dest); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("key parts: %w", err)
		}
		id, _ := dest[0].(int64)
		rule, ok1 := dest[1].([]byte)
		key, ok2 := dest[2].([]byte)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("key parts: part %d: rule %T, key %T", id, dest[1], dest[2])
		}
		for i < len(runs) && runs[i].run < id>>runShift {
			i++
		}
		if i == len(runs) || runs[i].run != id>>runShift || id&(1<<runShift-1) != int64(len(out[i])) {
			return nil, fmt.Errorf("key parts: %s: %w: not a part of key_runs", partLabel(id), errCorruptRun)
		}
		out[i] = append(out[i], partName{bytes.Clone(rule), bytes.Clone(key)})
	}
	for i, r := range runs {
		if int64(len(out[i])) != r.parts {
			return nil, fmt.Errorf("key parts: run %d: %d of its %d parts: %w", r.run, len(out[i]), r.parts, errCorruptRun)
		}
	}
	return out, nil
}

// partSeeker finds keys in one run: the part that may hold a key (the
// last whose first key is not after it), read once while the keys asked
// for stay in it, walked forward while they come in order.
type partSeeker struct {
	run    int64
	firsts []partName
	load   func(id int64) ([]byte, error)
	id     int64  // the part loaded; -1: none
	data   []byte // its entries
	c      cursor // at the entry last compared, c.valid; over data
}

// holds reports whether the run has an entry (a tombstone included) of
// e's (rule, key).
func (s *partSeeker) holds(e *entry) (bool, error) {
	i, found := slices.BinarySearchFunc(s.firsts, e, func(p partName, e *entry) int {
		return cmp.Or(bytes.Compare(p.rule, e.rule), bytes.Compare(p.key, e.key))
	})
	if !found {
		i-- // the part before the first one after e
	}
	if i < 0 {
		return false, nil
	}
	id := s.run<<runShift | int64(i)
	if id != s.id || !s.c.valid || compareEntries(&s.c.e, e) > 0 {
		if id != s.id {
			b, err := s.load(id)
			if err != nil {
				return false, fmt.Errorf("%s: %w", partLabel(id), err)
			}
			s.id, s.data = id, b
		}
		s.c = cursor{blob: s.data, name: s.c.name[:0]}
	}
	for {
		if s.c.valid {
			switch c := compareEntries(&s.c.e, e); {
			case c == 0:
				return true, nil
			case c > 0:
				return false, nil
			}
		}
		if len(s.c.blob) == 0 {
			s.c.valid = false
			return false, nil
		}
		if err := s.c.decode(); err != nil {
			return false, fmt.Errorf("%s: %w: %w", partLabel(s.id), errCorruptRun, err)
		}
		s.c.valid = true
	}
}

// held reports whether the active bans hold e's (rule, key) with an until
// after now (or none), or the history has a ban of it since keep.
func (w *conn) held(e *entry, now int64, keep any) (bool, error) {
	v, err := w.queryOne(sHeld, unsafeString(e.rule), unsafeString(e.key), now, keep)
	if err != nil {
		return false, err
	}
	n, _ := v.(int64)
	return n != 0, nil
}

// heldQuery: see held.
const heldQuery = `SELECT EXISTS (SELECT 1 FROM bans b WHERE b.rule = ?1 AND b.key = ?2
		AND (b.until_ms IS NULL OR b.until_ms > ?3))
	OR EXISTS (SELECT 1 FROM history h WHERE h.key = ?2 AND h.time_ms >= ?4
		AND h.rule = ?1 AND h.kind = 'ban')`

// eachKey calls fn with every key state (no tombstone), in (rule, key)
// order, reading the runs in one read transaction.
func (s *Snapshot) eachKey(op string, fn func(e *entry) error) error {
	ctx := context.Background()
	q := s.q
	if db, ok := q.(*sql.DB); ok {
		tx, err := db.Begin()
		if err != nil {
			return s.errf(op, "%w", err)
		}
		defer tx.Rollback()
		q = tx
	}
	rows, err := q.QueryContext(ctx, runsQuery)
	if err != nil {
		return s.errf(op, "%w", err)
	}
	var runs []runInfo
	for rows.Next() {
		var r runInfo
		if err := rows.Scan(&r.run, &r.tier, &r.parts, &r.bytes); err != nil {
			rows.Close()
			return s.errf(op, "%w", err)
		}
		runs = append(runs, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return s.errf(op, "%w", err)
	}
	load := func(id int64) ([]byte, error) {
		var b []byte
		err := q.QueryRowContext(ctx, partQuery, id).Scan(&b)
		return b, err
	}
	m, err := newMerger(runs, load)
	if err != nil {
		return s.errf(op, "%w", err)
	}
	errFn := errors.New("fn")
	var fnErr error
	err = m.each(func(e *entry) error {
		if e.tomb {
			return nil
		}
		if err := e.parse(); err != nil {
			return err
		}
		if err := fn(e); err != nil {
			fnErr = err
			return errFn
		}
		return nil
	})
	if err == errFn {
		return fnErr
	}
	if err != nil {
		return s.errf(op, "%w", err)
	}
	return nil
}

// Keys: see DB.Keys.
func (s *Snapshot) Keys(fn func(*KeyRow) error) error {
	var r KeyRow
	var rules []string
	return s.eachKey("read keys", func(e *entry) error {
		e.row(&r, &rules)
		return fn(&r)
	})
}

// TopKeys: see DB.TopKeys.
func (s *Snapshot) TopKeys(rule, by string, n int) ([]KeyRow, error) {
	var order func(a, b *KeyRow) int // a before b: negative
	switch by {
	case "requests":
		order = func(a, b *KeyRow) int {
			return cmp.Or(-cmp.Compare(a.Requests, b.Requests), -strings.Compare(a.Key, b.Key))
		}
	case "cpu":
		order = func(a, b *KeyRow) int {
			return cmp.Or(-cmp.Compare(a.CPU, b.CPU), -strings.Compare(a.Key, b.Key))
		}
	case "last_seen":
		order = func(a, b *KeyRow) int {
			// Never seen last, as SQL's DESC puts NULL.
			as, bs := a.LastSeen.UnixMilli(), b.LastSeen.UnixMilli()
			if a.LastSeen.IsZero() {
				as = -1 << 63
			}
			if b.LastSeen.IsZero() {
				bs = -1 << 63
			}
			return cmp.Or(-cmp.Compare(as, bs), -strings.Compare(a.Key, b.Key))
		}
	default:
		return nil, s.errf("top keys", "by %q: want requests, cpu or last_seen", by)
	}
	var ks []KeyRow
	var r KeyRow
	var rules []string
	err := s.eachKey("top keys", func(e *entry) error {
		if string(e.rule) != rule || n <= 0 || by == "cpu" && !(e.cpu > 0) {
			return nil
		}
		e.row(&r, &rules)
		r.Data = nil
		if len(ks) == n && order(&r, &ks[n-1]) >= 0 {
			return nil
		}
		i, _ := slices.BinarySearchFunc(ks, &r, func(a KeyRow, b *KeyRow) int { return order(&a, b) })
		if len(ks) == n {
			ks = ks[:n-1]
		}
		ks = slices.Insert(ks, i, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ks, nil
}

// convertKeys moves the rows of the table keys (schema version 3) into
// the first run, in tx, and drops keys: once, at the migration to
// version 4.
func convertKeys(tx *sql.Tx) error {
	rows, err := tx.Query(`SELECT rule, key, last_seen_ms, requests, blocked, cpu, phase, until_ms, data FROM keys ORDER BY rule, key`)
	if err != nil {
		return fmt.Errorf("keys: %w", err)
	}
	defer rows.Close()
	rw := &runWriter{run: 1, tier: tierBase, insert: func(id, tier, n int64, pruneMS any, data, _, _ []byte) error {
		_, err := tx.Exec(`INSERT INTO key_runs (id, tier, n, size, prune_ms, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6)`,
			id, tier, n, len(data), pruneMS, data)
		return err
	}}
	var r KeyRow
	var seen, until sql.NullInt64
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&r.Rule, &r.Key, &seen, &r.Requests, &r.Blocked, &r.CPU, &r.Phase, &until, &data); err != nil {
			return fmt.Errorf("keys: %w", err)
		}
		r.LastSeen, r.Until = fromMS(seen), fromMS(until)
		r.Data = data
		if r.Data == nil {
			r.Data = []byte{}
		}
		if err := rw.add(&r); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("keys: %w", err)
	}
	rows.Close()
	if err := rw.flush(); err != nil {
		return err
	}
	if _, err := tx.Exec(`DROP TABLE keys`); err != nil {
		return fmt.Errorf("dropping keys: %w", err)
	}
	return nil
}

// fillPartKeys writes the first (rule, key) of every part of key_runs
// into key_parts, in tx: once, at the migration to version 5.
func fillPartKeys(tx *sql.Tx) error {
	rows, err := tx.Query(`SELECT id, data FROM key_runs ORDER BY id`)
	if err != nil {
		return fmt.Errorf("key runs: %w", err)
	}
	defer rows.Close()
	type first struct {
		id        int64
		rule, key []byte
	}
	var fs []first // a part's first name, a few dozen bytes for 64 KiB of states
	for rows.Next() {
		var f first
		var data []byte
		if err := rows.Scan(&f.id, &data); err != nil {
			return fmt.Errorf("key runs: %w", err)
		}
		c := cursor{blob: data}
		if err := c.decode(); err != nil {
			return fmt.Errorf("%s: %w: %w", partLabel(f.id), errCorruptRun, err)
		}
		f.rule, f.key = bytes.Clone(c.e.rule), bytes.Clone(c.e.key)
		fs = append(fs, f)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("key runs: %w", err)
	}
	rows.Close()
	for _, f := range fs {
		if _, err := tx.Exec(`INSERT INTO key_parts (id, rule, key) VALUES (?1, ?2, ?3)`, f.id, f.rule, f.key); err != nil {
			return fmt.Errorf("key parts: %w", err)
		}
	}
	return nil
}

// KeyRuns returns how many runs hold the key states and how many of them
// are a base (every run merged, doc.go "Key runs"): right after a merge
// into a new base, 1 and 1.
func (db *DB) KeyRuns() (runs, bases int, err error) {
	err = db.r.QueryRow(`SELECT count(DISTINCT id >> 20), count(DISTINCT CASE WHEN tier = 2 THEN id >> 20 END) FROM key_runs
		WHERE id >> 20 NOT IN (SELECT run FROM key_hidden)`).Scan(&runs, &bases)
	if err != nil {
		return 0, 0, db.errf("key runs", "%w", err)
	}
	return runs, bases, nil
}
