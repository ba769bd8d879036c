package ops

import (
	"bytes"
	"encoding/json"
	"strings"
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
