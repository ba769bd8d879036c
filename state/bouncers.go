package state

import "time"

// Bouncer is a CrowdSec bouncer registered with `logjail bouncers add`: its
// name, the SHA-256 of its API key (the key itself is shown once and never
// kept) and what its last pull of the decisions stream was.
type Bouncer struct {
	Name      string
	KeyHash   [32]byte
	Created   time.Time
	LastPull  time.Time // zero: never pulled
	LastSeq   int64     // the decisions' sequence number its last stream pull reached
	IP        string    // the address of its last pull
	UserAgent string    // and its User-Agent
}

// BouncerDecision is one decision of the CrowdSec decisions API (package
// crowdsec) as the database keeps it, so that a restart of logjail loses no
// bouncer's delta: ID is its sequence number when it was made, Deleted the
// sequence number of its removal (0 while it is active).
type BouncerDecision struct {
	ID       int64
	Value    string // an address or a prefix, as CrowdSec writes it
	Scope    string // "Ip" or "Range"
	Type     string // "ban", "throttle", "captcha"
	Scenario string // the rule
	Until    time.Time
	Deleted  int64
}

// Bouncers is the bouncers' table and the decisions they pull: what the
// crowdsec action and `logjail bouncers` use. The store implements it; it
// is not part of Store (a state backend need not serve bouncers).
type Bouncers interface {
	ListBouncers() ([]Bouncer, error)
	AddBouncer(b Bouncer) error
	DeleteBouncer(name string) (bool, error)
	SetBouncerPull(name string, at time.Time, seq int64, ip, userAgent string) error
	BouncerDecisions() ([]BouncerDecision, error)
	// WriteBouncerDecisions inserts add, marks the decisions of deleted
	// (ID → sequence number) removed, and drops the removed ones whose
	// removal is at most prune (every bouncer has seen it), in one
	// transaction.
	WriteBouncerDecisions(add []BouncerDecision, deleted map[int64]int64, prune int64) error
}
