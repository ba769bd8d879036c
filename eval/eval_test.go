package eval

import (
	"bytes"
	"context"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/logjail/logjail/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite testdata/eval/figures.txt")

const (
	figures = "../testdata/eval/figures.txt"
	labels  = "../testdata/eval/labels"
)

// TestFigures runs the whole evaluation (real logs, scenarios, genlog)
// with the embedded example configuration and compares the table with
// testdata/eval/figures.txt: a change of the default configuration or of
// the detector that changes who is banned, or how soon, shows as a diff
// (`go test ./eval -run TestFigures -update` rewrites it, for review). It
// logs the goals' status, and fails on a goal not met once EnforceGoals is
// on.
func TestFigures(t *testing.T) {
	shared := testenv.Shared(t)
	python := testenv.Need(t, "python3")[0]
	cfg, err := Config()
	if err != nil {
		t.Fatal(err)
	}
	rows, err := All(context.Background(), cfg, python, shared, labels, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := WriteTable(&got, rows); err != nil {
		t.Fatal(err)
	}
	t.Logf("evaluation of the default configuration:\n%s", got.String())
	if *update {
		if err := os.WriteFile(figures, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	} else {
		want, err := os.ReadFile(figures)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(strings.Split(string(want), "\n"), strings.Split(got.String(), "\n")); diff != "" {
			t.Errorf("%s (-want +got; run with -update after review):\n%s", figures, diff)
		}
	}
	for _, g := range Goals(Total(rows)) {
		if !g.Met && EnforceGoals {
			t.Errorf("goal %s: got %s", g.Name, g.Got)
		}
	}
}

// TestScenariosAlone is the evaluation a clone without ../shared can run:
// every scenario replays, every labelled client is counted once, and the
// flood, the one attacker the current defaults must stop whatever their
// tuning, is banned. Each scenario's truth, written beside its log in the
// labels format, reads back as the truth evaluated.
func TestScenariosAlone(t *testing.T) {
	cfg, err := Config()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rows, err := All(context.Background(), cfg, "", "", labels, dir)
	if err != nil {
		t.Fatal(err)
	}
	// The truth written beside each log reads back as the truth evaluated.
	logs, err := Scenarios(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, lg := range logs {
		name := strings.TrimPrefix(lg.Name, "scenario/")
		back, err := LoadLabels(filepath.Join(dir, name+".labels.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(lg.Truth, back, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
			t.Errorf("%s: truth written and read back (-want +got):\n%s", name, diff)
		}
	}
	if len(rows) != 9 {
		t.Fatalf("%d rows, want the 9 scenarios", len(rows))
	}
	for _, r := range rows {
		if r.Lines == 0 || r.Rejected != 0 {
			t.Errorf("%s: %d lines, %d rejected: want every generated line read", r.Log, r.Lines, r.Rejected)
		}
		if r.TrueBans+r.Missed != r.Attackers || len(r.Before) != r.TrueBans {
			t.Errorf("%s: %d true bans + %d missed != %d attackers, or %d before counts", r.Log, r.TrueBans, r.Missed, r.Attackers, len(r.Before))
		}
		if r.Log == "scenario/flood" && r.TrueBans != 1 {
			t.Errorf("flood not banned: %+v", r)
		}
	}
}

// TestLabels loads every labels file: each client an address or a prefix,
// attacker or good, with a why, none twice; and a bad file is refused
// naming the client.
func TestLabels(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(labels, "*.yaml"))
	if err != nil || len(files) != len(realLogs) {
		t.Fatalf("labels files %v (%v), want one per real log (%d)", files, err, len(realLogs))
	}
	for _, f := range files {
		tr, err := LoadLabels(f)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if len(tr) == 0 {
			t.Errorf("%s: no client labelled", f)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	for _, c := range []struct{ yaml, want string }{
		{"clients:\n  - {addr: 203.0.113.7, label: evil, why: x}\n", `bad.yaml:2: clients[0].label: "evil"`},
		{"clients:\n  - {addr: 203.0.113.300, label: good, why: x}\n", "clients[0].addr"},
		{"clients:\n  - {addr: 203.0.113.7, label: good}\n", "clients[0].why: empty"},
		{"clients:\n  - {addr: 203.0.113.7, label: good, why: x}\n  - {addr: 203.0.113.7, label: attacker, why: y}\n", "bad.yaml:3: clients[1].addr: 203.0.113.7/32 labelled twice"},
		{"clients:\n  - {addr: 203.0.113.7, lable: good, why: x}\n", "line 2: field lable not found"},
	} {
		if err := os.WriteFile(bad, []byte(c.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadLabels(bad); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one containing %q", c.yaml, err, c.want)
		}
	}
}

// TestCovered: a ban reaches a labelled address through the address, its
// /24 or /64, or a range, and no other.
func TestCovered(t *testing.T) {
	groups := map[string][]netip.Prefix{"range:googlebot": {netip.MustParsePrefix("66.249.64.0/19")}}
	for _, c := range []struct {
		key, label string
		want       bool
	}{
		{"203.0.113.7", "203.0.113.7/32", true},
		{"203.0.113.8", "203.0.113.7/32", false},
		{"203.0.113.0/24", "203.0.113.7/32", true},
		{"198.51.100.0/24", "203.0.113.7/32", false},
		{"2001:db8:1:2::/64", "2001:db8:1:2::5/128", true},
		{"2001:db8:1:3::/64", "2001:db8:1:2::5/128", false},
		{"range:googlebot", "66.249.66.1/32", true},
		{"range:googlebot", "66.250.66.1/32", false},
		{"203.0.113.7", "203.0.113.0/24", true}, // a ban inside a labelled prefix
		{"ua:curl", "203.0.113.7/32", false},
	} {
		if got := covered(keyPrefixes(c.key, groups), netip.MustParsePrefix(c.label)); got != c.want {
			t.Errorf("ban of %s reaches %s: %v, want %v", c.key, c.label, got, c.want)
		}
	}
}

// TestMedian: the lower middle of an even count, -1 for none.
func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []int
		want int
	}{{nil, -1}, {[]int{4}, 4}, {[]int{1, 9}, 1}, {[]int{1, 2, 30}, 2}} {
		if got := Median(c.xs); got != c.want {
			t.Errorf("Median(%v) = %d, want %d", c.xs, got, c.want)
		}
	}
}
