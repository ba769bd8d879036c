package detector

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/logjail/logjail/limits"
	"github.com/logjail/logjail/rules"
)

func TestImpose(t *testing.T) {
	r := banRule("r", rate(3, 10*time.Second))
	d := New(Options{MaxBansPerMinute: 1})
	run(d, r, keys("a", 0, 1))
	got := d.Impose(at(2), r, "a", at(100), "by hand")
	want := Decision{Rule: "r", Key: "a", Kind: Ban, Time: at(2), Until: at(100), Reason: "by hand", Origin: "operator"}
	if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
		t.Errorf("Impose (-want +got):\n%s", diff)
	}
	if k, until := d.Status(r, "a", at(3)); k != Ban || !until.Equal(at(100)) {
		t.Errorf("Status = %v %v, want ban until %v", k, until, at(100))
	}
	// Banned: its requests are not charged, and it ends at its until.
	out := run(d, r, keys("a", 3, 4, 5, 6))
	if len(out) != 0 {
		t.Errorf("decisions while imposed: %+v", out)
	}
	out = d.Advance(at(100), nil)
	if diff := cmp.Diff([]Decision{unban("r", "a", 100)}, out, cmpOpts...); diff != "" {
		t.Errorf("expiry (-want +got):\n%s", diff)
	}
	// No escalation, no breaker: the rule's own ban comes at its length,
	// and the breaker (1 a minute) admits it.
	out = run(d, r, keys("a", 101, 101, 101, 101))
	if diff := cmp.Diff([]Decision{ban("r", "a", 101, 161, 0, "rate 4 per 10s > 3 (rule r)")}, out, cmpOpts...); diff != "" {
		t.Errorf("after the imposed ban (-want +got):\n%s", diff)
	}
	// Imposed over a ban of the rule: replaced; the old expiry is void.
	d.Impose(at(102), r, "a", at(500), "longer")
	if out := d.Advance(at(200), nil); len(out) != 0 {
		t.Errorf("the replaced ban expired: %+v", out)
	}
	if out := d.Lift(at(201), r, "a", nil); len(out) != 1 || out[0].Kind != Unban {
		t.Errorf("Lift = %+v, want one unban", out)
	}
	if st := d.Stats(); st.Banned != 0 || st.Keys != 1 {
		t.Errorf("stats %+v, want 1 key, none banned", st)
	}
}

func TestImposeSurvivesACheckpoint(t *testing.T) {
	cfg := parseConfig(t, "sources:\n  - name: s\n    paths: [/x.log]\n    format: combined\nrules:\n  - name: r\n    limits: [\"3 per 10s\"]\n    ban: {for: 1m}\n")
	r := cfg.Rule("r")
	d := New(Options{})
	d.Advance(at(0), nil)
	d.Impose(at(0), r, "203.0.113.7", at(3600), "by hand")
	d2 := roundTrip(t, cfg, d)
	if k, until := d2.Status(r, "203.0.113.7", at(10)); k != Ban || !until.Equal(at(3600)) {
		t.Errorf("restored: %v %v, want ban until %v", k, until, at(3600))
	}
	if out := d2.Advance(at(3600), nil); len(out) != 1 || out[0].Kind != Unban {
		t.Errorf("restored expiry: %+v", out)
	}
}

func TestForget(t *testing.T) {
	r := banRule("r", rate(3, 10*time.Second))
	other := banRule("o", rate(3, 10*time.Second))
	d := New(Options{})
	run(d, r, keys("a", 0, 0, 0, 0)) // banned: remembered for escalation
	run(d, other, keys("a", 0))
	run(d, r, keys("b", 0))
	if d.Forget(r, "a") {
		t.Errorf("Forget of a banned key: true")
	}
	d.Lift(at(1), r, "a", nil)
	d.Changes(func(*KeyState) {})
	if !d.Forget(r, "a") {
		t.Fatalf("Forget after Lift: false")
	}
	if d.Forget(r, "a") || d.Forget(r, "nobody") {
		t.Errorf("Forget of an untracked key: true")
	}
	var deleted, changed []string
	d.Changes(func(ks *KeyState) {
		if ks.Data == nil {
			deleted = append(deleted, ks.Rule+" "+ks.Key)
		} else {
			changed = append(changed, ks.Rule+" "+ks.Key)
		}
	})
	if diff := cmp.Diff([]string{"r a"}, deleted); diff != "" {
		t.Errorf("deleted (-want +got):\n%s", diff)
	}
	if len(changed) != 0 {
		t.Errorf("changed: %v", changed)
	}
	// The other rule's state of the key and other keys stay.
	if st := d.Stats(); st.Keys != 2 {
		t.Errorf("keys = %d, want 2", st.Keys)
	}
	// Forgotten: the next ban is the first again (1m, not 2m with factor 2).
	r.Ban.Factor = 2
	out := run(d, r, keys("a", 100, 100, 100, 100))
	if len(out) != 1 || !out[0].Until.Equal(at(160)) {
		t.Errorf("ban after forget: %+v, want until %v", out, at(160))
	}
}

func TestCurrent(t *testing.T) {
	r := &rules.Rule{Name: "r", Limits: []rules.Limit{
		rate(10, 10*time.Second),
		share(limits.Share{Weight: limits.CPU}, 0.5, 10*time.Second),
		{Kind: limits.Bucket{}, N: 1, Burst: 4},
		{Kind: limits.LastN{}, N: 3, Window: 2 * time.Second},
	}}
	d := New(Options{})
	run(d, r, []ev{{at: 0, key: "a", cpu: 1}, {at: 1, key: "a", cpu: 1}, {at: 5, key: "a", cpu: 2}})
	get := func(sec float64) []LimitNow {
		var ls []LimitNow
		d.Current(at(sec), func(k *KeyNow) {
			if k.Key == "a" {
				ls = append(ls, k.Limits...)
			}
		})
		return ls
	}
	type vr struct{ V, R float64 }
	round := func(ls []LimitNow) []vr {
		var out []vr
		for _, l := range ls {
			out = append(out, vr{math.Round(l.Value*1000) / 1000, math.Round(l.Ratio*1000) / 1000})
		}
		return out
	}
	// At 5: 3 requests, 4 s of CPU over 10 s; the bucket refilled 1 a
	// second from 4 (at 0: 3 left, at 1: 3, at 5: 3): 1 taken; the next
	// request would make the last 3 span 1..5 = 4 s.
	want := []vr{{3, 0.3}, {0.4, 0.8}, {1, 0.25}, {4, 0.5}}
	if diff := cmp.Diff(want, round(get(5))); diff != "" {
		t.Errorf("at 5 (-want +got):\n%s", diff)
	}
	// At 10.5: the requests at 0 (bucket 0) has left the 10 s window.
	want = []vr{{2, 0.2}, {0.3, 0.6}, {0, 0}, {9.5, 0.211}}
	if diff := cmp.Diff(want, round(get(10.5))); diff != "" {
		t.Errorf("at 10.5 (-want +got):\n%s", diff)
	}
}

// roundTrip checkpoints d into a fresh detector, as the store would.
func roundTrip(t *testing.T, cfg *rules.Config, d *Detector) *Detector {
	t.Helper()
	ks := keyStore{}
	ks.checkpoint(t, d)
	global := d.SaveGlobal()
	d2 := detectorFor(cfg)
	states := func(yield func(*KeyState) bool) {
		for _, s := range ks {
			if !yield(s) {
				return
			}
		}
	}
	if _, err := d2.Restore(cfg, global, states); err != nil {
		t.Fatal(err)
	}
	return d2
}
