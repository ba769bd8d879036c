package replay

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/logjail/logjail/rules"
)

var update = flag.Bool("update", false, "rewrite the scenarios' want.txt from what the code decides (review the diff!)")

// scenarioHost stands for this machine's own address in every scenario, so
// that "the host's own address is never banned" does not depend on where the
// test runs.
var scenarioHost = netip.MustParseAddr("203.0.113.250")

// formatDecision writes a decision as one line of a scenario's want.txt.
func formatDecision(d Decision) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s %s", d.Time.UTC().Format(time.RFC3339), d.Kind, d.Rule, d.Key)
	if d.Until != nil {
		fmt.Fprintf(&b, " until=%s", d.Until.UTC().Format(time.RFC3339))
	}
	if d.Delay > 0 {
		fmt.Fprintf(&b, " delay=%gs", d.Delay)
	}
	if d.Violations > 0 {
		fmt.Fprintf(&b, " violations=%d", d.Violations)
	}
	if len(d.Addresses) > 0 {
		var as []string
		for _, a := range d.Addresses {
			as = append(as, a.String())
		}
		fmt.Fprintf(&b, " addresses=%s", strings.Join(as, ","))
	}
	if d.LogOnly {
		b.WriteString(" log_only")
	}
	fmt.Fprintf(&b, " reason=%q", d.Reason)
	return b.String()
}

// TestScenarios runs every folder of testdata/scenarios: config.yaml, one or
// more *.log files, and want.txt, the decisions expected, one a line (lines
// starting with # are comments explaining them). Each scenario pins down one
// ancestor's semantics (see each config.yaml's header).
func TestScenarios(t *testing.T) {
	entries, err := os.ReadDir("../testdata/scenarios")
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, filepath.Join("../testdata/scenarios", e.Name()))
		}
	}
	if len(dirs) == 0 {
		t.Fatal("no scenarios found under testdata/scenarios")
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			cfg, err := rules.Load(filepath.Join(dir, "config.yaml"), rules.Options{HostAddrs: []netip.Addr{scenarioHost}, Cores: 2})
			if err != nil {
				t.Fatal(err)
			}
			logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
			var inputs []Input
			for _, l := range logs {
				src := cfg.SourceFor(l)
				if src == nil {
					t.Fatalf("%s: no source reads it", l)
				}
				inputs = append(inputs, Input{Name: l, Source: src})
			}
			rep, err := Run(context.Background(), cfg, inputs, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Input.Rejected > 0 {
				t.Errorf("%d lines rejected: %v", rep.Input.Rejected, rep.Input.Samples)
			}
			var got []string
			for _, d := range rep.Decisions {
				got = append(got, formatDecision(d))
			}
			wantFile := filepath.Join(dir, "want.txt")
			raw, err := os.ReadFile(wantFile)
			if err != nil && !*update {
				t.Fatal(err)
			}
			var want, comments []string
			for _, l := range strings.Split(string(raw), "\n") {
				switch {
				case strings.HasPrefix(l, "#"):
					comments = append(comments, l)
				case strings.TrimSpace(l) != "":
					want = append(want, l)
				}
			}
			if *update {
				out := strings.Join(append(comments, got...), "\n") + "\n"
				if err := os.WriteFile(wantFile, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("decisions (-want +got):\n%s", diff)
			}
		})
	}
}
