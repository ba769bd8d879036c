package store

import (
	"bytes"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mattn/go-sqlite3"
)

// BenchmarkNewDB measures what `replay --db` asks of a new database: Open
// (the file made, the schema migrated), one checkpoint of 13,500 key
// states (the 1M-line genlog's: 5,012 clients under three rules), and
// Close (the WAL copied into the database). open-ms, checkpoint-ms and
// close-ms are each step's wall time; most of open's and close's is
// fsync, which varies with the disk (the temporary directory's).
func BenchmarkNewDB(b *testing.B) {
	t0 := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	rows := benchKeys(13500, t0)
	dir := b.TempDir()
	var open, ckpt, closing time.Duration
	n := 0
	for b.Loop() {
		n++
		path := filepath.Join(dir, "replay"+itoa(n)+".db")
		s := time.Now()
		db, err := Open(path, Options{})
		if err != nil {
			b.Fatal(err)
		}
		open += time.Since(s)
		s = time.Now()
		if err := db.Checkpoint(&Checkpoint{Time: t0, Global: []byte("g"), Keys: rows}); err != nil {
			b.Fatal(err)
		}
		ckpt += time.Since(s)
		s = time.Now()
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
		closing += time.Since(s)
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(n) / 1e6 }
	b.ReportMetric(ms(open), "open-ms")
	b.ReportMetric(ms(ckpt), "checkpoint-ms")
	b.ReportMetric(ms(closing), "close-ms")
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		if n /= 10; n == 0 {
			return string(b[i:])
		}
	}
}

// schemaOf is what makes a database's schema what it is: its version,
// settings and every table and index as created.
func schemaOf(t *testing.T, path string) []string {
	t.Helper()
	rdb := raw(t, path)
	var out []string
	for _, p := range []string{"user_version", "page_size", "auto_vacuum", "journal_mode"} {
		var v string
		if err := rdb.QueryRow("PRAGMA " + p).Scan(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, p+" = "+v)
	}
	rows, err := rdb.Query("SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY name")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var typ, name, tbl string
		var q sql.NullString
		if err := rows.Scan(&typ, &name, &tbl, &q); err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.Join([]string{typ, name, tbl, q.String}, " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestNewSchemaAsMigrated: a new database, made in one transaction, has
// the schema and settings of one migrated a version at a time (as every
// database was made before, and as an older one still is); a migration
// that fails leaves a new database empty, at version 0, and the next Open
// makes it whole.
func TestNewSchemaAsMigrated(t *testing.T) {
	dir := t.TempDir()
	one := filepath.Join(dir, "one.db")
	mustOpen(t, one, Options{}).Close()
	steps := filepath.Join(dir, "steps.db")
	for k := 1; k <= len(migrations); k++ {
		w := sql.OpenDB(&connector{dsn: dsn(steps, false), drv: &sqlite3.SQLiteDriver{ConnectHook: writerHook(false, false)}})
		w.SetMaxOpenConns(1)
		err := migrate(w, migrations[:k])
		w.Close()
		if err != nil {
			t.Fatalf("to version %d: %v", k, err)
		}
	}
	got, want := schemaOf(t, one), schemaOf(t, steps)
	if len(want) < 10 || !reflect.DeepEqual(got, want) {
		t.Errorf("the schema of a new database:\n%s\nwant (migrated a version at a time):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if want[0] != fmt.Sprintf("user_version = %d", Version()) {
		t.Errorf("%s, want version %d", want[0], Version())
	}

	broken := filepath.Join(dir, "broken.db")
	migs := append(append([]string(nil), migrations...), `CREATE TABLE half (x); INSERT INTO nosuch VALUES (1);`)
	if _, err := open1(broken, Options{}, migs); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Fatalf("a new database whose last migration fails: %v", err)
	}
	var v, n int
	rdb := raw(t, broken)
	if err := rdb.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	if err := rdb.QueryRow("SELECT count(*) FROM sqlite_schema").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if v != 0 || n != 0 {
		t.Errorf("after a new database's failed migration: version %d, %d schema rows; want 0 and none", v, n)
	}
	mustOpen(t, broken, Options{}).Close()
	if got := schemaOf(t, broken); !reflect.DeepEqual(got, want) {
		t.Errorf("the schema made after a failed one:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestNoSync: a writer opened with NoSync never waits for the disk
// (synchronous = OFF, from the start) and keeps its rollback journal in
// memory when it makes the database; one without waits as doc.go says
// (NORMAL), in WAL mode. Both leave a database in WAL mode, -wal and -shm
// kept, and read back what they wrote; a NoSync writer of a database that
// exists keeps it in WAL mode.
func TestNoSync(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	for _, noSync := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "logjail.db")
		db := mustOpen(t, path, Options{NoSync: noSync})
		var sync int
		var mode string
		if err := db.w.QueryRow("PRAGMA synchronous").Scan(&sync); err != nil {
			t.Fatal(err)
		}
		if err := db.w.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
			t.Fatal(err)
		}
		wantMode := map[bool]string{false: "wal", true: "memory"}[noSync]
		if want := map[bool]int{false: 1, true: 0}[noSync]; sync != want || mode != wantMode {
			t.Errorf("NoSync %v: synchronous %d, journal_mode %s; want %d and %s", noSync, sync, mode, want, wantMode)
		}
		rows := benchKeys(100, t0)
		if err := db.Checkpoint(&Checkpoint{Time: t0, Global: []byte("g"), Keys: rows}); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{path + "-wal", path + "-shm"} {
			if _, err := os.Stat(f); err != nil {
				t.Errorf("NoSync %v: after Close: %v", noSync, err)
			}
		}
		r := mustOpen(t, path, Options{ReadOnly: true})
		if err := r.r.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
			t.Errorf("NoSync %v: the database closed is in journal mode %q (%v), want wal", noSync, mode, err)
		}
		want := map[string][]byte{}
		for _, k := range rows {
			want[k.Key] = k.Data
		}
		n := 0
		if err := r.Keys(func(k *KeyRow) error {
			if !bytes.Equal(k.Data, want[k.Key]) {
				t.Errorf("NoSync %v: key %s reads back as %x, want %x", noSync, k.Key, k.Data, want[k.Key])
			}
			n++
			return nil
		}); err != nil || n != len(rows) {
			t.Errorf("NoSync %v: %d keys read back (%v), want %d", noSync, n, err, len(rows))
		}
		// A database that exists stays in WAL mode under a NoSync writer
		// (leaving it would wait for the reader still open, r).
		again, err := Open(path, Options{NoSync: true})
		if err != nil {
			t.Fatalf("NoSync %v: a NoSync writer of the existing database, a reader open: %v", noSync, err)
		}
		if err := again.w.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
			t.Errorf("NoSync %v: a NoSync writer of an existing database: journal mode %q (%v), want wal", noSync, mode, err)
		}
		if err := again.Close(); err != nil {
			t.Error(err)
		}
	}
}
