package store

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/logjail/logjail/internal/testenv"
)

// TestGroupReader is the deployment: root writes, and a member of the
// database's group, who may read its files and not write them nor the
// directory, reads while the writer runs and after it has stopped (the
// writer leaves the -wal and -shm files a reader cannot create), and after
// a writer was killed with its last checkpoint in the WAL. The
// reader is this test binary run as nobody:nogroup, with nogroup as the
// database's group.
func TestGroupReader(t *testing.T) {
	testenv.Root(t, "runs a reader as another user")
	u, err1 := user.Lookup("nobody")
	g, err2 := user.LookupGroup("nogroup")
	if err1 != nil || err2 != nil {
		testenv.Skip(t, "no nobody:nogroup here")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(g.Gid)

	// A tree nobody may walk: the test's directories are 0700.
	base := t.TempDir()
	for d := base; strings.HasPrefix(d, os.TempDir()+"/"); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(base, "store.test")
	copyFile(t, os.Args[0], bin)
	path := filepath.Join(base, "state", "logjail.db")

	w := mustOpen(t, path, Options{Group: "nogroup"})
	c := &Checkpoint{Time: at("2026-11-22T10:00:00Z"), Global: []byte("root wrote this"),
		Keys:    []KeyRow{{Rule: "flood", Key: "203.0.113.7", Data: []byte("d"), LastSeen: at("2026-11-22T10:00:00Z")}},
		SetBans: []Ban{{Rule: "flood", Key: "203.0.113.7", Kind: PhaseBan, Since: at("2026-11-22T10:00:00Z"), Origin: OriginDetector}}}
	if err := w.Checkpoint(c); err != nil {
		t.Fatal(err)
	}

	read := func(when, global string) {
		t.Helper()
		cmd := exec.Command(bin, "-test.run=^TestGroupReaderChild$", "-test.count=1", "-test.v")
		cmd.Dir = base
		// GORACE: a race-enabled binary otherwise waits a second at exit.
		cmd.Env = append(os.Environ(), "STORE_READER_DB="+path, "GORACE=atexit_sleep_ms=0")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "read: "+global+", 1 keys, 1 bans") {
			t.Errorf("%s: the reader failed: %v\n%s", when, err, out)
		}
		t.Logf("%s: %s", when, strings.TrimSpace(strings.Split(string(out), "\n")[1]))
	}
	read("while the writer runs", "root wrote this")
	if err := w.Checkpoint(&Checkpoint{Time: at("2026-11-22T10:00:05Z"), Global: []byte("root wrote this")}); err != nil {
		t.Fatal(err)
	}
	read("after another checkpoint", "root wrote this")
	w.Close()
	read("after the writer stopped", "root wrote this")

	// A writer killed with its last checkpoint still in the WAL.
	holder := startLockHolder(t, bin, path, "STORE_LOCK_GROUP=nogroup")
	holder.Process.Signal(syscall.SIGKILL)
	holder.Wait()
	if fileSize(t, path+"-wal") == 0 {
		t.Error("the killed writer's checkpoint is not in the WAL: the case is not tested")
	}
	read("after the writer was killed", "written by the holder")
}

// TestGroupReaderChild is the reader TestGroupReader runs as another user.
func TestGroupReaderChild(t *testing.T) {
	path := os.Getenv("STORE_READER_DB")
	if path == "" {
		return // run by TestGroupReader only: alone, nothing to do (not a skip)
	}
	db, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	g, _, err := db.Global()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := db.Keys(func(*KeyRow) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	bans, err := db.ActiveBans()
	if err != nil {
		t.Fatal(err)
	}
	// A reader may not become a writer.
	if w, err := Open(path, Options{}); err == nil {
		w.Close()
		t.Error("a group member opened the database as a writer")
	}
	fmt.Printf("read: %s, %d keys, %d bans\n", g, n, len(bans))
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSQLiteCLI reads a running writer's database with the sqlite3 command,
// as an operator would, with the query of the package documentation.
func TestSQLiteCLI(t *testing.T) {
	sqlite3 := testenv.Need(t, "sqlite3")[0]
	path := filepath.Join(t.TempDir(), "logjail.db")
	w := mustOpen(t, path, Options{})
	if err := w.Checkpoint(&Checkpoint{Time: at("2026-11-22T10:00:00Z"), SetBans: []Ban{{Rule: "flood", Key: "203.0.113.7",
		Kind: PhaseBan, Since: at("2026-11-22T10:00:00Z"), Until: at("2026-11-22T10:03:00Z"), Reason: "5 violations", Origin: OriginDetector}}}); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sqlite3, "-readonly", path,
		"select rule, key, kind, datetime(until_ms/1000, 'unixepoch'), reason from bans").CombinedOutput()
	if want := "flood|203.0.113.7|ban|2026-11-22 10:03:00|5 violations\n"; err != nil || string(out) != want {
		t.Errorf("sqlite3 beside the writer: %v\n%s\nwant %s", err, out, want)
	}
	// The writer goes on.
	if err := w.Checkpoint(&Checkpoint{Time: at("2026-11-22T10:00:05Z")}); err != nil {
		t.Fatal(err)
	}
}
