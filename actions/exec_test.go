//go:build unix

package actions

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// execTestScript writes a script that appends its arguments after the
// first (the log file), each in brackets, as one line of the log; it exits
// 3 with a message on stderr when an argument is 203.0.113.66, and sleeps
// when one is "sleep".
func execTestScript(t testing.TB) (script, log string) {
	t.Helper()
	dir := t.TempDir()
	script = filepath.Join(dir, "record.sh")
	log = filepath.Join(dir, "calls.log")
	body := `#!/bin/sh
log=$1
shift
for a in "$@"; do
	case $a in
	203.0.113.66) echo "cannot block $a: the firewall is on fire" >&2; exit 3 ;;
	sleep) sleep 60 ;;
	esac
done
printf '[%s]' "$@" >>"$log"
echo >>"$log"
`
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script, log
}

// execTestCalls is the log's lines, and empties it.
func execTestCalls(t testing.TB, log string) []string {
	t.Helper()
	data, err := os.ReadFile(log)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(log)
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

func execTestBuild(t testing.TB, stateDir string, now time.Time, opts map[string]any) *Exec {
	t.Helper()
	env := Env{StateDir: stateDir, Now: func() time.Time { return now }}
	be, err := buildExec(NewOptions("logjail.yaml", 0, "exec", opts), env)
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	return be.(*Exec)
}

func execTestEntry(s string, until time.Time) Entry {
	return Entry{Prefix: Prefixes(s, nil)[0], Kind: KindBan, Until: until, Rule: "flood", Key: s, Reason: "too many requests"}
}

// execTestRecord is the prefixes of the record file.
func execTestRecord(t testing.TB, dir, name string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "exec-"+name+".json"))
	if err != nil {
		t.Fatalf("record: %v", err)
	}
	var r execRecord
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("record: %v\n%s", err, data)
	}
	out := []string{}
	for _, e := range r.Entries {
		out = append(out, e.Prefix)
	}
	return out
}

func TestExecSubstitution(t *testing.T) {
	script, log := execTestScript(t)
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.FixedZone("CET", 3600))
	b := execTestBuild(t, t.TempDir(), now, map[string]any{
		"ban":   []any{script, log, "ban", "{address}", "{prefix}", "{family}", "{key}", "{rule}", "{reason}", "{until}", "{timeout}", "{kind}", "--addr={address}/{family}", "{}", "{ not one }", "${address}"},
		"unban": []any{script, log, "unban", "{address}", "{reason}", "{until}"},
	})
	ctx := context.Background()
	evil := "; rm -rf / $(x) `id` \"'"
	user := Entry{Prefix: netip.MustParsePrefix("198.51.100.7/32"), Kind: KindThrottle, Until: now.Add(90 * time.Second), Rule: "heavy", Key: "user:bob $(whoami)", Reason: evil}
	v6 := Entry{Prefix: netip.MustParsePrefix("2001:db8:1::/64"), Kind: KindBan, Rule: "scan", Key: "2001:db8:1::/64", Reason: "404s"}
	if err := b.Apply(ctx, []Change{{Entry: user}, {Entry: v6}}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	want := []string{
		"[ban][198.51.100.7][198.51.100.7/32][inet][user:bob $(whoami)][heavy][" + evil + "][2026-11-22T09:01:30Z][90][throttle][--addr=198.51.100.7/inet][{}][{ not one }][$198.51.100.7]",
		"[ban][2001:db8:1::/64][2001:db8:1::/64][inet6][2001:db8:1::/64][scan][404s][][0][ban][--addr=2001:db8:1::/64/inet6][{}][{ not one }][$2001:db8:1::/64]",
	}
	if d := cmp.Diff(want, execTestCalls(t, log)); d != "" {
		t.Errorf("ban calls (-want +got):\n%s", d)
	}
	// The unban command sees the entry the prefix was banned with.
	if err := b.Apply(ctx, []Change{{Entry: Entry{Prefix: user.Prefix}, Delete: true}}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	want = []string{"[unban][198.51.100.7][" + evil + "][2026-11-22T09:01:30Z]"}
	if d := cmp.Diff(want, execTestCalls(t, log)); d != "" {
		t.Errorf("unban calls (-want +got):\n%s", d)
	}
}

func TestExecFailures(t *testing.T) {
	script, log := execTestScript(t)
	now := time.Now()
	dir := t.TempDir()
	b := execTestBuild(t, dir, now, map[string]any{
		"ban":     []any{script, log, "ban", "{address}"},
		"unban":   []any{script, log, "unban", "{address}"},
		"name":    "block",
		"timeout": "1s",
	})
	ctx := context.Background()
	changes := []Change{
		{Entry: execTestEntry("203.0.113.5", now.Add(time.Hour))},
		{Entry: execTestEntry("203.0.113.66", now.Add(time.Hour))},
		{Entry: execTestEntry("203.0.113.7", now.Add(time.Hour))},
	}
	err := b.Apply(ctx, changes)
	for _, w := range []string{`exec action "block"`, "ban 203.0.113.66", script, "exit status 3", "cannot block 203.0.113.66: the firewall is on fire"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Apply with a failing ban: err = %v, want it to say %q", err, w)
		}
	}
	if d := cmp.Diff([]string{"[ban][203.0.113.5]", "[ban][203.0.113.7]"}, execTestCalls(t, log)); d != "" {
		t.Errorf("the other bans still run (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"203.0.113.5/32", "203.0.113.7/32"}, execTestRecord(t, dir, "block")); d != "" {
		t.Errorf("record (-want +got):\n%s", d)
	}

	// The retry runs the failed ban alone (it fails again); a longer ban
	// runs the command again; lifting a prefix never banned runs nothing.
	changes[2].Until = now.Add(2 * time.Hour)
	changes = append(changes, Change{Entry: Entry{Prefix: netip.MustParsePrefix("198.51.100.9/32")}, Delete: true})
	if err := b.Apply(ctx, changes); err == nil {
		t.Errorf("the retry: want the failure again")
	}
	if d := cmp.Diff([]string{"[ban][203.0.113.7]"}, execTestCalls(t, log)); d != "" {
		t.Errorf("the retry's calls (-want +got):\n%s", d)
	}

	// A command that outlives the timeout is killed, its children too.
	slow := execTestBuild(t, dir, now, map[string]any{"ban": []any{script, log, "sleep", "{address}"}, "name": "slow", "timeout": "1s"})
	start := time.Now()
	err = slow.Apply(ctx, []Change{{Entry: execTestEntry("203.0.113.8", time.Time{})}})
	if err == nil || !strings.Contains(err.Error(), "killed after the timeout of 1s") || !strings.Contains(err.Error(), script) {
		t.Errorf("a command sleeping 60s: err = %v, want one saying it was killed after 1s", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the timeout took %s", d)
	}
	// A command that cannot be started.
	b2 := execTestBuild(t, dir, now, map[string]any{"ban": []any{filepath.Join(dir, "missing"), "{address}"}, "name": "missing"})
	err = b2.Apply(ctx, changes[:1])
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "missing")) {
		t.Errorf("a missing command: err = %v, want one naming it", err)
	}
}

func TestExecReconcile(t *testing.T) {
	script, log := execTestScript(t)
	now := time.Now()
	dir := t.TempDir()
	opts := map[string]any{
		"ban":   []any{script, log, "ban", "{address}"},
		"unban": []any{script, log, "unban", "{address}"},
	}
	ctx := context.Background()
	a := execTestEntry("198.51.100.1", now.Add(time.Hour))
	bb := execTestEntry("198.51.100.0/24", now.Add(time.Hour))
	c := execTestEntry("2001:db8::1", time.Time{})

	// The first run has no record: every entry is banned.
	b := execTestBuild(t, dir, now, opts)
	if err := b.Sync(ctx, []Entry{bb, a}, nil); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if d := cmp.Diff([]string{"[ban][198.51.100.0/24]", "[ban][198.51.100.1]"}, execTestCalls(t, log)); d != "" {
		t.Errorf("first Sync (-want +got):\n%s", d)
	}
	// A restart: the record says what was banned.
	b = execTestBuild(t, dir, now, opts)
	if err := b.Sync(ctx, []Entry{bb, c}, nil); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if d := cmp.Diff([]string{"[unban][198.51.100.1]", "[ban][2001:db8::1]"}, execTestCalls(t, log)); d != "" {
		t.Errorf("Sync after a restart (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"198.51.100.0/24", "2001:db8::1/128"}, execTestRecord(t, dir, "exec")); d != "" {
		t.Errorf("record (-want +got):\n%s", d)
	}
	if err := b.Sync(ctx, []Entry{bb, c}, nil); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if got := execTestCalls(t, log); len(got) != 0 {
		t.Errorf("a second Sync ran %q, want nothing", got)
	}
	if tmp, _ := filepath.Glob(filepath.Join(dir, ".exec-*")); len(tmp) != 0 {
		t.Errorf("temporary files left: %v", tmp)
	}

	// Flush lifts everything recorded and removes the record.
	if err := b.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if d := cmp.Diff([]string{"[unban][198.51.100.0/24]", "[unban][2001:db8::1]"}, execTestCalls(t, log)); d != "" {
		t.Errorf("Flush (-want +got):\n%s", d)
	}
	if _, err := os.Stat(filepath.Join(dir, "exec-exec.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the record is still there after Flush: %v", err)
	}

	// A damaged record is an error that says what to do.
	if err := os.WriteFile(filepath.Join(dir, "exec-exec.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	b = execTestBuild(t, dir, now, opts)
	if err := b.Sync(ctx, []Entry{a}, nil); err == nil || !strings.Contains(err.Error(), "exec-exec.json") {
		t.Errorf("Sync over a damaged record: err = %v, want one naming it", err)
	}
	// No state_dir: no record to keep.
	b = execTestBuild(t, "", now, opts)
	if err := b.Sync(ctx, []Entry{a}, nil); err == nil || !strings.Contains(err.Error(), "state_dir") {
		t.Errorf("Sync without a state_dir: err = %v", err)
	}
}

// TestExecOptions checks the builder's errors: each names the file, the
// action's line and the option.
func TestExecOptions(t *testing.T) {
	for _, tc := range []struct {
		opts map[string]any
		want string
	}{
		{map[string]any{}, "actions[0].ban: is required"},
		{map[string]any{"ban": "block {address}"}, "actions[0].ban"},
		{map[string]any{"ban": []any{"block", "{addr}"}}, "actions[0].ban: {addr}"},
		{map[string]any{"ban": []any{"block", "{address}"}, "unban": []any{"unblock", "x={ip}"}}, "actions[0].unban: {ip}"},
		{map[string]any{"ban": []any{"{address}"}}, "actions[0].ban"},
		{map[string]any{"ban": []any{"block"}, "timeout": "0s"}, "actions[0].timeout"},
		{map[string]any{"ban": []any{"block"}, "timeout": "10m"}, "actions[0].timeout"},
		{map[string]any{"ban": []any{"block"}, "timeout": "soon"}, "actions[0].timeout"},
		{map[string]any{"ban": []any{"block"}, "name": "../etc/passwd"}, "actions[0].name"},
		{map[string]any{"ban": []any{"block"}, "shell": true}, "actions[0].shell"},
	} {
		_, err := buildExec(NewOptions("logjail.yaml", 0, "exec", tc.opts), Env{})
		if err == nil || !strings.Contains(err.Error(), "logjail.yaml") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want one naming %s", tc.opts, err, tc.want)
		}
	}
	dir := t.TempDir()
	b, err := buildExec(NewOptions("logjail.yaml", 0, "exec", map[string]any{"ban": []any{"block", "{address}"}, "name": "fw-1.2"}), Env{StateDir: dir})
	if err != nil {
		t.Fatalf("valid options: %v", err)
	}
	if b.Name() != "fw-1.2" {
		t.Errorf("name %q", b.Name())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("the builder wrote %v", ents)
	}
}

// BenchmarkExecApply100 bans 100 addresses with `true`: the cost of a ban
// through a command (a fork and exec each, and the record written).
func BenchmarkExecApply100(b *testing.B) {
	dir := b.TempDir()
	now := time.Now()
	be := execTestBuild(b, dir, now, map[string]any{"ban": []any{"true", "{address}"}})
	set := make([]Change, 100)
	del := make([]Change, 100)
	for i := range set {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, 0, byte(i)}), 32)
		set[i] = Change{Entry: Entry{Prefix: p, Kind: KindBan, Until: now.Add(time.Hour)}}
		del[i] = Change{Entry: Entry{Prefix: p}, Delete: true}
	}
	ctx := context.Background()
	b.ReportAllocs()
	var apply time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := be.Apply(ctx, set); err != nil {
			b.Fatal(err)
		}
		apply += time.Since(t0)
		if err := be.Apply(ctx, del); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(apply.Seconds()/float64(b.N)/100, "s/ban")
}
