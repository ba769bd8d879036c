// Package statetest is the conformance suite of package state: Run checks
// that an implementation of state.Store keeps the guarantees state's
// package documentation lists. store's TestConformance runs it against
// SQLite; a second backend runs it against its own Opener.
//
// What it checks: round trips of every value type (times to the
// millisecond, in UTC; addresses of both families; empty and absent
// values); that a checkpoint is all or nothing (one with a bad row leaves
// nothing of its other rows); the order of the history and every field of
// a HistoryQuery; the active bans, their counts and those ended at a time;
// Prune (idle keys, held keys, keys banned within KeepBannedSince, old
// history); the offsets per path with the file's identity; readers opened
// beside a writer seeing whole checkpoints only, alone and in View; the
// one-writer lock and a reader's ErrReadOnly; and crash-exactness: a child
// process (the test binary run again, selected by an environment
// variable, as checkpoint's TestCrashRecovery does) checkpoints in a loop
// and is killed with SIGKILL at random points, and the state opened again
// is exactly the one of a checkpoint the child committed, or of the one it
// was committing, never a mix, for several kills.
//
// Read, the suite's reader of everything a state holds, serves other
// packages' tests too.
//
// Boundaries: It owns the suite. It must not know any implementation:
// it sees them through the Opener and state's interfaces only.
package statetest

import (
	"bufio"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/logjail/logjail/state"
)

// Opener opens the state kept in the directory dir: a writer, which
// creates it when needed, or, with readOnly, a reader of a state a writer
// created, which may be open beside that writer.
type Opener func(dir string, readOnly bool) (state.Store, error)

// crashEnv names the directory of the crash child's state; set, Run
// runs the child's loop instead of the suite.
const crashEnv = "LOGJAIL_STATETEST_CRASH_DIR"

// commitLine prefixes the lines the crash child writes on its standard
// output after each checkpoint it committed.
const commitLine = "statetest committed "

// Run runs the conformance suite against the states open makes, each in a
// directory of its own. It must be called from a test that runs nothing
// else, as the crash test runs that test again in a child process.
func Run(t *testing.T, open Opener) {
	if dir := os.Getenv(crashEnv); dir != "" {
		crashChild(t, open, dir)
		return
	}
	t.Run("empty", func(t *testing.T) { testEmpty(t, open) })
	t.Run("round-trip", func(t *testing.T) { testRoundTrip(t, open) })
	t.Run("all-or-nothing", func(t *testing.T) { testAtomic(t, open) })
	t.Run("history", func(t *testing.T) { testHistory(t, open) })
	t.Run("bans", func(t *testing.T) { testBans(t, open) })
	t.Run("prune", func(t *testing.T) { testPrune(t, open) })
	t.Run("offsets", func(t *testing.T) { testOffsets(t, open) })
	t.Run("one-writer", func(t *testing.T) { testOneWriter(t, open) })
	t.Run("readers", func(t *testing.T) { testReaders(t, open) })
	top := t.Name()
	t.Run("crash", func(t *testing.T) { testCrash(t, open, top) })
}

var cmpOpts = cmp.Options{cmpopts.EquateComparable(netip.Addr{}), cmpopts.EquateEmpty()}

// t0 is the suite's log time: whole milliseconds, in a zone that is not
// UTC (times come back in UTC, the same instants).
var t0 = time.Date(2026, 11, 22, 10, 0, 0, 250e6, time.FixedZone("CET", 3600))

func sec(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }

func mustOpen(t testing.TB, open Opener, dir string, readOnly bool) state.Store {
	t.Helper()
	s, err := open(dir, readOnly)
	if err != nil {
		t.Fatalf("open %s (read-only %v): %v", dir, readOnly, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func checkpoint(t testing.TB, s state.CheckpointSink, c *state.Checkpoint) {
	t.Helper()
	if err := s.Checkpoint(c); err != nil {
		t.Fatalf("checkpoint at %v: %v", c.Time, err)
	}
}

// Contents is everything a state says, read back through the interfaces
// (Read).
type Contents struct {
	Global    []byte
	Time      time.Time
	Keys      []state.KeyRow
	Bans      []state.Ban
	History   []state.Event
	Positions []state.Position
	Meta      map[string]string
}

// read reads everything r holds, with the meta values of keys.
func read(r state.Reader, keys ...string) (Contents, error) {
	var c Contents
	var err error
	if c.Global, c.Time, err = r.Global(); err != nil {
		return c, fmt.Errorf("Global: %w", err)
	}
	err = r.Keys(func(k *state.KeyRow) error {
		row := *k
		row.Data = slices.Clone(k.Data)
		c.Keys = append(c.Keys, row)
		return nil
	})
	if err != nil {
		return c, fmt.Errorf("Keys: %w", err)
	}
	if c.Bans, err = r.ActiveBans(); err != nil {
		return c, fmt.Errorf("ActiveBans: %w", err)
	}
	if c.History, err = r.History(state.HistoryQuery{}); err != nil {
		return c, fmt.Errorf("History: %w", err)
	}
	if c.Positions, err = r.Positions(); err != nil {
		return c, fmt.Errorf("Positions: %w", err)
	}
	c.Meta = map[string]string{}
	for _, k := range keys {
		v, ok, err := r.Meta(k)
		if err != nil {
			return c, fmt.Errorf("Meta %q: %w", k, err)
		}
		if ok {
			c.Meta[k] = v
		}
	}
	return c, nil
}

// Read reads everything r holds, with the meta values of keys, and fails
// t on an error: the suite's reader, and other packages' tests' (cmd's
// replay --db tests compare two databases through it).
func Read(t testing.TB, r state.Reader, keys ...string) Contents {
	t.Helper()
	c, err := read(r, keys...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func diff(t testing.TB, what string, want, got any) {
	t.Helper()
	if d := cmp.Diff(want, got, cmpOpts); d != "" {
		t.Errorf("%s (-want +got):\n%s", what, d)
	}
}

func testEmpty(t *testing.T, open Opener) {
	s := mustOpen(t, open, t.TempDir(), false)
	c := Read(t, s, "absent")
	if c.Global != nil || !c.Time.IsZero() {
		t.Errorf("Global of a new state = %q, %v; want nil and the zero time", c.Global, c.Time)
	}
	diff(t, "a new state", Contents{Meta: map[string]string{}}, c)
	if n, err := s.CountActiveBans(); err != nil || n != 0 {
		t.Errorf("CountActiveBans = %d, %v; want 0", n, err)
	}
}

var (
	v4 = netip.MustParseAddr("203.0.113.7")
	v6 = netip.MustParseAddr("2001:db8::1")
)

func testRoundTrip(t *testing.T, open Opener) {
	dir := t.TempDir()
	s := mustOpen(t, open, dir, false)
	keyA := state.KeyRow{Rule: "flood", Key: "203.0.113.7", Data: []byte("state A"), LastSeen: sec(1),
		Requests: 120, Blocked: 3, CPU: 1.5, Phase: state.PhaseThrottle, Until: sec(10)}
	keyB := state.KeyRow{Rule: "flood", Key: "2001:db8::/64", Data: []byte{0, 1, 2, 255}, LastSeen: sec(2), Requests: 1}
	keyC := state.KeyRow{Rule: "cpu", Key: "range:bots", Data: []byte{}} // never seen: no LastSeen
	ban := state.Ban{Rule: "flood", Key: "2001:db8::/64", Kind: state.PhaseBan, Since: sec(2), Until: sec(62),
		Reason: "rate 31 per 10s > 30 (rule flood)", Violations: 4, Addresses: []netip.Addr{v6, netip.MustParseAddr("2001:db8::2")},
		Origin: state.OriginDetector, Node: "web2"}
	forever := state.Ban{Rule: "operator", Key: "198.51.100.0/24", Kind: state.PhaseBan, Since: sec(3),
		Reason: "by hand", Origin: state.OriginOperator, Who: "root", LogOnly: true, Node: "web1"}
	throttle := state.Ban{Rule: "flood", Key: "203.0.113.7", Kind: state.PhaseThrottle, Since: sec(1), Until: sec(10),
		Reason: "throttled", Addresses: []netip.Addr{v4}, Origin: state.OriginDetector}
	ev := func(b state.Ban) state.Event {
		return state.Event{Time: b.Since, Rule: b.Rule, Key: b.Key, Kind: b.Kind, Until: b.Until, Reason: b.Reason,
			Violations: b.Violations, Addresses: b.Addresses, Origin: b.Origin, Who: b.Who, LogOnly: b.LogOnly, Node: b.Node}
	}
	forget := state.Event{Time: sec(4), Rule: "flood", Key: "203.0.113.9", Kind: state.KindForget, Origin: state.OriginOperator, Who: "alice", Node: "web3"}
	trip := state.Event{Time: sec(5), Key: "breaker", Kind: state.KindBreakerTrip, Reason: "101 bans in a minute", Origin: state.OriginDetector}
	pos := state.Position{Path: "/var/log/nginx/access.log", Dev: 1<<63 + 5, Inode: 1<<64 - 1, Offset: 4096, Line: 30,
		HeadHash: "ab12", Size: 8192}
	checkpoint(t, s, &state.Checkpoint{
		Time: sec(5), Global: []byte("global 1"),
		Keys:      []state.KeyRow{keyA, keyB, keyC},
		Events:    []state.Event{ev(throttle), ev(ban), ev(forever), forget, trip},
		SetBans:   []state.Ban{ban, forever, throttle},
		Positions: []state.Position{pos, {Path: "/var/log/other.log"}},
		Meta:      map[string]string{"guard /var/log/nginx/access.log": "2026-11-22T09:00:00Z", "empty": ""},
	})
	want := Contents{
		Global: []byte("global 1"), Time: sec(5),
		Keys:      []state.KeyRow{keyC, keyB, keyA},
		Bans:      []state.Ban{ban, throttle, forever},
		History:   []state.Event{trip, forget, ev(forever), ev(ban), ev(throttle)},
		Positions: []state.Position{pos, {Path: "/var/log/other.log"}},
		Meta:      map[string]string{"guard /var/log/nginx/access.log": "2026-11-22T09:00:00Z", "empty": ""},
	}
	metaKeys := []string{"guard /var/log/nginx/access.log", "empty", "absent"}
	got := Read(t, s, metaKeys...)
	diff(t, "after the first checkpoint", want, got)
	if got.Time.Location() != time.UTC {
		t.Errorf("times come back in %v, want UTC", got.Time.Location())
	}
	var each []state.Ban
	if err := s.EachActiveBan(func(b *state.Ban) error { each = append(each, *b); return nil }); err != nil {
		t.Fatal(err)
	}
	diff(t, "EachActiveBan", want.Bans, each)
	errStop := errors.New("stop")
	n := 0
	if err := s.EachActiveBan(func(*state.Ban) error { n++; return errStop }); err != errStop || n != 1 {
		t.Errorf("EachActiveBan stopped by its function: %d calls, %v; want 1, the function's error", n, err)
	}
	if err := s.Keys(func(*state.KeyRow) error { return errStop }); err != errStop {
		t.Errorf("Keys stopped by its function: %v; want the function's error", err)
	}
	counts, err := s.BanCounts()
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "BanCounts", []state.BanCount{{Rule: "flood", Kind: state.PhaseBan, N: 1},
		{Rule: "flood", Kind: state.PhaseThrottle, N: 1}, {Rule: "operator", Kind: state.PhaseBan, N: 1}}, counts)
	byKind, err := s.CountActiveBansByKind()
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "CountActiveBansByKind", map[string]int{state.PhaseBan: 2, state.PhaseThrottle: 1}, byKind)

	// The second checkpoint: a key deleted, one rewritten twice (the last
	// mention wins), a ban replaced by a later one and one set then
	// deleted in the same checkpoint, a position moved, Global replaced
	// by none (which is still a checkpoint).
	keyA2 := keyA
	keyA2.Data, keyA2.Requests, keyA2.Phase, keyA2.Until = []byte("state A2"), 130, state.PhaseAllowed, time.Time{}
	keyA3 := keyA2
	keyA3.Data = []byte("state A3")
	ban2 := ban
	ban2.Until, ban2.Reason, ban2.Violations, ban2.Addresses = sec(120), "again", 5, nil
	pos2 := pos
	pos2.Offset, pos2.Line, pos2.Inode, pos2.HeadHash = 10, 1, 42, "cd34"
	checkpoint(t, s, &state.Checkpoint{
		Time:      sec(7),
		Keys:      []state.KeyRow{{Rule: keyB.Rule, Key: keyB.Key}, keyA2, keyA3},
		SetBans:   []state.Ban{ban2, {Rule: "x", Key: "y", Kind: state.PhaseBan}},
		DelBans:   []state.BanKey{{Rule: "flood", Key: "203.0.113.7"}, {Rule: "x", Key: "y"}, {Rule: "none", Key: "such"}},
		Positions: []state.Position{pos2},
		Meta:      map[string]string{"empty": "now set"},
	})
	want.Global, want.Time = []byte{}, sec(7)
	want.Keys = []state.KeyRow{keyC, keyA3}
	want.Bans = []state.Ban{ban2, forever}
	want.Positions = []state.Position{pos2, {Path: "/var/log/other.log"}}
	want.Meta["empty"] = "now set"
	got = Read(t, s, metaKeys...)
	if got.Global == nil {
		t.Errorf("Global after a checkpoint with none = nil, want empty: a checkpoint was written")
	}
	diff(t, "after the second checkpoint", want, got)

	// And the same from a fresh open, writer then reader.
	s.Close()
	s = mustOpen(t, open, dir, false)
	diff(t, "reopened", want, Read(t, s, metaKeys...))
	r := mustOpen(t, open, dir, true)
	diff(t, "read-only", want, Read(t, r, metaKeys...))
}

func testAtomic(t *testing.T, open Opener) {
	s := mustOpen(t, open, t.TempDir(), false)
	good := state.KeyRow{Rule: "flood", Key: "203.0.113.1", Data: []byte("1"), LastSeen: sec(1)}
	goodBan := state.Ban{Rule: "flood", Key: "203.0.113.1", Kind: state.PhaseBan, Since: sec(1), Until: sec(9)}
	checkpoint(t, s, &state.Checkpoint{Time: sec(1), Global: []byte("g1"), Keys: []state.KeyRow{good},
		SetBans: []state.Ban{goodBan}, Events: []state.Event{{Time: sec(1), Rule: "flood", Key: "203.0.113.1", Kind: state.KindBan}},
		Positions: []state.Position{{Path: "/a", Offset: 10}}, Meta: map[string]string{"m": "1"}})
	before := Read(t, s, "m")
	// Each checkpoint changes every kind of row, then has one bad row.
	full := func() *state.Checkpoint {
		return &state.Checkpoint{Time: sec(2), Global: []byte("g2"),
			Keys:      []state.KeyRow{{Rule: "flood", Key: "203.0.113.2", Data: []byte("2")}, {Rule: "flood", Key: "203.0.113.1"}},
			Events:    []state.Event{{Time: sec(2), Rule: "flood", Key: "203.0.113.2", Kind: state.KindBan}},
			SetBans:   []state.Ban{{Rule: "flood", Key: "203.0.113.2", Kind: state.PhaseBan, Since: sec(2)}},
			DelBans:   []state.BanKey{{Rule: "flood", Key: "203.0.113.1"}},
			Positions: []state.Position{{Path: "/a", Offset: 20}, {Path: "/b", Offset: 5}},
			Meta:      map[string]string{"m": "2"}}
	}
	for _, bad := range []struct {
		name string
		edit func(c *state.Checkpoint)
	}{
		{"a key without a rule", func(c *state.Checkpoint) { c.Keys = append(c.Keys, state.KeyRow{Key: "k", Data: []byte("x")}) }},
		{"a key without a key", func(c *state.Checkpoint) { c.Keys = append(c.Keys, state.KeyRow{Rule: "r", Data: []byte("x")}) }},
		{"an event without a kind", func(c *state.Checkpoint) { c.Events = append(c.Events, state.Event{Rule: "r", Key: "k"}) }},
		{"a ban of no kind", func(c *state.Checkpoint) {
			c.SetBans = append(c.SetBans, state.Ban{Rule: "r", Key: "k", Kind: "unban"})
		}},
		{"a ban without a key", func(c *state.Checkpoint) { c.SetBans = append(c.SetBans, state.Ban{Rule: "r", Kind: state.PhaseBan}) }},
		{"a position without a path", func(c *state.Checkpoint) { c.Positions = append(c.Positions, state.Position{Offset: 1}) }},
	} {
		c := full()
		bad.edit(c)
		if err := s.Checkpoint(c); err == nil {
			t.Errorf("a checkpoint with %s: no error", bad.name)
			continue
		}
		diff(t, "after a checkpoint with "+bad.name, before, Read(t, s, "m"))
	}
	// The same rows without the bad one are written whole.
	checkpoint(t, s, full())
	got := Read(t, s, "m")
	if string(got.Global) != "g2" || len(got.Keys) != 1 || len(got.Bans) != 1 || len(got.History) != 2 ||
		len(got.Positions) != 2 || got.Meta["m"] != "2" {
		t.Errorf("the good checkpoint after the bad ones: %+v", got)
	}
}

func testHistory(t *testing.T, open Opener) {
	s := mustOpen(t, open, t.TempDir(), false)
	e := func(at int, rule, key, kind, reason string) state.Event {
		return state.Event{Time: sec(at), Rule: rule, Key: key, Kind: kind, Reason: reason, Origin: state.OriginDetector}
	}
	// Written in three checkpoints, with ties within one second and
	// across checkpoints, and a log time older than the one before it.
	w := [][]state.Event{
		{e(1, "flood", "203.0.113.1", state.KindThrottle, "a"), e(2, "flood", "203.0.113.1", state.KindBan, "b"),
			e(2, "cpu", "203.0.113.2", state.KindBan, "c")},
		{e(2, "flood", "203.0.113.2", state.KindBan, "d"), e(1, "cpu", "203.0.113.1", state.KindBan, "e")},
		{e(3, "flood", "203.0.113.1", state.KindUnban, "f"), e(4, "", "breaker", state.KindBreakerReset, "g")},
	}
	for i, es := range w {
		checkpoint(t, s, &state.Checkpoint{Time: sec(10 + i), Events: es})
	}
	reasons := func(es []state.Event) string {
		var b strings.Builder
		for _, e := range es {
			b.WriteString(e.Reason)
		}
		return b.String()
	}
	for _, c := range []struct {
		q    state.HistoryQuery
		want string // reasons, newest first
	}{
		{state.HistoryQuery{}, "gfdcbea"},
		{state.HistoryQuery{Key: "203.0.113.1"}, "fbea"},
		{state.HistoryQuery{Rule: "cpu"}, "ce"},
		{state.HistoryQuery{Kind: state.KindBan}, "dcbe"},
		{state.HistoryQuery{Key: "203.0.113.1", Kind: state.KindBan, Rule: "flood"}, "b"},
		{state.HistoryQuery{Since: sec(2)}, "gfdcb"},
		{state.HistoryQuery{Until: sec(2)}, "ea"},
		{state.HistoryQuery{Since: sec(2), Until: sec(3)}, "dcb"},
		{state.HistoryQuery{Limit: 3}, "gfd"},
		{state.HistoryQuery{Key: "breaker", Kind: state.KindBreakerReset, Limit: 1}, "g"},
		{state.HistoryQuery{Key: "198.51.100.1"}, ""},
	} {
		es, err := s.History(c.q)
		if err != nil {
			t.Fatalf("History(%+v): %v", c.q, err)
		}
		if got := reasons(es); got != c.want {
			t.Errorf("History(%+v) = %q, want %q (newest first, ties newest written first)", c.q, got, c.want)
		}
	}
}

func testBans(t *testing.T, open Opener) {
	s := mustOpen(t, open, t.TempDir(), false)
	b := func(rule, key, kind string, until time.Time) state.Ban {
		return state.Ban{Rule: rule, Key: key, Kind: kind, Since: sec(0), Until: until, Origin: state.OriginDetector}
	}
	bans := []state.Ban{
		b("flood", "203.0.113.3", state.PhaseBan, sec(30)),
		b("flood", "203.0.113.1", state.PhaseThrottle, sec(10)),
		b("cpu", "203.0.113.1", state.PhaseBan, sec(20)),
		b("deny", "198.51.100.9", state.PhaseBan, time.Time{}), // until lifted
		b("cpu", "203.0.113.2", state.PhaseBan, sec(20)),
	}
	checkpoint(t, s, &state.Checkpoint{Time: sec(1), SetBans: bans})
	active, err := s.ActiveBans()
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "ActiveBans, by rule and key", []state.Ban{bans[2], bans[4], bans[3], bans[1], bans[0]}, active)
	for _, c := range []struct {
		at   time.Time
		want []state.Ban
	}{
		{sec(9), nil},
		{sec(10), []state.Ban{bans[1]}}, // until is inclusive
		{sec(25), []state.Ban{bans[1], bans[2], bans[4]}},
		{sec(1e6), []state.Ban{bans[1], bans[2], bans[4], bans[0]}}, // never one without an until
	} {
		ended, err := s.EndedBans(c.at)
		if err != nil {
			t.Fatal(err)
		}
		diff(t, fmt.Sprintf("EndedBans at %v, the soonest first", c.at), c.want, ended)
	}
	if n, err := s.CountActiveBans(); err != nil || n != 5 {
		t.Errorf("CountActiveBans = %d, %v; want 5", n, err)
	}
}

func testPrune(t *testing.T, open Opener) {
	s := mustOpen(t, open, t.TempDir(), false)
	k := func(key string, seen time.Time, phase string, until time.Time) state.KeyRow {
		return state.KeyRow{Rule: "flood", Key: key, Data: []byte(key), LastSeen: seen, Phase: phase, Until: until}
	}
	now := sec(1000)
	keys := []state.KeyRow{
		k("idle", sec(10), "", time.Time{}),                        // pruned
		k("never-seen", time.Time{}, "", time.Time{}),              // pruned
		k("recent", sec(900), "", time.Time{}),                     // kept: seen after KeysBefore
		k("throttled", sec(10), state.PhaseThrottle, sec(2000)),    // kept: its phase holds
		k("throttle-over", sec(10), state.PhaseThrottle, sec(500)), // pruned: its phase ended
		k("banned-forever", sec(10), state.PhaseBan, time.Time{}),  // kept
		k("held-by-ban", sec(10), "", time.Time{}),                 // kept: an active ban holds it
		k("banned-lately", sec(10), "", time.Time{}),               // kept: banned since KeepBannedSince
		k("banned-long-ago", sec(10), "", time.Time{}),             // pruned
	}
	checkpoint(t, s, &state.Checkpoint{Time: sec(10), Keys: keys,
		SetBans: []state.Ban{{Rule: "flood", Key: "held-by-ban", Kind: state.PhaseBan, Since: sec(10), Until: sec(5000)}},
		Events: []state.Event{
			{Time: sec(5), Rule: "flood", Key: "banned-long-ago", Kind: state.KindBan, Reason: "old"},
			{Time: sec(800), Rule: "flood", Key: "banned-lately", Kind: state.KindBan, Reason: "late"},
			{Time: sec(801), Rule: "flood", Key: "banned-lately", Kind: state.KindUnban, Reason: "late unban"},
		}})
	st, err := s.Prune(now, state.PruneOptions{KeysBefore: sec(100), KeepBannedSince: sec(700), HistoryBefore: sec(700)})
	if err != nil {
		t.Fatal(err)
	}
	if st.Keys != 4 || st.History != 1 {
		t.Errorf("Prune deleted %d keys and %d events, want 4 and 1", st.Keys, st.History)
	}
	got := Read(t, s)
	var left []string
	for _, r := range got.Keys {
		left = append(left, r.Key)
	}
	diff(t, "the keys Prune kept", []string{"banned-forever", "banned-lately", "held-by-ban", "recent", "throttled"}, left)
	if len(got.History) != 2 || got.History[1].Reason != "late" {
		t.Errorf("history after Prune: %+v; want the two events at or after HistoryBefore", got.History)
	}
	// Zero options delete nothing.
	if st, err := s.Prune(now, state.PruneOptions{}); err != nil || st.Keys != 0 || st.History != 0 {
		t.Errorf("Prune with zero options: %+v, %v; want nothing deleted", st, err)
	}
	if _, err := s.TruncateWAL(); err != nil {
		t.Errorf("TruncateWAL: %v", err)
	}
}

func testOffsets(t *testing.T, open Opener) {
	dir := t.TempDir()
	s := mustOpen(t, open, dir, false)
	a := state.Position{Path: "/var/log/a.log", Dev: 2049, Inode: 7, Offset: 100, Line: 2, HeadHash: "h1", Size: 100}
	b := state.Position{Path: "/var/log/b.log", Dev: 2049, Inode: 8, Offset: 50, Line: 1, HeadHash: "h2", Size: 80}
	checkpoint(t, s, &state.Checkpoint{Time: sec(1), Positions: []state.Position{b, a}})
	// The file at a's path was rotated: a new identity, read from its start.
	a2 := state.Position{Path: a.Path, Dev: 2049, Inode: 9, Offset: 30, Line: 1, HeadHash: "h3", Size: 30}
	checkpoint(t, s, &state.Checkpoint{Time: sec(2), Positions: []state.Position{a2}})
	s.Close()
	s = mustOpen(t, open, dir, false)
	ps, err := s.Positions()
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "positions by path, each with the identity of its last checkpoint", []state.Position{a2, b}, ps)
	if len(ps) == 2 && ps[0].File() != a2.File() {
		t.Errorf("File() of the position read back = %+v, want %+v", ps[0].File(), a2.File())
	}
}

func testOneWriter(t *testing.T, open Opener) {
	dir := t.TempDir()
	w := mustOpen(t, open, dir, false)
	if s, err := open(dir, false); !errors.Is(err, state.ErrLocked) {
		if err == nil {
			s.Close()
		}
		t.Errorf("a second writer: %v; want an error wrapping state.ErrLocked", err)
	}
	checkpoint(t, w, &state.Checkpoint{Time: sec(1)})
	r := mustOpen(t, open, dir, true)
	if err := r.Checkpoint(&state.Checkpoint{Time: sec(2)}); !errors.Is(err, state.ErrReadOnly) {
		t.Errorf("Checkpoint of a reader: %v; want state.ErrReadOnly", err)
	}
	if _, err := r.Prune(sec(2), state.PruneOptions{HistoryBefore: sec(2)}); !errors.Is(err, state.ErrReadOnly) {
		t.Errorf("Prune of a reader: %v; want state.ErrReadOnly", err)
	}
	w.Close()
	if err := w.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	// Closed, the writer has let the lock go.
	mustOpen(t, open, dir, false)
}

// seqCheckpoint is the n-th checkpoint of the readers' and the crash
// test's sequences: every row it writes says n, so that a reader can tell
// a whole checkpoint from a mix. It rewrites keys of 1000 (a window of
// 300 that moves with n) and deletes one, sets a ban of 50 and lifts
// another, appends three events, moves one file's offset (its identity
// changes every 10 checkpoints, as by rotation) and another's every third
// checkpoint.
func seqCheckpoint(n int) *state.Checkpoint {
	tag := strconv.Itoa(n)
	c := &state.Checkpoint{Time: sec(n), Global: []byte("global " + tag), Meta: map[string]string{"seq": tag}}
	data := []byte(strings.Repeat(tag+" ", 150/(len(tag)+1)+1))
	for i := range 300 {
		c.Keys = append(c.Keys, state.KeyRow{Rule: "flood", Key: fmt.Sprintf("k%03d", (n*37+i)%1000), Data: data,
			LastSeen: sec(n), Requests: int64(n), CPU: float64(n) / 8, Phase: state.PhaseAllowed})
	}
	c.Keys = append(c.Keys, state.KeyRow{Rule: "flood", Key: fmt.Sprintf("k%03d", (n*53)%1000)})
	for j := range 3 {
		c.Events = append(c.Events, state.Event{Time: sec(n), Rule: "flood", Key: fmt.Sprintf("k%03d", (n+j)%1000),
			Kind: state.KindBan, Until: sec(n + 60), Reason: tag, Violations: j, Addresses: []netip.Addr{v4}, Origin: state.OriginDetector,
			Node: "node " + tag})
	}
	c.SetBans = []state.Ban{{Rule: "flood", Key: fmt.Sprintf("b%02d", n%50), Kind: state.PhaseBan, Since: sec(n),
		Until: sec(n + 60), Reason: tag, Origin: state.OriginDetector, Node: "node " + tag}}
	c.DelBans = []state.BanKey{{Rule: "flood", Key: fmt.Sprintf("b%02d", (n*7)%50)}}
	c.Positions = []state.Position{{Path: "/var/log/a.log", Dev: 1, Inode: uint64(n / 10), Offset: int64(n) * 100,
		Line: int64(n), HeadHash: "h" + strconv.Itoa(n/10), Size: int64(n) * 100}}
	if n%3 == 0 {
		c.Positions = append(c.Positions, state.Position{Path: "/var/log/b.log", Dev: 1, Inode: 1, Offset: int64(n), Line: int64(n / 3), Size: int64(n)})
	}
	return c
}

// model is what a state holds after seqCheckpoint(1) … seqCheckpoint(n),
// as the guarantees say it (state's package documentation).
func model(n int) Contents {
	keys := map[string]state.KeyRow{}
	bans := map[string]state.Ban{}
	pos := map[string]state.Position{}
	var c Contents
	c.Meta = map[string]string{}
	for i := 1; i <= n; i++ {
		ck := seqCheckpoint(i)
		c.Global, c.Time = ck.Global, ck.Time
		for _, k := range ck.Keys {
			if k.Data == nil {
				delete(keys, k.Key)
			} else {
				keys[k.Key] = k
			}
		}
		c.History = append(c.History, ck.Events...)
		for _, b := range ck.SetBans {
			bans[b.Key] = b
		}
		for _, k := range ck.DelBans {
			delete(bans, k.Key)
		}
		for _, p := range ck.Positions {
			pos[p.Path] = p
		}
		c.Meta["seq"] = ck.Meta["seq"]
	}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		c.Keys = append(c.Keys, keys[k])
	}
	for _, k := range slices.Sorted(maps.Keys(bans)) {
		c.Bans = append(c.Bans, bans[k])
	}
	for _, k := range slices.Sorted(maps.Keys(pos)) {
		c.Positions = append(c.Positions, pos[k])
	}
	slices.Reverse(c.History) // newest first: each checkpoint's time is later
	return c
}

// seqOf is the checkpoint number a state says it holds (0: none).
func seqOf(c Contents) (int, error) {
	if c.Global == nil {
		return 0, nil
	}
	n, err := strconv.Atoi(strings.TrimPrefix(string(c.Global), "global "))
	if err != nil {
		return 0, fmt.Errorf("global %q: not one of the sequence's", c.Global)
	}
	return n, nil
}

// whole checks that c is the state after some checkpoint of the sequence
// and returns its number.
func whole(c Contents) (int, error) {
	n, err := seqOf(c)
	if err != nil {
		return 0, err
	}
	if want := model(n); canon(want) != canon(c) {
		return n, fmt.Errorf("not the state after checkpoint %d (-want +got):\n%s", n, cmp.Diff(want, c, cmpOpts))
	}
	return n, nil
}

// canon writes c out with times as instants and empty as absent: equal
// for equal Contents, and two orders of magnitude faster than cmp.Equal
// on a thousand rows.
func canon(c Contents) string {
	var b strings.Builder
	ms := func(t time.Time) int64 {
		if t.IsZero() {
			return 0
		}
		return t.UnixMilli()
	}
	fmt.Fprintf(&b, "global %x %d\n", c.Global, ms(c.Time))
	for _, k := range c.Keys {
		fmt.Fprintf(&b, "key %q %q %x %d %d %d %v %q %d\n", k.Rule, k.Key, k.Data, ms(k.LastSeen), k.Requests, k.Blocked, k.CPU, k.Phase, ms(k.Until))
	}
	for _, x := range c.Bans {
		fmt.Fprintf(&b, "ban %q %q %q %d %d %q %d %v %q %q %v %q\n", x.Rule, x.Key, x.Kind, ms(x.Since), ms(x.Until), x.Reason, x.Violations, x.Addresses, x.Origin, x.Who, x.LogOnly, x.Node)
	}
	for _, e := range c.History {
		fmt.Fprintf(&b, "event %d %q %q %q %d %q %d %v %q %q %v %q\n", ms(e.Time), e.Rule, e.Key, e.Kind, ms(e.Until), e.Reason, e.Violations, e.Addresses, e.Origin, e.Who, e.LogOnly, e.Node)
	}
	for _, p := range c.Positions {
		fmt.Fprintf(&b, "position %+v\n", p)
	}
	for _, k := range slices.Sorted(maps.Keys(c.Meta)) {
		fmt.Fprintf(&b, "meta %q %q\n", k, c.Meta[k])
	}
	return b.String()
}

// testReaders reads, alone and in View, from readers opened beside a
// writer that checkpoints the sequence: each read sees one whole
// checkpoint.
func testReaders(t *testing.T, open Opener) {
	dir := t.TempDir()
	w := mustOpen(t, open, dir, false)
	checkpoint(t, w, seqCheckpoint(1))
	stop := make(chan struct{}) // closed when the test fails
	type result struct {
		last int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		n := 1
		for n < 200 {
			select {
			case <-stop:
				done <- result{last: n}
				return
			default:
			}
			if err := w.Checkpoint(seqCheckpoint(n + 1)); err != nil {
				done <- result{last: n, err: err}
				return
			}
			n++
		}
		done <- result{last: n}
	}()
	readers := []state.Store{mustOpen(t, open, dir, true), mustOpen(t, open, dir, true)}
	seen := map[int]bool{}
	var res result
	views := 0
	for writing := true; writing || views < 10; views++ {
		select {
		case res = <-done:
			writing = false
		default:
		}
		r := readers[views%len(readers)]
		err := r.View(func(v state.Reader) error {
			c, err := read(v, "seq")
			if err != nil {
				return err
			}
			n, err := whole(c)
			seen[n] = true
			return err
		})
		if err != nil {
			close(stop)
			t.Fatalf("a View beside the writer: %v", err)
		}
		// A read method alone sees one whole checkpoint too: the bans of
		// checkpoint n, the newest of which checkpoint n set.
		bans, err := r.ActiveBans()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, b := range bans {
			i, _ := strconv.Atoi(b.Reason)
			n = max(n, i)
		}
		if want := model(n).Bans; canon(Contents{Bans: want}) != canon(Contents{Bans: bans}) {
			diff(t, fmt.Sprintf("ActiveBans beside the writer (checkpoint %d)", n), want, bans)
		}
	}
	if res.err != nil {
		t.Fatalf("the writer: %v", res.err)
	}
	t.Logf("%d views saw %d checkpoints of the %d the writer wrote meanwhile", views, len(seen), res.last)
	if len(seen) < 3 {
		t.Fatalf("the views saw %d checkpoints: the test proved too little", len(seen))
	}
	got := Read(t, readers[0], "seq")
	if n, err := whole(got); err != nil || n != res.last {
		t.Fatalf("after the writer: checkpoint %d, %v; want %d", n, err, res.last)
	}
}

// crashChild is the process testCrash kills: it opens the writer in dir,
// reads which checkpoint of the sequence the state holds, and writes the
// next ones, saying on its standard output after each that it committed
// it, until it is killed (or its output is closed, or 100000 are written).
func crashChild(t *testing.T, open Opener, dir string) {
	s, err := open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g, _, err := s.Global()
	if err != nil {
		t.Fatal(err)
	}
	n, err := seqOf(Contents{Global: g})
	if err != nil {
		t.Fatal(err)
	}
	for n++; n < 100_000; n++ {
		if err := s.Checkpoint(seqCheckpoint(n)); err != nil {
			t.Fatal(err)
		}
		if _, err := fmt.Fprintf(os.Stdout, "%s%d\n", commitLine, n); err != nil {
			return
		}
	}
}

// testCrash kills a child that checkpoints in a loop, at random points,
// and checks after each kill that the state is the one of a checkpoint the
// child committed, or of the one it was committing when killed: never a
// mix, and never one before the last it said it committed.
func testCrash(t *testing.T, open Opener, top string) {
	if testing.Short() {
		t.Skip("the crash test runs child processes")
	}
	dir := t.TempDir()
	var pattern []string
	for _, part := range strings.Split(top, "/") {
		pattern = append(pattern, "^"+regexp.QuoteMeta(part)+"$")
	}
	r := rand.New(rand.NewPCG(19, uint64(time.Now().UnixNano())))
	const kills = 8
	committed, mid := 0, 0
	for kill := range kills {
		cmd := exec.Command(os.Args[0], "-test.run="+strings.Join(pattern, "/"), "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnv+"="+dir)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		commits := make(chan int)
		go func() {
			defer close(commits)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if n, ok := strings.CutPrefix(sc.Text(), commitLine); ok {
					if i, err := strconv.Atoi(n); err == nil {
						commits <- i
					}
				}
			}
		}()
		// Kill after a random number of commits (from 1: past the
		// child's start), a random time into the checkpoint after it.
		after := 1 + r.IntN(40)
		delay := time.Duration(r.IntN(4000)) * time.Microsecond
		timeout := time.After(time.Minute)
		last := committed
	wait:
		for seen := 0; seen < after; {
			select {
			case n, ok := <-commits:
				if !ok {
					t.Fatalf("kill %d: the child ended before it was killed:\n%s", kill, stderr.String())
				}
				last, seen = n, seen+1
			case <-timeout:
				break wait
			}
		}
		select {
		case n, ok := <-commits:
			if ok {
				last = n
			}
		case <-time.After(delay):
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		for n := range commits { // what it said before it died
			last = n
		}
		cmd.Wait()

		s, err := open(dir, false)
		if err != nil {
			t.Fatalf("kill %d: reopening: %v", kill, err)
		}
		got, err := read(s, "seq")
		s.Close()
		if err != nil {
			t.Fatalf("kill %d: reading: %v", kill, err)
		}
		n, err := whole(got)
		if err != nil {
			t.Fatalf("kill %d (the child said it committed %d): %v", kill, last, err)
		}
		if n != last && n != last+1 {
			t.Fatalf("kill %d: the state is checkpoint %d; the child said it committed %d: want it or the one after", kill, n, last)
		}
		if n == last+1 {
			mid++
		}
		t.Logf("kill %d after %d commits and %v: checkpoint %d, the last said committed %d", kill, after, delay, n, last)
		committed = n
	}
	if committed < kills {
		t.Fatalf("%d checkpoints in %d kills: the test proved too little", committed, kills)
	}
	t.Logf("%d kills, %d checkpoints; %d times the one being written had committed unsaid", kills, committed, mid)
}
