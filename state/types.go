package state

import (
	"net/netip"
	"time"

	"github.com/logjail/logjail/source"
)

// Phases of a key row (KeyRow.Phase) and kinds of a ban (Ban.Kind).
const (
	PhaseAllowed  = ""
	PhaseThrottle = "throttle"
	PhaseBan      = "ban"
)

// Kinds of history events (Event.Kind). KindThrottle, KindBan and
// KindUnban are decisions (the detector's, or an operator's with Origin
// "operator"); the others are operator actions that are no decision about
// one key's ban.
const (
	KindThrottle = "throttle"
	KindBan      = "ban"
	KindUnban    = "unban"
	// KindForget: an operator cleared a key's windows and ladder.
	KindForget = "forget"
	// KindBreakerReset: an operator reset the circuit breaker (Rule
	// empty, Key "breaker": control.BreakerKey).
	KindBreakerReset = "breaker-reset"
	// KindBreakerTrip: the circuit breaker tripped (Rule empty, Key
	// "breaker"; the reason names the ban that tripped it).
	KindBreakerTrip = "breaker-trip"
)

// Origins of bans and events.
const (
	OriginDetector = "detector"
	OriginDeny     = "deny"
	OriginRange    = "range"
	OriginOperator = "operator"
)

// KeyRow is the saved state of one (rule, key): the detector's blob and a
// summary of it that the CLI reads without decoding the blob.
type KeyRow struct {
	Rule, Key string
	Data      []byte // the detector's state; nil in a Checkpoint: delete the row
	LastSeen  time.Time
	Requests  int64 // requests seen (charged and blocked)
	Blocked   int64 // requests seen while banned
	CPU       float64
	Phase     string    // PhaseAllowed, PhaseThrottle, PhaseBan
	Until     time.Time // end of the throttle or ban; zero: none
}

// Ban is an active throttle or ban of a (rule, key).
type Ban struct {
	Rule, Key, Kind string       // kind PhaseThrottle or PhaseBan
	Since, Until    time.Time    // Until zero: until lifted
	Reason          string       // why, as the decision said it
	Violations      int          // ladder violations at the decision
	Addresses       []netip.Addr // what a ban of a key that is no address blocks
	Origin          string       // OriginDetector, OriginDeny, OriginRange, OriginOperator
	Who             string       // the operator, for operator actions
	LogOnly         bool         // decided by a log_only rule (or a tripped breaker): acted on by nothing
	Node            string       // the fleet node that decided it; "" outside a fleet
}

// Event is one line of history: a decision or an operator action.
type Event struct {
	Time            time.Time
	Rule, Key, Kind string // Kind: one of the Kind constants
	Until           time.Time
	Reason          string
	Violations      int
	Addresses       []netip.Addr
	Origin, Who     string
	LogOnly         bool
	Node            string // the fleet node that decided it; "" outside a fleet
}

// Position is how far a source file was read.
type Position struct {
	Path       string
	Dev, Inode uint64
	Offset     int64  // bytes of the file consumed (whole lines only)
	Line       int64  // lines consumed
	HeadHash   string // hash of the file's first line, to recognise rotation and truncation
	Size       int64  // the file's size when saved
}

// PositionAt is the position of the file id at path after line lines,
// offset bytes. Size is at least offset (a file read past the size it had
// when identified has grown).
func PositionAt(path string, id source.FileID, offset, line int64) Position {
	return Position{Path: path, Dev: id.Dev, Inode: id.Inode, Offset: offset, Line: line,
		HeadHash: id.HeadHash, Size: max(id.Size, offset)}
}

// File is the FileID the position was saved for.
func (p Position) File() source.FileID {
	return source.FileID{Dev: p.Dev, Inode: p.Inode, Size: p.Size, HeadHash: p.HeadHash}
}

// BanKey names an active ban.
type BanKey struct{ Rule, Key string }

// Checkpoint is what one checkpoint writes, in one transaction.
type Checkpoint struct {
	Time      time.Time  // log time of the checkpoint (the newest entry processed)
	Global    []byte     // the detector-wide state; replaces the previous one
	Keys      []KeyRow   // changed key states: upserted, or deleted where Data is nil
	Events    []Event    // appended to the history, in this order
	SetBans   []Ban      // upserted into the active bans, by (rule, key)
	DelBans   []BanKey   // removed from the active bans (after SetBans)
	Positions []Position // upserted, by path
	// Meta is upserted into the meta table in the same transaction (an
	// addition to the original API: what must change with the state, as
	// a configuration hash, goes here).
	Meta map[string]string
	// Mark and Cover let a store drop the key states it holds from before
	// a checkpoint without reading them (issue 23). Mark starts a cover:
	// the next Cover counts from this checkpoint. Cover says that the
	// newest state of every (rule, key) that has one (a tombstone aside)
	// is in the checkpoints from the last one with Mark (that one
	// included) to this one: whatever came before them may be dropped.
	// Cover applies before Mark (to the mark before). A store may ignore
	// both: they change no state. A checkpoint written again with a later
	// one (after an error) passes its Mark and Cover on to it.
	Mark, Cover bool
}

// HistoryQuery selects history events. Zero fields select everything.
type HistoryQuery struct {
	Key, Rule string
	Kind      string    // an addition: one kind of event only
	Since     time.Time // events at or after
	Until     time.Time // events before
	Limit     int       // at most this many, the newest (0: all)
}

// BanCount is how many active bans of one kind a rule has.
type BanCount struct {
	Rule, Kind string
	N          int
}

// PruneOptions say what Prune deletes. A zero time deletes nothing of its
// kind.
type PruneOptions struct {
	// KeysBefore: key states last seen before this (twice the longest
	// window ago) are deleted unless the key is throttled or banned.
	KeysBefore time.Time
	// KeepBannedSince: a key banned since this time (a ban in the history)
	// keeps its state even when idle, so that its earlier bans still count
	// for escalation (the rules' longest `remember` ago). Zero: no such keep.
	KeepBannedSince time.Time
	// HistoryBefore: history before this (history_retention ago) is
	// deleted.
	HistoryBefore time.Time
	// VacuumPages is how many free pages to give back to the file system
	// (PRAGMA incremental_vacuum): 0 none, negative all.
	VacuumPages int
}

// PruneStats say what Prune did.
type PruneStats struct {
	Keys, History int64 // rows deleted
	VacuumedPages int64 // pages given back to the file system
	FreePages     int64 // free pages left in the file
}
