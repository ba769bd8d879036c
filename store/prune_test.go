package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestPrune(t *testing.T) {
	path := filepath.Join(t.TempDir(), "logjail.db")
	db := mustOpen(t, path, Options{})
	now := at("2026-11-22T12:00:00Z")
	old, recent := now.Add(-time.Hour), now.Add(-time.Minute)
	key := func(name string, seen time.Time, phase string, until time.Time) KeyRow {
		return KeyRow{Rule: "flood", Key: name, Data: make([]byte, 200), LastSeen: seen, Requests: 1, Phase: phase, Until: until}
	}
	c := &Checkpoint{Time: now,
		Keys: []KeyRow{
			key("old", old, "", time.Time{}),
			key("never-seen", time.Time{}, "", time.Time{}),
			key("recent", recent, "", time.Time{}),
			key("old-throttled", old, PhaseThrottle, now.Add(time.Minute)),
			key("old-throttle-over", old, PhaseThrottle, now.Add(-time.Minute)),
			key("old-banned-forever", old, PhaseBan, time.Time{}),
			key("old-in-bans", old, "", time.Time{}),
			key("old-ban-over", old, "", time.Time{}),
		},
		SetBans: []Ban{
			{Rule: "flood", Key: "old-in-bans", Kind: PhaseBan, Since: old, Until: now.Add(time.Hour), Origin: OriginOperator, Who: "alice"},
			{Rule: "flood", Key: "old-ban-over", Kind: PhaseBan, Since: old, Until: now.Add(-time.Second), Origin: OriginDetector},
		},
		Events: []Event{
			{Time: now.Add(-48 * time.Hour), Rule: "flood", Key: "old", Kind: KindBan},
			{Time: now.Add(-25 * time.Hour), Rule: "flood", Key: "old", Kind: KindUnban},
			{Time: now.Add(-time.Hour), Rule: "flood", Key: "old-in-bans", Kind: KindBan},
		},
	}
	// Many more old keys, to have pages to give back.
	for i := range 5000 {
		c.Keys = append(c.Keys, key(fmt.Sprintf("filler-%05d", i), old, "", time.Time{}))
	}
	if err := db.Checkpoint(c); err != nil {
		t.Fatal(err)
	}
	if _, err := db.TruncateWAL(); err != nil {
		t.Fatal(err)
	}
	sizeBefore := fileSize(t, path)

	st, err := db.Prune(now, PruneOptions{KeysBefore: now.Add(-20 * time.Minute), HistoryBefore: now.Add(-24 * time.Hour), VacuumPages: -1})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	if err := db.Keys(func(r *KeyRow) error { left = append(left, r.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	want := []string{"old-banned-forever", "old-in-bans", "old-throttled", "recent"}
	if !slices.Equal(left, want) {
		t.Errorf("keys left: %v, want %v", left, want)
	}
	hist, err := db.History(HistoryQuery{})
	if err != nil || len(hist) != 1 || hist[0].Key != "old-in-bans" {
		t.Errorf("history left: %+v, %v; want the event of the last day", hist, err)
	}
	if st.Keys != 5004 || st.History != 2 {
		t.Errorf("stats %+v: want 5004 keys and 2 events deleted", st)
	}
	if st.VacuumedPages == 0 || st.FreePages != 0 {
		t.Errorf("stats %+v: want pages given back and none left free", st)
	}
	if _, err := db.TruncateWAL(); err != nil {
		t.Fatal(err)
	}
	if after := fileSize(t, path); after >= sizeBefore {
		t.Errorf("the file is %d bytes after the prune, %d before", after, sizeBefore)
	}

	// Nothing to prune, nothing to vacuum: no error, nothing done.
	st, err = db.Prune(now, PruneOptions{KeysBefore: now.Add(-20 * time.Minute), HistoryBefore: now.Add(-24 * time.Hour), VacuumPages: 100})
	if err != nil || st != (PruneStats{}) {
		t.Errorf("a second prune: %+v, %v", st, err)
	}
}

func TestTopKeys(t *testing.T) {
	db := mustOpen(t, filepath.Join(t.TempDir(), "logjail.db"), Options{})
	t0 := at("2026-11-22T12:00:00Z")
	c := &Checkpoint{Time: t0}
	// Busy keys (in the partial indexes) and light ones, and another rule.
	for i, req := range []int64{500, 5, 150, 40, 100, 99, 1} {
		c.Keys = append(c.Keys, KeyRow{Rule: "flood", Key: fmt.Sprintf("k%d", i), Data: []byte{}, Requests: req,
			CPU: float64(req) / 50, LastSeen: t0.Add(time.Duration(i) * time.Second)})
	}
	c.Keys = append(c.Keys, KeyRow{Rule: "other", Key: "x", Data: []byte{}, Requests: 1000, CPU: 100, LastSeen: t0.Add(time.Hour)})
	if err := db.Checkpoint(c); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		by   string
		n    int
		want []string
	}{
		{"requests", 2, []string{"k0", "k2"}},                                // from the index alone
		{"requests", 5, []string{"k0", "k2", "k4", "k5", "k3"}},              // and the light keys after
		{"requests", 10, []string{"k0", "k2", "k4", "k5", "k3", "k1", "k6"}}, // all of the rule
		{"cpu", 4, []string{"k0", "k2", "k4", "k5"}},                         // cpu ≥ 1 then below
		{"last_seen", 3, []string{"k6", "k5", "k4"}},
	} {
		t.Run(fmt.Sprintf("%s,%d", tc.by, tc.n), func(t *testing.T) {
			rows, err := db.TopKeys("flood", tc.by, tc.n)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range rows {
				got = append(got, r.Key)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTruncateWAL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "logjail.db")
	w := mustOpen(t, path, Options{})
	r := mustOpen(t, path, Options{ReadOnly: true})
	c := &Checkpoint{Time: at("2026-11-22T12:00:00Z"), Keys: benchKeys(2000, at("2026-11-22T12:00:00Z"))}
	if err := w.Checkpoint(c); err != nil {
		t.Fatal(err)
	}
	// A reader in the middle of a read keeps the WAL from being emptied,
	// and is not disturbed.
	errStop := errors.New("stop")
	err := r.View(func(s Reader) error {
		return s.Keys(func(*KeyRow) error {
			if err := w.Checkpoint(&Checkpoint{Time: at("2026-11-22T12:00:05Z"), Keys: c.Keys[:10]}); err != nil {
				return err
			}
			done, err := w.TruncateWAL()
			if err != nil || done {
				return fmt.Errorf("TruncateWAL beside a reader: %v, %v; want not done", done, err)
			}
			return errStop
		})
	})
	if !errors.Is(err, errStop) {
		t.Fatal(err)
	}
	if n, _ := w.WALSize(); n == 0 {
		t.Error("the WAL is empty before it was truncated")
	}
	done, err := w.TruncateWAL()
	if err != nil || !done {
		t.Fatalf("TruncateWAL with no reader: %v, %v", done, err)
	}
	if n, err := w.WALSize(); n != 0 || err != nil {
		t.Errorf("WAL after TruncateWAL: %d bytes, %v", n, err)
	}
	// The checkpoint written beside the reader is there.
	if g, tm, err := r.Global(); err != nil || !tm.Equal(at("2026-11-22T12:00:05Z")) {
		t.Errorf("Global after: %q, %v, %v", g, tm, err)
	}
}

// TestPruneKeepsRecentlyBanned: an idle key banned within KeepBannedSince
// keeps its state (its earlier bans count for escalation); one banned before
// it, or never, goes.
func TestPruneKeepsRecentlyBanned(t *testing.T) {
	db := mustOpen(t, filepath.Join(t.TempDir(), "logjail.db"), Options{})
	now := at("2026-11-22T12:00:00Z")
	old := now.Add(-time.Hour)
	c := &Checkpoint{Time: now, Events: []Event{
		{Time: now.Add(-2 * time.Hour), Rule: "flood", Key: "banned-lately", Kind: KindBan},
		{Time: now.Add(-2 * time.Hour), Rule: "other", Key: "banned-by-another-rule", Kind: KindBan},
		{Time: now.Add(-40 * 24 * time.Hour), Rule: "flood", Key: "banned-long-ago", Kind: KindBan},
	}}
	for _, k := range []string{"banned-lately", "banned-by-another-rule", "banned-long-ago", "never-banned"} {
		c.Keys = append(c.Keys, KeyRow{Rule: "flood", Key: k, Data: []byte{1}, LastSeen: old})
	}
	if err := db.Checkpoint(c); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Prune(now, PruneOptions{KeysBefore: now.Add(-20 * time.Minute), KeepBannedSince: now.Add(-30 * 24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	var left []string
	if err := db.Keys(func(r *KeyRow) error { left = append(left, r.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(left, []string{"banned-lately"}) {
		t.Errorf("keys left: %v, want only banned-lately", left)
	}
}

// TestPruneMany: a prune of idle states spread over several parts of a
// key run deletes them all and counts each once; the states it keeps
// (banned, recent), spread among them, are kept.
func TestPruneMany(t *testing.T) {
	const pruneSlice = 16384
	db := mustOpen(t, filepath.Join(t.TempDir(), "logjail.db"), Options{})
	now := at("2026-11-22T12:00:00Z")
	c := &Checkpoint{Time: now}
	idle, unseen := 2*pruneSlice+7, pruneSlice+3
	var kept []string
	for i := range idle {
		seen := now.Add(-time.Hour - time.Duration(i)*time.Millisecond)
		c.Keys = append(c.Keys, KeyRow{Rule: "flood", Key: fmt.Sprintf("idle-%06d", i), Data: []byte{1}, LastSeen: seen})
		if i%5000 == 0 { // a banned state among them, as old
			k := fmt.Sprintf("banned-%06d", i)
			c.Keys = append(c.Keys, KeyRow{Rule: "flood", Key: k, Data: []byte{1}, LastSeen: seen, Phase: PhaseBan, Until: now.Add(time.Hour)})
			kept = append(kept, k)
		}
	}
	for i := range unseen {
		c.Keys = append(c.Keys, KeyRow{Rule: "scanners", Key: fmt.Sprintf("unseen-%06d", i), Data: []byte{1}})
	}
	c.Keys = append(c.Keys, KeyRow{Rule: "flood", Key: "recent", Data: []byte{1}, LastSeen: now.Add(-time.Minute)})
	kept = append(kept, "recent")
	if err := db.Checkpoint(c); err != nil {
		t.Fatal(err)
	}
	st, err := db.Prune(now, PruneOptions{KeysBefore: now.Add(-20 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if st.Keys != int64(idle+unseen) {
		t.Errorf("pruned %d states, want %d", st.Keys, idle+unseen)
	}
	var left []string
	if err := db.Keys(func(r *KeyRow) error { left = append(left, r.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	slices.Sort(kept)
	slices.Sort(left)
	if !slices.Equal(left, kept) {
		t.Errorf("states left: %v, want %v", left, kept)
	}
}
