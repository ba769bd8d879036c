package ops

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
)

func TestNewLogger(t *testing.T) {
	tests := []struct {
		level    string
		terminal bool
		wantErr  bool
		// which of debug, info, warn, error come out
		want [4]bool
	}{
		{"debug", false, false, [4]bool{true, true, true, true}},
		{"info", true, false, [4]bool{false, true, true, true}},
		{"", false, false, [4]bool{false, true, true, true}},
		{"WARN", false, false, [4]bool{false, false, true, true}},
		{"error", true, false, [4]bool{false, false, false, true}},
		{"verbose", false, true, [4]bool{false, false, false, true}},
	}
	for _, tt := range tests {
		t.Run(tt.level, func(t *testing.T) {
			var buf bytes.Buffer
			log, err := NewLogger(&buf, tt.level, tt.terminal)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			log.Debug("m-debug")
			log.Info("m-info", "k", "v")
			log.Warn("m-warn")
			log.Error("m-error")
			out := buf.String()
			for i, m := range []string{"m-debug", "m-info", "m-warn", "m-error"} {
				if got := strings.Contains(out, m); got != tt.want[i] {
					t.Errorf("%s logged: %v, want %v\n%s", m, got, tt.want[i], out)
				}
			}
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				var v map[string]any
				isJSON := json.Unmarshal([]byte(line), &v) == nil
				if isJSON == tt.terminal {
					t.Errorf("terminal %v but line is JSON: %v: %s", tt.terminal, isJSON, line)
				}
			}
		})
	}
}

// TestJournalLogger: on the journal's stream each JSON line starts with
// its syslog priority, which journald strips; attributes added with With
// stay on every level.
func TestJournalLogger(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLogger(&buf, "debug", false, true)
	if err != nil {
		t.Fatal(err)
	}
	log = log.With("component", "x")
	log.Debug("d")
	log.Info("i")
	log.Warn("w")
	log.Error("e")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []struct{ prefix, msg string }{{"<7>", "d"}, {"<6>", "i"}, {"<4>", "w"}, {"<3>", "e"}}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, w := range want {
		rest, ok := strings.CutPrefix(lines[i], w.prefix)
		var v map[string]any
		if !ok || json.Unmarshal([]byte(rest), &v) != nil || v["msg"] != w.msg || v["component"] != "x" {
			t.Errorf("line %d: %q, want %s then JSON with msg %q and component x", i, lines[i], w.prefix, w.msg)
		}
	}
}

// TestJournalStream: only the file $JOURNAL_STREAM names is the journal.
func TestJournalStream(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "stream")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	env := fmt.Sprintf("%d:%d", st.Dev, st.Ino)
	if !journalStream(f, env) {
		t.Errorf("%s: not recognised as the journal's stream", env)
	}
	if journalStream(f, "") || journalStream(f, fmt.Sprintf("%d:%d", st.Dev, st.Ino+1)) || journalStream(&bytes.Buffer{}, env) {
		t.Errorf("another stream taken for the journal's")
	}
}
