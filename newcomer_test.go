package logjail

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/logjail/logjail/internal/testenv"
)

// TestNewcomer runs scripts/newcomer.sh: the README's first command in a
// fresh clone with an empty GOCACHE, its output checked for the report's
// summary, a ban with its reason and a non-zero CPU column. It compiles
// everything (about a minute and a half on two cores), so -short skips it;
// CI runs it. Offline without the modules cached it skips (fails under
// CI=true).
func TestNewcomer(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the newcomer's first command compiles everything afresh")
	}
	testenv.Need(t, "go", "git", "make", "gcc")
	cmd := exec.Command("scripts/newcomer.sh")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 77 {
		testenv.Skip(t, "scripts/newcomer.sh: %s", strings.TrimSpace(string(out)))
	}
	if err != nil {
		t.Fatalf("scripts/newcomer.sh: %v\n%s", err, out)
	}
	for _, want := range []string{"building logjail (first run", "\nSUMMARY\n", "(rule heavy)", "\n  COSTLIEST KEYS "} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the first command's output lacks %q:\n%s", want, out)
		}
	}
	t.Logf("scripts/newcomer.sh:\n%s", out)
}
