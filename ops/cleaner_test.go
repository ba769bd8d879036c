package ops

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

	"github.com/google/go-cmp/cmp"
	"github.com/logjail/logjail/checkpoint"
	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/internal/feedtest"
	"github.com/logjail/logjail/pipeline"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/state"
	"github.com/logjail/logjail/store"
)

func TestParseSchedule(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 7, 30, 0, time.UTC) // a Sunday
	tests := []struct {
		spec    string
		want    time.Time
		wantErr string
	}{
		{spec: "@every 1m", want: at.Add(time.Minute)},
		{spec: "@every 90s", want: at.Add(90 * time.Second)},
		{spec: "@every 1d", want: at.Add(24 * time.Hour)},
		{spec: "  @every 1h ", want: at.Add(time.Hour)},
		{spec: "@hourly", want: time.Date(2026, 11, 22, 11, 0, 0, 0, time.UTC)},
		{spec: "@daily", want: time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)},
		{spec: "@midnight", want: time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)},
		{spec: "*/5 * * * *", want: time.Date(2026, 11, 22, 10, 10, 0, 0, time.UTC)},
		{spec: "30 3 * * *", want: time.Date(2026, 11, 23, 3, 30, 0, 0, time.UTC)},
		{spec: "0 4 * * mon-fri", want: time.Date(2026, 11, 23, 4, 0, 0, 0, time.UTC)},
		{spec: "0 4 1 jan *", want: time.Date(2027, 1, 1, 4, 0, 0, 0, time.UTC)},
		{spec: "0 4 * * 7", want: time.Date(2026, 11, 29, 4, 0, 0, 0, time.UTC)},
		{spec: "0 4 * * 6-7", want: time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC)},
		{spec: "0 4 * * 0", want: time.Date(2026, 11, 29, 4, 0, 0, 0, time.UTC)},
		{spec: "15,45 * * * *", want: time.Date(2026, 11, 22, 10, 15, 0, 0, time.UTC)},
		{spec: "@every 500ms", wantErr: "at least"},
		{spec: "@every soon", wantErr: "soon"},
		{spec: "@often", wantErr: "@often"},
		{spec: "* * * *", wantErr: "* * * *"},
		{spec: "0 0 * * * *", wantErr: "0 0 * * * *"},
		{spec: "61 * * * *", wantErr: "61"},
		{spec: "", wantErr: "schedule"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			s, err := ParseSchedule(tt.spec)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Next(at); !got.Equal(tt.want) {
				t.Errorf("Next(%v) = %v, want %v", at, got, tt.want)
			}
			if s.String() != strings.TrimSpace(tt.spec) {
				t.Errorf("String() = %q", s.String())
			}
		})
	}
	if got := (Schedule{}).Next(at); !got.IsZero() {
		t.Errorf("zero Schedule: Next = %v, want zero", got)
	}
}

// TestParseScheduleAcceptsTheConfigDefault: what rules defaults to and the
// example config says parse here too.
func TestParseScheduleAcceptsTheConfigDefault(t *testing.T) {
	cfg, err := rules.Parse("example.yaml", rules.Example(), rules.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{rules.DefaultCleaner, cfg.Cleaner} {
		if _, err := ParseSchedule(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
}

const cleanConfig = `
sources: [{name: web, paths: [/var/log/access.log], format: combined, timezone: UTC}]
good_bots: {verify: off} # its "2000 per minute" would keep idle keys 2m, past this test's log time
rules:
  - name: flood
    limits: ["5 per 10s"]
    ban: {for: 1h, remember: 1h}
`

// writeLog writes n requests of each ip at the given time, 100 ms apart.
func writeLog(t *testing.T, path string, reqs ...request) {
	t.Helper()
	var b strings.Builder
	for _, r := range reqs {
		for i := 0; i < r.n; i++ {
			at := r.at.Add(time.Duration(i) * 100 * time.Millisecond)
			fmt.Fprintf(&b, "%s - - [%s] \"GET / HTTP/1.1\" 200 1 \"-\" \"t\"\n", r.ip, at.Format("02/Jan/2006:15:04:05 -0700"))
		}
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

type request struct {
	ip string
	at time.Time
	n  int
}

// TestClean: a checkpoint holds an ended ban (a), one still in force (b)
// and an idle key never banned (c). A pass at a wall time after a's end
// ends a in the store (an unban in the history, gone from the active
// bans) but not in the detector, which lifts it on log time without a
// second unban; it keeps b, and prunes the keys idle on log time.
// cleanFixture feeds the log of TestClean into a new database under cfgText
// and returns it with a detector restored from it.
func cleanFixture(t *testing.T, cfgText string) (*rules.Config, *store.DB, *detector.Detector, time.Time) {
	t.Helper()
	dir := t.TempDir()
	cfg, err := rules.Parse("t.yaml", []byte(cfgText), rules.Options{HostAddrs: []netip.Addr{netip.MustParseAddr("192.0.2.1")}})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	log := filepath.Join(dir, "access.log")
	writeLog(t, log,
		request{"203.0.113.1", t0, 20},                       // banned until t0+1h
		request{"203.0.113.3", t0.Add(time.Minute), 2},       // never banned
		request{"203.0.113.2", t0.Add(50 * time.Minute), 20}, // banned until t0+1h50m
	)
	db, err := store.Open(filepath.Join(dir, "state", "logjail.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := feedtest.Feed(context.Background(), cfg, db, log, feedtest.Options{Source: cfg.Sources[0]}); err != nil {
		t.Fatal(err)
	}
	if got := banKeys(t, db); !slices.Equal(got, []string{"203.0.113.1", "203.0.113.2"}) {
		t.Fatalf("bans before the pass: %q", got)
	}
	det := pipeline.NewDetector(cfg)
	if _, _, err := checkpoint.Restore(db, cfg, det); err != nil {
		t.Fatal(err)
	}
	return cfg, db, det, t0
}

func TestClean(t *testing.T) {
	cfg, db, det, t0 := cleanFixture(t, cleanConfig)
	now := t0.Add(70 * time.Minute)
	st, err := Clean(db, cfg, det, now, -1)
	if err != nil {
		t.Fatal(err)
	}
	if st.Expired != 1 || len(st.Unbans) != 1 || st.Unbans[0].Key != "203.0.113.1" {
		t.Errorf("stats %+v, want one ban expired, of 203.0.113.1", st)
	}
	// Keys are pruned on log time (the logs end at 10:50:02): c was last
	// seen more than twice the 10 s window before and was never banned; a
	// is still banned on log time (until 11:00), b too.
	if st.Pruned.Keys != 1 {
		t.Errorf("pruned %d keys, want 1 (the idle 203.0.113.3)", st.Pruned.Keys)
	}
	if !st.WAL {
		t.Errorf("WAL not truncated, with no reader")
	}
	if got := banKeys(t, db); !slices.Equal(got, []string{"203.0.113.2"}) {
		t.Errorf("bans after the pass: %q, want only 203.0.113.2", got)
	}
	unbans, err := db.History(state.HistoryQuery{Kind: state.KindUnban})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range unbans {
		got = append(got, fmt.Sprintf("%s %s %s %s", e.Rule, e.Key, e.Time.UTC().Format(time.TimeOnly), e.Reason))
	}
	if diff := cmp.Diff([]string{"flood 203.0.113.1 11:00:00 ban expired"}, got); diff != "" {
		t.Errorf("unbans in the history (-want +got):\n%s", diff)
	}
	var keys []string
	if err := db.Keys(func(r *state.KeyRow) error { keys = append(keys, r.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys, []string{"203.0.113.1", "203.0.113.2"}) {
		t.Errorf("key states left: %q, want the two banned on log time", keys)
	}

	// The detector lives on log time: the wall clock ended a's ban in the
	// store, not in the detector, which still holds both at its newest
	// time; when the logs reach 11:00 it lifts a itself, and that unban
	// is not recorded a second time.
	logNow := det.Newest()
	for _, key := range []string{"203.0.113.1", "203.0.113.2"} {
		if k, _ := det.Status(cfg.Rule("flood"), key, logNow); k != "ban" {
			t.Errorf("detector: %s is %q at log time %s after the pass, want ban", key, k, logNow.Format(time.TimeOnly))
		}
	}
	w := checkpoint.NewWriter(db)
	if err := w.Resume(cfg, det, time.Time{}); err != nil {
		t.Fatal(err)
	}
	out := det.Advance(t0.Add(61*time.Minute), nil)
	if len(out) != 1 || out[0].Kind != detector.Unban || out[0].Key != "203.0.113.1" {
		t.Fatalf("the detector at 11:01: %+v, want its unban of 203.0.113.1", out)
	}
	if kept := w.Keep(out); len(kept) != 0 {
		t.Errorf("the detector's own unban of a ban the store ended: kept %+v, want dropped", kept)
	}
	if err := w.Flush(det, t0.Add(61*time.Minute)); err != nil {
		t.Fatal(err)
	}

	// A second pass expires nothing more; a, free and idle on log time, is
	// pruned.
	st, err = Clean(db, cfg, det, now, -1)
	if err != nil {
		t.Fatal(err)
	}
	if st.Expired != 0 || st.Pruned.Keys != 1 {
		t.Errorf("second pass: %+v, want no ban expired and a's state pruned (log time has ended its ban)", st)
	}
	if n, _ := db.History(state.HistoryQuery{Kind: state.KindUnban}); len(n) != 1 {
		t.Errorf("second pass: %d unbans in the history, want still 1", len(n))
	}
}

func banKeys(t *testing.T, db *store.DB) []string {
	t.Helper()
	bans, err := db.ActiveBans()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, b := range bans {
		out = append(out, b.Key)
	}
	return out
}

// TestCleanKeepsRemembered: the state of a key whose ban ended is kept
// while the ban is remembered for escalation (remember defaults to 30d),
// however idle the key.
func TestCleanKeepsRemembered(t *testing.T) {
	cfg, db, det, t0 := cleanFixture(t, strings.Replace(cleanConfig, ", remember: 1h", "", 1))
	st, err := Clean(db, cfg, det, t0.Add(70*time.Minute), 0)
	if err != nil {
		t.Fatal(err)
	}
	if st.Expired != 1 || st.Pruned.Keys != 1 {
		t.Errorf("stats %+v, want 1 ban expired and only the never banned key pruned", st)
	}
	var keys []string
	if err := db.Keys(func(r *state.KeyRow) error { keys = append(keys, r.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys, []string{"203.0.113.1", "203.0.113.2"}) {
		t.Errorf("key states left: %q, want both banned keys", keys)
	}
}

// TestCleanEndsThrottlesAndForeignBans: a throttle that ended leaves the
// active bans without an unban; a ban the detector does not hold (an
// operator's) leaves them with one.
func TestCleanEndsThrottlesAndForeignBans(t *testing.T) {
	cfg, db, det, t0 := cleanFixture(t, cleanConfig)
	end := t0.Add(5 * time.Minute)
	err := db.Checkpoint(&state.Checkpoint{Time: t0, SetBans: []state.Ban{
		{Rule: "flood", Key: "198.51.100.1", Kind: state.PhaseThrottle, Since: t0, Until: end, Origin: state.OriginDetector},
		{Rule: "flood", Key: "198.51.100.2", Kind: state.PhaseBan, Since: t0, Until: end, Origin: state.OriginOperator, Who: "root"},
		{Rule: "flood", Key: "198.51.100.3", Kind: state.PhaseBan, Since: t0, Origin: state.OriginOperator, Who: "root"}, // forever
	}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := Clean(db, cfg, det, t0.Add(70*time.Minute), 0)
	if err != nil {
		t.Fatal(err)
	}
	if st.Expired != 2 || st.Throttles != 1 {
		t.Errorf("stats %+v, want 2 bans expired (203.0.113.1, the operator's) and 1 throttle", st)
	}
	if got := banKeys(t, db); !slices.Equal(got, []string{"198.51.100.3", "203.0.113.2"}) {
		t.Errorf("bans after the pass: %q", got)
	}
	unbans, err := db.History(state.HistoryQuery{Kind: state.KindUnban})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range unbans {
		got = append(got, e.Key+" "+e.Origin+" "+e.Reason)
	}
	slices.Sort(got)
	want := []string{"198.51.100.2 operator ban expired", "203.0.113.1 detector ban expired"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("unbans (-want +got):\n%s", diff)
	}
}
