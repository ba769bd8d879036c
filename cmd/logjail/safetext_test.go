package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// safeTestUA is a user agent as nginx logs it: ESC, BEL and a newline
// written as \xNN escapes, which the parser decodes to the real bytes.
const safeTestUA = `evil\x1B[2J\x1B]0;pwned\x07\x0Aok`

// safeTestUAKey is its key: printable text.
const safeTestUAKey = `ua:evil\x1b[2J\x1b]0;pwned\x07\x0aok`

// noControl fails when out holds a control character other than the
// newline that ends a line and the tab that separates fields for a script,
// and when it lacks want.
func noControl(t *testing.T, what, out, want string) {
	t.Helper()
	for i, r := range out {
		if r < 0x20 && r != '\n' && r != '\t' || r == 0x7f || r >= 0x80 && r < 0xa0 {
			t.Errorf("%s: a raw %U at byte %d:\n%q", what, r, i, out)
			return
		}
	}
	if !strings.Contains(out, want) {
		t.Errorf("%s: %q missing from:\n%s", what, want, out)
	}
}

// TestSafeText: a user agent that would repaint the operator's terminal
// reaches parse, replay, list, history and top as its escapes (`\x1b`),
// never raw; parse --output json keeps JSON (the real characters, escaped
// by JSON).
func TestSafeText(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "logjail.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`state_dir: %[1]s/state
control_socket: %[1]s/control.sock
sources: [{name: web, paths: [%[1]s/access.log], format: combined}]
rules:
  - {name: agents, key: user_agent, limits: ["3 per 10s"], ban: {for: 1000d}}
`, dir)), 0o600); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	for i := range 6 {
		fmt.Fprintf(&log, "203.0.113.7 - - [22/Nov/2026:10:00:0%d +0100] \"GET /\\x1B[31m HTTP/1.1\" 200 5 \"-\" \"%s\"\n", i, safeTestUA)
	}
	log.WriteString("\x1b[2Jgarbage\n")
	logPath := filepath.Join(dir, "access.log")
	if err := os.WriteFile(logPath, []byte(log.String()), 0o600); err != nil {
		t.Fatal(err)
	}

	_, out, stderr := run(t, "", "parse", "--format", "combined", logPath)
	noControl(t, "parse", out, `evil\x1b[2J`)
	noControl(t, "parse", out, `/\x1b[31m`)
	noControl(t, "parse summary", stderr, "rejected")

	_, out, _ = run(t, "", "parse", "--format", "combined", "--output", "json", logPath)
	var first struct {
		UserAgent string `json:"user_agent"`
	}
	if err := json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &first); err != nil || first.UserAgent != "evil\x1b[2J\x1b]0;pwned\x07\nok" {
		t.Errorf("parse --output json: user_agent %q (%v), want the decoded text", first.UserAgent, err)
	}

	code, out, stderr := run(t, "", "replay", "--config", cfg, "--source", "web", "--db", filepath.Join(dir, "state", "logjail.db"), logPath)
	if code != exitNegative { // the garbage line is rejected
		t.Fatalf("replay: exit %d, want %d; stderr: %s", code, exitNegative, stderr)
	}
	noControl(t, "replay", out, safeTestUAKey)
	noControl(t, "replay's stderr", stderr, "")

	for _, args := range [][]string{{"list"}, {"history", safeTestUAKey}, {"top"}} {
		code, out, stderr := run(t, "", append(args, "--config", cfg)...)
		if code != exitOK {
			t.Errorf("%s: exit %d; stderr: %s", args, code, stderr)
		}
		noControl(t, strings.Join(args, " "), out, safeTestUAKey)
	}
}
