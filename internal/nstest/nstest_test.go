package nstest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestEnter: the test body runs in a network namespace that is not the
// test run's, with its loopback up.
func TestEnter(t *testing.T) {
	if !Enter(t, "ip") {
		return
	}
	if err := Isolated(); err != nil {
		t.Fatalf("inside Enter: %v", err)
	}
	self, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	if self == os.Getenv(envOrigin) {
		t.Fatalf("namespace %s is the test run's", self)
	}
	out, err := exec.Command("ip", "-o", "link", "show", "lo").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "UP") {
		t.Errorf("ip link show lo: %v: %s, want it up", err, out)
	}
}

// TestIsolatedRefusesTheHost: outside a namespace Enter made, Isolated
// refuses, so that no firewall change can reach this machine's own.
func TestIsolatedRefusesTheHost(t *testing.T) {
	if os.Getenv(envInside) != "" {
		return // in a child of another test: its namespace is not this test's to judge
	}
	if err := Isolated(); err == nil {
		t.Error("Isolated() = nil in the test run's own namespace")
	}
	t.Setenv(envOrigin, "net:[0]")
	if self, err := os.Readlink("/proc/self/ns/net"); err == nil {
		if host, err := os.Readlink("/proc/1/ns/net"); err == nil && self == host {
			if err := Isolated(); err == nil {
				t.Error("Isolated() = nil in PID 1's namespace")
			}
		}
	}
}
