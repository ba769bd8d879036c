package ops

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logjail/logjail/internal/testenv"
)

// TestSystemdUnits checks contrib/systemd's units with systemd-analyze
// verify: every key known and well-formed, the timer's service found. verify
// also wants each Exec*= command to exist, so it reads copies in which
// /usr/local/bin/logjail is this test's own binary. Any output fails the
// test: verify reports unknown keys and bad values as warnings.
func TestSystemdUnits(t *testing.T) {
	analyze := testenv.Need(t, "systemd-analyze")[0]
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join("..", "contrib", "systemd")
	dir := t.TempDir()
	units := []string{"logjail.service", "logjail-clean.service", "logjail-clean.timer"}
	var args []string
	for _, u := range units {
		b, err := os.ReadFile(filepath.Join(src, u))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte("/usr/local/bin/logjail")) && strings.HasSuffix(u, ".service") {
			t.Errorf("%s does not run /usr/local/bin/logjail", u)
		}
		b = bytes.ReplaceAll(b, []byte("/usr/local/bin/logjail"), []byte(self))
		p := filepath.Join(dir, u)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, p)
	}
	cmd := exec.Command(analyze, append([]string{"verify", "--man=no", "--recursive-errors=no"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestSystemdUnitsCommented: every directive of the units has a comment
// line above it saying why.
func TestSystemdUnitsCommented(t *testing.T) {
	for _, u := range []string{"logjail.service", "logjail-clean.service", "logjail-clean.timer"} {
		b, err := os.ReadFile(filepath.Join("..", "contrib", "systemd", u))
		if err != nil {
			t.Fatal(err)
		}
		prev := ""
		for i, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			if line != "" && !strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "[") && !strings.HasPrefix(prev, "#") {
				t.Errorf("%s:%d: %q has no comment above it", u, i+1, line)
			}
			prev = line
		}
	}
}
