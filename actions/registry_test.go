package actions_test

import (
	"net/netip"
	"slices"
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
