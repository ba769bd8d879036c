package logjail

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/logjail/logjail/internal/testenv"
)

// TestBenchSmoke runs `make bench`'s table at its smoke size
// (BENCH_QUICK=1 scripts/bench-table.sh): every row of issue 23's table
// must be measured, with a number and a yes or no; whether a target holds
// is not judged (a benchmark at a tenth of its size on a shared machine
// says nothing about it). It builds logjail without -race and runs the
// daemon, wrk and fail2ban-regex, so -short skips it; CI runs it, with
// the tools scripts/deps.sh installs.
func TestBenchSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the benchmark smoke builds logjail and runs every benchmark of the table")
	}
	testenv.Need(t, "go", "python3", "curl", "time", "wrk", "taskset", "fail2ban-regex")
	shared := testenv.Shared(t)
	cmd := exec.Command("scripts/bench-table.sh")
	cmd.Env = append(os.Environ(), "BENCH_QUICK=1", "BENCH_ROUNDS=1", "LOGJAIL_SHARED="+shared, "BENCH_DIR="+t.TempDir(), "LOGJAIL_BIN=")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	table := string(out)
	if err != nil {
		t.Errorf("scripts/bench-table.sh: %v\nstdout:\n%s\nstderr:\n%s", err, table, stderr.String())
	}
	var rows [][]string
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| figure |") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cells) != 5 {
			t.Errorf("a row of %d cells, want 5 (figure, measured, ratio, target, holds): %q", len(cells), line)
			continue
		}
		rows = append(rows, cells)
	}
	// Issue 23's figures: keys (wall, and bytes a key), live CPU, /auth,
	// fail2ban-regex, checkpoint, list, replay lines/s.
	if len(rows) != 8 {
		t.Errorf("%d rows, want 8:\n%s", len(rows), table)
	}
	for _, r := range rows {
		if strings.Contains(r[1], "not measured") || !strings.ContainsAny(r[1], "0123456789") {
			t.Errorf("row %q: measured %q, want a figure", r[0], r[1])
		}
		if r[4] != "yes" && r[4] != "no" {
			t.Errorf("row %q: holds %q, want yes or no", r[0], r[4])
		}
	}
	for _, want := range []string{"- CPU: ", " cores", "- kernel: ", "go1.", "- load average"} {
		if !strings.Contains(table, want) {
			t.Errorf("the machine under the table lacks %q:\n%s", want, table)
		}
	}
	t.Logf("BENCH_QUICK=1 scripts/bench-table.sh:\n%s", table)
}
