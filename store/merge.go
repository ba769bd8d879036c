package store

import (
	"database/sql/driver"
	"fmt"
	"slices"
)

// Merges in steps (doc.go, "Key runs"). A merge's inputs are fixed when it
// starts; its output is written a slice per checkpoint, in the
// checkpoint's transaction, as a run that key_hidden hides from every
// reader (Keys, restore, TopKeys, Prune, KeyRuns) until the step that
// writes its last part publishes it: the same transaction hides the
// inputs (kind hiddenDead) and shows the output. The output's run number
// is taken when the merge starts (the next after every run there is, the
// hidden ones included), so the runs checkpoints write meanwhile come
// after it, as they are newer. The runs a merge replaced are deleted a
// slice per checkpoint afterwards.

const (
	// stepBytes: the least a merge step reads (the bytes of the input
	// parts it loads), in one checkpoint's transaction.
	stepBytes = 4 << 20
	// stepFactor: a step reads at least this many times the bytes its
	// checkpoint wrote, so that a merge outpaces the runs written while
	// it runs: a merge reading I bytes takes I/(stepFactor×C) steps, in
	// which the checkpoints add I/stepFactor bytes of runs.
	stepFactor = 4
	// maxStepRuns: while a merge runs, past this many runs (shown) the
	// checkpoint at hand finishes it, which bounds what a reader merges.
	maxStepRuns = 2 * maxRuns
)

// Kinds of key_hidden's rows.
const (
	hiddenOutput = 0 // the output of the merge in progress
	hiddenDead   = 1 // a run a merge replaced, or an output given up: being deleted
)

// stepMerge is the merge in progress.
type stepMerge struct {
	inputs []runInfo // oldest first, fixed when it started
	m      *merger   // its cursors hold the input parts they are at
	rw     *runWriter
	base   bool // the output is a new base: tombstones left out
}

// stepBudget is what a merge step reads after a checkpoint that wrote c
// bytes of run: stepBytes, or stepFactor×c if more; or the test's
// setting.
func (db *DB) stepBudget(c int64) int64 {
	if db.mergeBytes > 0 {
		return db.mergeBytes
	}
	return max(stepBytes, stepFactor*c)
}

// nextRun is the number for a new run: after every run there is, hidden
// or not, and after a hidden output that has no part yet.
func (db *DB) nextRun(w *conn) (int64, error) {
	n, err := w.queryInt(`SELECT max(coalesce((SELECT max(id) FROM key_runs), 0) >> 20,
		coalesce((SELECT max(run) FROM key_hidden), 0)) + 1`)
	if err != nil {
		return 0, fmt.Errorf("key runs: next run: %w", err)
	}
	return n, nil
}

// exec runs q, not prepared, with args.
func (w *conn) execSQL(q string, args ...driver.Value) error {
	_, err := w.c.Exec(q, args)
	return err
}

// mergeStep takes one step of the merges after a checkpoint wrote its
// run (runs: the runs shown, that one included), reading about budget
// bytes of input parts: it starts a merge when none runs and compactPlan
// says so; it carries the merge in progress on by about budget bytes
// (all of it past maxStepRuns runs), publishing it when done; then it
// deletes up to 2×budget bytes of parts of the runs merges replaced
// (those just replaced included, so that a small merge frees their pages
// in its own transaction, as a merge at once did).
func (db *DB) mergeStep(w *conn, runs []runInfo, budget int64) error {
	if err := db.giveUpOrphans(w); err != nil {
		return err
	}
	sm := db.merge
	if sm == nil {
		if from := compactPlan(runs, db.coverEnd); from >= 0 {
			var err error
			if sm, err = db.startMerge(w, runs[from:], from == 0); err != nil {
				return err
			}
		}
	} else if len(runs) > maxStepRuns {
		budget = -1
	}
	if sm != nil {
		if err := db.stepOn(w, sm, budget); err != nil {
			return err
		}
	}
	parts := int64(-1)
	if budget >= 0 {
		parts = 2*budget/partBytes + 1
	}
	return db.dropDead(w, parts)
}

// giveUpOrphans marks dead an output that no merge of this DB writes
// (after Open, or a transaction that failed: db.orphans).
func (db *DB) giveUpOrphans(w *conn) error {
	if !db.orphans {
		return nil
	}
	if err := w.execSQL(`UPDATE key_hidden SET kind = ?1 WHERE kind = ?2`, int64(hiddenDead), int64(hiddenOutput)); err != nil {
		return fmt.Errorf("key runs: giving up a merge: %w", err)
	}
	db.orphans = false
	return nil
}

// startMerge starts a merge of inputs (the newest runs); base: into a new
// base.
func (db *DB) startMerge(w *conn, inputs []runInfo, base bool) (*stepMerge, error) {
	out, err := db.nextRun(w)
	if err != nil {
		return nil, err
	}
	if err := w.execSQL(`INSERT INTO key_hidden (run, kind) VALUES (?1, ?2)`, out, int64(hiddenOutput)); err != nil {
		return nil, fmt.Errorf("key runs: hiding run %d: %w", out, err)
	}
	m, err := newCountingMerger(inputs, w.loadPart, true)
	if err != nil {
		return nil, fmt.Errorf("merging key runs %d to %d: %w", inputs[0].run, inputs[len(inputs)-1].run, err)
	}
	tier := int64(tierMerged)
	if base {
		tier = tierBase
	}
	sm := &stepMerge{inputs: slices.Clone(inputs), m: m, base: base,
		rw: &runWriter{run: out, tier: tier, insert: w.insertPart}}
	db.merge = sm
	return sm, nil
}

// stepOn carries sm on until its cursors loaded budget more bytes
// (budget < 0: to its end); at its end it publishes the output: the
// inputs are hidden (to be deleted) and the output shown, in the
// caller's transaction.
func (db *DB) stepOn(w *conn, sm *stepMerge, budget int64) error {
	limit := int64(-1)
	if budget >= 0 {
		limit = sm.m.loaded + budget
	}
	done, err := sm.m.until(limit, func(e *entry) error {
		if e.tomb && sm.base {
			return nil
		}
		return sm.rw.addEntry(e)
	})
	if err == nil && done {
		err = sm.rw.flush()
	}
	first, last := sm.inputs[0].run, sm.inputs[len(sm.inputs)-1].run
	if err != nil {
		db.merge = nil // the caller's transaction fails: db.orphans
		return fmt.Errorf("merging key runs %d to %d: %w", first, last, err)
	}
	if !done {
		return nil
	}
	db.merge, db.pruneCancels = nil, 0
	for _, r := range sm.inputs {
		if err := w.execSQL(`INSERT INTO key_hidden (run, kind) VALUES (?1, ?2)`, r.run, int64(hiddenDead)); err != nil {
			return fmt.Errorf("key runs: hiding merged run %d: %w", r.run, err)
		}
	}
	if err := w.execSQL(`DELETE FROM key_hidden WHERE run = ?1`, sm.rw.run); err != nil {
		return fmt.Errorf("key runs: showing run %d, merged from %d to %d: %w", sm.rw.run, first, last, err)
	}
	return nil
}

// mergeAll merges every run (runs: those shown) into a new base at once,
// giving up the merge in progress, and deletes the runs it replaced:
// Prune's merge (not a checkpoint's).
func (db *DB) mergeAll(w *conn, runs []runInfo) error {
	if err := db.giveUpOrphans(w); err != nil {
		return err
	}
	if err := db.cancelMerge(w); err != nil {
		return err
	}
	if len(runs) == 0 {
		return nil
	}
	sm, err := db.startMerge(w, runs, true)
	if err != nil {
		return err
	}
	if err := db.stepOn(w, sm, -1); err != nil {
		return err
	}
	return db.dropDead(w, -1)
}

// cancelMergeOf gives up the merge in progress if run is one of its
// inputs: Prune is about to write a part of it again.
func (db *DB) cancelMergeOf(w *conn, run int64) error {
	if sm := db.merge; sm == nil || !sm.reads(run) {
		return nil
	}
	db.pruneCancels++
	db.pruneGaveUp++
	return db.cancelMerge(w)
}

// reads reports whether run is one of sm's inputs.
func (sm *stepMerge) reads(run int64) bool {
	return slices.ContainsFunc(sm.inputs, func(r runInfo) bool { return r.run == run })
}

// finishBeforePrune reports whether Prune, about to read the parts old,
// must first finish the merge in progress: when a Prune gave up a merge
// since the last one ended, and one of old is an input's. Prune so
// gives up at most one merge in a row, and a merge ends however often
// Prune runs (the cleaner's minute may be shorter than a merge of a
// million states on a quiet daemon, whose checkpoints are seconds
// apart).
func (db *DB) finishBeforePrune(old []int64) bool {
	sm := db.merge
	return sm != nil && db.pruneCancels > 0 && slices.ContainsFunc(old, func(id int64) bool { return sm.reads(id >> runShift) })
}

// cancelMerge gives up the merge in progress: its output, hidden, is
// deleted as the replaced runs are.
func (db *DB) cancelMerge(w *conn) error {
	sm := db.merge
	if sm == nil {
		return nil
	}
	db.merge = nil
	if err := w.execSQL(`UPDATE key_hidden SET kind = ?1 WHERE run = ?2`, int64(hiddenDead), sm.rw.run); err != nil {
		db.orphans = true
		return fmt.Errorf("key runs: giving up the merge into run %d: %w", sm.rw.run, err)
	}
	return nil
}

// dropDead deletes up to parts parts (< 0: all) of the runs key_hidden
// marks dead, the oldest first, with their key_parts rows; a run's
// key_hidden row goes with its last part.
func (db *DB) dropDead(w *conn, parts int64) error {
	for parts != 0 {
		run, err := w.queryInt(fmt.Sprintf(`SELECT coalesce(min(run), 0) FROM key_hidden WHERE kind = %d`, hiddenDead))
		if err != nil {
			return fmt.Errorf("key runs: dead runs: %w", err)
		}
		if run == 0 {
			return nil
		}
		lo, hi := run<<runShift, (run+1)<<runShift
		if parts > 0 {
			// The parts left: ids first to last, without gaps.
			first, err := w.queryInt(fmt.Sprintf(`SELECT coalesce(min(id), %d) FROM key_runs WHERE id >= %d AND id < %d`, hi, lo, hi))
			if err != nil {
				return fmt.Errorf("key runs: run %d: %w", run, err)
			}
			last, err := w.queryInt(fmt.Sprintf(`SELECT coalesce(max(id), %d) FROM key_runs WHERE id >= %d AND id < %d`, hi-1, lo, hi))
			if err != nil {
				return fmt.Errorf("key runs: run %d: %w", run, err)
			}
			lo = first
			if left := last + 1 - first; left > parts {
				hi, parts = first+parts, 0
			} else {
				parts -= left
			}
		}
		if err := w.execArgs(sDeleteRuns, lo, hi); err != nil {
			return fmt.Errorf("key runs: deleting run %d: %w", run, err)
		}
		if err := w.execArgs(sDeleteRunKeys, lo, hi); err != nil {
			return fmt.Errorf("key parts: deleting run %d: %w", run, err)
		}
		if hi == (run+1)<<runShift {
			if err := w.execSQL(`DELETE FROM key_hidden WHERE run = ?1`, run); err != nil {
				return fmt.Errorf("key runs: run %d deleted: %w", run, err)
			}
		}
	}
	return nil
}
