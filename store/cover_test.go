package store

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestCovers holds checkpoints with Mark and Cover against a plain model
// (a map of the states): 400 random rounds of checkpoints, half of them a
// sweep over the keys in turn (so that every state is written again
// between marks, and covers come) and half random keys, with overwrites,
// tombstones (evictions) and bans; a cover whenever the model says every
// state was written since the last mark (and only then), a mark at
// random and after covers; checkpoints that fail and roll back (their
// Mark and Cover with them), prunes, merges in steps of one part (so that
// covers meet merges in progress), and the database closed and opened
// again (the mark forgotten: covers are ignored until the next). After
// every round Keys reads exactly what the model holds; at the end every
// run the covers dropped is gone.
func TestCovers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "logjail.db")
	db := mustOpen(t, path, Options{})
	db.mergeBytes = 1
	rng := rand.New(rand.NewPCG(23, 14))
	t0 := at("2026-11-26T09:00:00Z")
	model := map[[2]string]KeyRow{}
	written := map[[2]string]int{} // the round each state was last written in
	mark := -1                     // the round of the last Mark committed since Open
	rules := []string{"flood", "heavy"}
	const keys = 600
	sweep := 0
	var covers, marks, failed, reopened, pruned, stepped int
	for round := range 400 {
		now := t0.Add(time.Duration(round) * time.Minute)
		c := &Checkpoint{Time: now}
		n := 50 + rng.IntN(300)
		for j := range n {
			k := rng.IntN(keys)
			if round%2 == 0 {
				k = (sweep + j) % keys
			}
			r := KeyRow{Rule: rules[k%2], Key: fmt.Sprintf("k%05d", k),
				LastSeen: now.Add(-time.Duration(rng.IntN(40)) * time.Minute), Requests: int64(round)}
			r.Data = make([]byte, 40+rng.IntN(150))
			r.Data[0] = byte(round)
			switch x := rng.IntN(100); {
			case x < 6:
				r.Data = nil
			case x < 10:
				r.Phase, r.Until = PhaseBan, now.Add(time.Hour)
			}
			c.Keys = append(c.Keys, r)
		}
		if round%2 == 0 {
			sweep = (sweep + n) % keys
		}
		// Cover only where it holds: every state left after c was
		// written since the mark (c's own included).
		inC := map[[2]string]bool{}
		for _, r := range c.Keys {
			inC[[2]string{r.Rule, r.Key}] = true
		}
		holds := mark >= 0
		for k := range model {
			if holds && !inC[k] && written[k] < mark {
				holds = false
			}
		}
		c.Cover = holds && rng.IntN(5) != 0
		c.Mark = rng.IntN(20) == 0 || c.Cover && rng.IntN(3) == 0
		if rng.IntN(20) == 0 { // fails after its keys, cover and a merge step were written: all rolled back
			c.Events = append(c.Events, Event{Time: now, Rule: "flood", Key: "k1"})
			if err := db.Checkpoint(c); err == nil {
				t.Fatalf("round %d: a checkpoint with an event of no kind was written", round)
			}
			failed++
		} else {
			before := db.covered
			if err := db.Checkpoint(c); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			if db.covered > before {
				covers++
			}
			for _, r := range c.Keys {
				k := [2]string{r.Rule, r.Key}
				if r.Data == nil {
					delete(model, k)
					delete(written, k)
				} else {
					model[k], written[k] = r, round
				}
			}
			if c.Mark {
				mark = round
				marks++
			}
		}
		if db.merge != nil {
			stepped++
		}
		switch x := rng.IntN(100); {
		case x < 4:
			p := PruneOptions{KeysBefore: now.Add(-35 * time.Minute)}
			pruned += pruneAsScan(t, round, db, now, p, model, db)
		case x < 7:
			db.Close()
			db = mustOpen(t, path, Options{})
			db.mergeBytes = 1
			mark = -1
			reopened++
		}
		want := modelRows(model)
		if got := readKeys(t, db); !reflect.DeepEqual(want, got) {
			t.Fatalf("round %d: states (-model +runs):\n%s", round, cmp.Diff(want, got))
		}
		if runs, _, err := db.KeyRuns(); err != nil || runs > maxStepRuns+1 {
			t.Fatalf("round %d: %d runs (%v), more than %d", round, runs, err, maxStepRuns+1)
		}
	}
	// A checkpoint with no bound on its step deletes every run dropped.
	db.mergeBytes = 1 << 50
	if err := db.Checkpoint(&Checkpoint{Time: t0, Keys: []KeyRow{{Rule: "flood", Key: "k00000", Data: []byte{1}}}}); err != nil {
		t.Fatal(err)
	}
	var dead int
	if err := db.r.QueryRow(`SELECT count(*) FROM key_hidden WHERE kind = 1`).Scan(&dead); err != nil || dead != 0 {
		t.Errorf("%d runs dropped still there (%v)", dead, err)
	}
	t.Logf("%d covers dropped runs, %d marks; %d checkpoints left a merge in progress; %d failed, %d reopened, %d states pruned",
		covers, marks, stepped, failed, reopened, pruned)
	if covers < 20 || marks < 20 || stepped < 10 || failed < 5 || reopened < 5 || pruned == 0 {
		t.Error("the rounds did not exercise the covers")
	}
}

// TestCoverGivesUpMerge: a cover whose mark comes after an input of the
// merge in progress gives the merge up (its inputs are dropped under
// it); the states read are the last checkpoint's.
func TestCoverGivesUpMerge(t *testing.T) {
	db := mustOpen(t, filepath.Join(t.TempDir(), "logjail.db"), Options{})
	db.mergeBytes = 1
	t0 := at("2026-11-26T09:00:00Z")
	var last []KeyRow
	for i := range 6 {
		c := &Checkpoint{Time: t0.Add(time.Duration(i) * time.Second), Mark: i == 2, Cover: i >= 3}
		for k := range 2000 {
			c.Keys = append(c.Keys, KeyRow{Rule: "flood", Key: fmt.Sprintf("k%05d", k), LastSeen: c.Time, Requests: int64(i), Data: make([]byte, 100)})
		}
		if err := db.Checkpoint(c); err != nil {
			t.Fatalf("checkpoint %d: %v", i, err)
		}
		if i == 2 && db.merge == nil {
			t.Fatal("no merge in progress at the mark: nothing tested")
		}
		last = c.Keys
	}
	if db.covered == 0 {
		t.Fatal("no cover dropped a run")
	}
	if got := readKeys(t, db); !reflect.DeepEqual(modelRows(rowsByKey(last)), got) {
		t.Fatalf("states (-last checkpoint +runs):\n%s", cmp.Diff(modelRows(rowsByKey(last)), got))
	}
}

func rowsByKey(rs []KeyRow) map[[2]string]KeyRow {
	m := map[[2]string]KeyRow{}
	for _, r := range rs {
		m[[2]string{r.Rule, r.Key}] = r
	}
	return m
}

// cadence gives a stream of checkpoints the Mark and Cover a
// checkpoint.Writer gives when keys states change in turn: a cover once
// every state was written since the mark, and at every checkpoint after
// it; a mark at the first checkpoint, at the first cover past an eighth
// more than keys states since the mark, and, where keys went idle (no
// cover comes), past a quarter more.
type cadence struct {
	keys, since int
	covered     bool
}

// set sets c's Mark and Cover: first says c is the stream's first, idle
// that some of the keys went idle.
func (s *cadence) set(c *Checkpoint, first, idle bool) {
	c.Cover = !first && !idle && (s.covered || s.since+len(c.Keys) >= s.keys)
	switch {
	case first, c.Cover && s.since > s.keys+s.keys/8, !c.Cover && s.since > s.keys+s.keys/4:
		c.Mark, s.since, s.covered = true, 0, false
	case c.Cover:
		s.covered = true
	}
	s.since += len(c.Keys)
}

// TestSizeCovers checks the size bound with covers (doc.go, "Size": 6 K
// and 4 C): K states changed in turn, C a checkpoint, with the Mark and
// Cover a checkpoint.Writer gives such a stream (a cover once every state
// was written since the mark; a mark again at the first cover past an
// eighth more), and, in the second half, a tenth of the keys gone idle
// (no cover: merges as before). The database, measured after every
// checkpoint, stays within the bound; the runs shown within maxRuns+1.
func TestSizeCovers(t *testing.T) {
	if testing.Short() {
		t.Skip("600 checkpoints")
	}
	t.Parallel()
	const keys, changed = 20_000, 1_600
	path := filepath.Join(t.TempDir(), "logjail.db")
	db := mustOpen(t, path, Options{})
	t0 := at("2026-11-26T09:00:00Z")
	all := benchKeys(keys, t0)
	cad, next := cadence{keys: keys}, 0
	var maxDB int64
	for ck := range 600 {
		now := t0.Add(time.Duration(ck) * 300 * time.Millisecond)
		live := keys
		if ck >= 300 {
			live = keys - keys/10 // the last tenth idle: no cover comes
		}
		rows := make([]KeyRow, changed)
		for i := range rows {
			rows[i] = all[(next+i)%live]
		}
		next = (next + changed) % live
		touch(rows, now)
		c := &Checkpoint{Time: now, Keys: rows}
		cad.set(c, ck == 0, live != keys)
		if err := db.Checkpoint(c); err != nil {
			t.Fatal(err)
		}
		maxDB = max(maxDB, fileSize(t, path))
		if runs, _, err := db.KeyRuns(); err != nil || runs > maxRuns+1 {
			t.Fatalf("checkpoint %d: %d runs (%v)", ck, runs, err)
		}
	}
	bound := int64((6*keys+4*changed)*sizeKeyBytes + sizeFixedBytes)
	t.Logf("database at most %d KB, bound %d KB; %d covers dropped runs", maxDB>>10, bound>>10, db.covered)
	if maxDB > bound {
		t.Errorf("the database grew to %d bytes, over its bound of %d", maxDB, bound)
	}
	if db.covered < 5 {
		t.Error("no covers: nothing tested")
	}
}

// TestCoverEndReopened: opened again, a DB weighs as its base the runs up
// to its last cover that dropped runs (meta coverEndKey), so the first
// checkpoints after a restart of a covered stream start no merge of
// every run; without it (the key deleted) the first one does.
func TestCoverEndReopened(t *testing.T) {
	for _, keep := range []bool{true, false} {
		t.Run(fmt.Sprint("kept=", keep), func(t *testing.T) {
			const keys, changed = 20_000, 1_600
			path := filepath.Join(t.TempDir(), "logjail.db")
			db := mustOpen(t, path, Options{})
			t0 := at("2026-11-26T09:00:00Z")
			all := benchKeys(keys, t0)
			cad, next := cadence{keys: keys}, 0
			write := func(ck int, first bool) {
				now := t0.Add(time.Duration(ck) * 300 * time.Millisecond)
				rows := make([]KeyRow, changed)
				for i := range rows {
					rows[i] = all[(next+i)%keys]
				}
				next = (next + changed) % keys
				touch(rows, now)
				c := &Checkpoint{Time: now, Keys: rows}
				cad.set(c, first, false)
				if err := db.Checkpoint(c); err != nil {
					t.Fatal(err)
				}
			}
			for ck := range 60 {
				write(ck, ck == 0)
			}
			if db.covered == 0 {
				t.Fatal("no cover dropped a run: nothing tested")
			}
			db.Close()
			if !keep {
				db = mustOpen(t, path, Options{})
				if _, err := db.w.Exec(`DELETE FROM meta WHERE key = ?1`, coverEndKey); err != nil {
					t.Fatal(err)
				}
				db.Close()
			}
			db = mustOpen(t, path, Options{})
			defer db.Close()
			merged := false
			for ck := 60; ck < 70; ck++ { // less than a round: no cover yet
				write(ck, ck == 60)
				merged = merged || db.merge != nil
			}
			if merged == keep {
				t.Errorf("a merge started after the reopening: %v, want %v", merged, !keep)
			}
		})
	}
}
