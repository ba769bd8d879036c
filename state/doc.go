// Package state is what logjail keeps across restarts, as values and as
// the small interfaces its users need: the detector's checkpoints
// (CheckpointSink, RestoreSource), the ban ledger (BanReader, Ledger),
// the cleaner's upkeep (Maintenance), and Store, their union, for what
// opens one. It has no I/O of its own: package store (SQLite) is the one
// implementation today, and statetest is the conformance suite every
// implementation passes (store's TestConformance runs it).
//
// # The cut
//
// Each interface holds the methods its users call, no more:
//
//	CheckpointSink  Checkpoint, ActiveBans, Global    checkpoint.Writer (Resume reads the last one back)
//	RestoreSource   Global, Keys, Positions, Meta     checkpoint.Restore, RestoreGuard, KeyStates; control.RestoreDetector
//	BanReader       ActiveBans, EachActiveBan, History, the three counts
//	                                                  the daemon's actions and watcher, control's breaker, the metrics
//	Reader          RestoreSource and BanReader       control.StatusOf; what Ledger.View hands over
//	Ledger          Reader and View                   control's List and ReadHistory, its server
//	Maintenance     EndedBans, Prune, TruncateWAL     ops.CleanWith
//	Store           all of them and Close             what opens the state: the daemon, cmd/logjail, ops.Clean
//
// The offsets and the meta values have no interface of their own: they are
// written only inside a Checkpoint (atomically with the detector state they
// go with, which is what makes a restart exact) and read only to restore
// it, so they belong to CheckpointSink and RestoreSource. The ban ledger's
// writes are checkpoints too (SetBans, DelBans, Events): its readers have
// BanReader. Store's extras that no user of the interfaces calls (TopKeys,
// SetMeta, WALSize) stay store's.
//
// # What an implementation guarantees
//
// Checkpoints are atomic. Checkpoint applies all of a Checkpoint or, on
// error, none of it, and a crash of the process at any instant leaves
// the state of exactly one checkpoint: the last one Checkpoint returned
// nil for, or the one being written (never a mix of two). Rows apply in
// field order (Keys, Events, SetBans, DelBans, Positions, Meta); a KeyRow
// with nil Data deletes its row; a (rule, key) or path named twice ends
// as its last mention says. A checkpoint replaces Global (nil is stored
// as empty: Global then reports one) and its Time is the checkpoint's.
// Times are kept to the millisecond and come back in UTC; a zero time is
// kept as none. Offsets (Positions) are kept per path with the file's
// identity (device, inode, head hash, size) as given: the follower
// decides from it whether the file is still the one read.
//
// A checkpoint with a row no reader could use is refused whole: a KeyRow
// or a Ban without a rule or a key, a Ban of a kind other than throttle
// or ban, an Event without a kind, a Position without a path.
//
// History is appended to (Prune alone deletes it) and ordered. History
// returns events newest first; events of one millisecond come newest
// written first. A HistoryQuery's zero fields select everything; Since is
// inclusive, Until exclusive; Limit keeps the newest. The active bans are
// listed in (rule, key) order; EndedBans, the soonest ended first.
//
// Reads see whole checkpoints. Each read method sees the latest committed
// checkpoint; View sees one checkpoint throughout. Readers never block
// the writer, nor are blocked by it; a reader opened beside a running
// writer (the operator's `list` while the daemon runs) sees the same.
//
// One writer at a time. Opening a second writer of the same state fails
// at once with an error wrapping ErrLocked; the lock goes when its holder
// dies, however it dies. A read-only Store's writing methods return
// ErrReadOnly. A write that fails for lack of space wraps ErrFull.
//
// What is the implementation's own: how it is opened (store.Open and its
// Options), its files, its schema and its extras (store's TopKeys,
// SetMeta, WALSize). docs/architecture.md, "A state backend", says where a
// second implementation plugs in.
//
// Boundaries: It owns the value types of the state and the interfaces of
// its users. It must do no I/O and import no implementation (neither
// store nor database/sql): a second backend imports state, not store.
package state
