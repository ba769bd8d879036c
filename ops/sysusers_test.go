package ops

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/logjail/logjail/internal/testenv"
)

// TestSysusers applies contrib/systemd/logjail.sysusers with the real
// systemd-sysusers to an empty root directory: it creates the system group
// logjail (the control socket's and the database's) and no user.
func TestSysusers(t *testing.T) {
	sysusers := testenv.Need(t, "systemd-sysusers")[0]
	conf, err := filepath.Abs(filepath.Join("..", "contrib", "systemd", "logjail.sysusers"))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(sysusers, "--root="+root, conf).CombinedOutput(); err != nil {
		t.Fatalf("systemd-sysusers: %v\n%s", err, out)
	}
	group, err := os.ReadFile(filepath.Join(root, "etc", "group"))
	if err != nil {
		t.Fatal(err)
	}
	// A system group: gid below 1000 (SYS_GID_MAX).
	if !regexp.MustCompile(`(?m)^logjail:x:[1-9][0-9]{0,2}:$`).Match(group) {
		t.Errorf("/etc/group after systemd-sysusers:\n%s\nwant a system group logjail", group)
	}
	if passwd, err := os.ReadFile(filepath.Join(root, "etc", "passwd")); err == nil && len(passwd) > 0 {
		t.Errorf("systemd-sysusers created users:\n%s", passwd)
	}
}
