package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/logjail/logjail/internal/testenv"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/state"
	"github.com/logjail/logjail/store"
)

// TestHintsChangeNothing: the batch loop's hints (pipeline.Pipeline.Prefetch
// for the next three entries, once the key table is large enough) change
// no decision. The same backlog (90,000 clients of 2001:db8::/32 once
// each, 300 of them five times within a second, so that "3 per 10s" bans
// them, and 30 banned ones coming back) is read by the daemon with the
// hints and without them (Options.plain): the same history (rule, key,
// kind, log time, violations, reason, applied or not) and the same key
// states, and the hints were on (the table was large enough to take them).
func TestHintsChangeNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 91,530 lines twice")
	}
	now := time.Now().UTC().Truncate(time.Second)
	var b strings.Builder
	at := func(i int) string {
		return now.Add(-10*time.Minute + time.Duration(i)*time.Millisecond).Format("02/Jan/2006:15:04:05 -0700")
	}
	n := 0
	line := func(addr string) {
		fmt.Fprintf(&b, "%s - - [%s] \"GET /h HTTP/1.1\" 200 1 \"-\" \"t\"\n", addr, at(n))
		n++
	}
	for i := range 90_000 {
		line(fmt.Sprintf("2001:db8:%x:%x::1", i>>16, i&0xffff))
		if i%300 == 7 {
			for range 5 {
				line(fmt.Sprintf("2001:db8:f00:%x::1", i/300))
			}
		}
	}
	for i := range 30 { // banned ones again, their bans still running
		line(fmt.Sprintf("2001:db8:f00:%x::1", i*10))
	}
	log := b.String()
	plain := hintsRun(t, log, true)
	hinted := hintsRun(t, log, false)
	if !hinted.prefetching {
		t.Fatalf("the hints were never on: the key table of %d keys is too small for detector.Prefetching", len(hinted.keys))
	}
	if len(plain.history) < 300 {
		t.Fatalf("%d decisions without the hints, want the 300 floods' bans at least", len(plain.history))
	}
	if !slices.Equal(plain.history, hinted.history) {
		t.Fatalf("the history differs: %d events without the hints, %d with\nwithout: %v\nwith:    %v", len(plain.history), len(hinted.history), first(plain.history), first(hinted.history))
	}
	if !slices.Equal(plain.keys, hinted.keys) {
		i := 0
		for i < min(len(plain.keys), len(hinted.keys)) && plain.keys[i] == hinted.keys[i] {
			i++
		}
		t.Fatalf("the key states differ: %d without the hints, %d with; the first that differs: %q, %q", len(plain.keys), len(hinted.keys), first(plain.keys[i:]), first(hinted.keys[i:]))
	}
	t.Logf("%d lines, %d decisions, %d key states", n, len(plain.history), len(plain.keys))
}

func first[T any](s []T) []T { return s[:min(len(s), 5)] }

type hintsResult struct {
	history     []string
	keys        []string
	prefetching bool
}

// hintsRun has the daemon read log from its start (plain: without the
// hints), stops it once it has read it all, and returns what it recorded.
func hintsRun(t *testing.T, log string, plain bool) hintsResult {
	t.Helper()
	dir := t.TempDir()
	stateDir := filepath.Join(dir, "state")
	logPath := filepath.Join(dir, "access.log")
	if err := os.WriteFile(logPath, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "logjail.yaml")
	cfg := fmt.Sprintf(`state_dir: %[1]s
control_socket: %[1]s/control.sock
metrics: ""
ipv6_prefix: 64
sources:
  - name: web
    paths: [%[2]s]
    format: combined
    from: start
rules:
  - name: flood
    limits: ["3 per 10s"]
    ban: {for: 2h}
`, stateDir, logPath)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs testenv.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	ctl := NewControl()
	go func() {
		done <- Run(ctx, Options{ConfigPath: cfgPath, Poll: true, Control: ctl, plain: plain,
			Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	}()
	var res hintsResult
	deadline := time.Now().Add(60 * time.Second)
	for {
		var off int64
		err := ctl.run(ctx, func(d *decider) error {
			if fg := d.guards[logPath]; fg != nil {
				off = fg.after.Offset
			}
			res.prefetching = res.prefetching || d.p.Prefetching()
			return nil
		})
		if err != nil {
			t.Fatalf("plain=%v: %v\n%s", plain, err, logs.String())
		}
		if off == int64(len(log)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("plain=%v: %d of %d bytes read after 60 s\n%s", plain, off, len(log), logs.String())
		}
		select {
		case err := <-done:
			t.Fatalf("plain=%v: Run returned early: %v\n%s", plain, err, logs.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("plain=%v: Run: %v\n%s", plain, err, logs.String())
	}
	res.history, res.keys = daemonResult(t, stateDir)
	return res
}

// daemonResult reads what a daemon left in stateDir's database: its
// history (each event's eventText) and its key states (each one's rule,
// key, counts, phase and last-seen time; not its Data: the stamps of its
// place in the LRU order are handed out by checkpoint, and a checkpoint's
// time is the wall clock's: decisionFlush, the interval), each sorted (the
// history's order among equal times is the store's).
func daemonResult(t *testing.T, stateDir string) (history, keys []string) {
	t.Helper()
	db, err := store.Open(filepath.Join(stateDir, "logjail.db"), store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	events, err := db.History(store.HistoryQuery{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		history = append(history, eventText(e))
	}
	slices.Sort(history)
	err = db.Keys(func(r *state.KeyRow) error {
		keys = append(keys, fmt.Sprintf("%s %s %d %d %s %s", r.Rule, r.Key, r.Requests, r.Blocked, r.Phase, r.LastSeen.UTC().Format(time.RFC3339Nano)))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	return history, keys
}

// eventText is what a decision says, without its wall-clock end.
func eventText(e state.Event) string {
	return fmt.Sprintf("%s %s %s %s %d %q %v", e.Time.UTC().Format(time.RFC3339Nano), e.Rule, e.Key, e.Kind, e.Violations, e.Reason, e.LogOnly)
}

// TestNewestAsMaps: decider.newest keeps d.last and each source's newest
// line as the two comparisons per line it replaced did, over random lines
// of three sources, with a restored d.last ahead of them at first.
func TestNewestAsMaps(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 11))
	srcs := []*rules.Source{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	t0 := time.Date(2026, 11, 26, 5, 0, 0, 0, time.UTC)
	for round := range 200 {
		d := newDecider(&Options{})
		d.last = t0.Add(time.Duration(rng.IntN(60)) * time.Second) // restored from a checkpoint
		last, lastLine := d.last, map[string]time.Time{}
		for range 300 {
			src := srcs[rng.IntN(len(srcs))]
			at := t0.Add(time.Duration(rng.IntN(120)) * time.Second)
			d.newest(src, at)
			if at.After(last) {
				last = at
			}
			if at.After(lastLine[src.Name]) {
				lastLine[src.Name] = at
			}
			if !d.last.Equal(last) || !maps.EqualFunc(d.lastLine, lastLine, time.Time.Equal) {
				t.Fatalf("round %d, a line of %s at %v: last %v, lastLine %v; want %v, %v", round, src.Name, at, d.last, d.lastLine, last, lastLine)
			}
		}
	}
}
