package control

import (
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/logjail/logjail/state"
)

// SchemaVersion is the "version" of every JSON document here. A field may
// be added without changing it; none changes meaning or goes away.
const SchemaVersion = 1

// Ban is one active (or, with --expired, ended) throttle or ban.
type Ban struct {
	Rule string `json:"rule"`
	Key  string `json:"key"`
	Kind string `json:"kind"` // "throttle" or "ban"
	// Since is when it was decided; Until when it ends, null for a ban
	// until lifted (the deny list).
	Since time.Time  `json:"since"`
	Until *time.Time `json:"until"`
	// LeftSeconds is the time left at Now, whole seconds; null without an
	// until; 0 once ended.
	LeftSeconds *int64   `json:"left_seconds"`
	Violations  int      `json:"violations"`
	Addresses   []string `json:"addresses"` // what a ban of a key that is no address blocks; [] for none
	Reason      string   `json:"reason"`
	Origin      string   `json:"origin"` // "detector", "deny", "range" or "operator"
	Who         string   `json:"who"`    // the operator, for an operator's ban; "" otherwise
	LogOnly     bool     `json:"log_only"`
	// Node is the fleet node that decided it; absent outside a fleet.
	Node string `json:"node,omitempty"`
	// Ended is when an ended ban ended (list --expired): lifted or
	// expired. Absent for an active one.
	Ended *time.Time `json:"ended,omitempty"`
	// EndReason is why it ended (list --expired).
	EndReason string `json:"end_reason,omitempty"`
}

// BanList is the document of `logjail list --output json` and GET /v1/bans.
type BanList struct {
	Version int       `json:"version"`
	Now     time.Time `json:"now"`
	Expired bool      `json:"expired"` // the ended bans, not the active ones
	Bans    []Ban     `json:"bans"`
}

// Event is one line of history: a decision or an operator's action.
type Event struct {
	Time       time.Time  `json:"time"`
	Rule       string     `json:"rule"`
	Key        string     `json:"key"`
	Kind       string     `json:"kind"` // throttle, ban, unban, forget, breaker-trip, breaker-reset
	Until      *time.Time `json:"until"`
	Reason     string     `json:"reason"`
	Violations int        `json:"violations"`
	Addresses  []string   `json:"addresses"`
	Origin     string     `json:"origin"`
	Who        string     `json:"who"`
	LogOnly    bool       `json:"log_only"`
	Node       string     `json:"node,omitempty"` // the fleet node that decided it; absent outside a fleet
}

// History is the document of `logjail history --output json` and GET
// /v1/history: the events of the keys searched, oldest first.
type History struct {
	Version int      `json:"version"`
	Query   string   `json:"query"` // as given
	Keys    []string `json:"keys"`  // the keys it stands for
	Events  []Event  `json:"events"`
}

// BanRequest is the body of POST /v1/ban.
type BanRequest struct {
	Key    string `json:"key"`    // an address, a CIDR, or a key (user:NAME, ua:TEXT, range:NAME, ADDRESS|ua:TEXT)
	For    string `json:"for"`    // a duration: 90s, 10m, 1h, 7d, 1d12h
	Reason string `json:"reason"` // "" for "banned by an operator"
	Rule   string `json:"rule"`   // "" or "operator": an operator's ban; else a configured rule
	Force  bool   `json:"force"`  // ban an allowed key all the same
}

// BanResult is the answer to a ban.
type BanResult struct {
	Version int  `json:"version"`
	Ban     Ban  `json:"ban"`
	Live    bool `json:"live"` // applied by the running daemon; false: written to the database, applied when it starts
	// Allowed names the allow-list entry an allowed key is on, when
	// Force banned it all the same.
	Allowed string `json:"allowed,omitempty"`
	// Exempt are allowed prefixes inside a banned CIDR: the actions let
	// them through.
	Exempt []string `json:"exempt"`
}

// UnbanRequest is the body of POST /v1/unban. Key, or Rule alone (every
// ban of the rule), or All.
type UnbanRequest struct {
	Key    string `json:"key"` // an address (every key containing it), a CIDR (every key overlapping it) or a key
	Rule   string `json:"rule"`
	All    bool   `json:"all"`
	Reason string `json:"reason"`
	Forget bool   `json:"forget"` // also drop the keys' windows and escalation memory
}

// Kept is a matched ban an unban does not lift, and why.
type Kept struct {
	Ban Ban    `json:"ban"`
	Why string `json:"why"`
}

// Forgotten is a (rule, key) whose state an unban --forget dropped.
type Forgotten struct {
	Rule string `json:"rule"`
	Key  string `json:"key"`
}

// UnbanResult is the answer to an unban.
type UnbanResult struct {
	Version   int         `json:"version"`
	Removed   []Ban       `json:"removed"`
	Kept      []Kept      `json:"kept"`
	Forgotten []Forgotten `json:"forgotten"`
	Live      bool        `json:"live"` // taken effect in every action; false: applied when the daemon starts
}

// CleanRequest is the body of POST /v1/clean.
type CleanRequest struct {
	// VacuumPages is how many free pages to give back to the file system
	// (0 none, negative all): clean's --vacuum-pages.
	VacuumPages int `json:"vacuum_pages"`
}

// CleanUnban is a ban a cleaner pass lifted because its time had passed.
type CleanUnban struct {
	Rule  string    `json:"rule"`
	Key   string    `json:"key"`
	Ended time.Time `json:"ended"` // the ban's until
}

// CleanReport is the document of `logjail clean --output json` and POST
// /v1/clean: what one cleaner pass did (ops.CleanStats), the same whether
// the daemon ran it (Live) or the command did on the database.
type CleanReport struct {
	Database      string `json:"database"`
	Expired       int    `json:"expired"`
	Throttles     int    `json:"throttles_ended"`
	Keys          int64  `json:"keys_pruned"`
	History       int64  `json:"history_pruned"`
	VacuumedPages int64  `json:"vacuumed_pages"`
	FreePages     int64  `json:"free_pages"`
	WALTruncated  bool   `json:"wal_truncated"`
	// Added with the API's clean: the unbans recorded (for the actions
	// to undo), and who ran the pass.
	Unbans []CleanUnban `json:"unbans"`
	Live   bool         `json:"live"` // run by the daemon, its actions undid the unbans; false: run on the database, applied when the daemon starts
}

// TopRequest is the query of GET /v1/top.
type TopRequest struct {
	Rule string `json:"rule"`
	By   string `json:"by"` // "" (any limit), "requests" (rate, token bucket, last N) or "cpu" (cpu and duration shares)
	N    int    `json:"n"`  // at most this many keys (default 20)
}

// TopLimit is one limit of a key in a top list.
type TopLimit struct {
	Limit string   `json:"limit"` // as configured: "20 per second"
	Value *float64 `json:"value"` // the window's value now in the limit's units (share: a fraction); null: none yet
	// Ratio is Value against the limit: 1 at it, above when over;
	// capped at 1e6 (a limit of 0).
	Ratio float64 `json:"ratio"`
}

// TopKey is one key of a top list.
type TopKey struct {
	Rule     string     `json:"rule"`
	Key      string     `json:"key"`
	Phase    string     `json:"phase"` // "", "throttle" or "ban"
	Until    *time.Time `json:"until"`
	Ratio    float64    `json:"ratio"` // the highest of its limits' (of those --by selects)
	Requests int64      `json:"requests"`
	CPU      float64    `json:"cpu_seconds"`
	LastSeen time.Time  `json:"last_seen"`
	Limits   []TopLimit `json:"limits"`
}

// Top is the document of `logjail top --output json` and GET /v1/top.
type Top struct {
	Version int       `json:"version"`
	Live    bool      `json:"live"` // the daemon's windows now; false: as of the last checkpoint
	Time    time.Time `json:"time"` // the log time the windows are read at
	Keys    []TopKey  `json:"keys"`
}

// Status is the document of `logjail status --output json` and GET
// /v1/status.
type Status struct {
	Version int  `json:"version"`
	Live    bool `json:"live"` // from the running daemon; false: from the database, no daemon answering
	// Logjail is the version of the daemon's binary (live), else of the
	// command's.
	Logjail       string        `json:"logjail"`
	PID           int           `json:"pid,omitempty"`
	Started       *time.Time    `json:"started"`
	UptimeSeconds float64       `json:"uptime_seconds"`
	Config        string        `json:"config"`
	Database      Database      `json:"database"`
	Sources       []Source      `json:"sources"`
	Rules         []RuleStatus  `json:"rules"`
	Actions       []ActionState `json:"actions"`
	Breaker       Breaker       `json:"breaker"`
	TrackedKeys   int           `json:"tracked_keys"`
	// Endpoints are the decision endpoints (live only).
	Endpoints []EndpointState `json:"endpoints,omitempty"`
	// Bouncers are the CrowdSec bouncers and their last pulls (package
	// crowdsec).
	Bouncers []BouncerInfo `json:"bouncers,omitempty"`
	// The detector's estimated heap (the states and the key index), that
	// per tracked key (detector.Memory), and the keys evicted at max_keys
	// since the state began (the checkpoint keeps the count). Offline: of
	// the detector restored from the last checkpoint.
	TrackedKeyBytes int64 `json:"tracked_key_bytes,omitempty"`
	BytesPerKey     int64 `json:"bytes_per_key,omitempty"`
	Evictions       int64 `json:"evictions"`
	// Fleet is the node's fleet (live, with a `fleet:` section only).
	Fleet *FleetStatus `json:"fleet,omitempty"`
}

// EndpointState is a decision endpoint in a status.
type EndpointState struct {
	Name    string `json:"name"`
	Listen  string `json:"listen"`
	Serving bool   `json:"serving"`
	// Ready: the bans are loaded (before, the endpoint answers by `fail`).
	Ready        bool  `json:"ready"`
	Conns        int   `json:"conns"`
	Evicted      int64 `json:"evicted"`       // connections closed to make room
	AcceptErrors int64 `json:"accept_errors"` // failed accepts, each retried
	// Error is why it does not serve, or the error of an accept failing
	// for 10 s; "" when healthy.
	Error string `json:"error"`
}

// Database is the state database in a status.
type Database struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"` // the file and its write-ahead log
	// Checkpoint is the log time of the last checkpoint; null: none yet.
	Checkpoint *time.Time `json:"checkpoint"`
	// Error is why the daemon cannot write the database now (a full disk:
	// "... database or disk is full ..."), or read it; "" when healthy.
	// The daemon keeps deciding and acting; the rest of the status is its
	// memory and the database as of its last write that succeeded.
	// `logjail status` says it first and exits 1.
	Error string `json:"error"`
}

// Source is a source in a status.
type Source struct {
	Name  string       `json:"name"`
	Files []SourceFile `json:"files"`
	// LastLine is the log time of the newest line read (live only).
	LastLine *time.Time `json:"last_line"`
	// LagSeconds is how far behind the wall clock that line is (live only).
	LagSeconds *float64 `json:"lag_seconds"`
	// Future counts the lines more than `future` ahead of the wall clock,
	// and Outliers those far ahead of their neighbours in their file, since
	// the daemon started: neither is charged (live only).
	Future   int64 `json:"future_lines,omitempty"`
	Outliers int64 `json:"outlier_lines,omitempty"`
}

// SourceFile is how far a file of a source was read.
type SourceFile struct {
	Path     string `json:"path"`
	Offset   int64  `json:"offset"`    // bytes read
	Line     int64  `json:"line"`      // lines read
	Size     int64  `json:"size"`      // the file's size now; -1 when it cannot be read
	LagBytes int64  `json:"lag_bytes"` // size − offset: what is left to read (0 for a rotated file)
}

// RuleStatus counts a rule's active throttles and bans. Operator bans
// count under "operator", the deny list and banned ranges under "deny".
type RuleStatus struct {
	Name      string `json:"name"`
	Throttles int    `json:"throttles"`
	Bans      int    `json:"bans"`
	LogOnly   bool   `json:"log_only"`
}

// ActionState is an action in a status.
type ActionState struct {
	Name        string     `json:"name"`
	Type        string     `json:"type"`
	Entries     int        `json:"entries"`
	Pending     int        `json:"pending"`
	Applied     *time.Time `json:"applied"`
	Errors      int64      `json:"errors"`
	LastError   string     `json:"last_error"`
	LastErrorAt *time.Time `json:"last_error_at"`
}

// Breaker is the circuit breaker (max_bans_per_minute) in a status, a
// BreakerStatus and a BreakerResetResult.
type Breaker struct {
	Open  bool  `json:"open"`  // rules are log-only until an operator resets it
	Trips int64 `json:"trips"` // times it tripped
	// MaxBansPerMinute is the limit in force; -1: the breaker is disabled.
	MaxBansPerMinute int `json:"max_bans_per_minute"`
	// Tripped is the log time of the ban that tripped it last; null: it
	// never tripped. The fields after it describe that trip, kept after a
	// reset: Bans bans acted on within WindowSeconds up to that ban (it
	// included), over the limit of then, Limit; TripRule and TripKey the
	// ban's (itself log-only).
	Tripped       *time.Time `json:"tripped"`
	Bans          int        `json:"bans"`
	WindowSeconds float64    `json:"window_seconds"`
	Limit         int        `json:"limit"`
	TripRule      string     `json:"trip_rule"`
	TripKey       string     `json:"trip_key"`
	// LogOnlyRules are the rules the open breaker holds to log-only:
	// every configured rule (range rules included) that is not log_only
	// itself. [] when closed.
	LogOnlyRules []string `json:"log_only_rules"`
	// Reset is the last reset by an operator; null: none in the history.
	Reset *BreakerReset `json:"reset"`
}

// BreakerReset is an operator's reset of the circuit breaker.
type BreakerReset struct {
	Time time.Time `json:"time"` // wall time
	Who  string    `json:"who"`
}

// BreakerStatus is the document of `logjail breaker status --output json`
// and GET /v1/breaker.
type BreakerStatus struct {
	Version int     `json:"version"`
	Live    bool    `json:"live"` // from the running daemon; false: from the database
	Breaker Breaker `json:"breaker"`
	// Events are the breaker's trips (kind breaker-trip) and resets
	// (breaker-reset) in the history, oldest first: the last 20.
	Events []Event `json:"events"`
}

// BreakerResetResult is the answer to POST /v1/breaker/reset and the
// document of `logjail breaker reset --output json`.
type BreakerResetResult struct {
	Version int `json:"version"`
	// WasOpen: the breaker was open and is closed now. false: it was
	// closed, and nothing changed (a reset is no error then).
	WasOpen bool `json:"was_open"`
	// Breaker is the breaker after the reset; its reset is this one, null
	// when nothing changed.
	Breaker Breaker `json:"breaker"`
	Live    bool    `json:"live"` // reset in the running daemon; false: in the database, restored closed when it starts
}

// Errors of the API. Each unwraps to one of these, which carry the HTTP
// status the server answers with and the client turns back into them.
var (
	// ErrBadRequest: the request is malformed (not an address, CIDR or
	// key; a bad duration; a rule not configured).
	ErrBadRequest = errors.New("bad request")
	// ErrNotFound: an unban matched no active ban and forgot nothing.
	ErrNotFound = errors.New("nothing matched")
	// ErrAllowed: a ban of an allowed key without Force.
	ErrAllowed = errors.New("on the allow list")
	// ErrForbidden: the caller may not change anything.
	ErrForbidden = errors.New("forbidden")
)

// httpStatus is the status the server answers err with.
func httpStatus(err error) int {
	switch {
	case errors.Is(err, ErrBadRequest):
		return http.StatusBadRequest
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, ErrAllowed):
		return http.StatusConflict
	case errors.Is(err, ErrForbidden):
		return http.StatusForbidden
	case errors.Is(err, state.ErrFull):
		// Not the server's fault: the message says the disk is full.
		return http.StatusInsufficientStorage
	}
	return http.StatusInternalServerError
}

// errorOf turns a status and message back into an error wrapping the
// sentinel of the status.
func errorOf(status int, msg string) error {
	var base error
	switch status {
	case http.StatusBadRequest:
		base = ErrBadRequest
	case http.StatusNotFound:
		base = ErrNotFound
	case http.StatusConflict:
		base = ErrAllowed
	case http.StatusForbidden:
		base = ErrForbidden
	case http.StatusInsufficientStorage:
		base = state.ErrFull
	default:
		return fmt.Errorf("the daemon answered %d: %s", status, msg)
	}
	return &apiError{base: base, msg: msg}
}

// apiError is an error of the API: its message as the server said it.
type apiError struct {
	base error
	msg  string
}

func (e *apiError) Error() string { return e.msg }
func (e *apiError) Unwrap() error { return e.base }

// errf makes an error wrapping base with a message of its own.
func errf(base error, format string, a ...any) error {
	return &apiError{base: base, msg: fmt.Sprintf(format, a...)}
}

// Version is logjail's version as the binary knows it: the module version
// (a tagged build) or "devel", with the VCS revision when built from a
// checkout.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+dirty"
			}
		}
	}
	if rev != "" && !strings.Contains(v, rev[:min(12, len(rev))]) {
		v += " (" + rev[:min(12, len(rev))] + modified + ")"
	}
	return v
}
