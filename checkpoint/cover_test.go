package checkpoint_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/logjail/logjail/checkpoint"
	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/pipeline"
	"github.com/logjail/logjail/state"
	"github.com/logjail/logjail/store"
)

// coverSink writes checkpoints into the store and the one-row-per-key
// reference (tee), failing some before either, and counts the covers.
type coverSink struct {
	*tee
	rng           *rand.Rand
	failed        int
	marks, covers int
}

func (s *coverSink) Checkpoint(c *state.Checkpoint) error {
	if s.rng.IntN(15) == 0 {
		s.failed++
		return errors.New("injected failure")
	}
	if err := s.tee.Checkpoint(c); err != nil {
		return err
	}
	if c.Mark {
		s.marks++
	}
	if c.Cover {
		s.covers++
	}
	return nil
}

// TestCoversRestoreAsRows: the Writer's covers (state.Checkpoint's Mark
// and Cover), which let the store drop its runs from before a mark
// unread, lose no state and keep none too many. A detector fed clients
// in turn (so that every state changes between marks and covers come),
// random ones (evictions: tombstones), bans and blocked lines is
// checkpointed into the store and the one-row-per-key reference, with
// failed checkpoints (written again with the next, Mark and Cover
// passed on) and the store closed and opened again (its mark forgotten).
// Every 10 checkpoints the store reads back exactly the reference's rows,
// and detectors restored from each decide alike on the lines after.
func TestCoversRestoreAsRows(t *testing.T) {
	cfg := parse(t, `
max_keys: 170
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
	path := filepath.Join(t.TempDir(), "logjail.db")
	db, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	ref := &rowSink{rows: map[state.BanKey]state.KeyRow{}}
	sink := &coverSink{tee: &tee{db, ref}, rng: rand.New(rand.NewPCG(3, 4))}
	det := pipeline.NewDetector(cfg)
	w := checkpoint.NewWriter(sink)
	r := rand.New(rand.NewPCG(23, 7))
	src := cfg.Source("web")
	now := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	turn := 0
	charges := func(d *detector.Detector, r *rand.Rand, now time.Time, n int, turn *int) (out []detector.Decision, _ time.Time) {
		for range n {
			now = now.Add(time.Duration(r.IntN(30)) * time.Millisecond)
			ip := netip.AddrFrom4([4]byte{198, 51, 100, byte(*turn)})
			*turn = (*turn + 1) % 150
			switch x := r.IntN(50); {
			case x == 0:
				ip = netip.AddrFrom4([4]byte{192, 0, byte(r.IntN(250)), byte(r.IntN(250))}) // once: evicted
			case x < 10:
				ip = netip.AddrFrom4([4]byte{203, 0, 113, byte(r.IntN(6))}) // the floods: bans
			}
			e := parser.Entry{IP: ip, Time: now, Method: "GET", Path: "/", Status: 200}
			chs, _ := cfg.Classify(src, &e, nil)
			for _, ch := range chs {
				out = d.Charge(now, &ch, out)
			}
		}
		return out, now
	}
	var reopened int
	for ck := 1; ck <= 150; ck++ {
		var ds []detector.Decision
		ds, now = charges(det, r, now, 200, &turn)
		w.Decisions(ds)
		if err := w.Flush(det, now); err != nil && err.Error() != "injected failure" {
			t.Fatal(err)
		}
		if ck%17 == 0 {
			db.Close()
			if db, err = store.Open(path, store.Options{}); err != nil {
				t.Fatal(err)
			}
			sink.tee.db = db
			reopened++
		}
		if ck%10 != 0 {
			continue
		}
		for i := 0; w.Flush(det, now) != nil; i++ { // a failed one is written again with the next
			if i == 10 {
				t.Fatal("10 checkpoints in a row failed")
			}
		}
		t.Run(fmt.Sprintf("after checkpoint %d", ck), func(t *testing.T) {
			restoresAlike(t, cfg, db, ref, func(d *detector.Detector) []detector.Decision {
				tn := turn
				ds, _ := charges(d, rand.New(rand.NewPCG(uint64(ck), 1)), now, 300, &tn)
				return ds
			})
		})
	}
	runs, _, err := db.KeyRuns()
	if err != nil {
		t.Fatal(err)
	}
	st := det.Stats()
	t.Logf("%d marks, %d covers, %d failed, %d reopened; %d runs at the end; %+v", sink.marks, sink.covers, sink.failed, reopened, runs, st)
	if sink.covers < 20 || sink.marks < 5 || sink.failed < 3 || st.Evictions == 0 || st.Bans == 0 {
		t.Error("the checkpoints did not exercise the covers")
	}
}
