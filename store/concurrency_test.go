package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
)

// TestConcurrentReaders runs one writer checkpointing as fast as it can
// (1,000 changed keys, 10 events and 20 ban changes each time) beside four
// readers, each with its own read-only handle, listing active bans, top
// keys, history and every key in a loop, for at least two seconds and
// until each has made 10 reads beside 10 checkpoints (a busy machine slows
// them all: the test is bounded by work, with a deadline). No call may fail
// (no SQLITE_BUSY, no "database is locked"), and every read transaction
// must see one whole checkpoint: the sequence number in meta, the global
// blob, every key, ban and the newest events all carry the same number.
func TestConcurrentReaders(t *testing.T) {
	t.Parallel() // beside TestSize
	const (
		nKeys    = 1000
		nBans    = 10
		duration = 2 * time.Second
		enough   = 10 // reads per reader and checkpoints
		deadline = 2 * time.Minute
	)
	path := filepath.Join(t.TempDir(), "logjail.db")
	w := mustOpen(t, path, Options{})
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	checkpoint := func(seq int) *Checkpoint {
		ts := t0.Add(time.Duration(seq) * time.Second)
		c := &Checkpoint{Time: ts, Global: []byte(strconv.Itoa(seq)), Meta: map[string]string{"seq": strconv.Itoa(seq)}}
		data := []byte(fmt.Sprintf("%0200d", seq))
		for j := range nKeys {
			c.Keys = append(c.Keys, KeyRow{Rule: "flood", Key: keyName(j), Data: data, LastSeen: ts,
				Requests: int64(seq), CPU: float64(seq)})
		}
		for j := range nBans {
			key := keyName((seq*nBans + j) % nKeys)
			c.Events = append(c.Events, Event{Time: ts, Rule: "flood", Key: key, Kind: KindBan, Until: ts.Add(time.Minute),
				Violations: seq, Origin: OriginDetector})
			c.SetBans = append(c.SetBans, Ban{Rule: "flood", Key: key, Kind: PhaseBan, Since: ts, Until: ts.Add(time.Minute),
				Violations: seq, Origin: OriginDetector})
			if seq > 1 {
				c.DelBans = append(c.DelBans, BanKey{Rule: "flood", Key: keyName(((seq-1)*nBans + j) % nKeys)})
			}
		}
		return c
	}
	if err := w.Checkpoint(checkpoint(1)); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	g, ctx := errgroup.WithContext(ctx)
	var written atomic.Int64
	g.Go(func() error {
		for seq := 2; ctx.Err() == nil; seq++ {
			if err := w.Checkpoint(checkpoint(seq)); err != nil {
				return err
			}
			written.Add(1)
		}
		return nil
	})
	reads := make([]atomic.Int64, 4)
	// Stop once the duration has passed and everyone has done enough.
	go func() {
		minimum := time.After(duration)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if minimum != nil {
				select {
				case <-minimum:
					minimum = nil
				default:
					continue
				}
			}
			done := written.Load() >= enough
			for i := range reads {
				done = done && reads[i].Load() >= enough
			}
			if done {
				cancel()
				return
			}
		}
	}()
	for i := range reads {
		r, err := Open(path, Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		g.Go(func() error {
			for ctx.Err() == nil {
				if err := r.View(func(s Reader) error { return consistent(s.(*Snapshot), nKeys, nBans) }); err != nil {
					return fmt.Errorf("reader %d: %w", i, err)
				}
				// And the DB's own methods, each on the latest checkpoint.
				if _, err := r.ActiveBans(); err != nil {
					return err
				}
				if _, err := r.TopKeys("flood", "cpu", 10); err != nil {
					return err
				}
				if _, err := r.History(HistoryQuery{Key: keyName(i), Limit: 5}); err != nil {
					return err
				}
				reads[i].Add(1)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	counts := make([]int64, len(reads))
	for i := range reads {
		counts[i] = reads[i].Load()
	}
	t.Logf("%d checkpoints of %d keys; reads per reader: %v", written.Load(), nKeys, counts)
	if written.Load() < enough {
		t.Errorf("the writer made only %d checkpoints beside the readers in %v", written.Load(), deadline)
	}
	for i, n := range counts {
		if n < enough {
			t.Errorf("reader %d made only %d consistent reads in %v", i, n, deadline)
		}
	}
}

// consistent checks that everything s reads belongs to one checkpoint.
func consistent(s *Snapshot, nKeys, nBans int) error {
	v, ok, err := s.Meta("seq")
	if err != nil || !ok {
		return fmt.Errorf("meta seq: %v, %v", ok, err)
	}
	seq, _ := strconv.Atoi(v)
	var errs []error
	check := func(what string, got int) {
		if got != seq {
			errs = append(errs, fmt.Errorf("%s from checkpoint %d in the read of checkpoint %d", what, got, seq))
		}
	}
	g, _, err := s.Global()
	if err != nil {
		return err
	}
	n, _ := strconv.Atoi(string(g))
	check("global", n)
	bans, err := s.ActiveBans()
	if err != nil {
		return err
	}
	if len(bans) != nBans {
		errs = append(errs, fmt.Errorf("%d active bans, want %d", len(bans), nBans))
	}
	for _, b := range bans {
		check("ban "+b.Key, b.Violations)
	}
	hist, err := s.History(HistoryQuery{Limit: nBans})
	if err != nil {
		return err
	}
	for _, e := range hist {
		check("event "+e.Key, e.Violations)
	}
	top, err := s.TopKeys("flood", "requests", 5)
	if err != nil {
		return err
	}
	for _, k := range top {
		check("top key "+k.Key, int(k.Requests))
	}
	keys := 0
	if err := s.Keys(func(r *KeyRow) error {
		keys++
		check("key "+r.Key, int(r.Requests))
		if d, _ := strconv.Atoi(string(r.Data)); d != seq {
			check("data of "+r.Key, d)
		}
		return nil
	}); err != nil {
		return err
	}
	if keys != nKeys {
		errs = append(errs, fmt.Errorf("%d keys, want %d", keys, nKeys))
	}
	return errors.Join(errs...)
}
