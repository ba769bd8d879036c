package checkpoint_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/logjail/logjail/checkpoint"
	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/internal/feedtest"
	"github.com/logjail/logjail/pipeline"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/state"
	"github.com/logjail/logjail/store"
)

const floodConfig = `
sources: [{name: web, paths: [/var/log/access.log], format: combined, timezone: UTC}]
rules:
  - name: flood
    limits: ["5 per 10s"]
    ban: {for: 1h}
  - name: slow
    limits: ["1000 per minute"]
`

func parse(t *testing.T, text string) *rules.Config {
	t.Helper()
	cfg, err := rules.Parse("t.yaml", []byte(text), rules.Options{HostAddrs: []netip.Addr{netip.MustParseAddr("192.0.2.1")}})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// writeLines writes n requests of ip, one every 100 ms from t0+sec.
func writeLines(t *testing.T, path, ip string, sec, n int) {
	t.Helper()
	t0 := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	var b strings.Builder
	for i := 0; i < n; i++ {
		at := t0.Add(time.Duration(sec)*time.Second + time.Duration(i)*100*time.Millisecond)
		fmt.Fprintf(&b, "%s - - [%s] \"GET / HTTP/1.1\" 200 1 \"-\" \"t\"\n", ip, at.Format("02/Jan/2006:15:04:05 -0700"))
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

func feed(t *testing.T, cfg *rules.Config, dbPath, log string) feedtest.Result {
	t.Helper()
	db, err := store.Open(dbPath, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := feedtest.Feed(context.Background(), cfg, db, log, feedtest.Options{Every: 3})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func activeBans(t *testing.T, dbPath string) []string {
	t.Helper()
	db, err := store.Open(dbPath, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	bans, err := db.ActiveBans()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, b := range bans {
		out = append(out, b.Kind+" "+b.Rule+" "+b.Key)
	}
	return out
}

// TestFeedResumesAndRecognisesRotation: a second Feed of the same file reads
// nothing again; after the file is rotated away, the new file at the path is
// read from its start; a ban survives both.
func TestFeedResumesAndRecognisesRotation(t *testing.T) {
	dir := t.TempDir()
	cfg := parse(t, floodConfig)
	dbPath, log := filepath.Join(dir, "state", "logjail.db"), filepath.Join(dir, "access.log")
	writeLines(t, log, "203.0.113.7", 0, 20)
	if res := feed(t, cfg, dbPath, log); res.Lines != 20 || res.From != 0 {
		t.Fatalf("first feed: %+v, want 20 lines from 0", res)
	}
	if got := activeBans(t, dbPath); len(got) != 1 || got[0] != "ban flood 203.0.113.7" {
		t.Fatalf("active bans %q, want the flood ban of 203.0.113.7", got)
	}
	if res := feed(t, cfg, dbPath, log); res.Lines != 0 || res.From == 0 || res.Restored.Keys == 0 {
		t.Errorf("second feed of the same file: %+v, want nothing read, from its end, keys restored", res)
	}
	os.Rename(log, log+".1")
	writeLines(t, log, "203.0.113.8", 30, 3)
	if res := feed(t, cfg, dbPath, log); res.Lines != 3 || res.From != 0 {
		t.Errorf("after rotation: %+v, want the 3 lines of the new file from its start", res)
	}
	if got := activeBans(t, dbPath); len(got) != 1 {
		t.Errorf("active bans after rotation %q, want the ban still there", got)
	}
}

// TestRemovedRuleLiftsItsBans: a ban of a rule taken out of the
// configuration is lifted at the next start, with an unban in the history.
func TestRemovedRuleLiftsItsBans(t *testing.T) {
	dir := t.TempDir()
	dbPath, log := filepath.Join(dir, "logjail.db"), filepath.Join(dir, "access.log")
	writeLines(t, log, "203.0.113.7", 0, 20)
	feed(t, parse(t, floodConfig), dbPath, log)
	without := parse(t, `
sources: [{name: web, paths: [/var/log/access.log], format: combined, timezone: UTC}]
rules:
  - name: slow
    limits: ["1000 per minute"]
`)
	res := feed(t, without, dbPath, log)
	if res.Restored.Dropped == 0 {
		t.Errorf("restore with the flood rule removed dropped nothing: %+v", res.Restored)
	}
	if got := activeBans(t, dbPath); len(got) != 0 {
		t.Errorf("active bans %q, want none: their rule is gone", got)
	}
	db, err := store.Open(dbPath, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	hist, err := db.History(state.HistoryQuery{Key: "203.0.113.7"})
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) < 2 || hist[0].Kind != "unban" || !strings.Contains(hist[0].Reason, "no longer in the configuration") {
		t.Errorf("history of 203.0.113.7 = %+v, want the ban then an unban saying the rule is gone", hist)
	}
}

// TestBansThatEndedWhileStopped: a ban that ended while logjail was not
// running leaves the active bans at start and is recorded as expired once;
// when the logs' time passes its end, the detector's own unban is not
// recorded again.
func TestBansThatEndedWhileStopped(t *testing.T) {
	dir := t.TempDir()
	cfg := parse(t, floodConfig)
	dbPath, log := filepath.Join(dir, "logjail.db"), filepath.Join(dir, "access.log")
	writeLines(t, log, "203.0.113.7", 0, 20) // banned at 10:00:00.5 for 1h
	feed(t, cfg, dbPath, log)

	db, err := store.Open(dbPath, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 2, 12, 0, 0, 0, time.UTC)
	if _, err := feedtest.Feed(context.Background(), cfg, db, log, feedtest.Options{Every: 3, Now: now}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if got := activeBans(t, dbPath); len(got) != 0 {
		t.Errorf("active bans at start, 2 h later: %q, want none", got)
	}
	// The logs go on past the ban's end: the detector unbans on its own.
	more := filepath.Join(dir, "more.log")
	writeLines(t, more, "203.0.113.9", 2*3600, 2)
	extra, _ := os.ReadFile(more)
	f, _ := os.OpenFile(log, os.O_APPEND|os.O_WRONLY, 0)
	f.Write(extra)
	f.Close()
	feed(t, cfg, dbPath, log)

	db, err = store.Open(dbPath, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	hist, err := db.History(state.HistoryQuery{Key: "203.0.113.7"})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range hist {
		kinds = append(kinds, e.Kind+": "+e.Reason)
	}
	if len(hist) != 2 || hist[0].Kind != "unban" || !strings.Contains(hist[0].Reason, "while logjail was not running") {
		t.Errorf("history of 203.0.113.7, newest first: %q; want the ban and one unban recorded at start", kinds)
	}
}

func TestPruneOptions(t *testing.T) {
	cfg := parse(t, floodConfig+"history_retention: 7d\n")
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	p := checkpoint.PruneOptions(cfg, now, 100)
	// The longest window is "1000 per minute"; remember is the default 30 days.
	want := state.PruneOptions{KeysBefore: now.Add(-2 * time.Minute), KeepBannedSince: now.Add(-30 * 24 * time.Hour),
		HistoryBefore: now.Add(-7 * 24 * time.Hour), VacuumPages: 100}
	if p != want {
		t.Errorf("PruneOptions = %+v, want %+v", p, want)
	}
}

// TestDecisionsCarryNode: the fleet node that decided a throttle, a ban or
// an unban reaches the active bans and the history; a decision of no
// fleet has none.
func TestDecisionsCarryNode(t *testing.T) {
	cfg := parse(t, floodConfig)
	db, err := store.Open(filepath.Join(t.TempDir(), "logjail.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w := checkpoint.NewWriter(db)
	det := pipeline.NewDetector(cfg)
	t0 := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	w.Decisions([]detector.Decision{
		{Rule: "flood", Key: "203.0.113.7", Kind: detector.Ban, Time: t0, Until: t0.Add(time.Hour), Reason: "rate", Origin: state.OriginDetector, Node: "web2"},
		{Rule: "flood", Key: "203.0.113.8", Kind: detector.Throttle, Time: t0, Until: t0.Add(time.Hour), Origin: state.OriginDetector, Node: "web1"},
		{Rule: "flood", Key: "203.0.113.9", Kind: detector.Ban, Time: t0, Until: t0.Add(time.Hour), Origin: state.OriginDetector},
	})
	if err := w.Flush(det, t0); err != nil {
		t.Fatal(err)
	}
	w.Decisions([]detector.Decision{{Rule: "flood", Key: "203.0.113.7", Kind: detector.Unban, Time: t0.Add(time.Minute),
		Origin: state.OriginOperator, Who: "root", Node: "web3"}})
	if err := w.Flush(det, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	bans, err := db.ActiveBans()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range bans {
		got = append(got, b.Kind+" "+b.Key+" node="+b.Node)
	}
	if want := []string{"throttle 203.0.113.8 node=web1", "ban 203.0.113.9 node="}; !slices.Equal(got, want) {
		t.Errorf("active bans %q, want %q", got, want)
	}
	hist, err := db.History(state.HistoryQuery{Key: "203.0.113.7"})
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	for _, e := range hist {
		got = append(got, e.Kind+" node="+e.Node)
	}
	if want := []string{"unban node=web3", "ban node=web2"}; !slices.Equal(got, want) {
		t.Errorf("history of 203.0.113.7, newest first: %q, want %q", got, want)
	}
}
