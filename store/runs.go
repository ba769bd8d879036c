package store

import (
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

func (w *conn) insertPart(id, tier, n int64, pruneMS any, data []byte) error {
	return w.execArgs(sInsertPart, id, tier, n, int64(len(data)), pruneMS, data)
}

// writeRun writes rows (each (rule, key) once, the last mention: a nil
// Data a tombstone) as a new run after runs, then merges runs as
// compactPlan says.
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
	db.order = sortRows(rows, db.order)
	rw := db.newRunWriter(w, runs, tierCheckpoint)
	for _, i := range db.order {
		if err := rw.add(&rows[i]); err != nil {
			return err
		}
	}
	return db.endRun(w, runs, rw, false)
}

func (db *DB) newRunWriter(w *conn, runs []runInfo, tier int64) *runWriter {
	next := int64(1)
	if len(runs) > 0 {
		next = runs[len(runs)-1].run + 1
	}
	return &runWriter{run: next, tier: tier, insert: w.insertPart, buf: db.part[:0]}
}

// endRun writes the last part of rw, then compacts runs and rw's run;
// with base, into a new base.
func (db *DB) endRun(w *conn, runs []runInfo, rw *runWriter, base bool) error {
	if err := rw.flush(); err != nil {
		return err
	}
	db.part = rw.buf[:0]
	if rw.part > 0 {
		runs = append(runs, runInfo{run: rw.run, tier: rw.tier, parts: rw.part, bytes: rw.bytes})
	}
	return db.compact(w, runs, base)
}

// compact merges the runs compactPlan names into a new run and deletes
// them. A merge into a new base leaves the tombstones out.
func (db *DB) compact(w *conn, runs []runInfo, base bool) error {
	from := compactPlan(runs)
	if base && len(runs) > 0 {
		from = 0
	}
	if from < 0 {
		return nil
	}
	tier := int64(tierMerged)
	if from == 0 {
		tier = tierBase
	}
	m, err := newMerger(runs[from:], w.loadPart)
	if err != nil {
		return err
	}
	rw := db.newRunWriter(w, runs, tier)
	err = m.each(func(e *entry) error {
		if e.tomb && tier == tierBase {
			return nil
		}
		return rw.addEntry(e)
	})
	if err == nil {
		err = rw.flush()
	}
	db.part = rw.buf[:0]
	if err != nil {
		return fmt.Errorf("merging key runs %d to %d: %w", runs[from].run, runs[len(runs)-1].run, err)
	}
	lo, hi := runs[from].run<<runShift, (runs[len(runs)-1].run+1)<<runShift
	if err := w.execArgs(sDeleteRuns, lo, hi); err != nil {
		return fmt.Errorf("deleting merged key runs: %w", err)
	}
	return nil
}

// pruneKeys writes a tombstone for every key state last seen before
// p.KeysBefore (or never) that is neither throttled nor banned at now (see
// Prune), and returns how many. Where a part may hold such a state (its
// prune_ms: the least last-seen time of its states, not counting those
// throttled or banned for good), it reads every run: the cost of reading
// the states (a merge), not of rewriting them; otherwise nothing.
func (db *DB) pruneKeys(w *conn, now time.Time, p PruneOptions) (int64, error) {
	// No part holds a state idle by p.KeysBefore: nothing to read.
	if least, err := w.queryInt(`SELECT min(prune_ms) IS NOT NULL AND min(prune_ms) < ` +
		fmt.Sprint(p.KeysBefore.UnixMilli()) + ` FROM key_runs`); err != nil || least == 0 {
		return 0, err
	}
	runs, err := w.runs()
	if err != nil {
		return 0, fmt.Errorf("key runs: %w", err)
	}
	m, err := newMerger(runs, w.loadPart)
	if err != nil {
		return 0, err
	}
	before, nowMS := p.KeysBefore.UnixMilli(), now.UnixMilli()
	keep := any(nil) // no ban since: none kept for it
	if !p.KeepBannedSince.IsZero() {
		keep = p.KeepBannedSince.UnixMilli()
	}
	rw := db.newRunWriter(w, runs, tierCheckpoint)
	var n, live int64
	err = m.each(func(e *entry) error {
		if e.tomb {
			return nil
		}
		live++
		if err := e.parse(); err != nil {
			return err
		}
		if e.hasSeen && e.lastSeen >= before {
			return nil
		}
		if len(e.phase) != 0 && (!e.hasUntil || e.until > nowMS) {
			return nil // throttled or banned
		}
		held, err := w.held(e, nowMS, keep)
		if err != nil || held {
			return err
		}
		n++
		t := *e
		t.tomb, t.body = true, []byte{entTomb}
		return rw.addEntry(&t)
	})
	if err != nil {
		db.part = rw.buf[:0]
		return 0, err
	}
	// A prune of an eighth of the states or more rewrites the base
	// without them, so that a vacuum can give their pages back; fewer
	// wait, as tombstones, for the next merge into a new base.
	return n, db.endRun(w, runs, rw, n > 0 && n*8 >= live)
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
	rw := &runWriter{run: 1, tier: tierBase, insert: func(id, tier, n int64, pruneMS any, data []byte) error {
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

// KeyRuns returns how many runs hold the key states and how many of them
// are a base (every run merged, doc.go "Key runs"): right after a merge
// into a new base, 1 and 1.
func (db *DB) KeyRuns() (runs, bases int, err error) {
	err = db.r.QueryRow(`SELECT count(DISTINCT id >> 20), count(DISTINCT CASE WHEN tier = 2 THEN id >> 20 END) FROM key_runs`).Scan(&runs, &bases)
	if err != nil {
		return 0, 0, db.errf("key runs", "%w", err)
	}
	return runs, bases, nil
}
