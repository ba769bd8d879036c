package follow

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/logjail/logjail/internal/testenv"
)

// noInotifyEnv marks the child of TestFollowWithoutInotify: it runs in a
// user namespace of its own where no inotify instance can be had.
const noInotifyEnv = "LOGJAIL_TEST_NO_INOTIFY"

// TestFollowWithoutInotify follows a file where inotify_init fails (a host
// at its fs.inotify.max_user_instances): Follow must poll and hand out the
// lines. nxadm/tail's tracker ended the process there (util.Fatal, "failed
// to create Watcher") before trackerReady. The test runs itself again
// under `unshare -Ur`, as root of a user namespace of its own, which sets
// that namespace's /proc/sys/user/max_inotify_instances to 0: the host's
// own limit is not touched.
func TestFollowWithoutInotify(t *testing.T) {
	if os.Getenv(noInotifyEnv) != "" {
		followWithoutInotify(t)
		return
	}
	if runtime.GOOS != "linux" {
		t.Skip("inotify is Linux's")
	}
	unshare := testenv.Need(t, "unshare")[0]
	cmd := exec.Command(unshare, "-Ur", os.Args[0], "-test.run=^TestFollowWithoutInotify$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), noInotifyEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil && strings.Contains(string(out), "unshare failed") {
		testenv.Skip(t, "no user namespaces here: %s", out)
	}
	if err != nil || !strings.Contains(string(out), "--- PASS: TestFollowWithoutInotify") {
		t.Fatalf("in a user namespace without inotify: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "inotify unavailable: polling every followed file") {
		t.Errorf("no warning that inotify is unavailable:\n%s", out)
	}
}

// followWithoutInotify is TestFollowWithoutInotify's child.
func followWithoutInotify(t *testing.T) {
	if err := os.WriteFile("/proc/sys/user/max_inotify_instances", []byte("0\n"), 0o644); err != nil {
		t.Fatalf("no inotify instance for this namespace: %v", err)
	}
	name := filepath.Join(t.TempDir(), "access.log")
	appendFile(t, name, "")
	r := start(t, Options{Paths: []string{name}, FromStart: true})
	appendFile(t, name, "first\nsecond\n")
	r.waitLines(2)
	appendFile(t, name, "third\n")
	lines := r.waitLines(3)
	if diff := onlyLines(lines); len(diff) != 3 || diff[2].Text != "third" {
		t.Errorf("lines: %+v", diff)
	}
	r.mu.Lock()
	for _, l := range r.logs {
		t.Log("log: " + l)
	}
	r.mu.Unlock()
}
