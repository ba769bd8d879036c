package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logjail/logjail/control"
)

// TestEmptyListings: with nothing to show, list, top and history say so on
// stderr (a script reading stdout sees no rows), and --no-headers is
// accepted by each.
func TestEmptyListings(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "logjail.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `state_dir: %[1]s/state
control_socket: %[1]s/control.sock
metrics: ""
sources: [{name: web, paths: [%[1]s/access.log], format: combined}]
rules:
  - {name: flood, limits: ["5 per 10s"], ban: {for: 1h}}
`, dir), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"list"}, exitOK, "no active throttles or bans\n"},
		{[]string{"list", "--no-headers", "--expired"}, exitOK, "no ended throttles or bans\n"},
		{[]string{"top", "--no-headers"}, exitOK, "no keys tracked in the last checkpoint (no daemon runs)\n"},
		{[]string{"top", "--rule", "flood"}, exitOK, "no keys tracked by rule flood in the last checkpoint (no daemon runs)\n"},
		{[]string{"history", "--no-headers", "203.0.113.7"}, exitNegative, "no history of 203.0.113.7"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, out, stderr := run(t, "", append(c.args, "--config", cfg)...)
			if code != c.code || out != "" || !strings.Contains(stderr, c.stderr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d, no stdout, stderr with %q", code, out, stderr, c.code, c.stderr)
			}
		})
	}
}

// TestTablesOnATerminal: on a terminal, list, top and history print a
// header over aligned columns; for scripts, tab-separated rows and no
// header.
func TestTablesOnATerminal(t *testing.T) {
	until := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	left := int64(3600)
	l := &control.BanList{Bans: []control.Ban{{Key: "203.0.113.7", Rule: "flood", Kind: "ban", Since: until.Add(-time.Hour), Until: &until,
		LeftSeconds: &left, Violations: 1, Reason: "rate 6 per 10s > 5 (rule flood)"}}}
	top := &control.Top{Live: true, Time: until, Keys: []control.TopKey{{Rule: "flood", Key: "203.0.113.7", Phase: "banned", Requests: 6, Ratio: 1.2}}}
	h := &control.History{Events: []control.Event{{Time: until, Kind: "ban", Rule: "flood", Key: "203.0.113.7", Reason: "rate 6 per 10s > 5 (rule flood)"}}}
	for _, c := range []struct {
		name   string
		print  func(w *bytes.Buffer, terminal bool) error
		header string
	}{
		{"list", func(w *bytes.Buffer, term bool) error { return printList(w, l, term) }, "KEY          RULE   KIND  SINCE"},
		{"top", func(w *bytes.Buffer, term bool) error { return printTop(w, top, term) }, "RULE   KEY          PHASE   RATIO  REQUESTS"},
		{"history", func(w *bytes.Buffer, term bool) error { return printHistory(w, h, term) }, "TIME                 KIND  RULE   KEY"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var term, script bytes.Buffer
			if err := c.print(&term, true); err != nil {
				t.Fatal(err)
			}
			if err := c.print(&script, false); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(term.String(), c.header) {
				t.Errorf("on a terminal, no header %q:\n%s", c.header, term.String())
			}
			if s := script.String(); strings.Contains(s, "KEY") || strings.Count(s, "\n") != 1 || !strings.Contains(s, "\t203.0.113.7\t") && !strings.HasPrefix(s, "203.0.113.7\t") {
				t.Errorf("for scripts, want one tab-separated row and no header:\n%s", s)
			}
		})
	}
}
