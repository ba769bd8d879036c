package store

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/mattn/go-sqlite3"

	"github.com/logjail/logjail/internal/testenv"
)

var cmpAddr = cmpopts.EquateComparable(netip.Addr{})

// at is a log time in whole milliseconds, in UTC, as the store gives back.
func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func mustOpen(t testing.TB, path string, o Options) *DB {
	t.Helper()
	db, err := Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// raw opens the database file directly, without the package.
func raw(t testing.TB, path string) *sql.DB {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(&connector{dsn: dsn(abs, false), drv: &sqlite3.SQLiteDriver{}})
	t.Cleanup(func() { db.Close() })
	return db
}

// state is everything a database holds, read back through the API.
type state struct {
	Global    []byte
	Time      time.Time
	Keys      []KeyRow
	Bans      []Ban
	History   []Event
	Positions []Position
}

func readState(t testing.TB, db *DB) state {
	t.Helper()
	var s state
	var err error
	if s.Global, s.Time, err = db.Global(); err != nil {
		t.Fatal(err)
	}
	if err := db.Keys(func(r *KeyRow) error {
		c := *r
		c.Data = bytes.Clone(r.Data)
		s.Keys = append(s.Keys, c)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if s.Bans, err = db.ActiveBans(); err != nil {
		t.Fatal(err)
	}
	if s.History, err = db.History(HistoryQuery{}); err != nil {
		t.Fatal(err)
	}
	if s.Positions, err = db.Positions(); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "logjail.db")
	db := mustOpen(t, path, Options{})

	v4, v6 := netip.MustParseAddr("203.0.113.7"), netip.MustParseAddr("2001:db8::1")
	keyA := KeyRow{Rule: "flood", Key: "203.0.113.7", Data: []byte("state A"), LastSeen: at("2026-11-22T10:00:01.250Z"),
		Requests: 120, Blocked: 3, CPU: 1.5, Phase: PhaseThrottle, Until: at("2026-11-22T10:00:11.250Z")}
	keyB := KeyRow{Rule: "flood", Key: "2001:db8::/64", Data: []byte{0, 1, 2, 255}, LastSeen: at("2026-11-22T10:00:02Z"), Requests: 7}
	keyC := KeyRow{Rule: "heavy", Key: "203.0.113.7", Data: []byte{}, LastSeen: at("2026-11-22T09:59:00Z"), CPU: 0.25}
	banA := Ban{Rule: "flood", Key: "203.0.113.7", Kind: PhaseThrottle, Since: at("2026-11-22T10:00:01.250Z"), Until: at("2026-11-22T10:00:11.250Z"),
		Reason: "rate 21 per 1s > 20 (rule flood)", Origin: OriginDetector, Node: "web1"}
	banR := Ban{Rule: "range:bots", Key: "range:bots", Kind: PhaseBan, Since: at("2026-11-22T10:00:00Z"),
		Reason: "deny list", Violations: 0, Addresses: []netip.Addr{v4, v6}, Origin: OriginDeny, LogOnly: true}
	ev1 := Event{Time: at("2026-11-22T10:00:00Z"), Rule: "range:bots", Key: "range:bots", Kind: KindBan, Reason: "deny list",
		Addresses: []netip.Addr{v4, v6}, Origin: OriginDeny, LogOnly: true}
	ev2 := Event{Time: at("2026-11-22T10:00:01.250Z"), Rule: "flood", Key: "203.0.113.7", Kind: KindThrottle,
		Until: at("2026-11-22T10:00:11.250Z"), Reason: "rate 21 per 1s > 20 (rule flood)", Origin: OriginDetector, Node: "web1"}
	posA := Position{Path: "/var/log/nginx/access.log", Dev: 2049, Inode: 1 << 63, Offset: 123456, Line: 999, HeadHash: "abc", Size: 200000}
	posB := Position{Path: "/var/log/nginx/other.log", Dev: 2049, Inode: 77, Offset: 10, Line: 1, HeadHash: "def", Size: 10}

	first := &Checkpoint{
		Time: at("2026-11-22T10:00:02Z"), Global: []byte("global 1"),
		Keys:      []KeyRow{keyC, keyA, keyB},
		Events:    []Event{ev1, ev2},
		SetBans:   []Ban{banR, banA},
		Positions: []Position{posA, posB},
		Meta:      map[string]string{"config": "hash1"},
	}
	if err := db.Checkpoint(first); err != nil {
		t.Fatal(err)
	}
	want := state{
		Global: []byte("global 1"), Time: at("2026-11-22T10:00:02Z"),
		Keys:      []KeyRow{keyB, keyA, keyC}, // "2001:…" sorts before "203.…"
		Bans:      []Ban{banA, banR},
		History:   []Event{ev2, ev1},
		Positions: []Position{posA, posB},
	}
	check := func(when string) {
		t.Helper()
		for _, d := range []struct {
			name string
			db   *DB
		}{{"writer", db}, {"reader", mustOpen(t, path, Options{ReadOnly: true})}} {
			if diff := cmp.Diff(want, readState(t, d.db), cmpAddr); diff != "" {
				t.Errorf("%s, read by the %s (-want +got):\n%s", when, d.name, diff)
			}
		}
		if v, ok, err := db.Meta("config"); err != nil || !ok || v != "hash1" {
			t.Errorf("%s: meta config = %q, %v, %v; want hash1", when, v, ok, err)
		}
	}
	check("after the first checkpoint")

	// The second names only what changed: B updated, C deleted, D new, A
	// and its position untouched; the throttle of A became a ban, the
	// range ban is lifted.
	keyB2 := keyB
	keyB2.Data, keyB2.Requests, keyB2.LastSeen = []byte("B again"), 9, at("2026-11-22T10:00:06Z")
	keyD := KeyRow{Rule: "scanners", Key: "198.51.100.1", Data: []byte("D"), LastSeen: at("2026-11-22T10:00:05Z"), Requests: 1}
	banA2 := banA
	banA2.Kind, banA2.Since, banA2.Until, banA2.Violations, banA2.Reason = PhaseBan, at("2026-11-22T10:00:05Z"), at("2026-11-22T10:03:05Z"), 5, "5 violations"
	ev3 := Event{Time: at("2026-11-22T10:00:05Z"), Rule: "flood", Key: "203.0.113.7", Kind: KindBan, Until: banA2.Until,
		Reason: "5 violations", Violations: 5, Origin: OriginDetector}
	ev4 := Event{Time: at("2026-11-22T10:00:06Z"), Rule: "range:bots", Key: "range:bots", Kind: KindUnban, Reason: "lifted",
		Origin: OriginOperator, Who: "alice"}
	posB2 := posB
	posB2.Offset, posB2.Line, posB2.Size = 20, 2, 20
	second := &Checkpoint{
		Time: at("2026-11-22T10:00:07Z"), Global: []byte("global 2"),
		Keys:      []KeyRow{keyB2, {Rule: keyC.Rule, Key: keyC.Key}, keyD},
		Events:    []Event{ev3, ev4},
		SetBans:   []Ban{banA2},
		DelBans:   []BanKey{{Rule: banR.Rule, Key: banR.Key}},
		Positions: []Position{posB2},
	}
	if err := db.Checkpoint(second); err != nil {
		t.Fatal(err)
	}
	want = state{
		Global: []byte("global 2"), Time: at("2026-11-22T10:00:07Z"),
		Keys:      []KeyRow{keyB2, keyA, keyD},
		Bans:      []Ban{banA2},
		History:   []Event{ev4, ev3, ev2, ev1},
		Positions: []Position{posA, posB2},
	}
	check("after the second checkpoint")

	// History queries.
	for _, tc := range []struct {
		name string
		q    HistoryQuery
		want []Event
	}{
		{"by key", HistoryQuery{Key: "203.0.113.7"}, []Event{ev3, ev2}},
		{"by rule", HistoryQuery{Rule: "range:bots"}, []Event{ev4, ev1}},
		{"by kind", HistoryQuery{Kind: KindBan}, []Event{ev3, ev1}},
		{"since", HistoryQuery{Since: at("2026-11-22T10:00:05Z")}, []Event{ev4, ev3}},
		{"until", HistoryQuery{Until: at("2026-11-22T10:00:05Z")}, []Event{ev2, ev1}},
		{"limit", HistoryQuery{Limit: 1}, []Event{ev4}},
		{"key and time", HistoryQuery{Key: "203.0.113.7", Since: at("2026-11-22T10:00:02Z"), Limit: 5}, []Event{ev3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := db.History(tc.q)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmpAddr); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}

	// Top keys and ended bans.
	top, err := db.TopKeys("flood", "requests", 1)
	if err != nil || len(top) != 1 || top[0].Key != keyA.Key || top[0].Data != nil || top[0].Requests != 120 {
		t.Errorf("TopKeys(flood, requests, 1) = %+v, %v; want %s without data", top, err, keyA.Key)
	}
	if ended, err := db.EndedBans(at("2026-11-22T10:03:05Z")); err != nil || len(ended) != 1 || ended[0].Key != keyA.Key {
		t.Errorf("EndedBans at its until = %+v, %v; want the ban of %s", ended, err, keyA.Key)
	}
	if ended, err := db.EndedBans(at("2026-11-22T10:03:04.999Z")); err != nil || len(ended) != 0 {
		t.Errorf("EndedBans before its until = %+v, %v; want none", ended, err)
	}
	if _, err := db.TopKeys("flood", "bytes", 1); err == nil {
		t.Error("TopKeys by an unknown column: no error")
	}

	// A checkpoint that fails writes nothing.
	bad := &Checkpoint{Time: at("2026-11-22T10:00:08Z"), Global: []byte("global 3"),
		Keys:    []KeyRow{{Rule: "flood", Key: "192.0.2.1", Data: []byte("x"), LastSeen: at("2026-11-22T10:00:08Z")}},
		SetBans: []Ban{{Rule: "flood", Key: "192.0.2.1", Kind: "jail"}}}
	if err := db.Checkpoint(bad); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "checkpoint") {
		t.Errorf("a checkpoint with a bad ban kind: %v; want an error naming the database and the operation", err)
	}
	check("after a failed checkpoint")
}

func TestEmpty(t *testing.T) {
	path := filepath.Join(t.TempDir(), "logjail.db")
	db := mustOpen(t, path, Options{})
	if g, tm, err := db.Global(); g != nil || !tm.IsZero() || err != nil {
		t.Errorf("Global of a new database = %q, %v, %v; want nil", g, tm, err)
	}
	if _, ok, err := db.Meta("x"); ok || err != nil {
		t.Errorf("Meta of a new database: %v, %v", ok, err)
	}
	if err := db.SetMeta("x", "1"); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := db.Meta("x"); v != "1" || !ok || err != nil {
		t.Errorf("Meta after SetMeta = %q, %v, %v", v, ok, err)
	}
	// A checkpoint without a global blob still counts as one.
	if err := db.Checkpoint(&Checkpoint{Time: at("2026-11-22T10:00:00Z")}); err != nil {
		t.Fatal(err)
	}
	if g, tm, err := db.Global(); g == nil || len(g) != 0 || !tm.Equal(at("2026-11-22T10:00:00Z")) || err != nil {
		t.Errorf("Global after an empty checkpoint = %q, %v, %v; want empty, not nil", g, tm, err)
	}

	r := mustOpen(t, path, Options{ReadOnly: true})
	for name, err := range map[string]error{
		"Checkpoint": r.Checkpoint(&Checkpoint{}),
		"SetMeta":    r.SetMeta("x", "2"),
	} {
		if !errors.Is(err, ErrReadOnly) {
			t.Errorf("%s on a reader: %v, want ErrReadOnly", name, err)
		}
	}
	if _, err := r.Prune(time.Now(), PruneOptions{}); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Prune on a reader: %v, want ErrReadOnly", err)
	}

	// A reader of a database that does not exist says so.
	_, err := Open(filepath.Join(t.TempDir(), "none.db"), Options{ReadOnly: true})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("reader of a missing database: %v, want ErrNotExist", err)
	}
}

func TestPragmas(t *testing.T) {
	path := filepath.Join(t.TempDir(), "logjail.db")
	db := mustOpen(t, path, Options{})
	for pragma, want := range map[string]string{
		"journal_mode": "wal",
		"auto_vacuum":  "2", // incremental
		"synchronous":  "1", // normal
		"foreign_keys": "1",
		"busy_timeout": "5000",
		"user_version": strconv.Itoa(Version()),
		"page_size":    "16384",
		// 16 MiB of pages
		"wal_autocheckpoint": "1024",
	} {
		var got string
		if err := db.w.QueryRow("PRAGMA " + pragma).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("PRAGMA %s = %s, want %s", pragma, got, want)
		}
	}
	r := mustOpen(t, path, Options{ReadOnly: true})
	if _, err := r.r.Exec("INSERT INTO meta VALUES ('a', 'b')"); err == nil {
		t.Error("a reader's connection wrote")
	}
	r.Close()
	db.Close()
	// The writer leaves an empty WAL and the -shm behind, for readers
	// that may not create them.
	for _, suffix := range []string{"-wal", "-shm"} {
		if fi, err := os.Stat(path + suffix); err != nil {
			t.Errorf("after the writer closed: %v", err)
		} else if suffix == "-wal" && fi.Size() != 0 {
			t.Errorf("after the writer closed the WAL holds %d bytes, want 0", fi.Size())
		}
	}
}

// testGroup returns a group the test may give files, to check that Open
// sets it: "logjail" where it exists, else (as root) an existing system
// group. The system's groups are never changed.
func testGroup(t *testing.T) (name string, gid int) {
	for _, name := range []string{DefaultGroup, "nogroup", "daemon"} {
		g, err := user.LookupGroup(name)
		if err != nil {
			continue
		}
		gid, _ := strconv.Atoi(g.Gid)
		if name == DefaultGroup || os.Geteuid() == 0 {
			return name, gid
		}
	}
	return "", -1
}

func TestPermissions(t *testing.T) {
	old := syscall.Umask(0o077) // Open must not depend on the umask
	defer syscall.Umask(old)

	modes := func(t *testing.T, dir, path string, gid int) {
		t.Helper()
		for _, c := range []struct {
			path string
			mode fs.FileMode
		}{
			{dir, fs.ModeDir | dirMode},
			{path, fileMode},
			{path + "-wal", fileMode},
			{path + "-shm", fileMode},
			{path + ".lock", fileMode},
		} {
			fi, err := os.Stat(c.path)
			if err != nil {
				t.Error(err)
				continue
			}
			if fi.Mode() != c.mode {
				t.Errorf("%s: mode %v, want %v", c.path, fi.Mode(), c.mode)
			}
			if st := fi.Sys().(*syscall.Stat_t); gid >= 0 && int(st.Gid) != gid {
				t.Errorf("%s: group %d, want %d", c.path, st.Gid, gid)
			}
		}
	}
	write := func(t *testing.T, db *DB) {
		t.Helper()
		if err := db.Checkpoint(&Checkpoint{Time: at("2026-11-22T10:00:00Z"), Global: []byte("g"),
			Keys: []KeyRow{{Rule: "r", Key: "k", Data: []byte("d")}}}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("default group", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "state")
		path := filepath.Join(dir, "logjail.db")
		db := mustOpen(t, path, Options{})
		write(t, db)
		gid := -1
		if g, err := user.LookupGroup(DefaultGroup); err == nil {
			gid, _ = strconv.Atoi(g.Gid)
		} else {
			t.Logf("no group %q here: modes checked, not the group", DefaultGroup)
		}
		modes(t, dir, path, gid)
	})

	t.Run("named group", func(t *testing.T) {
		name, gid := testGroup(t)
		if name == "" {
			testenv.Skip(t, "no group this process may give files (root may give any; CI runs as root)")
		}
		dir := filepath.Join(t.TempDir(), "state")
		path := filepath.Join(dir, "logjail.db")
		db := mustOpen(t, path, Options{Group: name})
		write(t, db)
		modes(t, dir, path, gid)
		db.Close()
		// A second writer repairs files whose mode was changed.
		os.Chmod(path, 0o600)
		os.Chmod(path+"-wal", 0o600)
		write(t, mustOpen(t, path, Options{Group: name}))
		modes(t, dir, path, gid)
	})

	t.Run("existing directory kept", func(t *testing.T) {
		dir := t.TempDir()
		os.Chmod(dir, 0o755)
		mustOpen(t, filepath.Join(dir, "x.db"), Options{})
		if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o755 {
			t.Errorf("an existing directory's mode changed to %v", fi.Mode())
		}
	})
}

func TestOneWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "logjail.db")
	w1 := mustOpen(t, path, Options{})
	if err := w1.Checkpoint(&Checkpoint{Time: at("2026-11-22T10:00:00Z"), Global: []byte("one")}); err != nil {
		t.Fatal(err)
	}

	_, err := Open(path, Options{})
	var le *LockedError
	if !errors.Is(err, ErrLocked) || !errors.As(err, &le) || le.PID != os.Getpid() {
		t.Fatalf("second writer: %v; want ErrLocked naming pid %d", err, os.Getpid())
	}
	if !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) || !strings.Contains(err.Error(), path) {
		t.Errorf("the error %q names neither the holder nor the database", err)
	}

	r := mustOpen(t, path, Options{ReadOnly: true})
	if g, _, err := r.Global(); err != nil || string(g) != "one" {
		t.Errorf("reader beside the writer: %q, %v", g, err)
	}

	w1.Close()
	w2 := mustOpen(t, path, Options{})
	if err := w2.Checkpoint(&Checkpoint{Time: at("2026-11-22T10:00:01Z"), Global: []byte("two")}); err != nil {
		t.Fatal(err)
	}
	if g, _, err := r.Global(); err != nil || string(g) != "two" {
		t.Errorf("reader after the second writer: %q, %v", g, err)
	}
}

// TestLockHolder is the process TestLockReleasedOnDeath and
// TestGroupReader kill: it opens $STORE_LOCK_DB as a writer, writes a
// checkpoint, says so and waits. Without it, it does nothing.
func TestLockHolder(t *testing.T) {
	path := os.Getenv("STORE_LOCK_DB")
	if path == "" {
		// Run by TestLockReleasedOnDeath and TestGroupReader only: alone
		// there is nothing to do, and returning (not skipping) keeps the
		// run's skips to tests that could not run.
		return
	}
	db, err := Open(path, Options{Group: os.Getenv("STORE_LOCK_GROUP")})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Checkpoint(&Checkpoint{Time: at("2026-11-22T11:00:00Z"), Global: []byte("written by the holder")}); err != nil {
		t.Fatal(err)
	}
	fmt.Println("locked")
	select {} // until killed
}

// startLockHolder runs TestLockHolder (binary bin, the test binary itself
// by default) on path with the extra environment env, and returns once it
// holds the writer lock and has written its checkpoint. The test kills it.
func startLockHolder(t *testing.T, bin, path string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, "-test.run=^TestLockHolder$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), "STORE_LOCK_DB="+path), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "locked\n" {
		t.Fatalf("the holder said %q, %v", line, err)
	}
	return cmd
}

// TestLockReleasedOnDeath: the writer lock is a flock, which the kernel
// releases when its holder dies, even by SIGKILL.
func TestLockReleasedOnDeath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "logjail.db")
	cmd := startLockHolder(t, os.Args[0], path)

	_, err := Open(path, Options{})
	var le *LockedError
	if !errors.As(err, &le) || le.PID != cmd.Process.Pid {
		t.Fatalf("writer beside the holder: %v; want ErrLocked naming pid %d", err, cmd.Process.Pid)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	mustOpen(t, path, Options{})
}

func TestMigrations(t *testing.T) {
	t.Run("from version 1", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "logjail.db")
		// A database of version 1 as a version-1 writer made it (this
		// build's writer prepares statements naming the node column,
		// which version 1 has not), with what it wrote, in its own
		// statements.
		ctx := context.Background()
		c, err := raw(t, path).Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		t0 := at("2026-11-22T10:00:00Z")
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{strings.Join(writerPragmas, "; "), nil},
			{migrations[0], nil},
			{`PRAGMA user_version = 1`, nil},
			{`INSERT INTO detector (id, time_ms, checkpoints, data) VALUES (1, ?1, 1, ?2)`, []any{t0.UnixMilli(), []byte("v1")}},
			{`INSERT INTO keys (rule, key, last_seen_ms, requests, blocked, cpu, phase, until_ms, data)
				VALUES ('r', 'k', ?1, 1, 0, 0, '', NULL, x'64')`, []any{t0.UnixMilli()}},
			{`INSERT INTO bans (rule, key, kind, since_ms, until_ms, reason, violations, addresses, origin, who, log_only)
				VALUES ('flood', '203.0.113.0/24', 'ban', ?1, ?2, 'rate', 2, '203.0.113.7,203.0.113.9', 'detector', '', 0)`,
				[]any{t0.UnixMilli(), t0.Add(time.Hour).UnixMilli()}},
			{`INSERT INTO history (time_ms, rule, key, kind, until_ms, reason, violations, addresses, origin, who, log_only)
				VALUES (?1, 'flood', '203.0.113.0/24', 'ban', ?2, 'rate', 2, '203.0.113.7,203.0.113.9', 'detector', '', 0)`,
				[]any{t0.UnixMilli(), t0.Add(time.Hour).UnixMilli()}},
		} {
			if _, err := c.ExecContext(ctx, q.sql, q.args...); err != nil {
				t.Fatalf("%s: %v", q.sql, err)
			}
		}
		c.Close()
		addrs := []netip.Addr{netip.MustParseAddr("203.0.113.7"), netip.MustParseAddr("203.0.113.9")}
		wantBans := []Ban{{Rule: "flood", Key: "203.0.113.0/24", Kind: PhaseBan, Since: t0, Until: t0.Add(time.Hour), Reason: "rate",
			Violations: 2, Addresses: addrs, Origin: OriginDetector}}
		wantHistory := []Event{{Time: t0, Rule: "flood", Key: "203.0.113.0/24", Kind: KindBan, Until: t0.Add(time.Hour), Reason: "rate",
			Violations: 2, Addresses: addrs, Origin: OriginDetector}}

		// The current build, and one with a further migration.
		extra := append(append([]string(nil), migrations...),
			`ALTER TABLE meta ADD COLUMN note TEXT NOT NULL DEFAULT ''; INSERT INTO meta (key, value, note) VALUES ('m', 'v', 'migrated');`)
		for _, migs := range [][]string{migrations, extra} {
			db, err := open1(path, Options{}, migs)
			if err != nil {
				t.Fatal(err)
			}
			var v int
			db.w.QueryRow("PRAGMA user_version").Scan(&v)
			if v != len(migs) {
				t.Errorf("version %d after opening with %d migrations", v, len(migs))
			}
			if g, _, err := db.Global(); string(g) != "v1" || err != nil {
				t.Errorf("state after migrating to %d: %q, %v", len(migs), g, err)
			}
			// The bans and the history of version 1 read with no node,
			// by every read of the bans.
			for name, read := range banReads(db) {
				bs, err := read()
				if err != nil {
					t.Fatalf("%s after migrating to %d: %v", name, len(migs), err)
				}
				if diff := cmp.Diff(wantBans, bs, cmpAddr); diff != "" {
					t.Errorf("%s after migrating to %d (-want +got):\n%s", name, len(migs), diff)
				}
			}
			es, err := db.History(HistoryQuery{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantHistory, es, cmpAddr); diff != "" {
				t.Errorf("history after migrating to %d (-want +got):\n%s", len(migs), diff)
			}
			db.Close()
		}
		var note string
		if err := raw(t, path).QueryRow("SELECT note FROM meta WHERE key = 'm'").Scan(&note); err != nil || note != "migrated" {
			t.Errorf("the further migration: %q, %v", note, err)
		}

		// The migrated database takes a node like a new one.
		db, err := open1(path, Options{}, extra)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		b := Ban{Rule: "flood", Key: "198.51.100.7", Kind: PhaseBan, Since: t0, Until: t0.Add(time.Minute), Origin: OriginDetector, Node: "web2"}
		e := Event{Time: t0.Add(time.Second), Rule: "flood", Key: "203.0.113.0/24", Kind: KindUnban, Origin: OriginOperator, Who: "root", Node: "web1"}
		if err := db.Checkpoint(&Checkpoint{Time: t0, SetBans: []Ban{b}, Events: []Event{e}, DelBans: []BanKey{{Rule: "flood", Key: "203.0.113.0/24"}}}); err != nil {
			t.Fatal(err)
		}
		got := readState(t, db)
		if diff := cmp.Diff([]Ban{b}, got.Bans, cmpAddr); diff != "" {
			t.Errorf("bans written after the migration (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(append([]Event{e}, wantHistory...), got.History, cmpAddr); diff != "" {
			t.Errorf("history written after the migration (-want +got):\n%s", diff)
		}
	})

	t.Run("newer refused", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "logjail.db")
		mustOpen(t, path, Options{}).Close()
		if _, err := raw(t, path).Exec(fmt.Sprintf("PRAGMA user_version = %d", Version()+1)); err != nil {
			t.Fatal(err)
		}
		for _, o := range []Options{{}, {ReadOnly: true}} {
			_, err := Open(path, o)
			if !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), "newer") || !strings.Contains(err.Error(), path) {
				t.Errorf("Open(%+v) of a newer database: %v; want ErrSchema saying it is newer", o, err)
			}
		}
		// The refused writer released its lock.
		if _, err := raw(t, path).Exec(fmt.Sprintf("PRAGMA user_version = %d", Version())); err != nil {
			t.Fatal(err)
		}
		mustOpen(t, path, Options{})
	})

	t.Run("failed migration rolled back", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "logjail.db")
		mustOpen(t, path, Options{}).Close()
		broken := append(append([]string(nil), migrations...),
			`CREATE TABLE half (x); INSERT INTO half VALUES (1); INSERT INTO nosuch VALUES (1);`)
		if _, err := open1(path, Options{}, broken); err == nil || !strings.Contains(err.Error(), "nosuch") {
			t.Fatalf("a failing migration: %v", err)
		}
		var v, n int
		rdb := raw(t, path)
		rdb.QueryRow("PRAGMA user_version").Scan(&v)
		rdb.QueryRow("SELECT count(*) FROM sqlite_schema WHERE name = 'half'").Scan(&n)
		if v != Version() || n != 0 {
			t.Errorf("after a failed migration: version %d, table half %d; want %d and none", v, n, Version())
		}
		r := mustOpen(t, path, Options{ReadOnly: true})
		if _, _, err := r.Global(); err != nil {
			t.Error(err)
		}
		// A reader of an older database says a writer must migrate it.
		_, err := open1(path, Options{ReadOnly: true}, broken)
		if !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), "older") {
			t.Errorf("a reader of an older database: %v", err)
		}
	})
}

// open1 is Open with a list of migrations of the test's choosing.
func open1(path string, o Options, migs []string) (*DB, error) { return open(path, o, migs) }

// TestLockOnDatabaseFile: a second writer is refused while another process
// writes the database, even when the lock file was removed; the reader
// still reads beside the writer.
func TestLockOnDatabaseFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "logjail.db")
	startLockHolder(t, os.Args[0], path)
	if err := os.Remove(path + ".lock"); err != nil {
		t.Fatal(err)
	}
	w, err := Open(path, Options{})
	if err == nil {
		w.Close()
		t.Fatal("a second writer opened the database once the lock file was removed")
	}
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), path) {
		t.Errorf("second writer: %v; want ErrLocked naming %s", err, path)
	}
	r := mustOpen(t, path, Options{ReadOnly: true})
	if g, _, err := r.Global(); err != nil || string(g) != "written by the holder" {
		t.Errorf("reader beside the writer: %q, %v", g, err)
	}
}

// TestEmptyDatabaseRefused: a zero-length database file is not taken for
// a new one: a writer refuses it, saying what it is and what to do, and
// leaves it as it is.
func TestEmptyDatabaseRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "logjail.db")
	if err := os.WriteFile(path, nil, 0o640); err != nil {
		t.Fatal(err)
	}
	w, err := Open(path, Options{})
	if err == nil {
		w.Close()
		t.Fatal("an empty database file was opened as a new database")
	}
	if !errors.Is(err, ErrEmpty) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "remove it") {
		t.Errorf("error %q: want ErrEmpty naming %s and what to do", err, path)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Errorf("the empty file was changed: %v %v", fi, err)
	}
	// A database that does not exist is created, as always.
	mustOpen(t, filepath.Join(t.TempDir(), "new.db"), Options{})
}

// TestDiskFull: a write that finds no room (SQLite's SQLITE_FULL, here
// from a page limit on the writer's connection, as a full disk gives it)
// fails with ErrFull, which says what is wrong and what to do; the
// database keeps what it had, and writes again once there is room. So
// too with NoSync, whose rollback journal is in memory.
func TestDiskFull(t *testing.T) {
	for _, noSync := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoSync=%v", noSync), func(t *testing.T) { testDiskFull(t, noSync) })
	}
}

func testDiskFull(t *testing.T, noSync bool) {
	db := mustOpen(t, filepath.Join(t.TempDir(), "logjail.db"), Options{NoSync: noSync})
	if err := db.Checkpoint(&Checkpoint{Time: at("2026-11-22T10:00:00Z"), Global: []byte("before")}); err != nil {
		t.Fatal(err)
	}
	limit := func(pages int) {
		t.Helper()
		if err := db.withConn(func(c *conn) error {
			_, err := c.c.Exec(fmt.Sprintf("PRAGMA max_page_count = %d", pages), nil)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	var pages int
	if err := db.r.QueryRow("PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	limit(pages)
	err := db.Checkpoint(&Checkpoint{Time: at("2026-11-22T10:00:01Z"), Global: bytes.Repeat([]byte("x"), 1<<20)})
	if !errors.Is(err, ErrFull) || !strings.Contains(err.Error(), "disk holding the database is full") {
		t.Fatalf("a write with no room: %v; want ErrFull", err)
	}
	if g, _, err := db.Global(); err != nil || string(g) != "before" {
		t.Errorf("after the failed write: %q, %v; want what was there", g, err)
	}
	limit(1 << 30)
	if err := db.Checkpoint(&Checkpoint{Time: at("2026-11-22T10:00:02Z"), Global: []byte("after")}); err != nil {
		t.Errorf("once there is room: %v", err)
	}
}
