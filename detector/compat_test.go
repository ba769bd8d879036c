package detector

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
)

// TestRestoresOlderCheckpoint restores testdata/checkpoint-v1.json, the
// checkpoint the detector of before the memory work (addresses seen in the
// ladder's block, written for every key that is not a single address) wrote
// after 2222 of the round trip's events (snapConfig, max_keys 100,000),
// then feeds the rest: the decisions, Stats and peaks are those of a
// detector fed every event without a stop.
func TestRestoresOlderCheckpoint(t *testing.T) {
	raw, err := os.ReadFile("testdata/checkpoint-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	var saved struct {
		Global []byte
		States []struct {
			Rule, Key string
			Data      []byte
		}
	}
	if err := json.Unmarshal(raw, &saved); err != nil {
		t.Fatal(err)
	}
	const cut = 2222
	cfg := parseConfig(t, snapConfigWith(100_000))
	evs := snapEvents(cfg, 4000)
	a := &snapRun{cfg: cfg, d: detectorFor(cfg)}
	a.feed(evs)

	var states []*KeyState
	old := 0
	for _, s := range saved.States {
		states = append(states, &KeyState{Rule: s.Rule, Key: s.Key, Data: s.Data})
		if len(s.Data) > 3 && s.Data[1] == tagRule && s.Data[2] == phaseAllowed && s.Data[3]&(encMulti|encExtra) == encMulti|encExtra {
			old++ // an allowed key's addresses in a ladder's block
		}
	}
	if old == 0 {
		t.Fatal("the saved checkpoint has no state in the older form: nothing to test")
	}
	c := &snapRun{cfg: cfg, d: detectorFor(cfg)}
	st, err := c.d.Restore(cfg, saved.Global, slices.Values(states))
	if err != nil {
		t.Fatal(err)
	}
	if st.Keys != len(states) || st.Dropped != 0 || st.Reset != 0 {
		t.Errorf("restore stats = %+v, want %d keys", st, len(states))
	}
	c.started = true // the static bans came before the cut
	c.feed(evs[cut:])
	want := a.out[a.marks[cut-1]:]
	if diff := gocmp.Diff(want, c.out, strictOpts...); diff != "" {
		t.Errorf("decisions after the cut (-uninterrupted +restored):\n%s", diff)
	}
	if diff := gocmp.Diff(a.d.Stats(), c.d.Stats()); diff != "" {
		t.Errorf("stats (-uninterrupted +restored):\n%s", diff)
	}
	if diff := gocmp.Diff(peaks(a.d), peaks(c.d), strictOpts...); diff != "" {
		t.Errorf("peaks (-uninterrupted +restored):\n%s", diff)
	}
}
