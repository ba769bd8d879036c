package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mattn/go-sqlite3"
)

const (
	dirMode  = 0o750
	fileMode = 0o640

	// busyTimeout is how long a connection waits for a lock before
	// SQLITE_BUSY. With one writer and WAL readers nothing should wait;
	// it covers outside writers (an operator's sqlite3) and WAL recovery.
	busyTimeout = 5 * time.Second
	// walLimit is what the WAL is truncated to after a checkpoint resets
	// it (PRAGMA journal_size_limit): a burst may grow it, it does not
	// stay grown.
	walLimit = 64 << 20
	// pageSize is the page size of a database a writer makes (doc.go,
	// "Settings"); one made with another keeps its own.
	pageSize = 16 << 10
	// walCheckpointBytes: once the WAL holds this much, a commit copies
	// it into the database (PRAGMA wal_autocheckpoint, in the database's
	// pages: 1024 of 16 KiB, 4096 of 4 KiB).
	walCheckpointBytes = 16 << 20
	// cacheKiB is the writer's page cache (PRAGMA cache_size): the
	// B-tree interior pages of several million key states fit (about 2 MB
	// for 3 million); leaves come from the OS's page cache, which is not
	// the daemon's memory.
	cacheKiB = 16 << 10

	// sqliteFcntlPersistWAL is SQLITE_FCNTL_PERSIST_WAL: the last writer
	// connection to close leaves an empty -wal and the -shm in place, so
	// that a reader without write access to the directory can still open
	// the database while no writer runs.
	sqliteFcntlPersistWAL = 10
)

// ErrSchema is wrapped by the error of Open when the database's schema
// version is not the one this build reads: newer than it knows (a newer
// logjail wrote it), or, for a reader, older (no writer of this version
// has migrated it yet), or not a logjail database at all.
var ErrSchema = errors.New("store: unsupported schema version")

// ErrEmpty is wrapped by the error of a writer Open on a database file of
// zero bytes, which SQLite would take for a new database: a file logjail
// made holds its schema, so an empty one is a truncation or a failed copy,
// and starting afresh on it would lose every ban without a word.
var ErrEmpty = errors.New("the database file is empty (0 bytes): not a database logjail wrote (truncated? a failed copy?); restore it, or remove it to start with no bans and no state")

// LockedError says which process holds the writer lock. It unwraps to
// ErrLocked.
type LockedError struct {
	Path string // the database
	PID  int    // the holder, 0 if it could not be read
}

func (e *LockedError) Error() string {
	holder := "a process whose pid is unknown"
	if e.PID > 0 {
		holder = "pid " + strconv.Itoa(e.PID)
	}
	return fmt.Sprintf("store: %s: held by another writer (%s, lock %s)", e.Path, holder, e.Path+".lock")
}

// Unwrap returns ErrLocked.
func (e *LockedError) Unwrap() error { return ErrLocked }

// Options say how to open a database.
type Options struct {
	// ReadOnly opens a reader: read-only connections that take no lock of
	// logjail's and never block the writer, nor are blocked by it. A
	// reader neither creates nor migrates the database.
	ReadOnly bool
	// Group is the group that may read the database (default "logjail").
	// A writer gives the files and the directory it creates that group
	// where the group exists and the process may give it (root, or a
	// member); elsewhere it is ignored.
	Group string
	// NoSync makes a writer that never waits for the disk (PRAGMA
	// synchronous = OFF, from before the database is made) and, making
	// a new database, keeps its rollback journal in memory until Close,
	// which leaves it in WAL mode: a crash of the process still loses
	// nothing committed, but one in a commit, a power loss or a crash
	// of the system before it wrote the pages back may leave the
	// database unreadable. Only for a database that can be made again
	// from what made it: replay --db's (package doc, "Settings").
	NoSync bool
}

// DB is an open logjail database. Its methods are safe for concurrent
// use; writes are serialised (one transaction at a time), reads run on
// their own connections beside them.
type DB struct {
	path string // as given, for errors
	abs  string
	ro   bool
	// memJournal: a NoSync writer of a new database, whose rollback
	// journal is in memory until Close (newNoSyncPragmas)
	memJournal bool

	r *sql.DB // read connections (mode=ro, query_only)
	w *sql.DB // the writer's one connection; nil for a reader

	lock   *os.File // the writer lock, held open; nil for a reader
	dbLock *os.File // the database file itself, flocked; nil for a reader

	mu     sync.Mutex // serialises writes; guards closed
	closed bool
	wc     conn    // the writer's connection and its statements
	order  []int32 // Checkpoint's buffer for the order of its keys
	// sortKeys is Checkpoint's buffer for sorting its keys (sortRows).
	sortKeys []sortKey
	part     []byte // the buffer of a key run's part being written
	// The merge of key runs in progress (merge.go); nil: none.
	merge *stepMerge
	// orphans: key_hidden may hold an output that merge does not write
	// (after Open, or a transaction that failed): the next step gives it
	// up.
	orphans bool
	// pruneCancels counts the merges Prune gave up since one ended;
	// pruneGaveUp and pruneFinished, all it gave up and finished (for
	// the tests).
	pruneCancels, pruneGaveUp, pruneFinished int
	// mergeBytes, when > 0, is every merge step's budget (tests).
	mergeBytes int64
	// The cover (cover.go): mark is the run of the last checkpoint with
	// Mark (0: none since Open), coverEnd the run of the last with Cover
	// (at Open, of the last that dropped runs: coverEndKey): the runs up
	// to it are weighed as the base.
	mark, coverEnd int64
	// covered counts the covers that hid runs (for the tests).
	covered int
}

// Open opens the database at path. A writer (the default) creates it and
// its directory when needed, takes the writer lock, migrates the schema
// to the current version and sets the modes and group of its files. A
// reader (Options.ReadOnly) opens an existing database of the current
// version only. See the package documentation for what each does exactly.
func Open(path string, o Options) (*DB, error) {
	return open(path, o, migrations)
}

func open(path string, o Options, migs []string) (*DB, error) {
	if o.Group == "" {
		o.Group = DefaultGroup
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", path, err)
	}
	db := &DB{path: path, abs: abs, ro: o.ReadOnly}
	if o.ReadOnly {
		err = db.openReader(abs, len(migs))
	} else {
		err = db.openWriter(abs, o.Group, o.NoSync, migs)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

func (db *DB) openReader(abs string, version int) error {
	if _, err := os.Stat(abs); err != nil {
		return db.errf("open", "%w", err)
	}
	db.r = sql.OpenDB(&connector{dsn: dsn(abs, true), drv: &sqlite3.SQLiteDriver{ConnectHook: readerHook}})
	db.r.SetMaxOpenConns(4)
	db.r.SetMaxIdleConns(2)
	var v int
	if err := db.r.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		var se sqlite3.Error
		if errors.As(err, &se) && (se.Code == sqlite3.ErrReadonly || se.Code == sqlite3.ErrCantOpen) {
			if _, serr := os.Stat(abs + "-shm"); errors.Is(serr, fs.ErrNotExist) {
				return db.errf("open", "%w (there is no %s-shm, which a reader that may not write the directory cannot make: open the database once as its writer)", err, filepath.Base(abs))
			}
		}
		return db.errf("open", "%w", err)
	}
	switch {
	case v > version:
		return db.errf("open", "schema version %d is newer than this logjail reads (%d): upgrade logjail: %w", v, version, ErrSchema)
	case v == 0:
		return db.errf("open", "not a logjail database, or not yet created by the daemon (schema version 0): %w", ErrSchema)
	case v < version:
		return db.errf("open", "schema version %d is older than this logjail reads (%d): run the daemon (or any writer) of this version once to migrate it: %w", v, version, ErrSchema)
	}
	return nil
}

func (db *DB) openWriter(abs, group string, noSync bool, migs []string) error {
	gid, err := groupID(group)
	if err != nil {
		return db.errf("open", "group %q: %w", group, err)
	}
	if err := ensureDir(filepath.Dir(abs), gid); err != nil {
		return db.errf("open", "%w", err)
	}
	if db.lock, err = lock(abs, gid); err != nil {
		var le *LockedError
		if errors.As(err, &le) {
			le.Path = db.path
			return le
		}
		return db.errf("open", "%w", err)
	}
	fi, err := os.Stat(abs)
	if err == nil && fi.Mode().IsRegular() && fi.Size() == 0 {
		return db.errf("open", "%w", ErrEmpty)
	}
	// Only a new database is made with the journal in memory: one that
	// exists is in WAL mode, and leaving it would wait for its readers.
	db.memJournal = noSync && errors.Is(err, fs.ErrNotExist)
	// Created here rather than by SQLite, to have the mode and group
	// from the start; SQLite gives -wal and -shm the mode (and, as root,
	// the owner and group) of the database file.
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, fileMode)
	if err != nil {
		return db.errf("open", "%w", err)
	}
	// The writer lock is held on the database file too, so that a second
	// writer is refused however the lock file is treated (removed, or on a
	// path that differs). flock does not meet SQLite's own (POSIX) locks,
	// so readers are not hindered. The descriptor stays open until Close,
	// after SQLite's: closing it earlier would drop SQLite's POSIX locks.
	if err := flock(f, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return &LockedError{Path: db.path}
		}
		return db.errf("open", "locking the database file: %w", err)
	}
	db.dbLock = f
	if err := setMode(abs, gid, false); err != nil {
		return db.errf("open", "%w", err)
	}

	db.w = sql.OpenDB(&connector{dsn: dsn(abs, false), drv: &sqlite3.SQLiteDriver{ConnectHook: writerHook(noSync, db.memJournal)}})
	db.w.SetMaxOpenConns(1)
	db.w.SetMaxIdleConns(1)
	db.w.SetConnMaxLifetime(0)
	db.w.SetConnMaxIdleTime(0)
	if err := migrate(db.w, migs); err != nil {
		return db.errf("migrate", "%w", err)
	}
	db.orphans = true
	if err := db.loadCoverEnd(); err != nil {
		return db.errf("open", "%w", err)
	}
	// Now that they exist (WAL mode made them), -wal and -shm get the
	// database's mode and group too: SQLite sets the group only as root.
	for _, p := range []string{abs + "-wal", abs + "-shm"} {
		if err := setMode(p, gid, true); err != nil {
			return db.errf("open", "%w", err)
		}
	}
	if err := db.withConn(func(*conn) error { return nil }); err != nil {
		return db.errf("open", "preparing statements: %w", err)
	}
	db.r = sql.OpenDB(&connector{dsn: dsn(abs, true), drv: &sqlite3.SQLiteDriver{ConnectHook: writerSideReaderHook}})
	db.r.SetMaxOpenConns(4)
	db.r.SetMaxIdleConns(2)
	return nil
}

// Close closes the database and, for a writer, releases the writer lock.
// It is safe to call twice.
func (db *DB) Close() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return nil
	}
	db.closed = true
	var errs []error
	// Readers first: the writer's connection is the last to close, which
	// checkpoints the WAL and leaves it empty.
	if db.r != nil {
		errs = append(errs, db.r.Close())
	}
	if db.w != nil {
		if db.memJournal {
			// Left in WAL mode, as every other logjail database: a
			// daemon or a reader opens it as it would one of its own.
			errs = append(errs, db.inWAL())
		}
		errs = append(errs, db.closeStmts())
		errs = append(errs, db.w.Close())
	}
	if db.dbLock != nil {
		errs = append(errs, db.dbLock.Close())
	}
	if db.lock != nil {
		// The lock file stays: removing it would let a writer lock a new
		// file while another still holds the unlinked one.
		errs = append(errs, db.lock.Close()) // closing releases the flock
	}
	if err := errors.Join(errs...); err != nil {
		return db.errf("close", "%w", err)
	}
	return nil
}

// Path returns the path the database was opened with.
func (db *DB) Path() string { return db.path }

// errf wraps an error with the database's path and the operation.
func (db *DB) errf(op, format string, a ...any) error {
	err := fmt.Errorf("store: %s: %s: "+format, append([]any{db.path, op}, a...)...)
	var se sqlite3.Error
	if errors.As(err, &se) && se.Code == sqlite3.ErrFull || errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("%w: %w", err, ErrFull)
	}
	return err
}

// writable returns ErrReadOnly for a reader, and an error once closed. The
// caller holds db.mu.
func (db *DB) writable(op string) error {
	if db.ro {
		return db.errf(op, "%w", ErrReadOnly)
	}
	if db.closed {
		return db.errf(op, "database closed")
	}
	return nil
}

// connector opens go-sqlite3 connections with a hook, without
// registering a driver globally.
type connector struct {
	dsn string
	drv *sqlite3.SQLiteDriver
}

func (c *connector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c *connector) Driver() driver.Driver                        { return c.drv }

// dsn is the URI of the database for go-sqlite3. A writer's transactions
// begin IMMEDIATE (the write lock at BEGIN, never an upgrade that could
// fail); a reader's are DEFERRED on a read-only file, on a connection
// without SQLite's own mutex (doc.go, "Reading the bans").
func dsn(abs string, ro bool) string {
	u := "file:" + (&url.URL{Path: abs}).EscapedPath()
	ms := strconv.Itoa(int(busyTimeout / time.Millisecond))
	if ro {
		return u + "?mode=ro&_mutex=no&_txlock=deferred&_busy_timeout=" + ms
	}
	return u + "?mode=rwc&_txlock=immediate&_busy_timeout=" + ms
}

// writerPragmas run on the writer's connection, in this order:
// page_size and auto_vacuum first, as they only take on a database
// without tables (doc.go, "Settings").
var writerPragmas = []string{
	"PRAGMA page_size = " + strconv.Itoa(pageSize),
	"PRAGMA auto_vacuum = INCREMENTAL",
	journalWAL,
	syncNormal,
	"PRAGMA foreign_keys = ON",
	"PRAGMA journal_size_limit = " + strconv.Itoa(walLimit),
	"PRAGMA cache_size = -" + strconv.Itoa(cacheKiB),
	"PRAGMA temp_store = MEMORY",
}

const syncNormal = "PRAGMA synchronous = NORMAL"

// noSyncPragmas are writerPragmas for Options.NoSync: synchronous = OFF
// instead of NORMAL, and first, so that the transactions that make a new
// database do not wait for the disk either. newNoSyncPragmas, for a new
// database, also keep the rollback journal in memory instead of the WAL
// until Close (inWAL), so that a commit writes each page once, into the
// database, rather than into the WAL and then, at Close, from the WAL
// into the database (replay --db's one checkpoint: docs/performance.md,
// "Row 5: the end of replay --db").
var (
	noSyncPragmas = append([]string{"PRAGMA synchronous = OFF"},
		slices.DeleteFunc(slices.Clone(writerPragmas), func(p string) bool { return p == syncNormal })...)
	newNoSyncPragmas = append([]string{"PRAGMA synchronous = OFF", journalMemory},
		slices.DeleteFunc(slices.Clone(writerPragmas), func(p string) bool { return p == syncNormal || p == journalWAL })...)
)

const (
	journalWAL    = "PRAGMA journal_mode = WAL"
	journalMemory = "PRAGMA journal_mode = MEMORY"
)

// inWAL puts a NoSync writer's database in WAL mode (at its Close), the
// WAL kept at close as setUpWriter has it.
func (db *DB) inWAL() error {
	return db.withConn(func(w *conn) error {
		v, err := firstValue(w.c, journalWAL)
		if err != nil {
			return err
		}
		if mode, _ := v.(string); mode != "wal" {
			return fmt.Errorf("%s: the journal mode is %v", journalWAL, v)
		}
		// A read opens the WAL (the switch only marks the file), so that
		// the close keeps it (persist) rather than never making it.
		_, err = firstValue(w.c, "SELECT count(*) FROM sqlite_schema")
		return err
	})
}

// writerHook returns the hook that sets up the writer's connection.
func writerHook(noSync, memJournal bool) func(*sqlite3.SQLiteConn) error {
	pragmas := writerPragmas
	switch {
	case memJournal:
		pragmas = newNoSyncPragmas
	case noSync:
		pragmas = noSyncPragmas
	}
	return func(c *sqlite3.SQLiteConn) error { return setUpWriter(c, pragmas) }
}

func setUpWriter(c *sqlite3.SQLiteConn, pragmas []string) error {
	for _, p := range pragmas {
		if _, err := c.Exec(p, nil); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
	}
	// The database's own page size: one made before pageSize keeps its.
	v, err := firstValue(c, "PRAGMA page_size")
	if err != nil {
		return err
	}
	ps, ok := v.(int64)
	if !ok || ps <= 0 {
		return fmt.Errorf("PRAGMA page_size: %v", v)
	}
	q := "PRAGMA wal_autocheckpoint = " + strconv.FormatInt(walCheckpointBytes/ps, 10)
	if _, err := c.Exec(q, nil); err != nil {
		return fmt.Errorf("%s: %w", q, err)
	}
	return c.SetFileControlInt("main", sqliteFcntlPersistWAL, 1)
}

// firstValue runs q on c and returns the first column of its first row
// (setUpWriter's page size, inWAL's journal mode).
func firstValue(c *sqlite3.SQLiteConn, q string) (driver.Value, error) {
	rows, err := c.Query(q, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", q, err)
	}
	defer rows.Close()
	v := make([]driver.Value, max(1, len(rows.Columns())))
	if err := rows.Next(v); err != nil {
		return nil, fmt.Errorf("%s: %w", q, err)
	}
	return v[0], nil
}

func readerHook(c *sqlite3.SQLiteConn) error {
	_, err := c.Exec("PRAGMA query_only = ON", nil)
	return err
}

// writerSideReaderHook is for the read connections of a writer: should one
// of them close last, the WAL is left in place as by the writer's.
func writerSideReaderHook(c *sqlite3.SQLiteConn) error {
	if err := readerHook(c); err != nil {
		return err
	}
	return c.SetFileControlInt("main", sqliteFcntlPersistWAL, 1)
}

// groupID returns the id of the group the writer gives its files, or -1
// where there is no such group or the process may not give it.
func groupID(name string) (int, error) {
	g, err := user.LookupGroup(name)
	if err != nil {
		var unknown user.UnknownGroupError
		if errors.As(err, &unknown) {
			return -1, nil
		}
		return -1, err
	}
	gid, err := strconv.Atoi(g.Gid)
	if err != nil {
		return -1, err
	}
	if os.Geteuid() == 0 || os.Getegid() == gid {
		return gid, nil
	}
	if groups, err := os.Getgroups(); err == nil && slices.Contains(groups, gid) {
		return gid, nil
	}
	return -1, nil
}

// ensureDir creates dir (mode 0750, group gid) when it does not exist. An
// existing directory is left as it is: it may be shared (a replay's
// database in /tmp).
func ensureDir(dir string, gid int) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return err
	}
	if err := os.Chmod(dir, dirMode); err != nil { // the umask may have taken bits
		return err
	}
	if gid >= 0 {
		return os.Chown(dir, -1, gid)
	}
	return nil
}

// setMode gives a file of the database mode 0640 and group gid (if >= 0).
func setMode(path string, gid int, mayBeAbsent bool) error {
	err := os.Chmod(path, fileMode)
	if err == nil && gid >= 0 {
		err = os.Chown(path, -1, gid)
	}
	if mayBeAbsent && errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// Held returns a *LockedError naming the process that holds the writer
// lock of the database at path, or nil when none does (or its lock file
// cannot be read: Open then says why). It takes the lock only to test it
// and lets it go at once: `logjail run` asks before it binds any address,
// so that a second daemon says who runs rather than "address already in
// use".
func Held(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil
	}
	f, err := os.Open(abs + ".lock")
	if err != nil {
		return nil
	}
	defer f.Close()
	if err := flock(f, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			b := make([]byte, 32)
			n, _ := f.ReadAt(b, 0)
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b[:n])))
			return &LockedError{Path: abs, PID: pid}
		}
		return nil
	}
	flock(f, syscall.LOCK_UN)
	return nil
}

// lock takes the writer lock: an exclusive flock on abs+".lock", which
// then holds the PID. The kernel releases it when the process dies,
// however it dies.
func lock(abs string, gid int) (*os.File, error) {
	name := abs + ".lock"
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, fileMode)
	if err != nil {
		return nil, err
	}
	if err := flock(f, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			b := make([]byte, 32)
			n, _ := f.ReadAt(b, 0)
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b[:n])))
			return nil, &LockedError{PID: pid}
		}
		return nil, fmt.Errorf("locking %s: %w", name, err)
	}
	err = setMode(name, gid, false)
	if err == nil {
		err = f.Truncate(0)
	}
	if err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return f, nil
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			return err
		}
	}
}
