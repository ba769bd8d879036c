package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	lstate "github.com/logjail/logjail/state"
)

// ErrBouncerExists is wrapped by AddBouncer's error when the name (or,
// astronomically unlikely, the key) is taken.
var ErrBouncerExists = errors.New("a bouncer of that name exists")

var _ lstate.Bouncers = (*DB)(nil)

// ListBouncers returns the registered bouncers, by name.
func (db *DB) ListBouncers() ([]lstate.Bouncer, error) {
	rows, err := db.r.QueryContext(context.Background(),
		`SELECT name, key_hash, created_ms, last_pull_ms, last_seq, ip, user_agent FROM bouncers ORDER BY name`)
	if err != nil {
		return nil, db.errf("read bouncers", "%w", err)
	}
	defer rows.Close()
	var out []lstate.Bouncer
	for rows.Next() {
		var b lstate.Bouncer
		var hash []byte
		var created int64
		var pull sql.NullInt64
		if err := rows.Scan(&b.Name, &hash, &created, &pull, &b.LastSeq, &b.IP, &b.UserAgent); err != nil {
			return nil, db.errf("read bouncers", "%w", err)
		}
		if len(hash) != len(b.KeyHash) {
			return nil, db.errf("read bouncers", "bouncer %q: key_hash of %d bytes, want %d", b.Name, len(hash), len(b.KeyHash))
		}
		copy(b.KeyHash[:], hash)
		b.Created = time.UnixMilli(created)
		b.LastPull = fromMS(pull)
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, db.errf("read bouncers", "%w", err)
	}
	return out, nil
}

// AddBouncer registers b (its name, key hash and creation time).
func (db *DB) AddBouncer(b lstate.Bouncer) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if err := db.writable("add bouncer"); err != nil {
		return err
	}
	var n int
	if err := db.w.QueryRow(`SELECT count(*) FROM bouncers WHERE name = ?1 OR key_hash = ?2`, b.Name, b.KeyHash[:]).Scan(&n); err != nil {
		return db.errf("add bouncer", "%s: %w", b.Name, err)
	}
	if n > 0 {
		return db.errf("add bouncer", "%q: %w", b.Name, ErrBouncerExists)
	}
	if _, err := db.w.Exec(`INSERT INTO bouncers (name, key_hash, created_ms) VALUES (?1, ?2, ?3)`,
		b.Name, b.KeyHash[:], b.Created.UnixMilli()); err != nil {
		return db.errf("add bouncer", "%s: %w", b.Name, err)
	}
	return nil
}

// DeleteBouncer removes the bouncer name; false if there was none.
func (db *DB) DeleteBouncer(name string) (bool, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if err := db.writable("delete bouncer"); err != nil {
		return false, err
	}
	res, err := db.w.Exec(`DELETE FROM bouncers WHERE name = ?1`, name)
	if err != nil {
		return false, db.errf("delete bouncer", "%s: %w", name, err)
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// SetBouncerPull records a bouncer's pull: when, the sequence number it
// reached (a pull of /v1/decisions, which moves no stream, passes the one
// it had), its address and User-Agent.
func (db *DB) SetBouncerPull(name string, at time.Time, seq int64, ip, userAgent string) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if err := db.writable("record bouncer pull"); err != nil {
		return err
	}
	if _, err := db.w.Exec(`UPDATE bouncers SET last_pull_ms = ?2, last_seq = ?3, ip = ?4, user_agent = ?5 WHERE name = ?1`,
		name, at.UnixMilli(), seq, ip, userAgent); err != nil {
		return db.errf("record bouncer pull", "%s: %w", name, err)
	}
	return nil
}

// BouncerDecisions returns every decision kept for the bouncers, active
// and removed, by ID.
func (db *DB) BouncerDecisions() ([]lstate.BouncerDecision, error) {
	rows, err := db.r.QueryContext(context.Background(),
		`SELECT id, value, scope, type, scenario, until_ms, deleted FROM bouncer_decisions ORDER BY id`)
	if err != nil {
		return nil, db.errf("read bouncer decisions", "%w", err)
	}
	defer rows.Close()
	var out []lstate.BouncerDecision
	for rows.Next() {
		var d lstate.BouncerDecision
		var until sql.NullInt64
		if err := rows.Scan(&d.ID, &d.Value, &d.Scope, &d.Type, &d.Scenario, &until, &d.Deleted); err != nil {
			return nil, db.errf("read bouncer decisions", "%w", err)
		}
		d.Until = fromMS(until)
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, db.errf("read bouncer decisions", "%w", err)
	}
	return out, nil
}

// WriteBouncerDecisions: see state.Bouncers.
func (db *DB) WriteBouncerDecisions(add []lstate.BouncerDecision, deleted map[int64]int64, prune int64) (err error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if err := db.writable("write bouncer decisions"); err != nil {
		return err
	}
	tx, err := db.w.Begin()
	if err != nil {
		return db.errf("write bouncer decisions", "%w", err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
			err = db.errf("write bouncer decisions", "%w", err)
		}
	}()
	for id, seq := range deleted {
		if _, err := tx.Exec(`UPDATE bouncer_decisions SET deleted = ?2 WHERE id = ?1`, id, seq); err != nil {
			return fmt.Errorf("decision %d: %w", id, err)
		}
	}
	for _, d := range add {
		if _, err := tx.Exec(`INSERT INTO bouncer_decisions (id, value, scope, type, scenario, until_ms, deleted) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)`,
			d.ID, d.Value, d.Scope, d.Type, d.Scenario, ms(d.Until), d.Deleted); err != nil {
			return fmt.Errorf("decision %d (%s): %w", d.ID, d.Value, err)
		}
	}
	if prune > 0 {
		if _, err := tx.Exec(`DELETE FROM bouncer_decisions WHERE deleted > 0 AND deleted <= ?1`, prune); err != nil {
			return fmt.Errorf("prune: %w", err)
		}
	}
	return tx.Commit()
}
