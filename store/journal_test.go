package store

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// journalState is one key state as a test writes and expects it.
func journalState(rule string, i, requests int, t0 time.Time) KeyRow {
	return KeyRow{Rule: rule, Key: fmt.Sprintf("2001:db8:%x::/64", i), Data: []byte(fmt.Sprintf("w%d-%d", i, requests)),
		LastSeen: t0.Add(time.Duration(requests) * time.Second), Requests: int64(requests), CPU: float64(requests) / 8,
		Phase: PhaseAllowed}
}

// keysOf reads every key state of db, in the order Keys gives them.
func keysOf(t *testing.T, db *DB) []KeyRow {
	t.Helper()
	var out []KeyRow
	err := db.Keys(func(r *KeyRow) error {
		c := *r
		c.Data = append([]byte{}, r.Data...)
		out = append(out, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestKeyJournal: a checkpoint of many changed states is journaled, not
// upserted; Keys reads the table and the journal as one (the journal's
// newest state of a key wins, a journaled delete removes it), across a
// restart; the cleaner's Prune folds the journal into the table, as does
// Close.
func TestKeyJournal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "logjail.db")
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]KeyRow{}
	ck := func(rows []KeyRow) {
		t.Helper()
		if err := db.Checkpoint(&Checkpoint{Time: t0, Keys: rows}); err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.Data == nil {
				delete(want, r.Rule+" "+r.Key)
			} else {
				want[r.Rule+" "+r.Key] = r
			}
		}
	}
	check := func(stage string) {
		t.Helper()
		got := keysOf(t, db)
		if len(got) != len(want) {
			t.Fatalf("%s: %d states, want %d", stage, len(got), len(want))
		}
		for i, r := range got {
			if i > 0 && compareRows(&got[i-1], &r) >= 0 {
				t.Fatalf("%s: %s %s after %s %s: not in (rule, key) order", stage, r.Rule, r.Key, got[i-1].Rule, got[i-1].Key)
			}
			if d := cmp.Diff(want[r.Rule+" "+r.Key], r); d != "" {
				t.Fatalf("%s: %s %s (-want +got):\n%s", stage, r.Rule, r.Key, d)
			}
		}
	}
	tableRows := func() (n, journaled int) {
		t.Helper()
		if err := db.r.QueryRow(`SELECT count(*) FROM keys`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if err := db.r.QueryRow(`SELECT coalesce(sum(states), 0) FROM key_journal`).Scan(&journaled); err != nil {
			t.Fatal(err)
		}
		return n, journaled
	}

	// A small checkpoint goes to the table.
	var small []KeyRow
	for i := range 100 {
		small = append(small, journalState("flood", i, 1, t0))
	}
	ck(small)
	if n, j := tableRows(); n != 100 || j != 0 {
		t.Fatalf("after a small checkpoint: %d rows in keys, %d journaled; want 100, 0", n, j)
	}
	// A large one (two rules, the table's keys among them) is journaled.
	var large []KeyRow
	for i := range journalMin + 500 {
		large = append(large, journalState("flood", i, 2, t0), journalState("cpu", i, 3, t0))
	}
	ck(large)
	if n, j := tableRows(); n != 100 || j != len(large) {
		t.Fatalf("after a large checkpoint: %d rows in keys, %d journaled; want 100, %d", n, j, len(large))
	}
	check("journaled")
	// While the journal holds states, a small checkpoint is journaled too
	// (the table must not get a state older than the journal's): a
	// changed key, a deleted one, a deleted one that only the table held.
	ck([]KeyRow{journalState("flood", 7, 9, t0), {Rule: "cpu", Key: journalState("cpu", 8, 0, t0).Key}, {Rule: "flood", Key: journalState("flood", 9, 0, t0).Key}})
	check("small journaled")
	if n, j := tableRows(); n != 100 || j != len(large)+3 {
		t.Fatalf("after a small journaled checkpoint: %d rows in keys, %d journaled; want 100, %d", n, j, len(large)+3)
	}

	// A checkpoint that names a key twice: the later mention wins, as in
	// the table.
	twice := append(append([]KeyRow{}, large[:journalMin]...), journalState("flood", 0, 11, t0))
	ck(twice)
	check("named twice")

	// A restart reads the same, and knows the journal is not empty.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if n, j := func() (int, int) { db = mustOpen(t, path, Options{ReadOnly: true}); return tableRows() }(); j != 0 || n != len(want) {
		t.Fatalf("after Close: %d rows in keys, %d journaled; want %d, 0 (Close folds)", n, j, len(want))
	}
	check("folded by Close")
	db.Close()
	// What a writer that died leaves: a journal not folded.
	var crashed []KeyRow
	for i := range 10 {
		crashed = append(crashed, journalState("cpu", i, 5, t0))
	}
	err = encodeJournal(crashed, []int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, func(b []byte, n int) error {
		_, err := raw(t, path).Exec(`INSERT INTO key_journal (states, data) VALUES (?, ?)`, n, b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range crashed {
		want[r.Rule+" "+r.Key] = r
	}
	db = mustOpen(t, path, Options{})
	if db.journaled != 10 {
		t.Fatalf("reopened: %d states journaled, want 10", db.journaled)
	}
	check("journal left by a crash")
	ck(small[:1]) // journaled, as the reopened writer knows of the journal
	check("reopened")

	// The cleaner's pass folds, then prunes the table.
	st, err := db.Prune(t0.Add(time.Hour), PruneOptions{KeysBefore: t0.Add(2500 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	for k, r := range want {
		if r.LastSeen.Before(t0.Add(2500 * time.Millisecond)) {
			delete(want, k)
		}
	}
	if n, j := tableRows(); j != 0 || n != len(want) {
		t.Fatalf("after Prune: %d rows in keys, %d journaled; want %d, 0 (pruned %d)", n, j, len(want), st.Keys)
	}
	check("folded by Prune")
}

// TestJournalCorrupt: a journal row cut short is an error of Keys, not a
// silently shorter state.
func TestJournalCorrupt(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	rows := []KeyRow{journalState("flood", 1, 1, t0), journalState("flood", 2, 1, t0)}
	var blob []byte
	if err := encodeJournal(rows, []int32{0, 1}, func(b []byte, n int) error { blob = append(blob, b...); return nil }); err != nil {
		t.Fatal(err)
	}
	var got []KeyRow
	if err := decodeJournal(blob, func(r *KeyRow) error { got = append(got, *r); return nil }); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(rows, got); d != "" {
		t.Fatalf("round trip (-want +got):\n%s", d)
	}
	for cut := 1; cut < len(blob); cut++ {
		n := 0
		err := decodeJournal(blob[:cut], func(*KeyRow) error { n++; return nil })
		if err == nil && n != 1 {
			t.Fatalf("cut at %d of %d: no error, %d states", cut, len(blob), n)
		}
	}
}
