package daemon_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/logjail/logjail/internal/testenv"
	"github.com/logjail/logjail/replay"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/store"
)

// TestGatedIngestDecidesAsReplay: on one CPU with two Ps, as `logjail run`
// has under taskset, ingest passes a gate of one slot (gate.go): the
// parse workers and the decider take turns, giving the slot up between
// slices of 256 lines. The daemon, run so on a log of 25,000 lines (many
// batches of 512, each charged in slices), decides what replay decides on
// the same log: the same bans of the same keys at the same log times. The
// test runs itself again under taskset -c 0 with GOMAXPROCS=2.
func TestGatedIngestDecidesAsReplay(t *testing.T) {
	if os.Getenv("LOGJAIL_GATED_CHILD") == "" {
		taskset := testenv.Need(t, "taskset")[0]
		cmd := exec.Command(taskset, "-c", "0", os.Args[0], "-test.run", "^TestGatedIngestDecidesAsReplay$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "LOGJAIL_GATED_CHILD=1", "GOMAXPROCS=2")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "gated: 1 CPU, 2 Ps") {
			t.Fatalf("the test under taskset -c 0: %v\n%s", err, out)
		}
		t.Logf("%s", out)
		return
	}
	if runtime.NumCPU() != 1 || runtime.GOMAXPROCS(0) != 2 {
		t.Fatalf("%d CPUs, %d Ps: want 1 and 2 (taskset -c 0, GOMAXPROCS=2)", runtime.NumCPU(), runtime.GOMAXPROCS(0))
	}
	t.Logf("gated: 1 CPU, 2 Ps")
	dir := t.TempDir()
	log, state, cfgPath := filepath.Join(dir, "access.log"), filepath.Join(dir, "state"), filepath.Join(dir, "logjail.yaml")
	if err := os.WriteFile(cfgPath, fmt.Appendf(nil, downtimeConfig, state, log), 0o600); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	// 50 clients every 1.5 s (over "5 per 10s": banned), 250 every 5 s
	// (under it), for 300 s of log time.
	var lines []logLine
	for i := range 300 {
		ip, every := fmt.Sprintf("203.0.113.%d", i%250+1), 5*time.Second
		if i >= 250 {
			ip, every = fmt.Sprintf("198.51.100.%d", i-249), 1500*time.Millisecond
		}
		for at := time.Duration(i) * time.Millisecond; at < 300*time.Second; at += every {
			lines = append(lines, logLine{t0.Add(at), ip})
		}
	}
	appendLines(t, log, lines)
	now := t0.Add(301 * time.Second)
	runUntilRead(t, cfgPath, state, log, now)

	cfg, err := rules.Load(cfgPath, rules.Options{HostAddrs: []netip.Addr{}})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := replay.Run(context.Background(), cfg, []replay.Input{{Name: log, Source: cfg.Sources[0]}}, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var want, got []string
	for _, d := range rep.Decisions {
		want = append(want, fmt.Sprintf("%s %s %s at %s", d.Kind, d.Rule, d.Key, d.Time.UTC().Format(time.TimeOnly+".0")))
	}
	db, err := store.Open(filepath.Join(state, "logjail.db"), store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	hist, err := db.History(store.HistoryQuery{})
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(hist) // oldest first
	for _, e := range hist {
		got = append(got, fmt.Sprintf("%s %s %s at %s", e.Kind, e.Rule, e.Key, e.Time.UTC().Format(time.TimeOnly+".0")))
	}
	if len(want) < 50 {
		t.Fatalf("replay decided %d times, want the 50 bans at least: %v", len(want), want)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decisions of %d lines (-replay +gated daemon):\n%s", len(lines), diff)
	}
	t.Logf("%d lines, %d decisions, as replay's", len(lines), len(got))
}
