package replay

import (
	"bytes"
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
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/source"
)

// t0 is the time of the tests' first line.
var t0 = time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)

// line is one combined-format line of ip at t0+sec.
func line(ip string, sec float64, status int) string {
	t := t0.Add(time.Duration(sec * float64(time.Second)))
	return fmt.Sprintf(`%s - - [%s] "GET /x HTTP/1.1" %d 10 "-" "test"`, ip, t.Format("02/Jan/2006:15:04:05 -0700"), status)
}

func writeLog(t *testing.T, lines []string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "access.log")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func parseConfig(t *testing.T, text string) *rules.Config {
	t.Helper()
	cfg, err := rules.Parse("test.yaml", []byte(text), rules.Options{HostAddrs: []netip.Addr{scenarioHost}, Cores: 2})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

const rateConfig = `
sources: [{name: web, paths: [/var/log/access.log], format: combined, timezone: UTC}]
rules:
  - name: flood
    limits: ["5 per 10s"]
    ban: {for: 1m}
`

// rampLog has client 203.0.113.K make K requests within one second, for K
// from 1 to 10: client K's peak against "N per 10s" is K.
func rampLog() []string {
	var ls []string
	for k := 1; k <= 10; k++ {
		for i := 0; i < k; i++ {
			ls = append(ls, line(fmt.Sprintf("203.0.113.%d", k), float64(k)*20+float64(i)/20, 200))
		}
	}
	return ls
}

func replayOne(t *testing.T, cfg *rules.Config, name string, o Options) *Report {
	t.Helper()
	rep, err := Run(context.Background(), cfg, []Input{{Name: name, Source: cfg.Sources[0]}}, o)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestPercentiles: clients making 1..10 requests in a second against "5 per
// 10s": the keys over 5 are banned at their 6th request, after which their
// requests are blocked, not charged, so the peaks are 1,2,3,4,5,6,6,6,6,6 and
// the nearest-rank percentiles are those a person computes by hand.
func TestPercentiles(t *testing.T) {
	cfg := parseConfig(t, rateConfig)
	rep := replayOne(t, cfg, writeLog(t, rampLog()), Options{})
	want := []LimitReport{{Limit: "5 per 10s", Unit: "requests", Keys: 10, P50: 5, P90: 6, P99: 6, Max: 6}}
	if diff := cmp.Diff(want, rep.Rules[0].Limits); diff != "" {
		t.Errorf("limit percentiles (-want +got):\n%s", diff)
	}
	if rep.Rules[0].Banned != 5 {
		t.Errorf("banned keys = %d, want 5 (the clients making 6 to 10 requests)", rep.Rules[0].Banned)
	}
	top := rep.Top[0]
	if k := top.Keys[0]; top.By != "requests" || len(top.Keys) != 10 || k.Key != "203.0.113.10" || k.Requests != 10 || k.Blocked != 4 {
		t.Errorf("top by requests = %+v, want 203.0.113.10 first with 10 requests, 4 blocked", top)
	}
}

// TestSweepMatchesSeparateReplays: one pass with --sweep counts, for each
// value, the keys a whole replay with that value throttles and bans.
func TestSweepMatchesSeparateReplays(t *testing.T) {
	cfg := parseConfig(t, rateConfig)
	log := writeLog(t, rampLog())
	sw, err := ParseSweep("flood[0]=2..8:4")
	if err != nil {
		t.Fatal(err)
	}
	rep := replayOne(t, cfg, log, Options{Sweeps: []Sweep{sw}})
	if len(rep.Sweeps) != 1 || len(rep.Sweeps[0].Values) != 4 {
		t.Fatalf("sweeps = %+v, want one with 4 values", rep.Sweeps)
	}
	for _, v := range rep.Sweeps[0].Values {
		c, err := cfg.WithLimitN("flood", 0, v.N)
		if err != nil {
			t.Fatal(err)
		}
		whole := replayOne(t, c, log, Options{})
		if v.Banned != whole.Rules[0].Banned || v.Throttled != whole.Rules[0].Throttled {
			t.Errorf("value %g: sweep says %d banned, %d throttled; a replay with it says %d, %d",
				v.N, v.Banned, v.Throttled, whole.Rules[0].Banned, whole.Rules[0].Throttled)
		}
		// Peaks 1..10 against "N per 10s": the keys over N are 10-N.
		if want := 10 - int(v.N); v.Banned != want {
			t.Errorf("value %g: %d keys banned, want %d", v.N, v.Banned, want)
		}
	}
}

func TestParseSweepErrors(t *testing.T) {
	for _, s := range []string{"flood", "flood=1..2:2", "flood[x]=1..2:2", "flood[0]=1..2", "flood[0]=1-2:2", "flood[0]=a..2:2", "flood[0]=1..2:0", "flood[0]=1..2:1"} {
		if _, err := ParseSweep(s); err == nil {
			t.Errorf("ParseSweep(%q): no error", s)
		}
	}
	sw, err := ParseSweep("flood[1]=10..50:5")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]float64{10, 20, 30, 40, 50}, sw.Values()); diff != "" || sw.Rule != "flood" || sw.Limit != 1 {
		t.Errorf("ParseSweep: %+v values (-want +got):\n%s", sw, diff)
	}
	cfg := parseConfig(t, rateConfig)
	if _, err := Run(context.Background(), cfg, nil, Options{Sweeps: []Sweep{{Rule: "nope", Limit: 0, From: 1, To: 2, Steps: 2}}}); err == nil {
		t.Error("a sweep of a rule that does not exist: no error")
	}
}

// TestFromTo: entries outside [from, to) are parsed and counted as skipped,
// and decide nothing.
func TestFromTo(t *testing.T) {
	cfg := parseConfig(t, rateConfig)
	log := writeLog(t, rampLog()) // clients 6..10 flood at t0+120s..t0+200s
	rep := replayOne(t, cfg, log, Options{To: t0.Add(130 * time.Second)})
	if rep.Rules[0].Banned != 1 || rep.Input.Parsed != 55 || rep.Input.Skipped != 55-21 {
		t.Errorf("--to t0+130s: %d banned, %d parsed, %d skipped; want 1 (203.0.113.6), 55, 34",
			rep.Rules[0].Banned, rep.Input.Parsed, rep.Input.Skipped)
	}
	rep = replayOne(t, cfg, log, Options{From: t0.Add(190 * time.Second)})
	if rep.Rules[0].Banned != 1 || rep.Input.Skipped != 55-10 {
		t.Errorf("--from t0+190s: %d banned, %d skipped; want 1 (203.0.113.10), 45", rep.Rules[0].Banned, rep.Input.Skipped)
	}
}

// TestRejectedLines: bad lines are counted by reason and the first few are
// quoted with their file and line number; the good lines still decide.
func TestRejectedLines(t *testing.T) {
	cfg := parseConfig(t, rateConfig)
	ls := rampLog()
	ls = append(ls[:3], append([]string{"garbage", "", "also garbage"}, ls[3:]...)...)
	for i := 0; i < 6; i++ {
		ls = append(ls, "more garbage")
	}
	log := writeLog(t, ls)
	rep := replayOne(t, cfg, log, Options{RejectSamples: 2})
	if rep.Input.Lines != 64 || rep.Input.Rejected != 9 || rep.Input.Parsed != 55 {
		t.Errorf("lines %d, rejected %d, parsed %d; want 64, 9, 55", rep.Input.Lines, rep.Input.Rejected, rep.Input.Parsed)
	}
	if len(rep.Input.Samples) != 2 || rep.Input.Samples[0].Line != 4 || rep.Input.Samples[1].Line != 5 || rep.Input.Samples[0].File != log {
		t.Errorf("samples = %+v, want lines 4 and 5 of %s", rep.Input.Samples, log)
	}
	if rep.Rules[0].Banned != 5 {
		t.Errorf("banned %d keys, want 5", rep.Rules[0].Banned)
	}
}

// TestStdinAndLastNJSON reads stdin and checks that a last-N limit, whose
// peak is undefined for keys with fewer than N requests, still gives valid
// JSON with a null peak, and percentiles ranked from the shortest span.
func TestStdinAndLastNJSON(t *testing.T) {
	cfg := parseConfig(t, `
sources: [{name: web, paths: [/var/log/access.log], format: combined, timezone: UTC}]
rules:
  - name: burst
    limits: ["last 3 within 2s"]
    ban: {for: 1m}
`)
	in := strings.Join([]string{
		line("203.0.113.1", 0, 200), line("203.0.113.1", 0.5, 200), line("203.0.113.1", 1, 200), // span 1s: banned
		line("203.0.113.2", 0, 200), line("203.0.113.2", 5, 200), line("203.0.113.2", 10, 200), // span 10s
		line("203.0.113.3", 1, 200), // one request: no span
	}, "\n") + "\n"
	rep, err := Run(context.Background(), cfg, []Input{{Name: "-", Source: cfg.Sources[0]}}, Options{Stdin: strings.NewReader(in)})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatalf("WriteJSON: %v", err)
	}
	if rep.Rules[0].Banned != 1 {
		t.Errorf("banned %d keys, want 1", rep.Rules[0].Banned)
	}
	lr := rep.Rules[0].Limits[0]
	if lr.Keys != 2 || lr.Max != 1 || lr.P50 != 10 {
		t.Errorf("last-N percentiles = %+v, want 2 keys, max (shortest span) 1s, p50 10s", lr)
	}
	if !strings.Contains(buf.String(), `"value": null`) {
		t.Errorf("the key without a span has no null peak in the JSON:\n%s", buf.String())
	}
}

// TestManyFilesMergeLikeOne splits a log into many files two ways (runs of
// consecutive lines, like rotated files, and round-robin, like two servers
// writing at once) and checks that the merge decides exactly what the whole
// file decides: the budget that bounds the blocks in flight neither loses,
// reorders nor stalls anything.
func TestManyFilesMergeLikeOne(t *testing.T) {
	cfg := parseConfig(t, rateConfig)
	var ls []string
	for i := 0; i < 6000; i++ {
		// 20 clients; client k sends every (k+1)/4 s, so the fast ones flood.
		k := i % 20
		ls = append(ls, line(fmt.Sprintf("203.0.113.%d", k), float64(i/20)*float64(k+1)/8, 200))
	}
	sortByTime(ls)
	whole := decisionsOf(replayOne(t, cfg, writeLog(t, ls), Options{}))
	if len(whole) == 0 {
		t.Fatal("the log decides nothing: the test would prove nothing")
	}
	dir := t.TempDir()
	for _, split := range []string{"runs", "round-robin"} {
		const n = 60
		parts := make([][]string, n)
		for i, l := range ls {
			j := i * n / len(ls)
			if split == "round-robin" {
				j = i % n
			}
			parts[j] = append(parts[j], l)
		}
		var inputs []Input
		for j, p := range parts {
			name := filepath.Join(dir, fmt.Sprintf("%s.%02d.log", split, j))
			if err := os.WriteFile(name, []byte(strings.Join(p, "\n")+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			inputs = append(inputs, Input{Name: name, Source: cfg.Sources[0]})
		}
		rep, err := Run(context.Background(), cfg, inputs, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Input.Parsed != int64(len(ls)) {
			t.Errorf("%s: parsed %d lines, want %d", split, rep.Input.Parsed, len(ls))
		}
		if diff := cmp.Diff(whole, decisionsOf(rep)); diff != "" {
			t.Errorf("%s: %d files decide differently from the whole file (-whole +files):\n%s", split, n, diff)
		}
	}
}

// sortByTime orders lines written by line() by their time, stably.
func sortByTime(ls []string) {
	key := func(l string) time.Time {
		i := strings.IndexByte(l, '[')
		t, _ := time.Parse("02/Jan/2006:15:04:05 -0700", l[i+1:i+27])
		return t
	}
	slices.SortStableFunc(ls, func(a, b string) int { return key(a).Compare(key(b)) })
}

// decisionsOf is the report's decisions, one line each, for comparing.
func decisionsOf(rep *Report) []string {
	var out []string
	for _, d := range rep.Decisions {
		out = append(out, formatDecision(d))
	}
	return out
}

// TestErrorsStopTheReplay: an input that cannot be opened, or a cancelled
// context, ends the replay with an error, without a hang.
func TestErrorsStopTheReplay(t *testing.T) {
	cfg := parseConfig(t, rateConfig)
	good := writeLog(t, rampLog())
	missing := filepath.Join(t.TempDir(), "missing.log")
	_, err := Run(context.Background(), cfg, []Input{{Name: good, Source: cfg.Sources[0]}, {Name: missing, Source: cfg.Sources[0]}}, Options{})
	if err == nil || !strings.Contains(err.Error(), "missing.log") {
		t.Errorf("a missing input: error %v, want one naming missing.log", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, cfg, []Input{{Name: good, Source: cfg.Sources[0]}}, Options{}); err == nil {
		t.Error("a cancelled context: no error")
	}
}

// TestDone: the progress share is what was read of the files' bytes, and
// unknown (-1) when an input is stdin.
func TestDone(t *testing.T) {
	cfg := parseConfig(t, rateConfig)
	var ls []string
	for i := 0; i < 1000; i++ {
		ls = append(ls, line("203.0.113.1", float64(i), 200))
	}
	name := writeLog(t, ls)
	lg, err := source.OpenLog(name, cfg.Sources[0].Parser, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	r := &reader{}
	r.log.Store(lg)
	if got := done([]*reader{r}); got < 0 || got > 0.1 {
		t.Errorf("before reading lines: done = %v, want at most 0.1 (the gzip check reads 4 KiB of 80)", got)
	}
	for _, _, ok := lg.Lines.Next(); ok; _, _, ok = lg.Lines.Next() {
	}
	if got := done([]*reader{r}); got != 1 {
		t.Errorf("after reading all: done = %v, want 1", got)
	}
	in, err := source.OpenLog("-", cfg.Sources[0].Parser, strings.NewReader(line("203.0.113.1", 0, 200)))
	if err != nil {
		t.Fatal(err)
	}
	rs := &reader{}
	rs.log.Store(in)
	if got := done([]*reader{r, rs}); got != -1 {
		t.Errorf("with stdin: done = %v, want -1 (unknown)", got)
	}
}
