package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logjail/logjail/actions"
	"github.com/logjail/logjail/endpoint"
	"github.com/logjail/logjail/internal/nstest"
	"github.com/logjail/logjail/rules"
)

// TestCleanFlush: `logjail clean --flush` removes everything the actions
// put in place (the iptables chain with its jump and ipsets, the nftables
// table, the block files) and empties list files, in a network namespace
// of the test's own.
func TestCleanFlush(t *testing.T) {
	if !nstest.Enter(t, "iptables", "ip6tables", "ipset", "nft") {
		return
	}
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "logjail.yaml")
	text := fmt.Sprintf(`state_dir: %[1]s/state
sources: [{name: web, paths: [%[1]s/access.log], format: combined}]
actions:
  - type: iptables
    mode: ipset
  - type: nftables
  - type: blockfile
    dir: %[1]s/blocked
  - type: nginx
    file: %[1]s/deny.conf
`, dir)
	if err := os.WriteFile(cfgPath, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := rules.Load(cfgPath, rules.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := actions.Builtin(endpoint.CheckOptions).Build(cfg, actions.Env{})
	if err != nil {
		t.Fatal(err)
	}
	entries := []actions.Entry{
		{Prefix: netip.MustParsePrefix("198.51.100.7/32"), Kind: actions.KindBan, Until: time.Now().Add(time.Hour), Rule: "flood", Key: "198.51.100.7"},
		{Prefix: netip.MustParsePrefix("2001:db8:1::/64"), Kind: actions.KindBan, Rule: "flood", Key: "2001:db8:1::/64"},
	}
	for _, c := range cs {
		if err := c.Sync(context.Background(), entries, nil); err != nil {
			t.Fatalf("%s: %v", c.Name(), err)
		}
		c.Close()
	}
	out := func(name string, args ...string) string {
		b, _ := exec.Command(name, args...).CombinedOutput()
		return string(b)
	}
	if !strings.Contains(out("iptables", "-S"), "LOGJAIL") || !strings.Contains(out("nft", "list", "tables"), "logjail") {
		t.Fatalf("the actions put nothing in place:\n%s%s", out("iptables", "-S"), out("nft", "list", "tables"))
	}

	code, stdout, stderr := run(t, "", "clean", "--flush", "--config", cfgPath)
	if code != 0 {
		t.Fatalf("clean --flush: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, name := range []string{"iptables", "nftables", "blockfile", "nginx"} {
		if !strings.Contains(stdout, "action "+name+" ("+name+"): flushed") {
			t.Errorf("the output does not name action %s:\n%s", name, stdout)
		}
	}
	for _, c := range []struct{ what, got, absent string }{
		{"iptables -S", out("iptables", "-S"), "LOGJAIL"},
		{"ip6tables -S", out("ip6tables", "-S"), "LOGJAIL"},
		{"ipset list -n", out("ipset", "list", "-n"), "logjail"},
		{"nft list tables", out("nft", "list", "tables"), "logjail"},
	} {
		if strings.Contains(c.got, c.absent) {
			t.Errorf("after --flush %s still shows %s:\n%s", c.what, c.absent, c.got)
		}
	}
	if es, _ := os.ReadDir(filepath.Join(dir, "blocked")); len(es) != 0 {
		t.Errorf("block files left: %v", es)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "deny.conf")); err != nil || strings.Contains(string(b), "\ndeny ") {
		t.Errorf("the list file after --flush: %q %v (want it kept, empty)", b, err)
	}
}
