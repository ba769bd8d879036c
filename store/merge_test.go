package store

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestSteppedMerges holds merges in steps (one 64 KiB part of input a
// checkpoint, so that a merge spans many checkpoints) against merges at
// once (a reference database given the same writes, whose merges end in
// the checkpoint that starts them) and against a plain model (a map of
// the states): 300 random rounds of checkpoints with overwrites and
// tombstones, checkpoints that fail and roll back, prunes (which give up
// a merge whose input they rewrite), and the
// database closed and opened again (a crash: nothing of a merge's
// progress survives but its committed, hidden parts). After every round
// Keys, a reader opened beside the writer and TopKeys read exactly what
// the reference and the model hold, and the runs a reader merges stay
// within maxStepRuns.
func TestSteppedMerges(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "logjail.db")
	db := mustOpen(t, path, Options{})
	db.mergeBytes = 1 // a step loads one part of each input it reaches
	ref := mustOpen(t, filepath.Join(dir, "ref.db"), Options{})
	ref.mergeBytes = 1 << 50 // every merge at once
	rng := rand.New(rand.NewPCG(23, 11))
	t0 := at("2026-11-22T12:00:00Z")
	model := map[[2]string]KeyRow{}
	rules := []string{"flood", "heavy"}
	var stepped, published, reopened, failed, pruned, cancels, finished int
	for round := range 300 {
		now := t0.Add(time.Duration(round) * time.Minute)
		c := &Checkpoint{Time: now}
		for range 50 + rng.IntN(400) {
			r := KeyRow{Rule: rules[rng.IntN(len(rules))], Key: fmt.Sprintf("k%05d", rng.IntN(3000)),
				LastSeen: now.Add(-time.Duration(rng.IntN(40)) * time.Minute), Requests: int64(round), CPU: float64(rng.IntN(9))}
			r.Data = make([]byte, 80+rng.IntN(200))
			r.Data[0] = byte(round)
			switch x := rng.IntN(100); {
			case x < 8:
				r.Data = nil // evicted: a tombstone
			case x < 12:
				r.Phase, r.Until = PhaseBan, now.Add(time.Hour)
			}
			c.Keys = append(c.Keys, r)
		}
		if rng.IntN(25) == 0 { // fails after its keys and a merge step were written: all rolled back
			c.Events = append(c.Events, Event{Time: now, Rule: "flood", Key: "k1"})
			if err := db.Checkpoint(c); err == nil {
				t.Fatalf("round %d: a checkpoint with an event of no kind was written", round)
			}
			failed++
		} else {
			for _, d := range []*DB{db, ref} {
				if err := d.Checkpoint(c); err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
			}
			for _, r := range c.Keys {
				if r.Data == nil {
					delete(model, [2]string{r.Rule, r.Key})
				} else {
					model[[2]string{r.Rule, r.Key}] = r
				}
			}
		}
		if db.merge != nil {
			stepped++
		}
		if n, _ := db.queryHidden(t); n > 0 {
			published++ // a merge's replaced runs still being deleted
		}
		switch x := rng.IntN(100); {
		case x < 4:
			p := PruneOptions{KeysBefore: now.Add(-30 * time.Minute)}
			pruned += pruneAsScan(t, round, ref, now, p, model, db, ref)
		case x < 10:
			cancels, finished = cancels+db.pruneGaveUp, finished+db.pruneFinished
			db.Close()
			db = mustOpen(t, path, Options{})
			db.mergeBytes = 1
			reopened++
		}
		want := modelRows(model)
		if got := readKeys(t, ref); !reflect.DeepEqual(want, got) {
			t.Fatalf("round %d: the reference's states (-model +reference):\n%s", round, cmp.Diff(want, got))
		}
		if got := readKeys(t, db); !reflect.DeepEqual(want, got) {
			t.Fatalf("round %d: states (-model +stepped):\n%s", round, cmp.Diff(want, got))
		}
		runs, _, err := db.KeyRuns()
		if err != nil || runs > maxStepRuns+1 {
			t.Fatalf("round %d: %d runs (%v), more than %d", round, runs, err, maxStepRuns+1)
		}
		if round%20 == 0 {
			rd := mustOpen(t, path, Options{ReadOnly: true})
			if got := readKeys(t, rd); !reflect.DeepEqual(want, got) {
				t.Fatalf("round %d: a reader's states (-model +reader):\n%s", round, cmp.Diff(want, got))
			}
			for _, by := range []string{"requests", "cpu", "last_seen"} {
				w, err1 := ref.TopKeys("flood", by, 25)
				g, err2 := rd.TopKeys("flood", by, 25)
				if err1 != nil || err2 != nil || !reflect.DeepEqual(w, g) {
					t.Fatalf("round %d: top keys by %s (%v, %v):\n%s", round, by, err1, err2, cmp.Diff(w, g))
				}
			}
			rd.Close()
		}
	}
	cancels, finished = cancels+db.pruneGaveUp, finished+db.pruneFinished
	// Opened again, the last merge given up: one checkpoint with no bound
	// on its step deletes every hidden run, and leaves no part that no
	// run shows.
	db.Close()
	db = mustOpen(t, path, Options{})
	db.mergeBytes = 1 << 50
	last := KeyRow{Rule: "flood", Key: "last", LastSeen: t0, Data: []byte{1}}
	if err := db.Checkpoint(&Checkpoint{Time: t0, Keys: []KeyRow{last}}); err != nil {
		t.Fatal(err)
	}
	model[[2]string{last.Rule, last.Key}] = last
	var hidden, parts, keys, shown int
	if err := db.r.QueryRow(`SELECT (SELECT count(*) FROM key_hidden), (SELECT count(*) FROM key_runs),
		(SELECT count(*) FROM key_parts), (SELECT coalesce(sum(parts), 0) FROM (`+strings.Replace(runsQuery, "max(tier), count(*)", "max(tier), count(*) AS parts", 1)+`))`).Scan(&hidden, &parts, &keys, &shown); err != nil {
		t.Fatal(err)
	}
	if hidden != 0 || parts != keys || parts != shown {
		t.Errorf("after a checkpoint without bound: %d runs hidden, %d parts, %d part keys, %d parts shown; want 0 and as many", hidden, parts, keys, shown)
	}
	if got, want := readKeys(t, db), modelRows(model); !reflect.DeepEqual(want, got) {
		t.Fatalf("states at the end (-model +stepped):\n%s", cmp.Diff(want, got))
	}
	t.Logf("%d checkpoints left a merge in progress, %d left replaced runs to delete; %d reopened, %d failed, %d states pruned; prunes gave up %d merges and finished %d",
		stepped, published, reopened, failed, pruned, cancels, finished)
	if stepped < 50 || published < 5 || reopened < 5 || failed < 3 || pruned == 0 || cancels == 0 {
		t.Error("the rounds did not exercise the stepped merges")
	}
}

// queryHidden counts the rows of key_hidden: the runs hidden.
func (db *DB) queryHidden(t *testing.T) (int, error) {
	t.Helper()
	var n int
	err := db.r.QueryRow(`SELECT count(*) FROM key_hidden`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n, err
}

// modelRows is the model's states as Keys reads them, in (rule, key)
// order.
func modelRows(m map[[2]string]KeyRow) []KeyRow {
	var out []KeyRow
	for _, r := range m {
		r.LastSeen, r.Until = r.LastSeen.UTC(), r.Until.UTC()
		if r.Until.IsZero() {
			r.Until = time.Time{}
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b KeyRow) int {
		if c := cmpString(a.Rule, b.Rule); c != 0 {
			return c
		}
		return cmpString(a.Key, b.Key)
	})
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestMergeStepBounded: while a merge into a new base of 20,000 states
// runs (60,000 entries read), no checkpoint loads more than its step of input parts (and the
// parts a cursor was in), and the output is published only at the end.
func TestMergeStepBounded(t *testing.T) {
	db := mustOpen(t, filepath.Join(t.TempDir(), "logjail.db"), Options{})
	db.mergeBytes = 256 << 10
	t0 := at("2026-11-22T12:00:00Z")
	all := benchKeys(20_000, t0)
	if err := db.Checkpoint(&Checkpoint{Time: t0, Keys: all}); err != nil {
		t.Fatal(err)
	}
	for i := range baseRatio { // baseRatio times the base's bytes: a merge starts
		touch(all, t0.Add(time.Duration(i+1)*time.Second))
		if err := db.Checkpoint(&Checkpoint{Time: t0, Keys: all}); err != nil {
			t.Fatal(err)
		}
	}
	if db.merge == nil {
		t.Fatal("no merge in progress after the checkpoint that should start one")
	}
	steps := 1
	small := all[:100]
	for db.merge != nil {
		before := db.merge.m.loaded
		touch(small, t0.Add(time.Duration(steps+1)*time.Second))
		if err := db.Checkpoint(&Checkpoint{Time: t0, Keys: small}); err != nil {
			t.Fatal(err)
		}
		if db.merge != nil {
			// One step: its budget, and at most one part more for each
			// of the two inputs it was in.
			if got := db.merge.m.loaded - before; got > db.mergeBytes+2*(partBytes+partBytes/4) {
				t.Fatalf("step %d loaded %d bytes, budget %d", steps, got, db.mergeBytes)
			}
			if runs, bases, _ := db.KeyRuns(); bases != 0 || runs != 1+baseRatio+steps || db.merge.rw.part == 0 {
				t.Fatalf("step %d: %d runs, %d bases shown: the output must stay hidden", steps, runs, bases)
			}
		}
		steps++
	}
	if steps < 10 {
		t.Errorf("the merge took %d steps, want many", steps)
	}
	if runs, bases, _ := db.KeyRuns(); runs != steps || bases != 1 {
		t.Errorf("%d runs, %d bases after the merge; want the new base and the %d runs written meanwhile", runs, bases, steps-1)
	}
	if got := readKeys(t, db); len(got) != len(all) || got[0].Requests != all[0].Requests {
		t.Errorf("%d states after the merge, want %d", len(got), len(all))
	}
}

// TestPrunableOf: what a merge reads of a body (prunableOf) is what parse
// gives, for bodies with and without a last-seen time, a phase and an
// until.
func TestPrunableOf(t *testing.T) {
	t0 := at("2026-11-22T12:00:00Z")
	for _, seen := range []time.Time{{}, t0, time.UnixMilli(-5).UTC()} {
		for _, phase := range []string{"", PhaseThrottle, PhaseBan} {
			for _, until := range []time.Time{{}, t0.Add(time.Hour)} {
				r := KeyRow{Rule: "flood", Key: "203.0.113.7", LastSeen: seen, Requests: -3, Blocked: 1 << 40, CPU: 1.5,
					Phase: phase, Until: until, Data: []byte{1, 2, 3}}
				e := entry{body: appendBody(nil, &r)}
				if err := e.parse(); err != nil {
					t.Fatal(err)
				}
				s, ms, forever, err := prunableOf(e.body)
				if err != nil || s != e.hasSeen || ms != e.lastSeen || forever != (len(e.phase) != 0 && !e.hasUntil) {
					t.Errorf("seen %v, phase %q, until %v: prunableOf %v %d %v (%v); parse %v %d %q %v",
						seen, phase, until, s, ms, forever, err, e.hasSeen, e.lastSeen, e.phase, e.hasUntil)
				}
			}
		}
	}
	if _, _, _, err := prunableOf([]byte{entLastSeen}); err == nil {
		t.Error("a truncated body read without an error")
	}
}

// TestPruneFinishesMerge: a Prune that must rewrite a part of a merge's
// input gives the merge up; the next, when a merge runs again, finishes
// it first, so that merges end however often Prune runs. Either way the
// states left are the full scan's.
func TestPruneFinishesMerge(t *testing.T) {
	db := mustOpen(t, filepath.Join(t.TempDir(), "logjail.db"), Options{})
	db.mergeBytes = 1
	t0 := at("2026-11-22T12:00:00Z")
	all := benchKeys(6000, t0)
	for i := range all {
		if i%500 == 0 {
			all[i].LastSeen = t0.Add(-time.Hour) // a few idle states in every run
		}
	}
	var ck int
	// checkpoint writes the next 1000 states, seen again (but the idle
	// ones), as one run.
	checkpoint := func() {
		t.Helper()
		rows := slices.Clone(all[ck%6*1000 : ck%6*1000+1000])
		for i := range rows {
			if !rows[i].LastSeen.Before(t0) {
				rows[i].LastSeen = t0.Add(time.Duration(ck) * time.Second)
			}
		}
		ck++
		if err := db.Checkpoint(&Checkpoint{Time: t0, Keys: rows}); err != nil {
			t.Fatal(err)
		}
	}
	prune := func() {
		t.Helper()
		p := PruneOptions{KeysBefore: t0.Add(-time.Minute)}
		want, n := prunedByScan(t, db, t0, p)
		st, err := db.Prune(t0, p)
		if err != nil || st.Keys != n {
			t.Fatalf("pruned %d (%v), the full scan %d", st.Keys, err, n)
		}
		if got := readKeys(t, db); !reflect.DeepEqual(want, got) {
			t.Fatalf("states after the prune (-full scan +prune):\n%s", cmp.Diff(want, got))
		}
		for i := range all {
			all[i].LastSeen = t0 // pruned: those written again are seen
		}
		for i := range all {
			if i%500 == 250 {
				all[i].LastSeen = t0.Add(-time.Hour) // the next idle ones
			}
		}
	}
	for db.merge == nil {
		checkpoint()
	}
	prune()
	if db.pruneGaveUp != 1 || db.merge != nil {
		t.Fatalf("a prune rewriting an input: %d merges given up, merge in progress %v; want 1, none", db.pruneGaveUp, db.merge != nil)
	}
	for db.merge == nil {
		checkpoint()
	}
	prune()
	if db.pruneFinished != 1 || db.pruneGaveUp != 1 || db.merge != nil {
		t.Fatalf("the next prune: %d merges finished, %d given up; want 1 and 1", db.pruneFinished, db.pruneGaveUp)
	}
}
