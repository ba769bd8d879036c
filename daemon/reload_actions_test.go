package daemon

import (
	"testing"

	"github.com/logjail/logjail/rules"
)

// TestSameActions: a reload warns that the actions changed (and keeps the
// running ones) only when what runs would differ, not when a comment
// moved an action or an option to another line.
func TestSameActions(t *testing.T) {
	block := rules.Action{Type: "blockfile", Index: 0, Line: 12, Lines: map[string]int{"type": 12, "dir": 13},
		Options: map[string]any{"dir": "/run/logjail/block"}}
	moved := block
	moved.Line, moved.Lines = 15, map[string]int{"type": 15, "dir": 17}
	other := block
	other.Options = map[string]any{"dir": "/run/logjail/other"}
	set := rules.Action{Type: "ipset", Options: map[string]any{"set": "logjail"}}
	for _, c := range []struct {
		name string
		a, b []rules.Action
		same bool
	}{
		{"moved by a comment", []rules.Action{block}, []rules.Action{moved}, true},
		{"an option changed", []rules.Action{block}, []rules.Action{other}, false},
		{"an action added", []rules.Action{block}, []rules.Action{block, set}, false},
		{"reordered", []rules.Action{block, set}, []rules.Action{set, block}, false},
	} {
		if got := sameActions(c.a, c.b); got != c.same {
			t.Errorf("%s: sameActions = %v, want %v", c.name, got, c.same)
		}
	}
}
