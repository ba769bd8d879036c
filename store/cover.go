package store

import "fmt"

// Covers (doc.go, "Key runs"): a checkpoint with Cover says that every key
// state there is is in the runs from the last checkpoint with Mark on (its
// run included), so the runs before that one are dropped as a merge's
// replaced runs are, without being read; the runs from the mark to the
// covering checkpoint's are then weighed as the base (compactPlan), so
// that no merge into a new base starts while covers keep coming.

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
		if err := db.dropBefore(w, db.mark); err != nil {
			return err
		}
		db.coverEnd = next
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
// then there is none.
func (db *DB) dropBefore(w *conn, run int64) error {
	if err := db.giveUpOrphans(w); err != nil {
		return err
	}
	if sm := db.merge; sm != nil && sm.inputs[0].run < run {
		if err := db.cancelMerge(w); err != nil {
			return err
		}
	}
	n, err := w.execCount(sCoverRuns, int64(hiddenDead), run<<runShift)
	if err != nil {
		return fmt.Errorf("key runs: dropping the runs before run %d: %w", run, err)
	}
	if n > 0 {
		db.covered++
	}
	return nil
}

// coverRunsQuery hides as dead the runs before ?2>>runShift not hidden
// yet.
const coverRunsQuery = `INSERT INTO key_hidden (run, kind) SELECT DISTINCT id >> 20, ?1 FROM key_runs
	WHERE id < ?2 AND id >> 20 NOT IN (SELECT run FROM key_hidden)`
