package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReplayHTML: --html FILE writes the page beside the report on stdout,
// and the page carries that very report; a file that cannot be written is
// an error naming the flag.
func TestReplayHTML(t *testing.T) {
	cfg := exampleConfig(t)
	page := filepath.Join(t.TempDir(), "report.html")
	code, out, stderr := run(t, "", "replay", "--config", cfg, "--source", "web", "--output", "json", "--html", page, "../../testdata/logs/sample/bots.log.gz")
	if code != exitOK {
		t.Fatalf("exit %d; stderr: %s", code, stderr)
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	const open = `<script type="application/json" id="report">`
	i := strings.Index(string(b), open)
	if i < 0 {
		t.Fatalf("%s has no report data", page)
	}
	data, _, _ := strings.Cut(string(b[i+len(open):]), "</script>")
	var fromPage, fromStdout any
	if err := json.Unmarshal([]byte(data), &fromPage); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out), &fromStdout); err != nil {
		t.Fatalf("stdout is not the JSON report: %v", err)
	}
	if d := cmp.Diff(fromStdout, fromPage); d != "" {
		t.Errorf("the page's report differs from stdout's (-stdout +page):\n%s", d)
	}

	bad := filepath.Join(t.TempDir(), "no", "such", "dir", "report.html")
	code, _, stderr = run(t, "", "replay", "--config", cfg, "--source", "web", "--html", bad, "../../testdata/logs/sample/bots.log.gz")
	if code == exitOK || !strings.Contains(stderr, "--html") {
		t.Errorf("exit %d, stderr %q: want a failure naming --html", code, stderr)
	}
}
