package actions_test

import (
	"net/netip"
	"regexp"
	"strings"
	"testing"

	"github.com/logjail/logjail/actions"
	"github.com/logjail/logjail/endpoint"
	"github.com/logjail/logjail/rules"
)

// TestExampleActions: every action the example configuration shows in
// comments builds as written once uncommented, so the example documents
// options that exist, with values they accept.
func TestExampleActions(t *testing.T) {
	ex := string(rules.Example())
	start, end := strings.Index(ex, "\nactions:"), strings.Index(ex, "\ncleaner:")
	if start < 0 || end < start {
		t.Fatal("the example has no actions section before cleaner")
	}
	option := regexp.MustCompile(`^  # (- type: |  [a-z_]+: )`)
	var b strings.Builder
	b.WriteString(ex[:start+1])
	types := 0
	inAction := false // the common keys are listed before the first action
	for _, l := range strings.Split(ex[start+1:end], "\n") {
		inAction = inAction || strings.HasPrefix(strings.TrimSpace(l), "- type:") || strings.Contains(l, "# - type:")
		if inAction && option.MatchString(l) {
			if strings.Contains(l, "- type:") {
				types++
			}
			l = "  " + l[4:]
		}
		b.WriteString(l + "\n")
	}
	b.WriteString(ex[end+1:])
	cfg, err := rules.Parse("example.yaml", []byte(b.String()), rules.Options{HostAddrs: []netip.Addr{}})
	if err != nil {
		t.Fatalf("the example with its actions uncommented: %v", err)
	}
	if types < 5 || len(cfg.Actions) != types+1 {
		t.Fatalf("uncommented %d action types, the configuration has %d actions", types, len(cfg.Actions))
	}
	cs, err := actions.Builtin(endpoint.CheckOptions).Build(cfg, actions.Env{})
	if err != nil {
		t.Fatalf("the example's actions do not build: %v", err)
	}
	var got []string
	for _, c := range cs {
		got = append(got, c.Type)
		c.Close()
	}
	// The endpoint is the daemon's: Build checks its options (the
	// registry's endpoint row) and leaves it out; endpoint's
	// TestExampleEndpoint reads its options and their defaults.
	want := "blockfile nginx iptables nftables exec"
	if strings.Join(got, " ") != want {
		t.Errorf("built %v, want %s (the endpoint is not built here)", got, want)
	}
	if last := cfg.Actions[len(cfg.Actions)-1]; last.Type != "endpoint" {
		t.Errorf("the example's last action is %q, want the endpoint", last.Type)
	}
}
