package rules_test

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/logjail/logjail/actions"
	"github.com/logjail/logjail/endpoint"
	"github.com/logjail/logjail/rules"
)

// wrongTwice is wrong in the rules and in the options of two actions, the
// problems interleaved in the file; actions[1]'s type is wrong, so the
// actions after it are not at their position among the decoded ones.
const wrongTwice = `sources: [{name: web, paths: [/var/log/nginx/access.log]}]
rules:
  - name: flood
    limits: ["20 per fortnight"]
actions:
  - type: nginx
    file: /etc/nginx/logjail-deny.conf
    style: map
  - type: firewall
  - type: iptables
    chain: INPUT
    ports:
      - 80
      - 0
ipv4_prefix: 40
`

// TestLoadChecksActionOptions: with the actions registry as its checker,
// one Load reports every problem of a file wrong in both its rules and
// its actions' options, each an *rules.Error at the line of the value
// (an option's, not its action's), in the order of the file, with the
// path of the option in the file's actions list. Without a checker, the
// options are left to whoever builds the actions.
func TestLoadChecksActionOptions(t *testing.T) {
	o := rules.Options{HostAddrs: []netip.Addr{}, Cores: 4, Actions: actions.Builtin(endpoint.CheckOptions)}
	_, err := rules.Parse("test.yaml", []byte(wrongTwice), o)
	want := []string{
		`test.yaml:4: rules[0].limits[0]: "20 per fortnight"`,
		`test.yaml:8: actions[0].style: "map": want deny, geo`,
		`test.yaml:9: actions[1].type: "firewall": want blockfile`,
		`test.yaml:11: actions[2].chain: "INPUT" is a builtin chain`,
		`test.yaml:13: actions[2].ports: want ports from 1 to 65535, not 0`,
		`test.yaml:15: ipv4_prefix: 40: want 1 to 32`,
	}
	if diff := cmp.Diff(want, prefixes(t, err, want)); diff != "" {
		t.Errorf("Load's problems (-want +got):\n%s\nerror:\n%v", diff, err)
	}

	o.Actions = nil
	_, err = rules.Parse("test.yaml", []byte(wrongTwice), o)
	if got := prefixes(t, err, want); len(got) != 3 || strings.Contains(err.Error(), "actions[0]") || strings.Contains(err.Error(), "actions[2]") {
		t.Errorf("without a checker, Load reported %d problems, want those of the rules and of actions[1].type only:\n%v", len(got), err)
	}
}

// prefixes returns, for each problem joined in err (each must be an
// *rules.Error), its text cut to the length of the wanted one it starts
// like, else whole.
func prefixes(t *testing.T, err error, want []string) []string {
	t.Helper()
	if err == nil {
		t.Fatal("Load succeeded")
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("%T is not a joined error: %v", err, err)
	}
	var out []string
	for _, e := range j.Unwrap() {
		var re *rules.Error
		if !errors.As(e, &re) {
			t.Errorf("%v (%T) is not an *rules.Error", e, e)
			continue
		}
		s := fmt.Sprint(re)
		for _, w := range want {
			if strings.HasPrefix(s, w) {
				s = w
				break
			}
		}
		out = append(out, s)
	}
	return out
}
