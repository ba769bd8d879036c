package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"

	"github.com/mattn/go-sqlite3"
)

// The writer's statements, prepared once on its connection.
const (
	sInsertPart = iota
	sInsertPartKey
	sUpdatePart
	sReadPart
	sDeleteRuns
	sDeleteRunKeys
	sHeld
	sInsertEvent
	sUpsertBan
	sDeleteBan
	sUpsertPosition
	sUpsertDetector
	sUpsertMeta
	sPruneHistory
	sCoverRuns
	nStmts
)

var stmtSQL = [nStmts]string{
	sInsertPart:    `INSERT INTO key_runs (id, tier, n, size, prune_ms, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6)`,
	sInsertPartKey: `INSERT INTO key_parts (id, rule, key) VALUES (?1, ?2, ?3)`,
	sUpdatePart:    `UPDATE key_runs SET n = ?2, size = ?3, prune_ms = ?4, data = ?5 WHERE id = ?1`,
	sReadPart:      partQuery,
	sDeleteRuns:    `DELETE FROM key_runs WHERE id >= ?1 AND id < ?2`,
	sDeleteRunKeys: `DELETE FROM key_parts WHERE id >= ?1 AND id < ?2`,
	sHeld:          heldQuery,
	sInsertEvent: `INSERT INTO history (time_ms, rule, key, kind, until_ms, reason, violations, addresses, origin, who, log_only, node)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)`,
	sUpsertBan: `INSERT INTO bans (rule, key, kind, since_ms, until_ms, reason, violations, addresses, origin, who, log_only, node)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
		ON CONFLICT (rule, key) DO UPDATE SET kind = ?3, since_ms = ?4, until_ms = ?5, reason = ?6,
			violations = ?7, addresses = ?8, origin = ?9, who = ?10, log_only = ?11, node = ?12`,
	sDeleteBan: `DELETE FROM bans WHERE rule = ?1 AND key = ?2`,
	sUpsertPosition: `INSERT INTO positions (path, dev, inode, offset, line, head_hash, size, updated_ms)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
		ON CONFLICT (path) DO UPDATE SET dev = ?2, inode = ?3, offset = ?4, line = ?5,
			head_hash = ?6, size = ?7, updated_ms = ?8`,
	sUpsertDetector: `INSERT INTO detector (id, time_ms, checkpoints, data) VALUES (1, ?1, 1, ?2)
		ON CONFLICT (id) DO UPDATE SET time_ms = ?1, checkpoints = checkpoints + 1, data = ?2`,
	sUpsertMeta:   `INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = ?2`,
	sPruneHistory: pruneHistoryQuery,
	sCoverRuns:    coverRunsQuery,
}

// conn is the writer's connection as go-sqlite3 gives it, with the
// prepared statements. A checkpoint writes through it directly, not
// through database/sql, and runs each statement as a query: go-sqlite3
// then binds the arguments and steps the statement in one call into C
// (its Exec makes a call per argument). A changed key so costs two calls
// into C and no allocation but the boxing of its values; through
// database/sql it cost a microsecond and 500 bytes more: for 100k keys,
// a tenth of a second and 50 MB of garbage every checkpoint.
type conn struct {
	c    *sqlite3.SQLiteConn
	st   [nStmts]driver.StmtQueryContext
	args []driver.NamedValue // positional, reused
}

// withConn runs fn on the writer's connection, preparing the statements
// when the connection is new (the first time, or if database/sql had to
// replace it). The caller holds db.mu, or is Open.
func (db *DB) withConn(fn func(*conn) error) error {
	ctx := context.Background()
	sc, err := db.w.Conn(ctx)
	if err != nil {
		return err
	}
	defer sc.Close()
	return sc.Raw(func(dc any) error {
		c, ok := dc.(*sqlite3.SQLiteConn)
		if !ok {
			return fmt.Errorf("driver connection %T", dc)
		}
		w := &db.wc
		if w.c != c {
			w.closeStmts()
			w.c = c
			for i, q := range stmtSQL {
				st, err := c.Prepare(q)
				if err != nil {
					w.closeStmts()
					return fmt.Errorf("%s: %w", q, err)
				}
				w.st[i] = st.(driver.StmtQueryContext)
			}
			w.args = make([]driver.NamedValue, 16)
			for i := range w.args {
				w.args[i].Ordinal = i + 1
			}
		}
		return fn(w)
	})
}

// closeStmts closes the prepared statements. The caller holds db.mu.
func (db *DB) closeStmts() error {
	if db.wc.c == nil {
		return nil
	}
	return db.withConn(func(w *conn) error { return w.closeStmts() })
}

func (w *conn) closeStmts() error {
	var errs []error
	for i, st := range w.st {
		if st != nil {
			errs = append(errs, st.(driver.Stmt).Close())
			w.st[i] = nil
		}
	}
	w.c = nil
	return errors.Join(errs...)
}

// tx runs fn in a write transaction (BEGIN IMMEDIATE), committed if fn
// returns nil and rolled back otherwise.
func (w *conn) tx(fn func() error) error {
	if _, err := w.c.Exec("BEGIN IMMEDIATE", nil); err != nil {
		return err
	}
	err := fn()
	for i := range w.args {
		w.args[i].Value = nil // keep no caller's memory alive
	}
	if err == nil {
		_, err = w.c.Exec("COMMIT", nil)
	}
	if err != nil {
		if _, rerr := w.c.Exec("ROLLBACK", nil); rerr != nil && !w.c.AutoCommit() {
			err = errors.Join(err, fmt.Errorf("rollback: %w", rerr))
		}
		return err
	}
	return nil
}

// exec runs statement i with args (from w.args, values set).
func (w *conn) exec(i int, args []driver.NamedValue) error {
	rows, err := w.st[i].QueryContext(context.Background(), args) // runs the statement
	if err != nil {
		return err
	}
	return rows.Close()
}

// execCount runs statement i with vs as its positional arguments and
// returns the rows it changed.
func (w *conn) execCount(i int, vs ...driver.Value) (int64, error) {
	a := w.args[:len(vs)]
	for j, v := range vs {
		a[j].Value = v
	}
	res, err := w.st[i].(driver.StmtExecContext).ExecContext(context.Background(), a)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// queryInt runs q, not prepared, to its end and returns the first column
// of its first row (0 if none).
func (w *conn) queryInt(q string) (int64, error) {
	rows, err := w.c.Query(q, nil)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var n int64
	dest := make([]driver.Value, len(rows.Columns()))
	for first := true; ; first = false {
		if err := rows.Next(dest); err == io.EOF {
			return n, nil
		} else if err != nil {
			return 0, err
		}
		if v, ok := firstInt(dest); ok && first {
			n = v
		}
	}
}

// queryOne runs statement i with vs as its positional arguments and
// returns the first column of its first row (io.EOF if it has none).
func (w *conn) queryOne(i int, vs ...driver.Value) (driver.Value, error) {
	a := w.args[:len(vs)]
	for j, v := range vs {
		a[j].Value = v
	}
	rows, err := w.st[i].QueryContext(context.Background(), a)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	dest := make([]driver.Value, len(rows.Columns()))
	if err := rows.Next(dest); err != nil {
		return nil, err
	}
	return dest[0], nil
}

// execArgs runs statement i with vs as its positional arguments.
func (w *conn) execArgs(i int, vs ...driver.Value) error {
	a := w.args[:len(vs)]
	for j, v := range vs {
		a[j].Value = v
	}
	return w.exec(i, a)
}

func firstInt(row []driver.Value) (int64, bool) {
	if len(row) == 0 {
		return 0, false
	}
	v, ok := row[0].(int64)
	return v, ok
}
