package store

import (
	"database/sql"
	"fmt"
)

// migrations[i] takes the schema from version i to version i+1 (PRAGMA
// user_version). They are only ever appended to: a released migration
// never changes. doc.go describes the schema they make.
var migrations = []string{
	// 1: the first schema.
	`
CREATE TABLE meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE detector (
	id          INTEGER PRIMARY KEY CHECK (id = 1),
	time_ms     INTEGER,
	checkpoints INTEGER NOT NULL,
	data        BLOB NOT NULL
);

CREATE TABLE keys (
	rule         TEXT NOT NULL,
	key          TEXT NOT NULL,
	last_seen_ms INTEGER,
	requests     INTEGER NOT NULL,
	blocked      INTEGER NOT NULL,
	cpu          REAL NOT NULL,
	phase        TEXT NOT NULL,
	until_ms     INTEGER,
	data         BLOB NOT NULL,
	PRIMARY KEY (rule, key)
) WITHOUT ROWID;
CREATE INDEX keys_last_seen ON keys (last_seen_ms);
CREATE INDEX keys_requests ON keys (rule, requests) WHERE requests >= 100;
CREATE INDEX keys_cpu ON keys (rule, cpu) WHERE cpu >= 1.0;

CREATE TABLE bans (
	rule       TEXT NOT NULL,
	key        TEXT NOT NULL,
	kind       TEXT NOT NULL,
	since_ms   INTEGER,
	until_ms   INTEGER,
	reason     TEXT NOT NULL,
	violations INTEGER NOT NULL,
	addresses  TEXT NOT NULL,
	origin     TEXT NOT NULL,
	who        TEXT NOT NULL,
	log_only   INTEGER NOT NULL,
	PRIMARY KEY (rule, key)
) WITHOUT ROWID;
CREATE INDEX bans_until ON bans (until_ms);

CREATE TABLE history (
	id         INTEGER PRIMARY KEY,
	time_ms    INTEGER,
	rule       TEXT NOT NULL,
	key        TEXT NOT NULL,
	kind       TEXT NOT NULL,
	until_ms   INTEGER,
	reason     TEXT NOT NULL,
	violations INTEGER NOT NULL,
	addresses  TEXT NOT NULL,
	origin     TEXT NOT NULL,
	who        TEXT NOT NULL,
	log_only   INTEGER NOT NULL
);
CREATE INDEX history_time ON history (time_ms);
CREATE INDEX history_key ON history (key, time_ms);

CREATE TABLE positions (
	path       TEXT PRIMARY KEY,
	dev        INTEGER NOT NULL,
	inode      INTEGER NOT NULL,
	offset     INTEGER NOT NULL,
	line       INTEGER NOT NULL,
	head_hash  TEXT NOT NULL,
	size       INTEGER NOT NULL,
	updated_ms INTEGER
) WITHOUT ROWID;
`,
	// 2: the fleet node that decided a ban or an event ('' outside a
	// fleet, and for every row written before).
	`
ALTER TABLE bans ADD COLUMN node TEXT NOT NULL DEFAULT '';
ALTER TABLE history ADD COLUMN node TEXT NOT NULL DEFAULT '';
`,
	// 3: the CrowdSec bouncers and the decisions they pull (bouncers.go).
	`
CREATE TABLE bouncers (
	name         TEXT PRIMARY KEY,
	key_hash     BLOB NOT NULL UNIQUE,
	created_ms   INTEGER NOT NULL,
	last_pull_ms INTEGER,
	last_seq     INTEGER NOT NULL DEFAULT 0,
	ip           TEXT NOT NULL DEFAULT '',
	user_agent   TEXT NOT NULL DEFAULT ''
) WITHOUT ROWID;

CREATE TABLE bouncer_decisions (
	id       INTEGER PRIMARY KEY CHECK (id > 0),
	value    TEXT NOT NULL,
	scope    TEXT NOT NULL,
	type     TEXT NOT NULL,
	scenario TEXT NOT NULL,
	until_ms INTEGER,
	deleted  INTEGER NOT NULL DEFAULT 0
);
`,
	// 4: the key states in runs (keyrun.go), not one row each: the rows
	// of keys become the first run (convertKeys), and keys is dropped.
	keyRunsMigration,
	// 5: the first (rule, key) of each part of a run (key_parts), so that
	// Prune finds a key in a run by reading one part (fillPartKeys fills
	// it from the parts there are).
	partKeysMigration,
	// 6: the runs hidden from readers (merge.go): a merge's output while
	// it is written a slice per checkpoint, and the runs it replaced
	// while they are deleted a slice per checkpoint.
	`
CREATE TABLE key_hidden (
	run  INTEGER PRIMARY KEY,
	kind INTEGER NOT NULL
);
`,
}

// keyRunsMigration makes key_runs; migrateOne then moves the rows of keys
// into it (convertKeys) in the same transaction.
const keyRunsMigration = `
CREATE TABLE key_runs (
	id   INTEGER PRIMARY KEY,
	tier INTEGER NOT NULL,
	n    INTEGER NOT NULL,
	size INTEGER NOT NULL,
	prune_ms INTEGER,
	data BLOB NOT NULL
);
`

// partKeysMigration makes key_parts; migrateOne then fills it from
// key_runs (fillPartKeys) in the same transaction.
const partKeysMigration = `
CREATE TABLE key_parts (
	id   INTEGER PRIMARY KEY,
	rule BLOB NOT NULL,
	key  BLOB NOT NULL
);
`

// Version is the schema version this build reads and writes.
func Version() int { return len(migrations) }

// migrate brings the database of w (one connection, IMMEDIATE
// transactions) to version len(migs), each migration in its own
// transaction with the version it reaches: a migration that fails leaves
// the database at the version before it. A new database (version 0) gets
// them all in one transaction: its schema is one commit, which writes each
// page into the WAL once (a commit a migration wrote page 1 and the roots
// of the tables again each time: 37 pages of 16 KiB instead of 18), and a
// failure leaves it at version 0, empty (TestNewSchemaAsMigrated).
func migrate(w *sql.DB, migs []string) error {
	for {
		done, err := migrateOne(w, migs)
		if err != nil || done {
			return err
		}
	}
}

func migrateOne(w *sql.DB, migs []string) (done bool, err error) {
	tx, err := w.Begin()
	if err != nil {
		return false, err
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	var v int
	if err := tx.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		return false, err
	}
	switch {
	case v > len(migs):
		return false, fmt.Errorf("schema version %d is newer than this logjail knows (%d): upgrade logjail: %w", v, len(migs), ErrSchema)
	case v == len(migs):
		return true, tx.Rollback()
	}
	to := v + 1
	if v == 0 {
		to = len(migs)
	}
	for ; v < to; v++ {
		if err := migrateTx(tx, migs[v]); err != nil {
			return false, fmt.Errorf("to version %d: %w", v+1, err)
		}
	}
	if _, err := tx.Exec(fmt.Sprintf("PRAGMA user_version = %d", v)); err != nil {
		return false, fmt.Errorf("to version %d: %w", v, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("to version %d: %w", v, err)
	}
	return false, nil
}

// migrateTx runs migration m in tx, with the conversion of the rows it
// needs.
func migrateTx(tx *sql.Tx, m string) error {
	if _, err := tx.Exec(m); err != nil {
		return err
	}
	switch m {
	case keyRunsMigration:
		return convertKeys(tx)
	case partKeysMigration:
		return fillPartKeys(tx)
	}
	return nil
}
