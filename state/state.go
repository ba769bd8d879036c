package state

import (
	"errors"
	"time"
)

// DefaultGroup is the group that may read the state and use the control
// socket when none is configured.
const DefaultGroup = "logjail"

// ErrLocked is wrapped by the error of opening a writer while another
// writer holds the state: one writer at a time.
var ErrLocked = errors.New("store: database is held by another writer")

// ErrFull is wrapped by the error of a write that failed because the
// storage is full (a full disk, a quota). Nothing is lost but the write:
// the daemon keeps deciding and retries at its next checkpoint.
var ErrFull = errors.New("the disk holding the database is full: free space there; logjail keeps deciding and writes again at its next checkpoint")

// ErrReadOnly is returned by the writing methods of a Store opened
// read-only.
var ErrReadOnly = errors.New("store: database opened read-only")

// CheckpointSink is where checkpoint.Writer writes: each Checkpoint
// whole or not at all, and, for Resume, the active bans and the time of
// the last checkpoint written.
type CheckpointSink interface {
	// Checkpoint writes c in one transaction: all of it or, on error,
	// none of it. Rows are applied in field order (Keys, Events, SetBans,
	// DelBans, Positions, Meta); a (rule, key) named twice ends as its
	// last mention says. Times are kept to the millisecond.
	Checkpoint(c *Checkpoint) error
	ActiveBans() ([]Ban, error)
	Global() ([]byte, time.Time, error)
}

// RestoreSource is the last checkpoint read back: the detector's state
// (checkpoint.Restore, control.RestoreDetector), the source offsets the
// daemon's followers go on from, and the meta values written with it
// (the files' guards).
type RestoreSource interface {
	// Global returns the detector-wide state of the last checkpoint and
	// that checkpoint's time; nil and the zero time when no checkpoint was
	// written.
	Global() ([]byte, time.Time, error)
	// Keys calls fn with every saved key state, in (rule, key) order,
	// streaming. The row and its Data are reused: fn must copy what it
	// keeps. An error from fn stops the walk and is returned as it is.
	Keys(fn func(*KeyRow) error) error
	// Positions returns the saved source offsets, by path.
	Positions() ([]Position, error)
	// Meta returns a meta value and whether it is set.
	Meta(key string) (string, bool, error)
}

// BanReader is the ban ledger as its readers see it: the active throttles
// and bans (the daemon's actions at start, the operator's list, the
// metrics) and the history (history, list --expired, the breaker).
type BanReader interface {
	// ActiveBans returns the active throttles and bans, sorted by rule,
	// key.
	ActiveBans() ([]Ban, error)
	// EachActiveBan calls fn with every active throttle and ban, in
	// (rule, key) order, streaming. The Ban is reused between calls; fn
	// must copy what it keeps. An error from fn stops the walk and is
	// returned as it is.
	EachActiveBan(fn func(*Ban) error) error
	// CountActiveBans returns how many throttles and bans are active.
	CountActiveBans() (int, error)
	// CountActiveBansByKind returns how many throttles and bans are
	// active, by kind (PhaseThrottle, PhaseBan).
	CountActiveBansByKind() (map[string]int, error)
	// BanCounts counts the active throttles and bans by rule and kind,
	// sorted by rule then kind.
	BanCounts() ([]BanCount, error)
	// History returns the events q selects, newest first; events of the
	// same millisecond newest written first.
	History(q HistoryQuery) ([]Event, error)
}

// Reader is every read of one checkpoint.
type Reader interface {
	RestoreSource
	BanReader
}

// Ledger is the state as the operator's views read it (control's list,
// history and status): every read, and View for several reads of one
// checkpoint.
type Ledger interface {
	Reader
	// View runs fn with a Reader that sees one committed checkpoint
	// throughout, whatever a writer commits meanwhile; the writer is not
	// blocked by it. The Reader is valid only during fn.
	View(fn func(Reader) error) error
}

// Maintenance is what the cleaner does to the state.
type Maintenance interface {
	// EndedBans returns the active bans whose until is at or before t,
	// the soonest ended first: what the cleaner expires.
	EndedBans(t time.Time) ([]Ban, error)
	// Prune deletes, in one transaction, the key states last seen before
	// p.KeysBefore (or never) that are neither throttled nor banned at
	// now, and the history before p.HistoryBefore; then it gives up to
	// p.VacuumPages free pages back. A key counts as throttled or banned
	// while its row's phase is set with an until after now (or none),
	// while the active bans hold it with an until after now (or none),
	// or, with p.KeepBannedSince, while the history has a ban of it since
	// then.
	Prune(now time.Time, p PruneOptions) (PruneStats, error)
	// TruncateWAL gives back what the store's write-ahead log holds, if
	// it has one; done is false when readers kept it (try again later).
	TruncateWAL() (done bool, err error)
}

// Store is an open state: what opens one (the daemon's open-state stage,
// the command line's opener, clean) holds it and hands its parts on.
type Store interface {
	Ledger
	CheckpointSink
	Maintenance
	// Close closes the state and, for a writer, releases the writer
	// lock. It is safe to call twice.
	Close() error
}
