package store

import (
	"database/sql"
	"fmt"
	"strconv"
)

// Covers (doc.go, "Key runs"): a checkpoint with Cover says that every key
// state there is is in the runs from the last checkpoint with Mark on (its
// run included), so the runs before that one are dropped as a merge's
// replaced runs are, without being read; the runs from the mark to the
// covering checkpoint's are then weighed as the base (compactPlan), so
// that no merge into a new base starts while covers keep coming.

// coverEndKey is the meta key under which the run of the last cover that
// dropped runs is kept, so that a DB opened again weighs the runs up to it
// as the base (compactPlan), as before: not its oldest run alone, which
// would start a merge of every run at the first checkpoint.
const coverEndKey = "store cover end"

// cover applies c's Cover, then its Mark, before c's run is written.
func (db *DB) cover(w *conn, c *Checkpoint) error {
	if !c.Cover && !c.Mark {
		return nil
	}
	next, err := db.nextRun(w) // the run c writes, if it has keys
	if err != nil {
		return err
	}
	if c.Cover && db.mark > 0 {
		dropped, err := db.dropBefore(w, db.mark)
		if err != nil {
			return err
		}
		db.coverEnd = next
		if dropped {
			if err := w.execArgs(sUpsertMeta, coverEndKey, strconv.FormatInt(next, 10)); err != nil {
				return fmt.Errorf("key runs: %s: %w", coverEndKey, err)
			}
		}
	}
	if c.Mark {
		db.mark = next
	}
	return nil
}

// dropBefore hides every run before run as dead (dropDead deletes them a
// slice a checkpoint), giving up first the merge in progress if it reads
// one of them (its output, numbered after its inputs, may be before run
// too). A covered run comes back each checkpoint until the next mark:
// then there is none. dropped reports whether there was one.
func (db *DB) dropBefore(w *conn, run int64) (dropped bool, err error) {
	if err := db.giveUpOrphans(w); err != nil {
		return false, err
	}
	if sm := db.merge; sm != nil && sm.inputs[0].run < run {
		if err := db.cancelMerge(w); err != nil {
			return false, err
		}
	}
	n, err := w.execCount(sCoverRuns, int64(hiddenDead), run<<runShift)
	if err != nil {
		return false, fmt.Errorf("key runs: dropping the runs before run %d: %w", run, err)
	}
	if n > 0 {
		db.covered++
	}
	return n > 0, nil
}

// loadCoverEnd reads the run coverEndKey keeps, if any, at Open.
func (db *DB) loadCoverEnd() error {
	var v string
	err := db.w.QueryRow(`SELECT value FROM meta WHERE key = ?1`, coverEndKey).Scan(&v)
	if err == sql.ErrNoRows {
		return nil
	}
	if err != nil {
		return err
	}
	if db.coverEnd, err = strconv.ParseInt(v, 10, 64); err != nil {
		return fmt.Errorf("meta %q: %w", coverEndKey, err)
	}
	return nil
}

// coverRunsQuery hides as dead the runs before ?2>>runShift not hidden
// yet.
const coverRunsQuery = `INSERT INTO key_hidden (run, kind) SELECT DISTINCT id >> 20, ?1 FROM key_runs
	WHERE id < ?2 AND id >> 20 NOT IN (SELECT run FROM key_hidden)`
