package checkpoint

import (
	"fmt"
	"testing"

	"github.com/logjail/logjail/state"
)

// TestMerge: a checkpoint that failed is written with the next one, whose
// rows win: nothing of it is lost, nothing newer is overwritten.
func TestMerge(t *testing.T) {
	old := &state.Checkpoint{
		Events:    []state.Event{{Key: "e1"}},
		Keys:      []state.KeyRow{{Rule: "r", Key: "A", Requests: 1}, {Rule: "r", Key: "B", Requests: 1}},
		SetBans:   []state.Ban{{Rule: "r", Key: "X", Kind: "ban"}},
		DelBans:   []state.BanKey{{Rule: "r", Key: "Y"}},
		Positions: []state.Position{{Path: "/a", Offset: 1}, {Path: "/b", Offset: 5}},
	}
	c := &state.Checkpoint{
		Global:    []byte("new"),
		Events:    []state.Event{{Key: "e2"}},
		Keys:      []state.KeyRow{{Rule: "r", Key: "B", Requests: 2}, {Rule: "r", Key: "C", Requests: 2}},
		DelBans:   []state.BanKey{{Rule: "r", Key: "X"}},
		Positions: []state.Position{{Path: "/a", Offset: 9}},
	}
	m := merge(old, c)
	got := fmt.Sprint(m.Events, m.Keys, m.SetBans, m.DelBans, m.Positions, string(m.Global))
	want := fmt.Sprint(
		[]state.Event{{Key: "e1"}, {Key: "e2"}},
		[]state.KeyRow{{Rule: "r", Key: "B", Requests: 2}, {Rule: "r", Key: "C", Requests: 2}, {Rule: "r", Key: "A", Requests: 1}},
		[]state.Ban(nil),
		[]state.BanKey{{Rule: "r", Key: "X"}, {Rule: "r", Key: "Y"}},
		[]state.Position{{Path: "/a", Offset: 9}, {Path: "/b", Offset: 5}},
		"new")
	if got != want {
		t.Errorf("merge:\n got %s\nwant %s", got, want)
	}
}
