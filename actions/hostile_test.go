//go:build unix

package actions_test

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logjail/logjail/actions"
	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/endpoint"
	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/rules"
)

// TestHostileKeys: a user and a user agent that carry a NUL, a newline, an
// ESC and a BEL (as nginx's \x00, \x0A, \x1B, \x07 decode) become keys of
// printable text where the keys are made (rules), and so reach the exec
// action's argv, the block file, the list file and the endpoint's view as
// text: exec runs for the ban and again for the unban (a NUL in an argv
// would make it fail for ever), and no file holds a control character.
func TestHostileKeys(t *testing.T) {
	dir := t.TempDir()
	script, calls := filepath.Join(dir, "record.sh"), filepath.Join(dir, "calls.log")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nlog=$1\nshift\nprintf '[%s]' \"$@\" >>\"$log\"\necho >>\"$log\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "blocked"), 0o755); err != nil {
		t.Fatal(err)
	}
	yaml := `
state_dir: ` + dir + `
sources: [{name: web, paths: [/var/log/nginx/access.log]}]
rules:
  - {name: users, key: user, limits: ["10 per second"]}
  - {name: agents, key: user_agent, limits: ["10 per second"]}
  - {name: pairs, key: ip+user_agent, limits: ["10 per second"]}
actions:
  - {type: exec, ban: [` + script + `, ` + calls + `, ban, "{key}", "{address}", "{reason}"], unban: [` + script + `, ` + calls + `, unban, "{key}", "{address}"]}
  - {type: blockfile, dir: ` + filepath.Join(dir, "blocked") + `}
  - {type: list, file: ` + filepath.Join(dir, "banned.list") + `}
`
	cfg, err := rules.Parse(filepath.Join(dir, "logjail.yaml"), []byte(yaml), rules.Options{HostAddrs: []netip.Addr{}})
	if err != nil {
		t.Fatal(err)
	}
	e := parser.Entry{IP: netip.MustParseAddr("203.0.113.7"), Time: time.Now(), Has: parser.HasUser | parser.HasUserAgent,
		User: "bob\x00\n\x1b[2J", UserAgent: "evil\x1b]0;pwned\x07\nretry_after: 0\xff"}
	charges, verdict := cfg.Classify(cfg.Source("web"), &e, nil)
	if verdict != rules.VerdictCharged || len(charges) != 3 {
		t.Fatalf("classify: %v %+v, want 3 charges", verdict, charges)
	}
	want := []string{`user:bob\x00\x0a\x1b[2J`, `ua:evil\x1b]0;pwned\x07\x0aretry_after: 0\xff`, `203.0.113.7|ua:evil\x1b]0;pwned\x07\x0aretry_after: 0\xff`}
	for i, c := range charges {
		if c.Key != want[i] {
			t.Errorf("rule %s: key %q, want %q", c.Rule.Name, c.Key, want[i])
		}
	}

	cs, err := actions.Builtin(endpoint.CheckOptions).Build(cfg, actions.Env{StateDir: dir, Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	view := endpoint.NewBans("endpoint")
	cs = append(cs, actions.Configured{Backend: view, Type: "endpoint", Kinds: []actions.Kind{actions.KindBan}})
	m := actions.NewManager(cs, actions.ManagerOptions{Sweep: time.Hour})
	m.Start(context.Background())
	defer m.Close()
	wait := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		for _, s := range m.Status() {
			if s.Errors > 0 || s.Pending > 0 {
				t.Fatalf("action %s: %+v", s.Name, s)
			}
		}
	}
	now := time.Now()
	addrs := []netip.Addr{netip.MustParseAddr("203.0.113.7")}
	var ds []detector.Decision
	for _, c := range charges[:2] {
		ds = append(ds, detector.Decision{Rule: c.Rule.Name, Key: c.Key, Kind: detector.Ban, Time: now, Until: now.Add(time.Hour),
			Addresses: addrs, Reason: "rate 11 per 1s > 10 (rule " + c.Rule.Name + ") " + c.Key, Origin: "detector"})
	}
	m.Decisions(ds[:1])
	wait()

	got, ok := view.Lookup(addrs[0], time.Now())
	if !ok || got.Key != want[0] {
		t.Errorf("endpoint view: %+v %v, want banned by %q", got, ok, want[0])
	}
	printable := func(what string, data []byte) {
		t.Helper()
		text := strings.TrimSuffix(string(data), "\n")
		if p := parser.Printable(strings.ReplaceAll(text, "\n", "")); p != strings.ReplaceAll(text, "\n", "") {
			t.Errorf("%s holds a control character: %q", what, data)
		}
	}
	for _, f := range []string{calls, filepath.Join(dir, "blocked", "203.0.113.7"), filepath.Join(dir, "banned.list")} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		printable(f, data)
	}
	block, _ := os.ReadFile(filepath.Join(dir, "blocked", "203.0.113.7"))
	if !strings.Contains(string(block), "key: "+want[0]+"\n") {
		t.Errorf("block file: %q, want the key %q on its line", block, want[0])
	}
	if list, _ := os.ReadFile(filepath.Join(dir, "banned.list")); !strings.Contains(string(list), "203.0.113.7") {
		t.Errorf("list file: %q, want 203.0.113.7", list)
	}

	// The user agent's ban replaces the user's in the view; then both end.
	m.Decisions(ds[1:])
	wait()
	m.Decisions([]detector.Decision{
		{Rule: ds[0].Rule, Key: ds[0].Key, Kind: detector.Unban, Time: now, Addresses: addrs},
		{Rule: ds[1].Rule, Key: ds[1].Key, Kind: detector.Unban, Time: now, Addresses: addrs},
	})
	wait()
	if got, ok := view.Lookup(addrs[0], time.Now()); ok {
		t.Errorf("endpoint view after the unbans: %+v, want nothing", got)
	}
	data, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	printable(calls, data)
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if !strings.HasPrefix(lines[0], "[ban]["+want[0]+"][203.0.113.7]") || !strings.HasPrefix(lines[len(lines)-1], "[unban][") {
		t.Errorf("exec calls:\n%s\nwant a ban of %q first and an unban last", data, want[0])
	}
	if _, err := os.Stat(filepath.Join(dir, "blocked", "203.0.113.7")); !os.IsNotExist(err) {
		t.Errorf("block file after the unbans: %v, want it gone", err)
	}
}
