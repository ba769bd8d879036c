package replay

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/logjail/logjail/rules"
)

var (
	clfTime  = regexp.MustCompile(`\[(\d\d/[A-Z][a-z]{2}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4})\]`)
	msecTime = regexp.MustCompile(`\[(\d+\.\d{3})\]`)
)

const clfLayout = "02/Jan/2006:15:04:05 -0700"

// lineTime reads the time of a scenario line (combined's [time_local] or
// [msec]) and returns it with a function that writes a line with another.
func lineTime(t *testing.T, line string) (time.Time, func(time.Time) string) {
	t.Helper()
	if m := clfTime.FindStringSubmatchIndex(line); m != nil {
		at, err := time.Parse(clfLayout, line[m[2]:m[3]])
		if err != nil {
			t.Fatal(err)
		}
		return at, func(u time.Time) string { return line[:m[2]] + u.In(at.Location()).Format(clfLayout) + line[m[3]:] }
	}
	if m := msecTime.FindStringSubmatchIndex(line); m != nil {
		f, err := strconv.ParseFloat(line[m[2]:m[3]], 64)
		if err != nil {
			t.Fatal(err)
		}
		at := time.UnixMilli(int64(f * 1000)).UTC()
		return at, func(u time.Time) string {
			return line[:m[2]] + fmt.Sprintf("%d.%03d", u.Unix(), u.Nanosecond()/1e6) + line[m[3]:]
		}
	}
	t.Fatalf("no time found in %q", line)
	return time.Time{}, nil
}

// outlierPositions returns where a line dated ahead+newest-so-far is an
// isolated outlier by the neighbour rule: the line after it is more than
// skew older (at the head: more than future older).
func outlierPositions(t *testing.T, lines []string, ahead, skew time.Duration) []int {
	var at []int
	var newest time.Time
	for i, l := range lines {
		ti, _ := lineTime(t, l)
		if i == 0 {
			at = append(at, 0)
		} else if ti.Before(newest.Add(ahead - skew)) {
			at = append(at, i)
		}
		if ti.After(newest) {
			newest = ti
		}
	}
	return at
}

// TestOneLineCannotMoveTheClock inserts into every scenario's log, at many
// places, one line dated 2099 and one line 60 s ahead of the newest line
// before it, and replays: the decisions (kind, rule, key, time, until,
// reason, addresses) are exactly those of the log without it, and the line
// is counted as an outlier.
func TestOneLineCannotMoveTheClock(t *testing.T) {
	dirs, _ := filepath.Glob("../testdata/scenarios/*")
	if len(dirs) == 0 {
		t.Fatal("no scenarios")
	}
	y2099 := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
	compared := 0
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			cfg, err := rules.Load(filepath.Join(dir, "config.yaml"), rules.Options{HostAddrs: []netip.Addr{scenarioHost}, Cores: 2})
			if err != nil {
				t.Fatal(err)
			}
			logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
			if len(logs) != 1 {
				// Not skipped: a scenario this test cannot read would go
				// untested without anyone noticing.
				t.Fatalf("%d logs: this test inserts its bad line into a scenario's one log; teach it more", len(logs))
			}
			raw, err := os.ReadFile(logs[0])
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
			replayLines := func(t *testing.T, ls []string) *Report {
				p := filepath.Join(t.TempDir(), "access.log")
				if err := os.WriteFile(p, []byte(strings.Join(ls, "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				rep, err := Run(context.Background(), cfg, []Input{{Name: p, Source: cfg.Sources[0]}}, Options{})
				if err != nil {
					t.Fatal(err)
				}
				return rep
			}
			want := decisionLines(replayLines(t, lines))
			ahead := cfg.Future // "+60 s" with the default future
			for _, i := range outlierPositions(t, lines, ahead, cfg.Skew) {
				var newest time.Time
				for _, l := range lines[:i] {
					if ti, _ := lineTime(t, l); ti.After(newest) {
						newest = ti
					}
				}
				_, with := lineTime(t, lines[i])
				plus := newest.Add(ahead)
				if i == 0 {
					t0, _ := lineTime(t, lines[0])
					plus = t0.Add(ahead + time.Second) // the head: more than future ahead of the next
				}
				for _, bad := range []struct {
					name string
					at   time.Time
				}{{"2099", y2099}, {"+60s", plus}} {
					ls := append(append(append([]string(nil), lines[:i]...), with(bad.at)), lines[i:]...)
					rep := replayLines(t, ls)
					if diff := cmp.Diff(want, decisionLines(rep)); diff != "" {
						t.Errorf("a line dated %s (%s) before line %d changed the decisions (-without +with):\n%s", bad.name, bad.at.Format(time.RFC3339), i+1, diff)
					}
					if rep.Input.Outliers != 1 {
						t.Errorf("a line dated %s before line %d: %d outliers, want 1", bad.name, i+1, rep.Input.Outliers)
					}
					compared++
				}
			}
		})
	}
	t.Logf("%d logs with one bad line compared with their scenario", compared)
}

func decisionLines(rep *Report) []string {
	var out []string
	for _, d := range rep.Decisions {
		out = append(out, formatDecision(d))
	}
	return out
}

// TestOneLineCannotMoveTheClockGenlog does the same on a generated log of
// 30,000 lines with testdata/genlog.yaml, at five places: one line 60 s
// ahead used to take its bans from 8 keys to 29.
func TestOneLineCannotMoveTheClockGenlog(t *testing.T) {
	cfg, err := rules.Load("../testdata/genlog.yaml", rules.Options{})
	if err != nil {
		t.Fatal(err)
	}
	log, _ := genlog(t, 30000, 1)
	raw, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	replayLines := func(ls []string) *Report {
		p := filepath.Join(t.TempDir(), "access.log")
		if err := os.WriteFile(p, []byte(strings.Join(ls, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		rep, err := Run(context.Background(), cfg, []Input{{Name: p, Source: cfg.Sources[0]}}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	want := decisionLines(replayLines(lines))
	bans := 0
	for _, d := range want {
		if strings.Contains(d, " ban ") {
			bans++
		}
	}
	if bans == 0 {
		t.Fatal("the generated log makes no ban: nothing to compare")
	}
	for _, i := range []int{len(lines) / 6, len(lines) / 3, len(lines) / 2, 2 * len(lines) / 3, 5 * len(lines) / 6} {
		var newest time.Time
		for _, l := range lines[:i] {
			if ti, _ := lineTime(t, l); ti.After(newest) {
				newest = ti
			}
		}
		_, with := lineTime(t, lines[i])
		for _, at := range []time.Time{newest.Add(cfg.Future), time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)} {
			ls := append(append(append([]string(nil), lines[:i]...), with(at)), lines[i:]...)
			rep := replayLines(ls)
			if diff := cmp.Diff(want, decisionLines(rep)); diff != "" {
				t.Errorf("a line dated %s before line %d changed the decisions (-without +with):\n%s", at.Format(time.RFC3339), i+1, diff)
			}
			if rep.Input.Outliers != 1 {
				t.Errorf("a line dated %s before line %d: %d outliers, want 1", at.Format(time.RFC3339), i+1, rep.Input.Outliers)
			}
		}
	}
	t.Logf("%d decisions (%d bans) unchanged by each of 10 bad lines", len(want), bans)
}

// TestRealGapIsFollowed: a log that resumes three hours later is followed,
// not taken for an outlier: the flood after the gap is banned at its own
// time, and a ban that ended during the gap is lifted at its end.
func TestRealGapIsFollowed(t *testing.T) {
	cfg := parseConfig(t, rateConfig)
	var ls []string
	for i := range 6 {
		ls = append(ls, line("203.0.113.1", float64(i)/10, 200))
	}
	for i := range 6 {
		ls = append(ls, line("203.0.113.2", 3*3600+float64(i)/10, 200))
	}
	rep := replayOne(t, cfg, writeLog(t, ls), Options{})
	want := []string{
		`2026-11-02T10:00:00Z ban flood 203.0.113.1 until=2026-11-02T10:01:00Z reason="rate 6 per 10s > 5 (rule flood)"`,
		`2026-11-02T10:01:00Z unban flood 203.0.113.1 reason="ban expired"`,
		`2026-11-02T13:00:00Z ban flood 203.0.113.2 until=2026-11-02T13:01:00Z reason="rate 6 per 10s > 5 (rule flood)"`,
	}
	if diff := cmp.Diff(want, decisionLines(rep)); diff != "" {
		t.Errorf("decisions (-want +got):\n%s", diff)
	}
	if rep.Input.Outliers != 0 {
		t.Errorf("%d outliers, want 0", rep.Input.Outliers)
	}
}
