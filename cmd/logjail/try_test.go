package main

import (
	"net/netip"
	"os"
	"reflect"
	"testing"

	"github.com/logjail/logjail/rules"
)

// TestTryRulesAreTheExamples: testdata/logs/sample/try.yaml says its
// probes, panels, flood and scanners are the example configuration's;
// their limits, throttle and ban must be, so that `make try` shows what
// the defaults do. (Their match and signatures are compiled away; the
// eval package evaluates the example's own.)
func TestTryRulesAreTheExamples(t *testing.T) {
	opt := rules.Options{HostAddrs: []netip.Addr{}, Cores: 4}
	ex, err := rules.Parse("example.yaml", rules.Example(), opt)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("../../testdata/logs/sample/try.yaml")
	if err != nil {
		t.Fatal(err)
	}
	try, err := rules.Parse("try.yaml", raw, opt)
	if err != nil {
		t.Fatal(err)
	}
	find := func(c *rules.Config, name string) *rules.Rule {
		for _, r := range c.Rules {
			if r.Name == name {
				return r
			}
		}
		t.Fatalf("%s: no rule %s", c.File, name)
		return nil
	}
	for _, name := range []string{"probes", "panels", "flood", "scanners"} {
		a, b := find(ex, name), find(try, name)
		if !reflect.DeepEqual(a.Limits, b.Limits) || !reflect.DeepEqual(a.Throttle, b.Throttle) || a.Ban != b.Ban || a.Key != b.Key || a.Combine != b.Combine {
			t.Errorf("rule %s: try.yaml's differs from the example's:\n%+v\n%+v", name, *b, *a)
		}
	}
}
