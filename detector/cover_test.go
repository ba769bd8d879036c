package detector

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestCoverReady: CoverReady says a cover is ready exactly when, after
// the Changes that follows, every state tracked (the keys a store given
// every Changes holds: static bans, banned states and tombstones
// included) was reported since the last MarkCover (marks at random, the
// Changes after a mark included). Over random events with evictions,
// bans, lifts, the deny list and a breaker, both answers come many times.
func TestCoverReady(t *testing.T) {
	cfg := parseConfig(t, snapConfigWith(60))
	evs := snapEvents(cfg, 6000)
	r := &snapRun{cfg: cfg, d: detectorFor(cfg)}
	rng := rand.New(rand.NewPCG(5, 9))
	store := map[string]bool{} // the (rule, key)s a store holds
	since := map[string]bool{} // reported since the mark
	marked := false
	var ready, notReady, forced int
	for from := 0; from < len(evs); {
		to := min(len(evs), from+1+rng.IntN(40))
		r.feed(evs[from:to])
		from = to
		ask := marked && rng.IntN(2) == 0
		ok := ask && r.d.CoverReady()
		mark := rng.IntN(6) == 0 // after a cover or not, as a Writer does
		if mark {
			r.d.MarkCover()
		}
		pending := r.d.Pending()
		n := 0
		reported := map[string]bool{}
		r.d.Changes(func(ks *KeyState) {
			k := ks.Rule + "/" + ks.Key
			if ks.Data == nil {
				delete(store, k)
				return
			}
			store[k], since[k], reported[k] = true, true, true
			n++
		})
		if n > pending {
			t.Fatalf("event %d: %d states reported, Pending said %d", to, n, pending)
		}
		// The cover asked for is the last mark's; a mark now starts afresh
		// from what this Changes reported.
		var missing []string
		for k := range store {
			if !since[k] {
				missing = append(missing, k)
			}
		}
		if mark {
			since, marked = reported, true
		}
		if !ask {
			continue
		}
		slices.Sort(missing)
		switch {
		case ok && len(missing) > 0:
			t.Fatalf("event %d: a cover ready, but not reported since the mark: %v", to, missing)
		case !ok && len(missing) == 0:
			t.Fatalf("event %d: no cover ready, but every state was reported since the mark", to)
		case ok:
			ready++
			if r.d.banned > 0 || len(r.d.static) > 0 {
				forced++
			}
		default:
			notReady++
		}
	}
	t.Logf("%d covers ready (%d with banned states or static bans), %d not", ready, forced, notReady)
	if ready < 10 || notReady < 10 || forced < 5 {
		t.Error("the events did not exercise both answers")
	}
}
