package testenv

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestSkipFailsUnderCI runs TestHelperMissing, a test that needs a command
// no machine has, in a child: with CI unset it skips saying why, under
// CI=true it fails saying so.
func TestSkipFailsUnderCI(t *testing.T) {
	for _, c := range []struct {
		ci, want string
		fails    bool
	}{
		{"", "--- SKIP: TestHelperMissing", false},
		{"false", "--- SKIP: TestHelperMissing", false},
		{"true", "--- FAIL: TestHelperMissing", true},
		{"1", "--- FAIL: TestHelperMissing", true},
	} {
		t.Run("CI="+c.ci, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperMissing$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), "CI="+c.ci, "TESTENV_HELPER=1") // the last CI wins
			out, err := cmd.CombinedOutput()
			if (err != nil) != c.fails || !strings.Contains(string(out), c.want) ||
				!strings.Contains(string(out), "logjail-no-such-tool is not installed") {
				t.Errorf("CI=%q: %v, want %s naming the tool:\n%s", c.ci, err, c.want, out)
			}
		})
	}
}

// TestHelperMissing is TestSkipFailsUnderCI's child; alone it returns at
// once (not a skip).
func TestHelperMissing(t *testing.T) {
	if os.Getenv("TESTENV_HELPER") != "1" {
		return
	}
	Need(t, "logjail-no-such-tool")
	t.Error("Need returned for a command that is not installed")
}
