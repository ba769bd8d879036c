package main

// The operator's commands both ways (issue 19): one engine, the daemon or
// the database only its transport. The opEnv harness of
// operator_e2e_test.go: the built binary, a real daemon, real SQLite, real
// actions.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/logjail/logjail/control"
)

// bothStep is one operator command and the exit code it must give.
type bothStep struct {
	name string
	code int
	args []string
}

// bothSteps are every operator command, in the order both runs make them:
// reads of the starting state, then the changes, then reads of what they
// left.
var bothSteps = []bothStep{
	{"status", 0, []string{"status", "--output", "json"}},
	{"list", 0, []string{"list", "--output", "json"}},
	{"list --expired", 0, []string{"list", "--expired", "--output", "json"}},
	{"list --key address", 0, []string{"list", "--key", "198.51.100.9", "--output", "json"}},
	{"list --key CIDR", 0, []string{"list", "--key", "203.0.113.0/24", "--output", "json"}},
	{"list --key key", exitNegative, []string{"list", "--key", "user:bob", "--output", "json"}},
	{"list --rule --sort", 0, []string{"list", "--rule", "operator", "--sort", "since", "--output", "json"}},
	{"history", 0, []string{"history", "198.51.100.9", "--output", "json"}},
	{"top", 0, []string{"top", "--output", "json"}},
	{"top --rule --by", 0, []string{"top", "--rule", "slow", "--by", "requests", "--output", "json"}},
	{"clean", 0, []string{"clean", "--output", "json"}},
	{"history expired", 0, []string{"history", "203.0.113.60", "--output", "json"}},
	{"clean again", 0, []string{"clean", "--output", "json"}},
	{"ban", 0, []string{"ban", "203.0.113.70", "--for", "1h", "--reason", "both ways", "--output", "json"}},
	{"ban allowed", exitNegative, []string{"ban", "127.0.0.9", "--for", "1h", "--output", "json"}},
	{"unban --forget", 0, []string{"unban", "198.51.100.9", "--forget", "--reason", "forgiven", "--output", "json"}},
	{"unban", 0, []string{"unban", "203.0.113.70", "--output", "json"}},
	{"unban nothing", exitNegative, []string{"unban", "203.0.113.70", "--output", "json"}},
	{"history after", 0, []string{"history", "203.0.113.70", "--output", "json"}},
	{"history forgotten", 0, []string{"history", "198.51.100.9", "--output", "json"}},
	{"list after", 0, []string{"list", "--output", "json"}},
	{"list --expired after", 0, []string{"list", "--expired", "--output", "json"}},
	{"top after", 0, []string{"top", "--output", "json"}},
	{"status after", 0, []string{"status", "--output", "json"}},
}

// statusShared are the fields of a status both ways give. The others are
// the running daemon's alone (pid, started, uptime_seconds, actions,
// endpoints, a source's last_line and lag_seconds), the file's size on
// disk (database.bytes: the daemon's WAL), or database.checkpoint, the
// time the last writer stamped its checkpoint with: a daemon stamps its
// newest line's log time (none, null, until it reads a line after a
// restart), a clean pass the wall clock (ops.Clean ends throttles at it);
// which writer came last differs by design between the two runs.
var statusShared = []string{"version", "logjail", "config", "database.path", "database.error",
	"sources.name", "sources.files.path", "sources.files.offset", "sources.files.line", "sources.files.size", "sources.files.lag_bytes",
	"rules", "breaker", "tracked_keys", "evictions"}

// bothRun is one run's answers, by step name, and the wall-clock interval
// the commands ran in.
type bothRun struct {
	out        map[string]string
	start, end time.Time
}

// TestOperatorBothWays builds one starting state with a real daemon (a
// detector's ban, windows, an operator's ban that has ended on the wall
// clock, one that has not), copies its state directory twice, runs every
// operator command once against a daemon started on the first copy and
// once with no daemon on the second, and compares the answers field by
// field. Then a fresh daemon starts on each result: they enforce the same.
func TestOperatorBothWays(t *testing.T) {
	e := newOpEnv(t)
	// The cleaner's schedule is pushed out of the test: the passes compared
	// are the operator's.
	f, err := os.OpenFile(e.cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, `cleaner: "@every 24h"`)
	f.Close()

	e.start()
	// A minute ago on the log's clock: the flood's 10 s window is empty by
	// the time either run reads it, the slow rule's hour is not.
	past := time.Now().Add(-time.Minute)
	e.appendLinesAt("198.51.100.9", 6, past)
	e.appendLinesAt("203.0.113.44", 3, past)
	e.waitFor("the flood ban", func() bool { return slices.Contains(banKeys(e.list()), "flood 198.51.100.9") })
	var short control.BanResult
	if err := json.Unmarshal([]byte(e.must(0, "ban", "203.0.113.60", "--for", "1s", "--reason", "short", "--output", "json")), &short); err != nil {
		t.Fatal(err)
	}
	e.must(0, "ban", "203.0.113.61", "--for", "1h", "--reason", "long")
	e.stop()
	// A second past its end: normalise takes a time within the second a
	// run starts in for one of the run's (and the runs start fast).
	e.waitFor("the short ban to end on the wall clock", func() bool { return time.Now().After(short.Ban.Until.Add(time.Second)) })
	start := e.snapshot()

	runs := map[bool]bothRun{}
	results := map[bool]map[string][]byte{}
	for _, live := range []bool{true, false} {
		e.restore(start)
		if live {
			e.start()
		}
		r := bothRun{out: map[string]string{}, start: time.Now()}
		for _, s := range bothSteps {
			r.out[s.name] = e.must(s.code, s.args...)
		}
		r.end = time.Now()
		if live {
			e.stop()
		}
		runs[live] = r
		results[live] = e.snapshot()
	}

	on, off := runs[true], runs[false]
	for _, s := range bothSteps {
		want, got := normalise(t, s.name, on.out[s.name], on), normalise(t, s.name, off.out[s.name], off)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: online and offline differ (-online +offline):\n%s", s.name, diff)
		}
	}
	// The steps did what they say (a comparison of two empty answers
	// would pass).
	for _, live := range []bool{true, false} {
		r := runs[live]
		var c control.CleanReport
		if err := json.Unmarshal([]byte(r.out["clean"]), &c); err != nil || c.Live != live || c.Expired != 1 ||
			len(c.Unbans) != 1 || c.Unbans[0].Key != "203.0.113.60" {
			t.Errorf("live %v: clean = %+v (%v), want the short ban expired", live, c, err)
		}
		var h control.History
		if err := json.Unmarshal([]byte(r.out["history expired"]), &h); err != nil || len(h.Events) != 2 || h.Events[1].Reason != "ban expired" {
			t.Errorf("live %v: history of the expired ban = %+v (%v), want its ban and the cleaner's unban", live, h, err)
		}
		var u control.UnbanResult
		if err := json.Unmarshal([]byte(r.out["unban --forget"]), &u); err != nil || u.Live != live || len(u.Removed) != 1 || len(u.Forgotten) == 0 {
			t.Errorf("live %v: unban --forget = %+v (%v), want the flood ban lifted and its state forgotten", live, u, err)
		}
		var top control.Top
		if err := json.Unmarshal([]byte(r.out["top"]), &top); err != nil || top.Live != live || len(top.Keys) == 0 {
			t.Errorf("live %v: top = %+v (%v), want the keys of the log", live, top, err)
		}
		var after control.Top
		if err := json.Unmarshal([]byte(r.out["top after"]), &after); err != nil || slices.ContainsFunc(after.Keys, func(k control.TopKey) bool { return k.Key == "198.51.100.9" }) {
			t.Errorf("live %v: top after unban --forget = %+v (%v), want 198.51.100.9's state gone", live, after, err)
		}
		if got := banKeys(listOf(t, r.out["list after"])); !slices.Equal(got, []string{"operator 203.0.113.61"}) {
			t.Errorf("live %v: list after = %v, want the long ban alone", live, got)
		}
	}

	// What a daemon started on each result enforces, and remembers (a
	// forgotten state stays forgotten).
	enforced := map[bool]string{}
	remembered := map[bool]string{}
	blocked := map[bool][]string{}
	for _, live := range []bool{true, false} {
		e.restore(results[live])
		e.start()
		e.waitFor("the actions to sync", func() bool { return e.blockFile("203.0.113.61") })
		r := bothRun{start: time.Now()}
		enforced[live] = e.must(0, "list", "--output", "json")
		remembered[live] = e.must(0, "top", "--output", "json")
		r.end = time.Now()
		enforced[live] = normalise(t, "list", enforced[live], r)
		remembered[live] = normalise(t, "top", remembered[live], r)
		if strings.Contains(remembered[live], "198.51.100.9") {
			t.Errorf("live %v: a daemon started on the result remembers the forgotten 198.51.100.9:\n%s", live, remembered[live])
		}
		ents, err := os.ReadDir(e.blocked)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ents {
			blocked[live] = append(blocked[live], d.Name())
		}
		e.stop()
	}
	if diff := cmp.Diff(enforced[true], enforced[false]); diff != "" {
		t.Errorf("a daemon started on each result lists (-online +offline):\n%s", diff)
	}
	if diff := cmp.Diff(remembered[true], remembered[false]); diff != "" {
		t.Errorf("a daemon started on each result tops (-online +offline):\n%s", diff)
	}
	if diff := cmp.Diff(blocked[true], blocked[false]); diff != "" || !slices.Equal(blocked[true], []string{"203.0.113.61"}) {
		t.Errorf("block files: online %v, offline %v; want [203.0.113.61] both", blocked[true], blocked[false])
	}
}

func listOf(t *testing.T, out string) control.BanList {
	t.Helper()
	var l control.BanList
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return l
}

// normalise makes a command's JSON answer comparable across the two runs.
// It rewrites, and nothing else:
//   - "live": the transport itself (true from the daemon);
//   - "left_seconds": the time left at the reader's wall clock;
//   - a time ("now", "time", "since", "until", "ended") that falls within
//     the run's own interval (the wall-clock moment of a command: a list's
//     now, top's time, an operator's ban, unban and their history events)
//     or an hour after it (the until of the run's `ban --for 1h`): it
//     becomes "run" or "run+1h".
//
// Times of the starting state (the log's, the setup's bans) are compared
// as they are. A status keeps statusShared's fields alone.
func normalise(t *testing.T, step, out string, r bothRun) string {
	t.Helper()
	if strings.TrimSpace(out) == "" {
		return ""
	}
	var v any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%s: %v: %s", step, err, out)
	}
	if strings.HasPrefix(step, "status") {
		v = keep(v, "", statusShared)
	}
	v = walk(v, r)
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func walk(v any, r bothRun) any {
	switch x := v.(type) {
	case map[string]any:
		for k, y := range x {
			switch k {
			case "live", "left_seconds":
				delete(x, k)
			case "now", "time", "since", "until", "ended":
				x[k] = runTime(y, r)
			default:
				x[k] = walk(y, r)
			}
		}
	case []any:
		for i := range x {
			x[i] = walk(x[i], r)
		}
	}
	return v
}

func runTime(v any, r bothRun) any {
	s, ok := v.(string)
	if !ok {
		return v
	}
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return v
	}
	within := func(t time.Time) bool {
		return !t.Before(r.start.Truncate(time.Second)) && !t.After(r.end.Add(time.Second))
	}
	switch {
	case within(tm):
		return "run"
	case within(tm.Add(-time.Hour)):
		return "run+1h"
	}
	return v
}

// keep keeps the fields of v (under path prefix) that paths name: a path
// names a field and all it holds; through arrays, each element.
func keep(v any, prefix string, paths []string) any {
	switch x := v.(type) {
	case map[string]any:
		for k, y := range x {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			switch {
			case slices.Contains(paths, p):
			case slices.ContainsFunc(paths, func(q string) bool { return strings.HasPrefix(q, p+".") }):
				x[k] = keep(y, p, paths)
			default:
				delete(x, k)
			}
		}
	case []any:
		for i := range x {
			x[i] = keep(x[i], prefix, paths)
		}
	}
	return v
}

// appendLinesAt writes n requests of ip at log time at.
func (e *opEnv) appendLinesAt(ip string, n int, at time.Time) {
	e.t.Helper()
	f, err := os.OpenFile(e.log, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	defer f.Close()
	ts := at.UTC().Format("02/Jan/2006:15:04:05 -0700")
	for i := range n {
		fmt.Fprintf(f, "%s - - [%s] \"GET /%d HTTP/1.1\" 200 1 \"-\" \"t\"\n", ip, ts, i)
	}
}

// snapshot copies the state directory's files (the daemon stopped: the
// database whole) and the actions' files are not part of it.
func (e *opEnv) snapshot() map[string][]byte {
	e.t.Helper()
	ents, err := os.ReadDir(e.state)
	if err != nil {
		e.t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, d := range ents {
		if !d.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(e.state, d.Name()))
		if err != nil {
			e.t.Fatal(err)
		}
		files[d.Name()] = b
	}
	return files
}

// restore puts a snapshot back as the state directory, and removes what
// the actions put in place, so that a daemon starts afresh on it.
func (e *opEnv) restore(files map[string][]byte) {
	e.t.Helper()
	for _, p := range []string{e.state, e.blocked, e.deny} {
		if err := os.RemoveAll(p); err != nil {
			e.t.Fatal(err)
		}
	}
	if err := os.MkdirAll(e.state, 0o750); err != nil {
		e.t.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(e.state, name), b, 0o640); err != nil {
			e.t.Fatal(err)
		}
	}
}
