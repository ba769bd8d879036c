// Package nstest runs a test inside a network namespace of its own, so that
// firewall tests change real iptables, ip6tables, ipset and nftables state
// without ever touching the host's.
//
// A test calls Enter first. Outside a namespace Enter re-runs the test
// binary, for this test alone, under `unshare --net` and returns false: the
// caller returns at once, and the child's verdict becomes the test's. In the
// child Enter checks that its network namespace is not the host's (PID 1's),
// brings the loopback up and returns true.
//
// Boundaries: test code only. It changes network state only inside the
// namespace it made (never the host's: Enter checks it) and starts no
// server but the loopback listeners a test asks for.
package nstest

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/logjail/logjail/internal/testenv"
)

// envInside marks the child that runs in the new namespace; envOrigin
// carries the namespace the test run started in.
const (
	envInside = "LOGJAIL_TEST_NETNS"
	envOrigin = "LOGJAIL_TEST_ORIGIN_NETNS"
)

// Enter runs the calling test in a new network namespace; see the package
// comment. The test is skipped, saying why (failed under CI=true: package
// testenv), when the machine cannot make one (not root, no unshare) or
// lacks a command in need.
func Enter(t testing.TB, need ...string) bool {
	t.Helper()
	testenv.Need(t, need...)
	if os.Getenv(envInside) == t.Name() {
		if err := Isolated(); err != nil {
			t.Fatalf("refusing to run a firewall test: %v", err)
		}
		if out, err := exec.Command("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
			t.Fatalf("ip link set lo up: %v: %s", err, out)
		}
		return true
	}
	testenv.Root(t, "network namespaces")
	testenv.Need(t, "unshare")
	args := []string{"--net", "--", os.Args[0], "-test.run", runPattern(t.Name()), "-test.count=1", "-test.v"}
	if _, bench := t.(*testing.B); bench {
		// A benchmark: run it alone, with the parent's -benchtime.
		args = []string{"--net", "--", os.Args[0], "-test.run", "^$", "-test.bench", runPattern(t.Name()), "-test.benchmem", "-test.v"}
		if f := flag.Lookup("test.benchtime"); f != nil {
			args = append(args, "-test.benchtime", f.Value.String())
		}
	}
	if testing.Short() {
		args = append(args, "-test.short")
	}
	cmd := exec.Command("unshare", args...)
	origin, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatalf("reading this process's network namespace: %v", err)
	}
	cmd.Env = append(os.Environ(), envInside+"="+t.Name(), envOrigin+"="+origin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Logf("in a new network namespace:\n%s", indent(out.String()))
	if err != nil {
		t.Fatalf("the test failed in its network namespace: %v", err)
	}
	if _, bench := t.(*testing.B); bench {
		t.SkipNow() // the figures are in the log above
	}
	if !strings.Contains(out.String(), "--- PASS: "+t.Name()) && !strings.Contains(out.String(), "--- SKIP: "+t.Name()) {
		t.Fatalf("the test did not run in its network namespace (no PASS line)")
	}
	if strings.Contains(out.String(), "--- SKIP: "+t.Name()) {
		t.Skip("skipped in its network namespace (see the log)")
	}
	return false
}

// Isolated returns an error unless this process runs in a network
// namespace Enter made: one that differs from the namespace the test run
// started in and, where it can be read, from PID 1's. Every firewall
// change in a test is made behind this check.
func Isolated() error {
	self, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return err
	}
	origin := os.Getenv(envOrigin)
	if origin == "" {
		return fmt.Errorf("not started by nstest.Enter")
	}
	if self == origin {
		return fmt.Errorf("this process is in the namespace the tests started in (%s)", self)
	}
	if host, err := os.Readlink("/proc/1/ns/net"); err == nil && self == host {
		return fmt.Errorf("this process is in PID 1's network namespace (%s)", self)
	}
	return nil
}

// runPattern matches exactly the test (and subtest) name.
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

func indent(s string) string {
	return "\t" + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n\t")
}
