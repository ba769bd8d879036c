package checkpoint_test

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/logjail/logjail/checkpoint"
	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/pipeline"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/state"
	"github.com/logjail/logjail/store"
)

// rowSink keeps a checkpoint's key states as the keys table of schema
// version 3 did, one row per (rule, key): upserted, deleted where Data is
// nil. It is the reference the store's key runs must read back exactly.
type rowSink struct {
	rows   map[state.BanKey]state.KeyRow
	global []byte
	at     time.Time
}

func (s *rowSink) Checkpoint(c *state.Checkpoint) error {
	for _, r := range c.Keys {
		k := state.BanKey{Rule: r.Rule, Key: r.Key}
		if r.Data == nil {
			delete(s.rows, k)
			continue
		}
		r.Data = bytes.Clone(r.Data)
		r.LastSeen, r.Until = ms(r.LastSeen), ms(r.Until)
		s.rows[k] = r
	}
	s.global, s.at = bytes.Clone(c.Global), c.Time
	return nil
}

func ms(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.UnixMilli(t.UnixMilli()).UTC()
}

func (s *rowSink) Global() ([]byte, time.Time, error) { return s.global, s.at, nil }

func (s *rowSink) Keys(fn func(*state.KeyRow) error) error {
	ks := slices.SortedFunc(maps.Keys(s.rows), func(a, b state.BanKey) int {
		if a.Rule != b.Rule {
			return strings.Compare(a.Rule, b.Rule)
		}
		return strings.Compare(a.Key, b.Key)
	})
	for _, k := range ks {
		r := s.rows[k]
		if err := fn(&r); err != nil {
			return err
		}
	}
	return nil
}

func (s *rowSink) Positions() ([]state.Position, error)        { return nil, nil }
func (s *rowSink) Meta(string) (string, bool, error)           { return "", false, nil }
func (s *rowSink) ActiveBans() ([]state.Ban, error)            { return nil, nil }
func (s *rowSink) writeBoth(db *store.DB) state.CheckpointSink { return &tee{db, s} }

// tee writes each checkpoint into the store and the reference.
type tee struct {
	db  *store.DB
	ref *rowSink
}

func (t *tee) Checkpoint(c *state.Checkpoint) error {
	if err := t.db.Checkpoint(c); err != nil {
		return err
	}
	return t.ref.Checkpoint(c)
}
func (t *tee) ActiveBans() ([]state.Ban, error)   { return t.db.ActiveBans() }
func (t *tee) Global() ([]byte, time.Time, error) { return t.db.Global() }

func allRows(t *testing.T, src state.RestoreSource) []state.KeyRow {
	t.Helper()
	var out []state.KeyRow
	if err := src.Keys(func(r *state.KeyRow) error {
		c := *r
		c.Data = bytes.Clone(r.Data)
		out = append(out, c)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRunsRestoreAsRows: the key states the store keeps in runs (states
// overwritten by later checkpoints, tombstones of evicted keys, runs merged
// into a new base many times over) read back as exactly the rows the
// one-row-per-key table kept, so that a detector restored from them is the
// one the old checkpoint restored: the same global state, the same key
// states, and the same decisions on the lines that follow.
func TestRunsRestoreAsRows(t *testing.T) {
	cfg := parse(t, `
max_keys: 400
sources: [{name: web, paths: [/var/log/access.log], format: combined, timezone: UTC}]
rules:
  - name: flood
    limits: ["5 per 10s"]
    throttle: {initial_delay: 2s, max_delay: 8s, quiet: 3s}
    ban: {after: 2, for: 30s}
  - name: slow
    key: prefix
    limits: ["40 per minute"]
    ban: {for: 1m}
`)
	dir := t.TempDir()
	db, err := store.Open(filepath.Join(dir, "logjail.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ref := &rowSink{rows: map[state.BanKey]state.KeyRow{}}
	det := pipeline.NewDetector(cfg)
	w := checkpoint.NewWriter(ref.writeBoth(db))
	r := rand.New(rand.NewPCG(23, 5))
	src := cfg.Source("web")
	now := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	// charges feeds n random lines to d from the clients; the same seed
	// gives the same lines.
	charges := func(d *detector.Detector, r *rand.Rand, now time.Time, n int) ([]detector.Decision, time.Time) {
		var out []detector.Decision
		for range n {
			now = now.Add(time.Duration(r.IntN(40)) * time.Millisecond)
			ip := netip.AddrFrom4([4]byte{203, 0, 113, byte(r.IntN(40))})
			if r.IntN(3) == 0 {
				ip = netip.AddrFrom4([4]byte{198, 51, byte(r.IntN(200)), byte(r.IntN(250))})
			}
			e := parser.Entry{IP: ip, Time: now, Method: "GET", Path: "/", Status: 200}
			chs, _ := cfg.Classify(src, &e, nil)
			for _, ch := range chs {
				out = d.Charge(now, &ch, out)
			}
		}
		return out, now
	}
	bases := 0
	for ck := 1; ck <= 120; ck++ {
		var ds []detector.Decision
		ds, now = charges(det, r, now, 150)
		w.Decisions(ds)
		if err := w.Flush(det, now); err != nil {
			t.Fatal(err)
		}
		if runs, base, err := db.KeyRuns(); err != nil {
			t.Fatal(err)
		} else if runs == 1 && base == 1 { // merged into a new base
			bases++
		}
		if ck%20 != 0 {
			continue
		}
		t.Run(fmt.Sprintf("after checkpoint %d", ck), func(t *testing.T) {
			seed := uint64(ck)
			ds := restoresAlike(t, cfg, db, ref, func(d *detector.Detector) []detector.Decision {
				ds, _ := charges(d, rand.New(rand.NewPCG(seed, 1)), now, 400)
				return ds
			})
			if len(ds) == 0 {
				t.Error("no decision on the lines after the restore: nothing compared")
			}
		})
	}
	if bases < 3 {
		t.Errorf("the runs were merged into a new base %d times: the test did not cross merges", bases)
	}
	if st := det.Stats(); st.Evictions == 0 || st.Bans == 0 {
		t.Errorf("stats %+v: want evictions (tombstones) and bans", st)
	}
}

// restoresAlike checks a store against the one-row-per-key reference:
// db reads back exactly ref's rows, and detectors restored from each have
// the same global state, make the same decisions on the lines that charge
// feeds them (the same lines to both), and leave the same states. It
// returns the decisions compared.
func restoresAlike(t *testing.T, cfg *rules.Config, db, ref state.RestoreSource, charge func(*detector.Detector) []detector.Decision) []detector.Decision {
	t.Helper()
	got, want := allRows(t, db), allRows(t, ref)
	if len(want) == 0 {
		t.Fatal("nothing saved")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("rows read back from the runs (-rows +runs):\n%s", diff)
	}
	fromRuns, fromRows := pipeline.NewDetector(cfg), pipeline.NewDetector(cfg)
	if _, _, err := checkpoint.Restore(db, cfg, fromRuns); err != nil {
		t.Fatal(err)
	}
	if _, _, err := checkpoint.Restore(ref, cfg, fromRows); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fromRuns.SaveGlobal(), fromRows.SaveGlobal()) {
		t.Error("global states differ")
	}
	dRuns, dRows := charge(fromRuns), charge(fromRows)
	if diff := cmp.Diff(dRows, dRuns, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
		t.Errorf("decisions after the restore (-rows +runs):\n%s", diff)
	}
	if diff := cmp.Diff(changes(fromRows), changes(fromRuns)); diff != "" {
		t.Errorf("states after the restore and the lines (-rows +runs):\n%s", diff)
	}
	return dRows
}

// changes is every state d reports changed, in order.
func changes(d *detector.Detector) []detector.KeyState {
	var out []detector.KeyState
	d.Changes(func(ks *detector.KeyState) {
		c := *ks
		c.Data = bytes.Clone(ks.Data)
		out = append(out, c)
	})
	return out
}
