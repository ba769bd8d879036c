package actions_test

import (
	"errors"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/logjail/logjail/actions"
	"github.com/logjail/logjail/endpoint"
	"github.com/logjail/logjail/rules"
)

// documentedTypes returns the action types the example configuration's
// comment above `actions:` names ("# Actions make bans real: blockfile,
// nginx, ...; ...").
func documentedTypes(t *testing.T) []string {
	t.Helper()
	const intro = "# Actions make bans real:"
	ex := string(rules.Example())
	i := strings.Index(ex, intro)
	if i < 0 {
		t.Fatalf("the example has no %q comment", intro)
	}
	end := strings.Index(ex[i:], ";")
	if end < 0 {
		t.Fatalf("the example's %q comment has no ';' after its list", intro)
	}
	list := strings.ReplaceAll(ex[i+len(intro):i+end], "\n#", " ")
	var out []string
	for _, typ := range strings.Split(list, ",") {
		out = append(out, strings.TrimSpace(typ))
	}
	return out
}

// TestBuiltinTypes: the registry lists every action type the example
// configuration documents and the configuration accepts, no other, and
// builds (or, for the endpoint, checks) each of them.
func TestBuiltinTypes(t *testing.T) {
	reg := actions.Builtin(endpoint.CheckOptions)
	got := slices.Sorted(slices.Values(reg.Types()))
	doc := slices.Sorted(slices.Values(documentedTypes(t)))
	if len(doc) < 9 {
		t.Fatalf("the example documents %v: want the nine types at least", doc)
	}
	if diff := cmp.Diff(doc, got); diff != "" {
		t.Errorf("the registry's types against the example's comment (-documented +registry):\n%s", diff)
	}
	if diff := cmp.Diff(slices.Sorted(slices.Values(rules.ActionTypes())), got); diff != "" {
		t.Errorf("the registry's types against those a configuration accepts (-rules +registry):\n%s", diff)
	}
	for _, typ := range reg.Types() {
		t.Run(typ, func(t *testing.T) {
			cfg := &rules.Config{File: "logjail.yaml", Actions: []rules.Action{{Type: typ, Line: 4, Options: map[string]any{}}}}
			err := reg.Check(cfg)
			if err != nil && strings.Contains(err.Error(), "not built into this logjail") {
				t.Errorf("Check: %v: want the type built (or checked)", err)
			}
		})
	}
}

// TestRegistriesIndependent: two registries are values of their own, in
// one program: one that cannot check the endpoint and one that can answer
// each by its own table, at once, and what Types returns is a copy.
func TestRegistriesIndependent(t *testing.T) {
	bare, full := actions.Builtin(nil), actions.Builtin(endpoint.CheckOptions)
	if bare == full {
		t.Fatal("Builtin returned the same registry twice")
	}
	yaml := "sources: [{name: web, paths: [/var/log/x.log]}]\nactions:\n  - {type: endpoint, listen: '0.0.0.0:7390'}\n"
	cfg, err := rules.Parse("logjail.yaml", []byte(yaml), rules.Options{HostAddrs: []netip.Addr{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		reg  *actions.Registry
		want string
	}{
		{"bare", bare, `logjail.yaml:3: actions[0].type: "endpoint" is not built into this logjail`},
		{"full", full, "logjail.yaml:3: actions[0].listen:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var wg sync.WaitGroup
			errs := make([]error, 8)
			for i := range errs {
				wg.Go(func() { errs[i] = c.reg.Check(cfg) })
			}
			wg.Wait()
			for _, err := range errs {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Errorf("Check: %v\nwant an error containing %q", err, c.want)
				}
			}
		})
	}
	types := full.Types()
	types[0] = "changed"
	if got := full.Types()[0]; got != "blockfile" {
		t.Errorf("after changing what Types returned, the registry's first type is %q, want blockfile", got)
	}
	if got := bare.Types(); !slices.Equal(got, full.Types()) {
		t.Errorf("the bare registry lists %v, the full one %v: want the same types", got, full.Types())
	}
}

// TestLoadReportsWhatBuildWould: every option error Build can return, Load
// with the registry as its checker returns first, with the line of the
// option's value (the action's line for an option the file does not
// give), and a configuration that Load accepts builds without an error.
// Each case is one action, its options one a line (block style), so that
// an option's line is not its action's.
func TestLoadReportsWhatBuildWould(t *testing.T) {
	reg := actions.Builtin(endpoint.CheckOptions)
	const head = "state_dir: /var/lib/logjail\nsources: [{name: web, paths: [/var/log/x.log]}]\nactions:\n"
	for _, c := range []struct {
		name, actions string
		want          []string // the paths of the problems, sorted
	}{
		{"blockfile without dir", "  - type: blockfile\n    group: '0'\n", []string{"actions[0].dir"}},
		{"blockfile with a file", "  - type: blockfile\n    dir: /run/b\n    file: x\n", []string{"actions[0].file"}},
		{"nginx style", "  - type: nginx\n    file: /etc/nginx/x.conf\n    style: map\n", []string{"actions[0].style"}},
		{"apache reload as a string", "  - type: apache\n    file: x.conf\n    reload: apachectl graceful\n", []string{"actions[0].reload"}},
		{"list settle", "  - type: list\n    file: x.list\n    settle: 1m\n    timeout: 0s\n", []string{"actions[0].settle", "actions[0].timeout"}},
		{"haproxy allow_file", "  - type: haproxy\n    file: x.acl\n    allow_file: x.acl\n", []string{"actions[0].allow_file"}},
		{"iptables", "  - type: iptables\n    chain: INPUT\n    ports:\n      - 0\n", []string{"actions[0].chain", "actions[0].ports"}},
		{"iptables protocol", "  - type: iptables\n    mode: ipset\n    protocol: udp\n", []string{"actions[0].protocol"}},
		{"nftables", "  - type: nftables\n    table: log jail\n    hook: output\n", []string{"actions[0].hook", "actions[0].table"}},
		{"exec without ban", "  - type: exec\n    timeout: 10m\n", []string{"actions[0].ban", "actions[0].timeout"}},
		{"exec placeholder", "  - type: exec\n    ban:\n      - block\n      - '{addr}'\n", []string{"actions[0].ban"}},
		{"on", "  - type: blockfile\n    dir: /run/b\n    on: [never]\n", []string{"actions[0].on"}},
		{"endpoint", "  - type: endpoint\n    listen: 0.0.0.0:7390\n    max_conns: 0\n", []string{"actions[0].listen", "actions[0].max_conns"}},
		{"the same name twice", "  - type: blockfile\n    dir: /run/a\n  - type: blockfile\n    name: blockfile\n    dir: /run/b\n", []string{"actions[1].name"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			text := head + c.actions
			plain, err := rules.Parse("logjail.yaml", []byte(text), rules.Options{HostAddrs: []netip.Addr{}})
			if err != nil {
				t.Fatalf("without a checker: %v", err)
			}
			_, buildErr := reg.Build(plain, actions.Env{})
			_, loadErr := rules.Parse("logjail.yaml", []byte(text), rules.Options{HostAddrs: []netip.Addr{}, Actions: reg})
			built, loaded := problems(t, buildErr), problems(t, loadErr)
			slices.Sort(built)
			slices.Sort(loaded)
			if diff := cmp.Diff(built, loaded); diff != "" {
				t.Errorf("Build's problems against Load's (-build +load):\n%s", diff)
			}
			var paths []string
			for _, p := range loaded {
				_, rest, _ := strings.Cut(p, ":")
				line, rest, _ := strings.Cut(rest, ": ")
				path, _, _ := strings.Cut(rest, ": ")
				paths = append(paths, path)
				if want := optionLine(text, path); line != strconv.Itoa(want) {
					t.Errorf("%s: at line %s, want %d (its value's)", p, line, want)
				}
			}
			if diff := cmp.Diff(c.want, slices.Sorted(slices.Values(paths))); diff != "" {
				t.Errorf("the paths of the problems (-want +got):\n%s", diff)
			}
		})
	}
	for _, name := range []string{"../testdata/rules/valid/full.yaml", "example.yaml"} {
		data := rules.Example()
		if name != "example.yaml" {
			var err error
			if data, err = os.ReadFile(name); err != nil {
				t.Fatal(err)
			}
		}
		cfg, err := rules.Parse(name, data, rules.Options{HostAddrs: []netip.Addr{}, Actions: reg})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := reg.Check(cfg); err != nil {
			t.Errorf("%s: Load accepted it, Build refused it: %v", name, err)
		}
	}
}

// problems returns the texts of the *rules.Error values joined in err.
func problems(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []string
		for _, e := range j.Unwrap() {
			out = append(out, problems(t, e)...)
		}
		return out
	}
	var re *rules.Error
	if !errors.As(err, &re) {
		t.Fatalf("%v (%T) is not an *rules.Error", err, err)
	}
	return []string{re.Error()}
}

// optionLine is the line of the value of the option at path
// ("actions[1].name") in text, one action a "  - type:" line, its options
// indented under it: the line after the key when its value is a block
// list; the action's own line for an option it does not give.
func optionLine(text, path string) int {
	idx, key, _ := strings.Cut(strings.TrimPrefix(path, "actions["), "].")
	n, _ := strconv.Atoi(idx)
	lines := strings.Split(text, "\n")
	action := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "  - type:") {
			action++
			if action == n {
				for j := i + 1; j < len(lines) && strings.HasPrefix(lines[j], "    "); j++ {
					if k, v, ok := strings.Cut(strings.TrimSpace(lines[j]), ":"); ok && k == key {
						if strings.TrimSpace(v) == "" {
							return j + 2
						}
						return j + 1
					}
				}
				return i + 1
			}
		}
	}
	return 0
}
