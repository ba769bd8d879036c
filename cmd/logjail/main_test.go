package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/state"
	"github.com/logjail/logjail/store"
)

// run runs the command line in-process and returns its exit code and output.
func run(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = execute(context.Background(), args, streams{in: strings.NewReader(stdin), out: &out, err: &errb})
	return code, out.String(), errb.String()
}

// exampleConfig writes the embedded example where the test can point
// --config at it, so that no test depends on this machine's /etc.
func exampleConfig(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "logjail.yaml")
	if err := os.WriteFile(p, rules.Example(), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const combinedLine = `203.0.113.7 - alice [22/Nov/2026:10:00:01 +0100] "GET /search?q=x HTTP/1.1" 200 512 "-" "curl/8.5.0"`

func TestParseJSON(t *testing.T) {
	in := combinedLine + "\n" + "garbage without an address\n" + `198.51.100.9 - - [22/Nov/2026:10:00:02 +0100] "-" 400 0 "-" "-"` + "\n"
	code, out, stderr := run(t, in, "parse", "--format", "combined", "--output", "json", "-")
	if code != exitNegative {
		t.Errorf("exit %d, want %d (a line was rejected); stderr: %s", code, exitNegative, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %d output lines, want 3:\n%s", len(lines), out)
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"line": 1.0, "ip": "203.0.113.7", "time": "2026-11-22T10:00:01+01:00", "method": "GET", "path": "/search",
		"query": "q=x", "protocol": "HTTP/1.1", "status": 200.0, "bytes": 512.0, "referer": nil, "user_agent": "curl/8.5.0",
		"user": "alice", "host": nil, "duration": nil, "cpu": nil,
	}
	if diff := cmp.Diff(want, first); diff != "" {
		t.Errorf("first line (-want +got):\n%s", diff)
	}
	var rej map[string]any
	if err := json.Unmarshal([]byte(lines[1]), &rej); err != nil {
		t.Fatal(err)
	}
	if rej["line"] != 2.0 || rej["error"] == nil || len(rej) != 2 {
		t.Errorf("rejected line = %v, want {line: 2, error: ...}", rej)
	}
	if !strings.Contains(stderr, "lines 3, parsed 2, rejected 1") {
		t.Errorf("summary missing from stderr: %q", stderr)
	}
}

func TestParseAllParsedExitsZero(t *testing.T) {
	code, out, stderr := run(t, combinedLine+"\n", "parse", "--format", "combined")
	if code != exitOK {
		t.Fatalf("exit %d, want 0; stderr: %s", code, stderr)
	}
	if !strings.Contains(out, "203.0.113.7") || !strings.Contains(out, "LINE") {
		t.Errorf("table output lacks the header or the address:\n%s", out)
	}
}

func TestUsageErrors(t *testing.T) {
	for name, args := range map[string][]string{
		"unknown flag":       {"parse", "--nope"},
		"unknown command":    {"frobnicate"},
		"two formats":        {"parse", "--format", "combined", "--log-format", "$remote_addr", "-"},
		"bad output":         {"parse", "--format", "combined", "--output", "xml", "-"},
		"missing file":       {"parse", "--format", "combined", "/nonexistent/access.log"},
		"replay without arg": {"replay"},
		"bad sweep":          {"replay", "--sweep", "flood=1..2", "-"},
		"bad from":           {"replay", "--from", "yesterday", "-"},
		"check missing file": {"check", "--config", "/nonexistent/logjail.yaml"},
	} {
		t.Run(name, func(t *testing.T) {
			if code, _, stderr := run(t, "", args...); code != exitUsage {
				t.Errorf("exit %d, want %d; stderr: %s", code, exitUsage, stderr)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	if code, out, stderr := run(t, "", "check", "--config", exampleConfig(t)); code != exitOK {
		t.Errorf("check of the example: exit %d, want 0\n%s%s", code, out, stderr)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("rules:\n  - name: x\n    limits: [\"20 per fortnight\"]\n    bogus: 1\n"), 0o600)
	code, _, stderr := run(t, "", "check", "--config", bad)
	if code != exitNegative {
		t.Errorf("check of an invalid config: exit %d, want 1", code)
	}
	for _, want := range []string{"bad.yaml:3", "fortnight", "bad.yaml:4", "bogus"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("check's errors lack %q:\n%s", want, stderr)
		}
	}
}

func TestExampleConfigIsValid(t *testing.T) {
	code, out, _ := run(t, "", "example-config")
	if code != exitOK || !strings.Contains(out, "rules:") {
		t.Fatalf("example-config: exit %d, output %q", code, out[:min(len(out), 200)])
	}
	if _, err := rules.Parse("printed.yaml", []byte(out), rules.Options{}); err != nil {
		t.Errorf("the printed example does not load: %v", err)
	}
}

// TestReplaySample replays the bundled real log with the example config:
// the report opens with its summary, then each rule.
func TestReplaySample(t *testing.T) {
	cfg := exampleConfig(t)
	code, out, stderr := run(t, "", "replay", "--config", cfg, "--source", "web", "../../testdata/logs/sample/bots.log.gz")
	if code != exitOK {
		t.Fatalf("exit %d; stderr: %s", code, stderr)
	}
	for _, want := range []string{"SUMMARY\n", "16912 read, 16912 parsed, 0 rejected", "rule flood", "rule scanners", "LIMIT", "p99", "keys banned", "(rule scanners)",
		"rule probes: 0 keys throttled, 125 keys banned", "rule panels: 0 keys throttled, 600 keys banned", "rate 1 per 14d > 0, signature secrets/dotenv (rule probes)",
		"decisions:  20 throttles, 1736 bans, 1650 unbans", "BUSIEST KEYS", "COSTLIEST KEYS: none (no line carried CPU seconds)"} {
		if !strings.Contains(out, want) {
			t.Errorf("replay report lacks %q:\n%s", want, out)
		}
	}
	if i, j := strings.Index(out, "BUSIEST KEYS"), strings.Index(out, "rule flood"); i < 0 || j < i {
		t.Errorf("the summary does not come before the rules:\n%s", out)
	}
	for _, bad := range []string{"{", "}", "Charges:"} { // no Go struct formatting
		if strings.Contains(out, bad) {
			t.Errorf("replay report holds %q:\n%s", bad, out)
		}
	}
}

// TestReplayTry is what the README's first command (`make try`) replays:
// the bundled nginx log with the embedded example configuration, then the
// PHP-FPM sample with testdata/logs/sample/try.yaml. The nginx log has its
// scanners and floods banned out of the box; the PHP-FPM sample's CPU hog
// (internal/samplelog) is banned by the CPU rule alone, twice (the ban
// ladder doubles the second), and its CPU seconds lead the summary's
// costliest keys.
func TestReplayTry(t *testing.T) {
	const dir = "../../testdata/logs/sample/"
	code, out, stderr := run(t, "", "replay", "--config", exampleConfig(t), dir+"bots.log.gz")
	if code != exitOK {
		t.Fatalf("example config: exit %d; stderr: %s", code, stderr)
	}
	for _, want := range []string{
		"16912 read, 16912 parsed, 0 rejected",
		"rate 16 per 30s > 15 (rule scanners)",
		"COSTLIEST KEYS: none (no line carried CPU seconds)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("replay report (example config) lacks %q:\n%s", want, out)
		}
	}
	code, out, stderr = run(t, "", "replay", "--config", dir+"try.yaml", dir+"shop.fpm.log")
	if code != exitOK {
		t.Fatalf("try.yaml: exit %d; stderr: %s", code, stderr)
	}
	for _, want := range []string{
		"3997 read, 3997 parsed, 0 rejected",
		"\n  heavy      0               1            0          2\n",
		"rule heavy: 0 keys throttled, 1 key banned",
		"cpu 26.4% over 1m > 25% (rule heavy)",
		"\n  COSTLIEST KEYS    REQUESTS  CPU s  BANNED BY\n  203.0.113.50      240       377.5  heavy\n",
		"2001:db8:bad::/64  2022-09-05T10:30:00Z  0          1     1 req / 0s", // the scanner, by panels at its first request
	} {
		if !strings.Contains(out, want) {
			t.Errorf("replay report lacks %q:\n%s", want, out)
		}
	}
}

var signatureInReason = regexp.MustCompile(`, signature [a-z0-9_-]+/[a-z0-9_-]+`)

// TestReplayDeterministicAndOrderFree replays the bundled bots log split
// into two files, one of them gzipped: the JSON report is byte-identical run
// to run, and the decisions are those of the whole file whatever the order of
// the arguments (the k-way merge interleaves the halves by time).
func TestReplayDeterministicAndOrderFree(t *testing.T) {
	cfg := exampleConfig(t)
	f, err := os.Open("../../testdata/logs/sample/bots.log.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var a, b []string
	for i, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if i%2 == 0 {
			a = append(a, l)
		} else {
			b = append(b, l)
		}
	}
	fa, fb := filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log.gz")
	if err := os.WriteFile(fa, []byte(strings.Join(a, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(strings.Join(b, "\n") + "\n"))
	zw.Close()
	if err := os.WriteFile(fb, gz.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}

	decisions := func(args ...string) string {
		t.Helper()
		code, out, stderr := run(t, "", append([]string{"replay", "--config", cfg, "--source", "web", "--output", "json"}, args...)...)
		if code != exitOK {
			t.Fatalf("exit %d; stderr: %s", code, stderr)
		}
		var doc struct {
			Input     map[string]any    `json:"input"`
			Decisions []json.RawMessage `json:"decisions"`
			Top       []json.RawMessage `json:"top"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Input["lines"] == nil || doc.Top == nil {
			t.Fatalf("JSON report lacks input.lines or top:\n%s", out)
		}
		// Entries of the same second from two files may interleave
		// differently from the whole file: compare the decisions as a set,
		// and without the signature a reason names (of two probes of one
		// client in the same second, either may come first).
		var ds []string
		for _, d := range doc.Decisions {
			ds = append(ds, signatureInReason.ReplaceAllString(string(d), ", signature …"))
		}
		sort.Strings(ds)
		return strings.Join(ds, "\n")
	}
	_, first, _ := run(t, "", "replay", "--config", cfg, "--source", "web", "--output", "json", fa, fb)
	_, again, _ := run(t, "", "replay", "--config", cfg, "--source", "web", "--output", "json", fa, fb)
	if first != again {
		t.Error("two replays of the same input differ")
	}
	whole := decisions("../../testdata/logs/sample/bots.log.gz")
	if !strings.Contains(whole, `"kind":"ban"`) && !strings.Contains(whole, `"kind": "ban"`) {
		t.Fatalf("the bots log bans nobody under the example config: %s", whole)
	}
	if got := decisions(fa, fb); got != whole {
		t.Errorf("split files a,b decide differently from the whole file:\n got %s\nwant %s", got, whole)
	}
	if got := decisions(fb, fa); got != whole {
		t.Errorf("split files b,a decide differently from the whole file:\n got %s\nwant %s", got, whole)
	}
}

// TestReplayDB: replay --db writes every decision into the history, the
// bans still active at the end of the log into the table of active bans,
// and the key states, readable by a read-only connection; a database that
// already holds a state is refused.
func TestReplayDB(t *testing.T) {
	cfg := exampleConfig(t)
	dbPath := filepath.Join(t.TempDir(), "state", "replay.db")
	code, out, stderr := run(t, "", "replay", "--config", cfg, "--source", "web", "--output", "json", "--db", dbPath, "../../testdata/logs/sample/bots.log.gz")
	if code != exitOK {
		t.Fatalf("exit %d; stderr: %s", code, stderr)
	}
	var doc struct {
		Decisions []struct {
			Rule, Key, Kind string
			Until           *time.Time
		} `json:"decisions"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(dbPath, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	hist, err := db.History(state.HistoryQuery{Limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != len(doc.Decisions) || len(hist) == 0 {
		t.Errorf("history holds %d events, the report %d decisions", len(hist), len(doc.Decisions))
	}
	// The bans active at the end: the last decision of each (rule, key) is
	// a throttle or ban that has not ended by the last line.
	last := map[string]string{}
	for _, d := range doc.Decisions {
		last[d.Rule+" "+d.Key] = d.Kind
	}
	bans, err := db.ActiveBans()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bans {
		if k := last[b.Rule+" "+b.Key]; k != b.Kind {
			t.Errorf("active %s %s/%s, but the report's last decision for it is %q", b.Kind, b.Rule, b.Key, k)
		}
	}
	n := 0
	if err := db.Keys(func(*state.KeyRow) error { n++; return nil }); err != nil || n == 0 {
		t.Errorf("%d key states saved (err %v), want some", n, err)
	}
	code, _, stderr = run(t, "", "replay", "--config", cfg, "--source", "web", "--db", dbPath, "../../testdata/logs/sample/bots.log.gz")
	if code != exitUsage || !strings.Contains(stderr, "already holds") {
		t.Errorf("a second replay into the same database: exit %d, stderr %q; want 2 and a reason", code, stderr)
	}
}

// TestReplayFormatFlagsAndHint: a Caddy log under the example config (whose
// source reads combined) is rejected line by line: replay exits 1, as the
// README's exit-code table says of rejected lines, and a hint names the
// preset that reads it; with --format caddy (parse's flag, shared) or
// --format auto every line is read and the exit is 0. parse gives the same
// hint.
func TestReplayFormatFlagsAndHint(t *testing.T) {
	cfg := exampleConfig(t)
	const caddy = "../../testdata/logs/caddy/input.log"
	code, out, stderr := run(t, "", "replay", "--config", cfg, caddy)
	if code != exitNegative {
		t.Errorf("replay of a Caddy log as combined: exit %d, want %d", code, exitNegative)
	}
	const hint = "hint: 10 of 10 lines of " + caddy + " were rejected under format combined; of its first 10 lines, caddy reads 10: try --format caddy (or --format auto)"
	if !strings.Contains(stderr, hint) {
		t.Errorf("replay's stderr lacks the hint %q:\n%s", hint, stderr)
	}
	if !strings.Contains(out, "10 read, 0 parsed, 10 rejected") {
		t.Errorf("replay's report lacks the rejected count:\n%s", out)
	}
	for _, format := range []string{"caddy", "auto"} {
		code, out, stderr = run(t, "", "replay", "--config", cfg, "--format", format, caddy)
		if code != exitOK || !strings.Contains(out, "10 read, 10 parsed, 0 rejected") || !strings.Contains(out, "format caddy") || strings.Contains(stderr, "hint:") {
			t.Errorf("replay --format %s: exit %d, want 0 with every line parsed as caddy and no hint:\n%s%s", format, code, out, stderr)
		}
	}
	code, _, stderr = run(t, "", "parse", "--config", cfg, caddy)
	if code != exitNegative || !strings.Contains(stderr, hint) {
		t.Errorf("parse of a Caddy log as combined: exit %d, want %d with the hint %q:\n%s", code, exitNegative, hint, stderr)
	}
	// Lines no preset reads get a hint on how to describe the format.
	junk := filepath.Join(t.TempDir(), "dpkg.log")
	os.WriteFile(junk, []byte("2025-06-24 10:00:01 status installed libc6:amd64 2.36-9\n2025-06-24 10:00:02 startup archives unpack\n"), 0o600)
	code, _, stderr = run(t, "", "replay", "--config", cfg, junk)
	if code != exitNegative || !strings.Contains(stderr, "no preset reads any of its first 2 lines: describe the format with --log-format") {
		t.Errorf("replay of a non-access log: exit %d, want %d with a hint to describe the format:\n%s", code, exitNegative, stderr)
	}
}

// TestReplayWithoutArgsShowsUsage: replay with no file says what it wants,
// with the usage, and exits 2.
func TestReplayWithoutArgsShowsUsage(t *testing.T) {
	code, _, stderr := run(t, "", "replay")
	if code != exitUsage || !strings.Contains(stderr, "give the logs to replay") || !strings.Contains(stderr, "Usage:\n  logjail replay [flags] FILE...|-") || !strings.Contains(stderr, "--format") {
		t.Errorf("replay without args: exit %d, want %d with the usage:\n%s", code, exitUsage, stderr)
	}
}
