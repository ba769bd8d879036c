package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logjail/logjail/state"
	"github.com/logjail/logjail/store"
)

const offlineLogConfig = `state_dir: %[1]s/state
control_socket: %[1]s/control.sock
metrics: ""
allow: [198.51.100.0/24]
sources:
  - name: web
    paths: [%[1]s/access.log]
    format: combined
rules:
  - name: flood
    limits: ["5 per 10s"]
    ban: {for: 1h}
`

// decisionLines are the JSON lines of stderr (the decision log, as the
// daemon writes it when stderr is no terminal).
func decisionLines(t *testing.T, stderr string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(stderr, "\n") {
		if !strings.HasPrefix(l, "{") {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("a log line that is not JSON: %q", l)
		}
		out = append(out, r)
	}
	return out
}

// TestOfflineChangesWriteTheDecisionLog: with no daemon, `ban`, `unban`
// and the lifts of resuming the state each write the decision-log line the
// daemon would (msg, rule, key, kind, reason, source, who; forced for a
// forced ban), on stderr, once the change is in the database; a change
// refused writes none.
func TestOfflineChangesWriteTheDecisionLog(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "logjail.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, offlineLogConfig, dir), 0o600); err != nil {
		t.Fatal(err)
	}
	// A database holding a detector's ban of a rule no longer configured.
	code, _, stderr := run(t, "", "ban", "203.0.113.1", "--for", "1h", "--config", cfg)
	if code != exitOK {
		t.Fatalf("first ban: exit %d\n%s", code, stderr)
	}
	db, err := store.Open(filepath.Join(dir, "state", "logjail.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	global, at, err := db.Global()
	if err != nil {
		t.Fatal(err)
	}
	gone := state.Ban{Rule: "gone", Key: "203.0.113.2", Kind: state.PhaseBan, Since: at, Until: time.Now().Add(time.Hour),
		Reason: "over the limit", Origin: state.OriginDetector}
	if err := db.Checkpoint(&state.Checkpoint{Time: at, Global: global, SetBans: []state.Ban{gone}}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	check := func(what string, lines []map[string]any, want ...map[string]any) {
		t.Helper()
		if len(lines) != len(want) {
			t.Fatalf("%s: %d decision lines, want %d: %v", what, len(lines), len(want), lines)
		}
		for i, w := range want {
			for k, v := range w {
				if lines[i][k] != v {
					t.Errorf("%s: line %d: %s = %v, want %v (%v)", what, i, k, lines[i][k], v, lines[i])
				}
			}
			if w["source"] == "operator" && !strings.Contains(fmt.Sprint(lines[i]["who"]), "uid ") {
				t.Errorf("%s: line %d: who = %v, want the caller", what, i, lines[i]["who"])
			}
		}
	}
	code, _, stderr = run(t, "", "ban", "203.0.113.8", "--for", "1h", "--reason", "offline", "--config", cfg)
	if code != exitOK {
		t.Fatalf("ban: exit %d\n%s", code, stderr)
	}
	check("ban", decisionLines(t, stderr),
		map[string]any{"msg": "unban", "rule": "gone", "key": "203.0.113.2", "kind": "unban", "source": "resume",
			"reason": "rule gone is no longer in the configuration"},
		map[string]any{"msg": "ban", "rule": "operator", "key": "203.0.113.8", "kind": "ban", "source": "operator", "reason": "offline"})

	code, _, stderr = run(t, "", "ban", "198.51.100.7", "--for", "1h", "--config", cfg)
	if code != exitNegative {
		t.Fatalf("ban of an allowed address: exit %d, want 1\n%s", code, stderr)
	}
	check("refused ban", decisionLines(t, stderr))

	code, _, stderr = run(t, "", "ban", "198.51.100.7", "--for", "1h", "--force", "--config", cfg)
	if code != exitOK {
		t.Fatalf("ban --force: exit %d\n%s", code, stderr)
	}
	check("ban --force", decisionLines(t, stderr),
		map[string]any{"msg": "ban", "rule": "operator", "key": "198.51.100.7", "source": "operator", "forced": true})

	code, _, stderr = run(t, "", "unban", "203.0.113.8", "--reason", "done", "--config", cfg)
	if code != exitOK {
		t.Fatalf("unban: exit %d\n%s", code, stderr)
	}
	check("unban", decisionLines(t, stderr),
		map[string]any{"msg": "unban", "rule": "operator", "key": "203.0.113.8", "kind": "unban", "source": "operator", "reason": "done"})
}
