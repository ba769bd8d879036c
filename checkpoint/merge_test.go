package checkpoint

import (
	"fmt"
	"testing"

	"github.com/logjail/logjail/store"
)

// TestMerge: a checkpoint that failed is written with the next one, whose
// rows win: nothing of it is lost, nothing newer is overwritten.
func TestMerge(t *testing.T) {
	old := &store.Checkpoint{
		Events:    []store.Event{{Key: "e1"}},
		Keys:      []store.KeyRow{{Rule: "r", Key: "A", Requests: 1}, {Rule: "r", Key: "B", Requests: 1}},
		SetBans:   []store.Ban{{Rule: "r", Key: "X", Kind: "ban"}},
		DelBans:   []store.BanKey{{Rule: "r", Key: "Y"}},
		Positions: []store.Position{{Path: "/a", Offset: 1}, {Path: "/b", Offset: 5}},
	}
	c := &store.Checkpoint{
		Global:    []byte("new"),
		Events:    []store.Event{{Key: "e2"}},
		Keys:      []store.KeyRow{{Rule: "r", Key: "B", Requests: 2}, {Rule: "r", Key: "C", Requests: 2}},
		DelBans:   []store.BanKey{{Rule: "r", Key: "X"}},
		Positions: []store.Position{{Path: "/a", Offset: 9}},
	}
	m := merge(old, c)
	got := fmt.Sprint(m.Events, m.Keys, m.SetBans, m.DelBans, m.Positions, string(m.Global))
	want := fmt.Sprint(
		[]store.Event{{Key: "e1"}, {Key: "e2"}},
		[]store.KeyRow{{Rule: "r", Key: "B", Requests: 2}, {Rule: "r", Key: "C", Requests: 2}, {Rule: "r", Key: "A", Requests: 1}},
		[]store.Ban(nil),
		[]store.BanKey{{Rule: "r", Key: "X"}, {Rule: "r", Key: "Y"}},
		[]store.Position{{Path: "/a", Offset: 9}, {Path: "/b", Offset: 5}},
		"new")
	if got != want {
		t.Errorf("merge:\n got %s\nwant %s", got, want)
	}
}
