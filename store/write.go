package store

import (
	"database/sql"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"
)

// Checkpoint writes c in one transaction: all of it or, on error, none of
// it. Rows are applied in field order (Keys, Events, SetBans, DelBans,
// Positions, Meta); a (rule, key) named twice ends as its last mention
// says. Times are kept to the millisecond.
func (db *DB) Checkpoint(c *Checkpoint) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if err := db.writable("checkpoint"); err != nil {
		return err
	}
	mark, coverEnd := db.mark, db.coverEnd
	err := db.withConn(func(w *conn) error {
		return w.tx(func() error { return db.checkpoint(w, c) })
	})
	if err != nil {
		db.merge, db.orphans = nil, true // rolled back: the merge's steps are lost
		db.mark, db.coverEnd = mark, coverEnd
		return db.errf("checkpoint", "%w", err)
	}
	return nil
}

func (db *DB) checkpoint(w *conn, c *Checkpoint) error {
	if err := db.cover(w, c); err != nil {
		return err
	}
	if len(c.Keys) > 0 {
		if err := db.writeRun(w, c.Keys); err != nil {
			return err
		}
	}
	for i := range c.Events {
		e := &c.Events[i]
		if e.Kind == "" {
			return fmt.Errorf("events[%d] (%s %s): no kind", i, e.Rule, e.Key)
		}
		if err := w.execArgs(sInsertEvent, ms(e.Time), e.Rule, e.Key, e.Kind, ms(e.Until), e.Reason, int64(e.Violations),
			addrs(e.Addresses), e.Origin, e.Who, e.LogOnly, e.Node); err != nil {
			return fmt.Errorf("event %s %s %s: %w", e.Kind, e.Rule, e.Key, err)
		}
	}
	for i := range c.SetBans {
		b := &c.SetBans[i]
		if b.Rule == "" || b.Key == "" {
			return fmt.Errorf("setBans[%d]: empty rule or key (%q, %q)", i, b.Rule, b.Key)
		}
		if b.Kind != PhaseThrottle && b.Kind != PhaseBan {
			return fmt.Errorf("ban %s %s: kind %q, want %q or %q", b.Rule, b.Key, b.Kind, PhaseThrottle, PhaseBan)
		}
		if err := w.execArgs(sUpsertBan, b.Rule, b.Key, b.Kind, ms(b.Since), ms(b.Until), b.Reason, int64(b.Violations),
			addrs(b.Addresses), b.Origin, b.Who, b.LogOnly, b.Node); err != nil {
			return fmt.Errorf("ban %s %s: %w", b.Rule, b.Key, err)
		}
	}
	for _, k := range c.DelBans {
		if err := w.execArgs(sDeleteBan, k.Rule, k.Key); err != nil {
			return fmt.Errorf("unban %s %s: %w", k.Rule, k.Key, err)
		}
	}
	for i := range c.Positions {
		p := &c.Positions[i]
		if p.Path == "" {
			return fmt.Errorf("positions[%d]: no path", i)
		}
		if err := w.execArgs(sUpsertPosition, p.Path, int64(p.Dev), int64(p.Inode), p.Offset, p.Line, p.HeadHash, p.Size, ms(c.Time)); err != nil {
			return fmt.Errorf("position %s: %w", p.Path, err)
		}
	}
	global := c.Global
	if global == nil {
		global = []byte{} // a checkpoint was written: Global reports one
	}
	if err := w.execArgs(sUpsertDetector, ms(c.Time), global); err != nil {
		return fmt.Errorf("detector state: %w", err)
	}
	for k, v := range c.Meta {
		if err := w.execArgs(sUpsertMeta, k, v); err != nil {
			return fmt.Errorf("meta %s: %w", k, err)
		}
	}
	return nil
}

// SetMeta sets one meta value, in a transaction of its own.
func (db *DB) SetMeta(k, v string) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if err := db.writable("set meta"); err != nil {
		return err
	}
	if _, err := db.w.Exec(stmtSQL[sUpsertMeta], k, v); err != nil {
		return db.errf("set meta", "%s: %w", k, err)
	}
	return nil
}

// Prune deletes, in one transaction, the key states last seen before
// p.KeysBefore (or never) that are neither throttled nor banned at now,
// and the history before p.HistoryBefore; then it gives up to
// p.VacuumPages free pages back to the file system. A key counts as
// throttled or banned while its row's phase is set with an until after
// now (or none), or while the active bans hold it with an until after now
// (or none).
func (db *DB) Prune(now time.Time, p PruneOptions) (PruneStats, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	var st PruneStats
	if err := db.writable("prune"); err != nil {
		return st, err
	}
	if err := db.prune(now, p, &st); err != nil {
		db.merge, db.orphans = nil, true // perhaps rolled back: the merge is given up
		return st, db.errf("prune", "%w", err)
	}
	return st, nil
}

const pruneHistoryQuery = `DELETE FROM history WHERE time_ms < ?1`

func (db *DB) prune(now time.Time, p PruneOptions, st *PruneStats) error {
	return db.withConn(func(w *conn) error {
		err := w.tx(func() error {
			if !p.KeysBefore.IsZero() {
				n, err := db.pruneKeys(w, now, p)
				if err != nil {
					return fmt.Errorf("keys: %w", err)
				}
				st.Keys = n
			}
			if !p.HistoryBefore.IsZero() {
				n, err := w.execCount(sPruneHistory, p.HistoryBefore.UnixMilli())
				if err != nil {
					return fmt.Errorf("history: %w", err)
				}
				st.History = n
			}
			return nil
		})
		if err != nil {
			return err
		}
		if st.FreePages, err = w.queryInt("PRAGMA freelist_count"); err != nil || p.VacuumPages == 0 || st.FreePages == 0 {
			return err
		}
		before, err := w.queryInt("PRAGMA page_count")
		if err != nil {
			return err
		}
		// The pragma frees one page a step: it must be stepped to its end.
		// 0 is SQLite's "all".
		if _, err := w.queryInt(fmt.Sprintf("PRAGMA incremental_vacuum(%d)", max(p.VacuumPages, 0))); err != nil {
			return fmt.Errorf("incremental vacuum: %w", err)
		}
		after, err := w.queryInt("PRAGMA page_count")
		if err != nil {
			return err
		}
		st.VacuumedPages = before - after
		st.FreePages, err = w.queryInt("PRAGMA freelist_count")
		return err
	})
}

// TruncateWAL copies the write-ahead log into the database and truncates
// it to zero bytes. The daemon calls it after a checkpoint when WALSize
// has grown large (SQLite's own automatic checkpoints reuse the WAL but
// cannot shrink it while readers keep reading). done is false when
// readers still used the log after a short wait: nothing is lost, try
// again later.
func (db *DB) TruncateWAL() (done bool, err error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if err := db.writable("truncate wal"); err != nil {
		return false, err
	}
	// Wait for readers briefly, not for the whole busy timeout: the caller
	// is the checkpoint loop.
	if _, err := db.w.Exec("PRAGMA busy_timeout = 200"); err != nil {
		return false, db.errf("truncate wal", "%w", err)
	}
	defer db.w.Exec(fmt.Sprintf("PRAGMA busy_timeout = %d", busyTimeout/time.Millisecond))
	var busy, log, copied int64
	if err := db.w.QueryRow("PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &log, &copied); err != nil {
		return false, db.errf("truncate wal", "%w", err)
	}
	return busy == 0, nil
}

// WALSize returns the size in bytes of the write-ahead log (0 if there is
// none).
func (db *DB) WALSize() (int64, error) {
	fi, err := os.Stat(db.abs + "-wal")
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, db.errf("wal size", "%w", err)
	}
	return fi.Size(), nil
}

// ms is a time as stored: unix milliseconds, NULL for the zero time.
func ms(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMilli()
}

// fromMS is the inverse of ms: times come back in UTC.
func fromMS(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMilli(v.Int64).UTC()
}

// addrs is addresses as stored: canonical forms joined by commas.
func addrs(as []netip.Addr) string {
	switch len(as) {
	case 0:
		return ""
	case 1:
		return as[0].String()
	}
	var b strings.Builder
	for i, a := range as {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(a.String())
	}
	return b.String()
}

// parseAddrs is the inverse of addrs: nil for none.
func parseAddrs(s string) ([]netip.Addr, error) {
	if s == "" {
		return nil, nil
	}
	as := make([]netip.Addr, 0, strings.Count(s, ",")+1)
	for f := range strings.SplitSeq(s, ",") {
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("addresses %q: %w", s, err)
		}
		as = append(as, a)
	}
	return as, nil
}
