package follow

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMissingDirectoryIsQuiet: a configured log whose directory does not
// exist (the example config's Apache paths on an nginx host) is no warning:
// one debug line says it is polled for, however many rescans pass, and its
// lines are read once the directory and the file appear.
func TestMissingDirectoryIsQuiet(t *testing.T) {
	dir := t.TempDir()
	here, missing := filepath.Join(dir, "access.log"), filepath.Join(dir, "apache2", "access.log")
	appendFile(t, here, "")
	r := start(t, Options{Paths: []string{here, missing}, FromStart: true})
	r.waitLog("no such directory yet: polling for the file path=" + missing)
	appendFile(t, here, "a\n")
	r.waitLines(1)
	if err := os.Mkdir(filepath.Dir(missing), 0o755); err != nil {
		t.Fatal(err)
	}
	appendFile(t, missing, "b\nc\n")
	r.waitLines(3)
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, l := range r.logs {
		if strings.HasPrefix(l, "inotify unavailable") {
			t.Errorf("a warning for a missing directory: %s", l)
		}
		if strings.HasPrefix(l, "no such directory yet") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("said %d times that the directory is missing, want once: %q", n, r.logs)
	}
}
