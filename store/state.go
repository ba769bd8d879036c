package store

// state is imported by another name: store's tests have a type state.
import lstate "github.com/logjail/logjail/state"

// The values of the state are package state's; these names keep store's
// own code and tests short. Every other package names state.X.
type (
	KeyRow       = lstate.KeyRow
	Ban          = lstate.Ban
	Event        = lstate.Event
	Position     = lstate.Position
	BanKey       = lstate.BanKey
	Checkpoint   = lstate.Checkpoint
	HistoryQuery = lstate.HistoryQuery
	BanCount     = lstate.BanCount
	PruneOptions = lstate.PruneOptions
	PruneStats   = lstate.PruneStats
	Reader       = lstate.Reader // what View hands its function: a *Snapshot
)

// Phases, kinds and origins: state's.
const (
	PhaseAllowed  = lstate.PhaseAllowed
	PhaseThrottle = lstate.PhaseThrottle
	PhaseBan      = lstate.PhaseBan

	KindThrottle     = lstate.KindThrottle
	KindBan          = lstate.KindBan
	KindUnban        = lstate.KindUnban
	KindForget       = lstate.KindForget
	KindBreakerReset = lstate.KindBreakerReset
	KindBreakerTrip  = lstate.KindBreakerTrip

	OriginDetector = lstate.OriginDetector
	OriginDeny     = lstate.OriginDeny
	OriginRange    = lstate.OriginRange
	OriginOperator = lstate.OriginOperator
)

// DefaultGroup is the group that may read the database when Options.Group
// is empty.
const DefaultGroup = lstate.DefaultGroup

// ErrLocked is wrapped by the error of a writer Open when another writer
// holds the database (see LockedError).
var ErrLocked = lstate.ErrLocked

// ErrFull is wrapped by the error of a write that failed because the disk
// (or the file system's quota) holding the database is full: SQLite's
// SQLITE_FULL, or ENOSPC. Nothing is lost but the write: the daemon keeps
// deciding and retries at its next checkpoint.
var ErrFull = lstate.ErrFull

// ErrReadOnly is returned by the writing methods of a DB opened ReadOnly.
var ErrReadOnly = lstate.ErrReadOnly

// A DB is a state.Store, and its Snapshot a state.Reader.
var (
	_ lstate.Store  = (*DB)(nil)
	_ lstate.Reader = (*Snapshot)(nil)
)
