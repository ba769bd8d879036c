// Package store keeps logjail's state in one SQLite database, logjail.db in
// state_dir (DESIGN.md, "Windows and limits", "Cleaner", "Operation"), so
// that a restart, a crash or a reboot loses no ban and counts no line
// twice, and so that an operator can read it with sqlite3 while the daemon
// runs.
//
// A DB is the one implementation of state.Store (package state holds the
// values and the interfaces; store's Ban, Event, KeyRow, … are aliases of
// state's), and its Snapshot a state.Reader. It passes state's
// conformance suite (TestConformance runs statetest.Run): the guarantees
// listed in state's package documentation are kept by one SQLite
// transaction per checkpoint, WAL readers and the flock described below.
// Beyond state.Store it has what only SQLite needs or gives: Open and its
// Options, Held, LockedError, ErrEmpty, ErrSchema, TopKeys, SetMeta and
// WALSize. Only the openers name it (the daemon's openState stage,
// cmd/logjail's opener, clean and replay --db).
//
// Windows live in memory, in the detector. The store receives checkpoints:
// every few seconds, in one transaction, the (rule, key) states changed
// since the last one (the detector's opaque blob and a summary of it), the
// detector's global blob, the decisions made since (history), the changes
// to the active bans and the source positions that fed that state. Either
// all of a checkpoint is in the database or none of it.
//
// # Files, modes, locks
//
// A writer (Open without ReadOnly) creates the directory (0750) when it
// does not exist, and the database file, 0640. Where the group
// Options.Group ("logjail" by default) exists and the process may give it
// (root, or a member), the directory it creates and the files get that
// group, so that members read while root writes; elsewhere the group is
// left alone. An existing directory keeps its mode (it may be /tmp); the
// files are set again at every writer Open. SQLite gives logjail.db-wal
// and logjail.db-shm the database file's mode (and, as root, its owner and
// group); Open sets them too.
//
// One writer at a time: Open takes an exclusive flock on logjail.db.lock
// and writes its PID there. A second writer fails at once with a
// *LockedError (errors.Is ErrLocked) naming that PID. The kernel releases
// a flock when its holder dies, however it dies, so a crashed daemon never
// leaves a stale lock; the file itself stays. The writer also holds an
// exclusive flock on logjail.db itself, for as long as it is open: a
// second writer is refused even when the lock file was removed (it then
// cannot say the holder's PID). flock and SQLite's POSIX locks do not
// meet, so readers are not hindered. (One process that opens a second
// writer on a database it already writes, after removing the lock file,
// is refused too, but its failed attempt drops the first writer's POSIX
// locks: POSIX locks go with any close of the file. Two daemons are two
// processes.)
//
// A database file of zero bytes is refused by a writer (ErrEmpty): SQLite
// would take it for a new database and the daemon would start with no
// bans and no state without a word. A file logjail makes holds its schema
// from its first Open; an empty one is a truncation or a failed copy.
// Remove it to start afresh. (The only empty file logjail leaves is one
// whose first Open died between creating the file and writing the
// schema; the same removal answers it.)
//
// Readers (Options.ReadOnly) take no lock of logjail's. They open the file
// read-only (mode=ro, query_only) in WAL mode, so they never block the
// writer and the writer never blocks them: they never see "database is
// locked". A reader needs the -wal and -shm files to exist when it may not
// create them (a group member, who may not write the directory): the
// writer keeps them when it closes (SQLITE_FCNTL_PERSIST_WAL, the WAL
// emptied), so a member can read the database of a stopped daemon.
// TestGroupReader runs a reader as nobody:nogroup against root's files.
//
// A DB is safe for concurrent use. Writes are serialised; reads run on
// their own connections beside them. Each read method sees the latest
// committed checkpoint; View runs several reads on one snapshot.
//
// # Settings
//
// WAL mode; synchronous=NORMAL (a commit does not wait for the disk: a
// power loss can lose the last checkpoints, never corrupt the database; a
// crash of the process loses nothing committed), or OFF for a writer
// opened with Options.NoSync, from before the database is made (nothing
// waits for the disk), which, making a new database, keeps its rollback
// journal in memory instead of the WAL until its Close puts the database
// in WAL mode (one that exists stays in WAL mode): a commit writes each
// page once, into the database, not into the WAL and again, at close,
// into the database. A crash of the process then loses nothing committed,
// but one in the middle of a commit, a power loss or a crash of the
// system before it wrote the pages back may leave the database
// unreadable, and until Close its readers and its writer may wait for
// each other (busy_timeout); replay --db's database, which the same
// replay makes again, read only before its one checkpoint, is the one
// opened so; busy_timeout 5 s (nothing
// should ever wait: it covers an operator writing with sqlite3);
// foreign_keys on; auto_vacuum=INCREMENTAL, set before the first table, so
// that Prune can give free pages back; page_size 16 KiB, also set before
// the first table (a database made with 4 KiB pages keeps them: the page
// size of a WAL database changes only by a VACUUM out of WAL mode, which
// logjail does not do); wal_autocheckpoint 16 MiB of pages (the WAL is
// copied into the database and reused once it holds that much: 1024
// pages of 16 KiB, 4096 of 4 KiB);
// journal_size_limit 64 MiB (a WAL grown by a large checkpoint is cut back
// to that); a 16 MiB page cache for the writer (the B-tree's interior
// pages of millions of key states; leaves come from the OS's page cache).
// Why 16 KiB pages: the key runs are 64 KiB blobs, which SQLite keeps in
// overflow pages, and a commit writes each page into the WAL (a header
// and the page, two writes) and copies it into the database later (a
// write): 4 KiB pages made 17 pages a part and most of a live checkpoint's
// system time. BenchmarkCheckpointLive's process (400k states, 150
// checkpoints of 16k, merges included) took 7.4 to 7.5 s of CPU with 4
// KiB pages (3.1 to 3.2 user, 4.2 to 4.4 system), 5.5 to 5.8 s with 16
// KiB (2.6 to 2.9, 2.9) and 5.1 with 16 KiB and the WAL copied back at
// 16 MiB instead of 4 (pages a merge frees and the next run reuses are
// copied once); 64 KiB pages were no faster than 16 KiB, and
// each changed ban, position or history row writes its whole page. The
// schema's pages are so 16 KiB each: some 256 KiB for the empty
// database.
// TruncateWAL empties the WAL on demand, for when readers kept it from
// being reused. temp_store=MEMORY: what a statement collects on the side
// (the primary keys a DELETE removes) is C memory, outside the page cache
// and the Go heap; so a statement must not collect much: Prune removes
// idle key states by writing their runs' parts again, one 64 KiB part at a
// time ("Key runs"), where one DELETE of a million rows of the old keys
// table held some 66 MB for as long as it ran.
//
// # Schema
//
// Times are INTEGER unix milliseconds, UTC, in columns named *_ms; NULL is
// "none" (the zero time.Time), so that
//
//	sqlite3 -readonly /var/lib/logjail/logjail.db \
//	  "select rule, key, kind, datetime(until_ms/1000, 'unixepoch'), reason from bans"
//
// reads as it says. Addresses are TEXT: canonical forms (netip.Addr's
// String) joined by commas, the empty string for none. Booleans are
// INTEGER 0 or 1. The schema version is PRAGMA user_version (Version).
//
//	meta             key TEXT PRIMARY KEY, value TEXT; WITHOUT ROWID
//	                 Free-form settings (SetMeta, Checkpoint.Meta); the
//	                 store keeps "store cover end" there ("Key runs").
//
//	detector         one row (id = 1): the detector-wide state
//	  time_ms        log time of the last checkpoint (its newest entry)
//	  checkpoints    checkpoints written since the database was made
//	  data           BLOB, the detector's global state (Global)
//
//	key_runs         the key states, in runs (see "Key runs" below); one
//	                 row per part of a run
//	  id             INTEGER PRIMARY KEY: run << 20 | part, so a run's
//	                 parts are one range of ids, in order
//	  tier           0: one checkpoint's changed states (or a prune's
//	                 tombstones); 1: runs merged; 2: a base (every run
//	                 merged, no tombstone)
//	  n, size        the part's entries and bytes
//	  prune_ms       the least last-seen time of its states (the least
//	                 integer for one never seen), leaving out those
//	                 throttled or banned without end; NULL: none. Prune
//	                 reads nothing when no part's is before KeysBefore
//	  data           BLOB, the part's entries (keyrun.go, appendEntry):
//	                 the (rule, key) (prefix-compressed), the summary
//	                 (last seen, requests, blocked, cpu, phase, until) and
//	                 the detector's state of the key (windows, ladder,
//	                 earlier bans), opaque here; or a tombstone
//
//	key_hidden       the runs no reader sees (merge.go): run INTEGER
//	                 PRIMARY KEY, kind 0 (the output of the merge in
//	                 progress, until published) or 1 (a run a merge
//	                 replaced, or an output given up, until deleted)
//
//	key_parts        the first (rule, key) of each part of key_runs, for
//	                 Prune's look-ups; id as key_runs'; written and deleted
//	                 with the part
//	  rule, key      BLOB
//
//	bans             the active throttles and bans; PRIMARY KEY (rule, key),
//	                 WITHOUT ROWID (ActiveBans lists them in that order)
//	  rule, key      TEXT
//	  kind           'throttle' or 'ban'
//	  since_ms       when the decision was made (log time)
//	  until_ms       when it ends; NULL: until lifted
//	  reason         TEXT, as the decision gave it
//	  violations     ladder violations at the decision
//	  addresses      the addresses a ban of a key that is no address blocks
//	  origin         'detector', 'deny', 'range' or 'operator'
//	  who            the operator, for operator actions; '' otherwise
//	  log_only       1: decided by a log_only rule, acted on by nothing
//	  node           the fleet node that decided it; '' outside a fleet
//	                 (and for the rows of a database of version 1)
//	  bans_until     (until_ms): EndedBans, the cleaner's bans that are due
//
//	history          one row per decision or operator action, never updated
//	  id             INTEGER PRIMARY KEY, in the order written
//	  time_ms, rule, key, kind, until_ms, reason, violations, addresses,
//	  origin, who, log_only, node
//	                 as in bans; kind is also 'unban' and the operator
//	                 kinds (KindForget, KindBreakerReset, KindBreakerTrip)
//	  history_time   (time_ms): History by time, Prune's old history
//	  history_key    (key, time_ms): History of a key, newest first
//
//	positions        how far each source file was read; path PRIMARY KEY,
//	                 WITHOUT ROWID
//	  path           TEXT, as the source names it
//	  dev, inode     the file's device and inode (uint64 stored as the
//	                 INTEGER of the same 64 bits)
//	  offset         bytes consumed, whole lines only
//	  line           lines consumed
//	  head_hash      TEXT, hash of the first line: tells a rotated or
//	                 truncated file
//	  size           the file's size when saved
//	  updated_ms     log time of the checkpoint that saved it
//
//	bouncers         the CrowdSec bouncers (bouncers.go, package crowdsec);
//	                 name PRIMARY KEY, WITHOUT ROWID; a migration of its own
//	  key_hash       BLOB, SHA-256 of the API key (UNIQUE); the key is not kept
//	  created_ms, last_pull_ms
//	  last_seq       the decisions' sequence number its last stream pull reached
//	  ip, user_agent of its last pull
//
//	bouncer_decisions the decisions the crowdsec API serves, active and removed
//	  id             INTEGER PRIMARY KEY > 0: the sequence number it was made at
//	  value, scope, type, scenario
//	  until_ms       NULL: until lifted
//	  deleted        the sequence number of its removal; 0 while active
//
// TestQueryPlans shows with EXPLAIN QUERY PLAN that each of those queries
// (and the prune) is answered from its index, without a table scan or a
// sort.
//
// # Key runs
//
// Schema 3 kept one row per (rule, key) in a WITHOUT ROWID table with three
// indexes, upserted by every checkpoint: 5 to 8.5 µs a changed state, most
// of it the random B-tree leaf each touched (a 4 KiB page into the WAL for
// a 200-byte state), and 88% of a live daemon's CPU (issue 23). Schema 4
// keeps the states in runs, as a log-structured merge tree does:
//
//   - A checkpoint writes its changed states, sorted by (rule, key), each
//     once (its last mention), the dropped ones as tombstones, as one new
//     run of compact parts of about 64 KiB (partBytes) in its transaction:
//     a few hundred bytes a state, written in sequence, no index.
//   - A later run's entry of a (rule, key) replaces the earlier runs'; a
//     tombstone deletes it. Keys merges the runs in (rule, key) order,
//     newest wins, streaming, in one read transaction: one part of each
//     run in memory, never a map of the keys. So Keys (and
//     checkpoint.Restore, control's views) read exactly the rows the
//     keys table held (checkpoint's TestRunsRestoreAsRows).
//   - Compaction: once the runs after the oldest (the base) hold twice
//     its bytes (baseRatio), every run is merged into a new base without
//     tombstones or replaced states; past 64 runs (maxRuns) the runs
//     after the base are merged into one. Where most states change
//     between two merges (a live daemon's: row 2 of docs/performance.md
//     changes each of its 200k keys every 12 checkpoints) a changed
//     state is so read by merges 1.5 times and written 0.5 times more
//     (with a new base once the rest held as many bytes as it, 2 and 1:
//     BenchmarkCheckpointLive fell from some 2,300 to 2,000 ns a changed
//     state). Where maxRuns comes first (1M keys, 16k changed a
//     checkpoint) the runs after the base are merged into one at 64
//     runs, and the new base follows: 2 and 1, as before. The runs hold
//     at most 3 times the live states (plus one checkpoint's), and a
//     reader merges at most maxRuns+1 runs, or maxStepRuns (128) while
//     a merge runs. A merge copies each entry's body and name as they
//     are, reading of the body only its prune time (prunableOf); the
//     name is compressed again. Memory stays bounded by the parts being
//     merged (one 64 KiB part a run), whatever the number of keys.
//   - Covers (cover.go): a merge reads every state it keeps, but where
//     every state changes between merges (row 2 of docs/performance.md:
//     200k keys, each back every 4 s, 16k changed a checkpoint) the
//     writer of the checkpoints knows more than the runs: that every
//     state there is was written since some checkpoint. It says so with
//     state.Checkpoint's Mark (a cover counts from this checkpoint's run
//     on) and Cover (every state there is is in the runs from the mark's
//     on). A checkpoint with Cover hides the runs before the mark's as
//     dead, unread, as a merge hides the runs it replaced (dropDead
//     deletes them a slice a checkpoint), giving up first the merge in
//     progress if it reads one of them; the runs from the mark to the
//     covering checkpoint's are then weighed as the base (compactPlan,
//     at most maxRuns/2 of them), so that no merge starts while covers
//     keep coming. The mark is in memory only: opened again, the DB
//     ignores Cover until the next Mark; the run of the last cover that
//     dropped runs is kept in meta ("store cover end"), so that the DB
//     opened again weighs the runs up to it as the base, not its oldest
//     run alone (which would start a merge of every run at once:
//     TestCoverEndReopened). checkpoint.Writer gives a cover once the detector
//     says every state it tracks was reported since the mark
//     (detector.CoverReady), and marks again past an eighth more states
//     written than tracked, or gives a mark up past a quarter more (idle
//     keys, which Prune may have removed: never written again to cover):
//     where keys go idle, covers do not come and the merges below run as
//     before. Row 2's daemon: store.Checkpoint from 12% of its CPU
//     (merges 7.9%) to under 5%, no merge after the first covers
//     (TestCovers: 400 random rounds against a plain model, with sweeps
//     and random keys, tombstones, failed checkpoints, prunes, merges in
//     steps and reopenings; TestCoverGivesUpMerge; checkpoint's
//     TestCoversRestoreAsRows).
//   - Merges run in steps (merge.go), so that no checkpoint holds one:
//     a merge into a new base of a million states read 1.9M entries in
//     one checkpoint, about a second of CPU on the daemon's one core
//     (BenchmarkCheckpointDuringMerge, docs/performance.md), which row 3
//     saw as /auth's p99. A merge's inputs are fixed when it starts.
//     Each checkpoint, after writing its run, carries it on until its
//     cursors have loaded a budget of input parts: 4 MiB (stepBytes),
//     or 4 times the bytes the checkpoint wrote if more (stepFactor), so
//     that the merge outpaces the runs written while it runs (a merge
//     reading I bytes takes I/4C steps, in which the checkpoints add
//     I/4 bytes: less than the next merge waits for). The output is a
//     run numbered after every run there was when it started; the
//     table key_hidden hides it from every reader (Keys, restore,
//     TopKeys, Prune, KeyRuns) until the step that writes its last part
//     publishes it, in that checkpoint's transaction: the inputs are
//     hidden and the output shown at once. The runs written meanwhile
//     are numbered after the output, so they stay newer than it. The
//     runs a merge replaced (hidden) are deleted afterwards, up to twice
//     the budget of parts a checkpoint, so that their pages return in
//     slices too. Past maxStepRuns runs shown, the checkpoint at hand
//     finishes the merge. What a merge holds between steps (its cursors,
//     the part it is filling) is in memory only: when the DB is opened
//     again, or a checkpoint's transaction fails (rolling back the
//     step), the merge is given up (its hidden output deleted as a
//     replaced run) and a new one starts where compactPlan says: a crash
//     loses a merge's work, never a state (TestSteppedMerges: 300 rounds
//     of checkpoints, tombstones, failed checkpoints, prunes and
//     reopenings, merges of one part a step, against merges at once and
//     a plain model, read by Keys, a reader and TopKeys;
//     TestMergeStepBounded). Prune does not rewrite a part of a merge's
//     input: it gives the merge up first (only when it changes such a
//     part); but when a Prune gave one up since the last merge ended, the
//     next finishes the merge in progress at once before it reads
//     (TestPruneFinishesMerge), so that merges end however often Prune
//     runs: the cleaner's minute can be shorter than a merge of a
//     million states on a quiet daemon, whose checkpoints are seconds
//     apart. Its merge of every run (below) is done at once too: Prune
//     is no checkpoint, and the daemon reads on while it runs.
//   - Prune reads only the parts whose prune_ms is before KeysBefore
//     (none: it reads nothing). An entry of such a part last seen before
//     then is the key's state only if no newer run holds the key: it is
//     looked up in each newer run, in the one part that may hold it
//     (key_parts keeps each part's first key; the parts of a run are read
//     forward while the keys come in order, one part a run in memory).
//     Each part read is written again in place, without the entries a
//     newer run replaces and without the idle states not held (one query
//     of the bans and the history each), which become tombstones where an
//     older run may hold the key (not in the oldest run); its prune_ms is
//     then the least of what is left, so the part is not read again until
//     a state in it goes idle. The keys read afterwards are those the
//     full merge it replaced left (TestPruneReadsOldParts: forty rounds of
//     random checkpoints, merges and prunes against that merge, count and
//     rows). A pass in which 100 states of 1M went idle reads about a
//     hundred parts of the base and as many of each newer run
//     (BenchmarkPruneTrickle; the full merge read every state, 0.8 s). A
//     part emptied so stays, empty, with its first key (a run's parts are
//     numbered without gaps), until the next merge. When a pass removes an
//     eighth of the entries or more it merges into a new base at once, so
//     that the incremental vacuum gives the tombstones' pages back too.
//     The detector does not forget idle keys itself (only evicted ones, as
//     tombstones): Prune is what keeps idle keys out of a restart.
//   - TopKeys reads every state of the rule (a merge) and keeps the n
//     first: no index is kept for it, as only tests and tools call it.
//
// Reading the states with sqlite3 is no longer possible (the parts are a
// binary encoding); logjail's own commands read them.
//
// # Migrations
//
// A writer brings the schema to Version at Open, each migration in its own
// transaction with the version it reaches (PRAGMA user_version is part of
// the transaction): a migration that fails leaves the database at the
// version before it. A database newer than this build is refused, by
// writers and readers, with an error wrapping ErrSchema that says so; so is
// an older one by a reader, which cannot migrate it.
//
// Version 2 added the node column to bans and history (ALTER TABLE …
// ADD COLUMN, which SQLite does without rewriting the rows): the rows of
// a version-1 database read with an empty node (TestMigrations).
//
// Version 4 made key_runs and, in the same transaction, moved the rows of
// keys into its first run (a base) and dropped keys (convertKeys): once,
// at the first open by a writer of this version (TestKeysTableMigrates).
//
// Version 5 added key_parts and filled it from the parts there were
// (fillPartKeys: each part read once, at the first open by a writer of
// this version; TestPartKeysMigrate).
//
// Version 6 added key_hidden, for merges in steps: a reader of version 5
// would read a merge's output before it is published (and the runs it
// replaced after), so it is refused.
//
// # Checkpoint cost
//
// A checkpoint sorts its changed states (sortRows), encodes them into a
// reused part buffer and inserts a part per 64 KiB through a prepared
// statement on the driver's connection (see conn). checkpoint's
// BenchmarkFlush (collecting included) on the 2-core machine: 10k changed
// states of 10k in 1.5 µs a state (19.5 µs with the keys table), 10k of 1M
// tracked in 0.37 µs (6.8 µs), with no allocation per state.
//
// An entry's body is encoded straight into the part, after its length
// computed beforehand (bodyLen), not into a scratch buffer copied after
// it; the shared prefix of neighbouring names is found 8 bytes at a time;
// a merge's cursors are kept in a tree of losers (one comparison of names
// a level, where a heap made two), and decoded entries of rules of one
// length are compared as one string. None of it changes a byte on disk:
// the entries are those appendBody and appendRaw wrote before
// (TestAppendEntrySame), merged in the same order (TestMergerNewestWins;
// docs/performance.md, "The checkpoint's cost a state").
//
// # Reading the bans
//
// The bans are decoded from the driver's values (decodeBan), not through
// Rows.Scan's conversions, and DB.EachActiveBan reads them on a connection
// of its own through the driver itself (database/sql's Conn.Raw), since a
// list reads 100,000 of them: a value of an unexpected type is still an
// error naming the ban and the column (TestBanReads). A repeated rule,
// kind, reason, origin, who or node keeps the previous row's string, so the
// bans a caller keeps share it. What remains of a list's read is SQLite
// stepping the rows (about half) and the driver's strings (go-sqlite3
// makes a value, and for text a string, of each column: 12 allocations a
// ban). Read connections are opened without SQLite's per-connection mutex
// (_mutex=no, SQLite's "multi-thread" mode): database/sql never uses one
// connection from two goroutines at once, which is all that mode asks,
// and sqlite3_interrupt (a cancelled context) stays safe from another
// thread. cmd/logjail's BenchmarkList100k/text (open, read, sort, format
// 100,000 bans), alternately, load 1.7 to 2.1: 177 to 212 ms with the
// mutex, 160 to 208 ms without (medians 193 and 166 ms, faster in 6
// pairs of 7).
//
// # Size
//
// The database holds the key runs and the history kept:
//
//	size ≤ 4.75 × K × (B + 40 B) + C + 2 × E × 190 B + 256 KiB
//
// K is the most (rule, key) states present (the keys seen within twice
// the longest window, plus those banned), B their blob's size (about 200
// B), 40 B the rest of an entry; C the bytes one checkpoint writes (its
// changed states, as entries). The runs hold at most 3 K states (a base
// and twice its bytes after it, baseRatio); a merge into a new base
// writes it (K) before it frees the runs it replaces, and while it runs
// in steps the checkpoints add at most a quarter of what it reads (3 K /
// stepFactor). The runs it replaced are deleted, in slices, long before
// the next merge into a new base starts. With covers ("Key runs") the
// base weighed is the runs from a mark to the covering checkpoint, at
// most 1.25 K + C states (checkpoint.Writer gives a mark up past a
// quarter more states than tracked): the runs shown hold at most three
// times that, and those a cover dropped (at most as many) until deleted,
// or a merge's output and steps as above: 6 K and 4 C in the bound
// instead of 4.75 K and C (TestSizeCovers). E is the events within history_retention; 190 B
// is an event's row (about 110 B with a 40-character reason) and its two
// index entries (about 45 B), in a B-tree between half and wholly full.
// 256 KiB are the schema's pages (16 KiB each) and the free pages Prune
// has not given back yet. A merge frees the pages of the runs it replaces, which the
// next runs reuse. The WAL comes on top: at most 16 MiB plus
// the last checkpoint's pages while it is reused, none after TruncateWAL.
// TestSize runs a day at 20 requests a second (about 2,100 keys tracked,
// 2,650 events kept, a checkpoint every 5 s, a prune with 1000 pages of
// incremental vacuum every minute) and checks the bound.
//
// Boundaries: It owns the SQLite database: the schema, and every read and
// write of it. It is the only package that imports database/sql and
// go-sqlite3 (TestOnlyStoreSpeaksSQL, in package state, checks it); it
// must not know the detector's windows beyond the rows it is given, nor
// define values of the state (state does).
package store
