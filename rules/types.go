package rules

import (
	"net/netip"
	"time"

	"github.com/logjail/logjail/limits"
)

// KeyKind says what a rule charges a request to (DESIGN.md, "Keys").
type KeyKind int

// Key kinds.
const (
	KeyIP          KeyKind = iota // address; IPv6 by ipv6_prefix ("2001:db8:1:2::/64")
	KeyPrefix                     // ipv4_prefix / ipv6_prefix ("203.0.113.0/24")
	KeyUser                       // "user:NAME"
	KeyUserAgent                  // "ua:TEXT"
	KeyIPUserAgent                // "ADDRESS|ua:TEXT"
	KeyRange                      // a range with group: true, "range:NAME"
)

// Limit is one compiled limit of a rule: its words, its kind (a
// limits.Kind, one of LimitKinds) and its numbers.
type Limit = limits.Limit

// Combine says how several limits of a rule combine.
type Combine int

// Combine modes.
const (
	CombineAny Combine = iota // over when any limit is over
	CombineAll                // over when every limit is over
)

// Throttle is the Perlbal ladder's throttle step. A rule without one bans on
// the first entry over its limits.
type Throttle struct {
	InitialDelay time.Duration
	MaxDelay     time.Duration
	Quiet        time.Duration
}

// Ban is a rule's ban step.
type Ban struct {
	After    int           // violations (while throttled) that must be exceeded before a ban
	For      time.Duration // first ban's length
	Factor   float64       // each earlier ban of the key by this rule multiplies For by Factor
	Max      time.Duration // cap on a ban's length; 0: no cap
	Remember time.Duration // how long earlier bans count (default 30 days)
}

// Rule is one compiled rule, or a range with limits (named "range:NAME").
type Rule struct {
	Name     string
	Index    int // position in Config.Rules (ordinary and range rules together)
	Key      KeyKind
	Limits   []Limit
	Combine  Combine
	Throttle *Throttle // nil: no throttle step
	Ban      Ban
	LogOnly  bool
	// Fleet is `scope: fleet`: the rule's windows are summed over the
	// fleet's nodes (Config.Fleet). Its default is true when the
	// configuration has a fleet: section and every limit of the rule
	// can be summed (a rate or a share: its kind's window layout is
	// limits.Buckets), else false (`scope: node`).
	Fleet bool
}

// Fleet is the configuration's fleet: section: the nodes that share
// windows and bans through Redis (DESIGN.md, "Beyond one machine"). It
// is comparable, so that a reload can tell whether it changed.
type Fleet struct {
	Redis        string        // redis:// or rediss:// URL (a password in it, or in PasswordFile); a cluster's seed, with the addrs: list appended as addr= parameters
	Cluster      bool          // Redis is a Redis Cluster (cluster: true)
	PasswordFile string        // a file holding the password (its first line); "" for none
	CAFile       string        // PEM CA certificates for rediss:// with a private CA; "" for the system's
	Node         string        // this node's name, unique in the fleet (default: the host name)
	Sync         time.Duration // how often the node exchanges its deltas
	Line         int           // line of the fleet: key in the configuration
}

// Charge is one request charged to one key by one rule.
type Charge struct {
	Rule *Rule
	Key  string // canonical key string; "" for an address or prefix key from ClassifyKeys
	// Fixed is an address or prefix key as a fixed-size value (its text is
	// Key's), which the detector keys by without the text; the zero value
	// for every other key (Key is then the key).
	Fixed FixedKey
	Addr  netip.Addr // the client address (the address a ban on a non-address key blocks)
	// CPU is the cost `% cpu` limits weigh: the entry's CPU seconds, or its
	// duration under cpu_fallback: duration, else 0.
	CPU float64
	// Duration is the cost `% duration` limits weigh: the entry's duration in seconds, or 0.
	Duration float64
	// Claims is the crawler (goodbots.Agent's name) the entry's user agent
	// claims when its address is not verified for it (a fake, or a DNS
	// answer still pending): the entry is charged as an ordinary client.
	// "" otherwise.
	Claims string
	// Signature is the pattern ("family/name") that let the entry into a
	// rule with `signatures:`, "" for other rules: a ban's reason names it.
	Signature string
}

// Verdict says how the lists and ranges treated an entry.
type Verdict int

// Verdicts.
const (
	VerdictCharged Verdict = iota // the entry was charged to zero or more rules
	VerdictAllowed                // allow list, own address or trusted proxy: charged to nothing
	VerdictExempt                 // a range with limits: none
	VerdictDenied                 // deny list or a `banned` range: already banned, charged to nothing
)

// StaticBan is a ban that comes from the configuration rather than from traffic:
// a deny-list entry or a range with limits: banned. It lasts until removed from the config.
type StaticBan struct {
	Key    netip.Prefix // the denied CIDR (a single address is a /32 or /128)
	Origin string       // "deny" or "range"
	Reason string       // "deny list" or "range NAME banned"
}
