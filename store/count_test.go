package store

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestBanCounts(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "logjail.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got, err := db.BanCounts()
	if err != nil || len(got) != 0 {
		t.Fatalf("empty: %v, %v", got, err)
	}
	now := time.Now()
	b := func(rule, key, kind string) Ban {
		return Ban{Rule: rule, Key: key, Kind: kind, Since: now, Until: now.Add(time.Hour), Origin: OriginDetector}
	}
	if err := db.Checkpoint(&Checkpoint{SetBans: []Ban{
		b("flood", "a", PhaseBan), b("flood", "b", PhaseBan), b("flood", "c", PhaseThrottle), b("operator", "d", PhaseBan),
	}}); err != nil {
		t.Fatal(err)
	}
	got, err = db.BanCounts()
	if err != nil {
		t.Fatal(err)
	}
	want := []BanCount{{Rule: "flood", Kind: PhaseBan, N: 2}, {Rule: "flood", Kind: PhaseThrottle, N: 1}, {Rule: "operator", Kind: PhaseBan, N: 1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("BanCounts (-want +got):\n%s", diff)
	}
}

func TestEachActiveBan(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "logjail.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Now().Truncate(time.Millisecond)
	if err := db.Checkpoint(&Checkpoint{SetBans: []Ban{
		{Rule: "r", Key: "b", Kind: PhaseBan, Since: now, Until: now.Add(time.Hour), Reason: "x", Origin: OriginDetector},
		{Rule: "r", Key: "a", Kind: PhaseThrottle, Since: now, Origin: OriginOperator, Who: "uid 0 (root)"},
	}}); err != nil {
		t.Fatal(err)
	}
	want, err := db.ActiveBans()
	if err != nil {
		t.Fatal(err)
	}
	var got []Ban
	if err := db.EachActiveBan(func(b *Ban) error { got = append(got, *b); return nil }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("EachActiveBan (-ActiveBans +got):\n%s", diff)
	}
	if n, err := db.CountActiveBans(); err != nil || n != 2 {
		t.Errorf("CountActiveBans = %d, %v", n, err)
	}
	if n, err := db.CountActiveBansByKind(); err != nil || !cmp.Equal(n, map[string]int{"ban": 1, "throttle": 1}) {
		t.Errorf("CountActiveBansByKind = %v, %v; want 1 ban, 1 throttle", n, err)
	}
}
