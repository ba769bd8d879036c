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

// TestPruneReadsOldParts checks Prune, which reads only the parts whose
// prune_ms is old and rewrites them in place, against the full scan it
// replaced: a merge of every run, each idle state that is neither
// throttled, banned nor held by the bans or the history left out. Forty
// rounds of random checkpoints over 4,000 (rule, key)s (overwrites,
// eviction tombstones, states never seen, throttles and bans with and
// without end, active bans and history) make merges into new bases and
// merged runs; every round prunes, and the states read afterwards must be
// the reference's, with the count it gave.
func TestPruneReadsOldParts(t *testing.T) {
	db := mustOpen(t, filepath.Join(t.TempDir(), "logjail.db"), Options{})
	rng := rand.New(rand.NewPCG(23, 5))
	t0 := at("2026-11-22T12:00:00Z")
	rules := []string{"flood", "heavy"}
	var pruned, inPlace int64
	maxRuns := 0
	for round := range 40 {
		now := t0.Add(time.Duration(round) * 2 * time.Minute)
		c := &Checkpoint{Time: now}
		for range 200 + rng.IntN(1200) {
			r := KeyRow{Rule: rules[rng.IntN(len(rules))], Key: fmt.Sprintf("k%05d", rng.IntN(4000)),
				LastSeen: now.Add(-time.Duration(rng.IntN(3)) * time.Minute), Requests: int64(round)}
			r.Data = make([]byte, 100+rng.IntN(200))
			r.Data[0] = byte(round)
			switch x := rng.IntN(100); {
			case x < 3:
				r.LastSeen = now.Add(-time.Hour)
			case x < 6:
				r.Data = nil // evicted
			case x < 14:
				r.LastSeen = time.Time{}
			case x < 20:
				r.Phase, r.Until = PhaseThrottle, now.Add(time.Duration(rng.IntN(20)-10)*time.Minute)
			case x < 23:
				r.Phase = PhaseBan
			case x < 27:
				c.SetBans = append(c.SetBans, Ban{Rule: r.Rule, Key: r.Key, Kind: PhaseBan, Since: now,
					Until: now.Add(time.Duration(rng.IntN(20)-10) * time.Minute), Reason: "test", Origin: OriginDetector})
			case x < 30:
				c.Events = append(c.Events, Event{Time: now.Add(-time.Duration(rng.IntN(60)) * time.Minute), Rule: r.Rule, Key: r.Key,
					Kind: KindBan, Until: now, Reason: "test", Origin: OriginDetector})
			}
			c.Keys = append(c.Keys, r)
		}
		if err := db.Checkpoint(c); err != nil {
			t.Fatal(err)
		}
		runs, _, err := db.KeyRuns()
		if err != nil {
			t.Fatal(err)
		}
		maxRuns = max(maxRuns, runs)
		p := PruneOptions{KeysBefore: now.Add(-20 * time.Minute), KeepBannedSince: now.Add(-30 * time.Minute)}
		want, n := prunedByScan(t, db, now, p)
		st, err := db.Prune(now, p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Keys != n {
			t.Errorf("round %d: pruned %d states, the full scan %d", round, st.Keys, n)
		}
		if got := readKeys(t, db); !reflect.DeepEqual(want, got) {
			t.Fatalf("round %d: states after the prune (-full scan +prune):\n%s", round, cmp.Diff(want, got))
		}
		if st, err := db.Prune(now, p); err != nil || st.Keys != 0 {
			t.Fatalf("round %d: a second prune: %+v, %v; want none", round, st, err)
		}
		if runs > 1 {
			inPlace += n
		}
		pruned += n
	}
	if pruned < 1000 || inPlace == 0 || maxRuns < 4 {
		t.Errorf("pruned %d states, %d beside newer runs, at most %d runs: the rounds did not exercise the prune", pruned, inPlace, maxRuns)
	}
}

// pruneAsScan prunes each of dbs at now with p, fails unless each pruned
// as many states as a full scan of scan finds (prunedByScan, before the
// prunes), makes model the states the scan leaves, and returns how many
// were pruned.
func pruneAsScan(t *testing.T, round int, scan *DB, now time.Time, p PruneOptions, model map[[2]string]KeyRow, dbs ...*DB) int {
	t.Helper()
	want, n := prunedByScan(t, scan, now, p)
	for _, d := range dbs {
		st, err := d.Prune(now, p)
		if err != nil || st.Keys != n {
			t.Fatalf("round %d: pruned %d (%v), the full scan %d", round, st.Keys, err, n)
		}
	}
	clear(model)
	for _, r := range want {
		model[[2]string{r.Rule, r.Key}] = r
	}
	return int(n)
}

// prunedByScan is the reference: the states a full merge of the runs
// leaves after a prune at now with p (each state read; an idle one, not
// throttled or banned at now and not held, left out), and how many it
// leaves out.
func prunedByScan(t *testing.T, db *DB, now time.Time, p PruneOptions) ([]KeyRow, int64) {
	t.Helper()
	before, nowMS := p.KeysBefore.UnixMilli(), now.UnixMilli()
	var keep any
	if !p.KeepBannedSince.IsZero() {
		keep = p.KeepBannedSince.UnixMilli()
	}
	var n int64
	var left []KeyRow
	for _, r := range readKeys(t, db) {
		idle := r.LastSeen.IsZero() || r.LastSeen.UnixMilli() < before
		if idle && !(r.Phase != "" && (r.Until.IsZero() || r.Until.UnixMilli() > nowMS)) {
			var held bool
			db.mu.Lock()
			err := db.withConn(func(w *conn) (err error) {
				held, err = w.held(&entry{rule: []byte(r.Rule), key: []byte(r.Key)}, nowMS, keep)
				return err
			})
			db.mu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			if !held {
				n++
				continue
			}
		}
		left = append(left, r)
	}
	return left, n
}

// TestPartKeysMigrate: a database of version 4 (no key_parts) gets the
// first key of each of its parts at its first open by this version, and
// a prune then finds keys in its runs as in one written by it.
func TestPartKeysMigrate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "logjail.db")
	db := mustOpen(t, path, Options{})
	t0 := at("2026-11-22T12:00:00Z")
	all := benchKeys(3000, t0)
	for i := range all {
		all[i].LastSeen = t0.Add(-time.Duration(i%40) * time.Minute)
	}
	// A base, then a newer run that sees every third key again.
	if err := db.Checkpoint(&Checkpoint{Time: t0, Keys: all}); err != nil {
		t.Fatal(err)
	}
	var again []KeyRow
	for i := 0; i < len(all); i += 3 {
		r := all[i]
		r.LastSeen = t0
		again = append(again, r)
	}
	if err := db.Checkpoint(&Checkpoint{Time: t0, Keys: again}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	r := raw(t, path)
	for _, q := range []string{`DROP TABLE key_parts`, `DROP TABLE key_hidden`, `PRAGMA user_version = 4`} {
		if _, err := r.Exec(q); err != nil {
			t.Fatal(q, err)
		}
	}
	r.Close()
	db = mustOpen(t, path, Options{})
	var parts, keys int
	if err := db.r.QueryRow(`SELECT (SELECT count(*) FROM key_runs), (SELECT count(*) FROM key_parts)`).Scan(&parts, &keys); err != nil {
		t.Fatal(err)
	}
	if parts < 4 || keys != parts {
		t.Fatalf("%d parts, %d part keys after the migration; want as many, several", parts, keys)
	}
	p := PruneOptions{KeysBefore: t0.Add(-20 * time.Minute)}
	want, n := prunedByScan(t, db, t0, p)
	st, err := db.Prune(t0, p)
	if err != nil || st.Keys != n || n == 0 {
		t.Fatalf("prune: %+v, %v; want %d states pruned", st, err, n)
	}
	if got := readKeys(t, db); !reflect.DeepEqual(want, got) {
		t.Fatalf("states after the prune (-full scan +prune):\n%s", cmp.Diff(want, got))
	}
}

// TestOldPageSize: a database made with 4 KiB pages keeps them, and its
// WAL is copied back at the same 16 MiB (4096 pages).
func TestOldPageSize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "logjail.db")
	r := raw(t, path)
	if _, err := r.Exec(`PRAGMA page_size = 4096; CREATE TABLE made_before (x); DROP TABLE made_before`); err != nil {
		t.Fatal(err)
	}
	r.Close()
	db := mustOpen(t, path, Options{})
	for pragma, want := range map[string]int{"page_size": 4096, "wal_autocheckpoint": 4096} {
		var got int
		if err := db.w.QueryRow("PRAGMA " + pragma).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("PRAGMA %s = %d, want %d", pragma, got, want)
		}
	}
}
