package control

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/logjail/logjail/internal/testenv"
)

// TestSocketGroup: the control socket is 0660 and belongs to the group
// (logjail by default, which contrib/systemd/logjail.sysusers creates), so
// that the group's members can use it without root. The test gives it
// nogroup (gid 65534), a group this root process is not in.
func TestSocketGroup(t *testing.T) {
	testenv.Root(t, "gives the socket a group the process is not in")
	path := filepath.Join(t.TempDir(), "control.sock")
	srv, err := Listen(ServerOptions{Path: path, Daemon: &fakeDaemon{cfg: testCfg(t)}, Group: "nogroup"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	defer func() { cancel(); <-done }()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Gid != 65534 || fi.Mode().Perm() != 0o660 {
		t.Errorf("socket: gid %d mode %v, want gid 65534 (nogroup) and 0660", st.Gid, fi.Mode().Perm())
	}
}
