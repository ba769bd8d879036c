package actions

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/logjail/logjail/rules"
)

// Kind is what an entry blocks for: a ban, or a throttle (only actions
// configured with `on: [throttle, ban]` see throttles).
type Kind string

// The kinds, as the detector and the store name them.
const (
	KindThrottle Kind = "throttle"
	KindBan      Kind = "ban"
)

// Entry is one blocked prefix, as every backend sees it: a single address
// is a /32 or a /128. An address is blocked while any active ban of a key
// containing it exists; the entry describes the ban that lasts longest
// among them.
type Entry struct {
	Prefix netip.Prefix // masked; never an allowed prefix's superset without an Allow exemption
	Kind   Kind         // KindBan when any ban holds the prefix, else KindThrottle
	Until  time.Time    // the latest end of the bans holding it; zero: until lifted
	Delay  time.Duration
	Rule   string // the rule of the ban that ends last
	Key    string // its key ("198.51.100.0/24", "user:bob", "198.51.100.7")
	Reason string // its reason, for a person
}

// Timeout is how long a kernel timeout (ipset, nftables) should keep the
// entry at now: its remaining time, at least a second, at most max; 0 means
// no timeout (a ban until lifted).
func (e *Entry) Timeout(now time.Time, max time.Duration) time.Duration {
	if e.Until.IsZero() {
		return 0
	}
	d := e.Until.Sub(now).Round(time.Second)
	if d < time.Second {
		d = time.Second
	}
	if max > 0 && d > max {
		d = max
	}
	return d
}

// RetryAfter is the seconds a client should wait, for Retry-After headers:
// the throttle delay, or the time left of a ban (at least 1); 0 for a ban
// until lifted.
func (e *Entry) RetryAfter(now time.Time) int {
	if e.Kind == KindThrottle && e.Delay > 0 {
		return int((e.Delay + time.Second - 1) / time.Second)
	}
	if e.Until.IsZero() {
		return 0
	}
	return max(1, int((e.Until.Sub(now)+time.Second-1)/time.Second))
}

// Change is one step of an Apply: the entry for a prefix is set (added or
// replaced: a longer ban, another reason), or deleted.
type Change struct {
	Entry
	Delete bool // the prefix is no longer blocked: only Entry.Prefix is set
}

// Backend is one configured action. The manager calls its methods from one
// goroutine per backend, never concurrently, and retries a failed call with
// back-off; a backend never sees the detector.
//
// Every method is idempotent: setting an entry the backend already holds, or
// deleting one it does not, is not an error.
type Backend interface {
	// Name names the action in logs, metrics and status: "iptables", or the
	// action's `name:` option.
	Name() string
	// Sync makes the backend hold exactly entries, whatever it held before
	// (rules, set elements or files left by an earlier run, a crash, an
	// operator): it adds what is missing and removes what is stale. allow
	// are the exemptions: the allowed prefixes (the configuration's
	// AllowList) that lie inside blocked ones, which the backend must let
	// through. The manager calls Sync at start, after a failed Apply, on
	// every cleaner pass, and whenever the exemptions change.
	Sync(ctx context.Context, entries []Entry, allow []netip.Prefix) error
	// Apply makes the changes, in order; the prefixes of one Apply are
	// distinct.
	Apply(ctx context.Context, changes []Change) error
	// Close releases what the backend holds open. What it put in place (a
	// firewall chain, files) stays: a restart must not open a gap.
	Close() error
}

// Flusher is a backend that can remove everything it ever put in place:
// `logjail clean --flush`.
type Flusher interface {
	Flush(ctx context.Context) error
}

// Memory is a backend whose state lives in logjail's own memory (the
// decision endpoint's view of the bans): nothing outside can change it, so
// the manager's periodic Resync leaves it alone.
type Memory interface {
	InMemory() bool
}

// Pacer is a backend whose changes are costly to make one by one (list
// files and the server reload that follows): the manager gathers changes
// for Settle after the first one and leaves MinInterval between two calls.
type Pacer interface {
	Pace() (settle, minInterval time.Duration)
}

// Env is what a backend learns of its surroundings when it is built.
type Env struct {
	StateDir string           // the configuration's state_dir (exec keeps its record there)
	Now      func() time.Time // the wall clock
}

// Builder builds a backend of one type from its options. It checks them and
// touches nothing outside the process: a configuration is checked with the
// same builders (`logjail check`, a reload) before anything is changed.
type Builder func(o *Options, env Env) (Backend, error)

// Registry is the action types a program knows: for each, how it is built
// (or, for a type the daemon runs itself, how its options are checked).
// Build it with Builtin; it is a value, passed to whoever builds or checks
// actions (the daemon, `logjail check`, `logjail clean --flush`), never a
// package variable. It does not change once built and is safe for
// concurrent use.
type Registry struct {
	types []actionType
}

// actionType is one row of the registry: a type the manager drives (build
// set), or one another package runs, whose options check reads (the
// endpoint); a row with neither is a type this registry cannot build.
type actionType struct {
	name  string
	build Builder
	check func(o *Options)
	one   bool // a configuration may have one action of the type (crowdsec: one API, one sequence of decisions)
}

// Builtin returns the registry of every action type logjail has, in the
// order the configuration documents them. endpoint checks the options of
// the decision endpoint (endpoint.CheckOptions): the endpoint package runs
// it inside the daemon and imports this one, so this one cannot name it
// and takes it from the caller. nil: the registry knows the endpoint but
// cannot check it, and Build reports it as not built in.
func Builtin(endpoint func(o *Options)) *Registry {
	return &Registry{types: []actionType{
		{name: "blockfile", build: buildBlockfile},
		{name: "nginx", build: buildListFile},
		{name: "apache", build: buildListFile},
		{name: "haproxy", build: buildListFile},
		{name: "list", build: buildListFile},
		{name: "iptables", build: newIPTables},
		{name: "nftables", build: buildNftables},
		{name: "endpoint", check: endpoint},
		{name: "exec", build: buildExec},
		{name: "crowdsec", check: checkCrowdsec, one: true},
	}}
}

// Types returns the names of the registry's types, in its order.
func (r *Registry) Types() []string {
	out := make([]string, len(r.types))
	for i, t := range r.types {
		out[i] = t.name
	}
	return out
}

// lookup returns the row of type typ; an empty one (neither build nor
// check) for a type the registry does not have.
func (r *Registry) lookup(typ string) actionType {
	for _, t := range r.types {
		if t.name == typ {
			return t
		}
	}
	return actionType{}
}

// OptionsOf returns the Options of action index of cfg, for a package that
// runs an action itself (the endpoint).
func OptionsOf(cfg *rules.Config, index int) *Options {
	return newOptions(cfg.File, index, cfg.Actions[index])
}

// Configured is a built action with what the manager needs to know of it.
type Configured struct {
	Backend
	Type  string
	Kinds []Kind // the kinds it acts on (`on:`), default [ban]
}

// Build builds the configured actions of the registry's types, in order;
// the endpoint (which reads the detector, not entries) is left to the
// daemon, its options checked. It finds the problems CheckActions finds,
// each naming the file, the line of the option's value and the option
// (`logjail.yaml:88: actions[1].reload: want a list of strings`), all of
// them joined: none for a configuration loaded with the registry as its
// checker (rules.Options.Actions), whose load reported them first.
func (r *Registry) Build(cfg *rules.Config, env Env) ([]Configured, error) {
	if env.StateDir == "" {
		env.StateDir = cfg.StateDir
	}
	// An action's index is its position in Config.Actions (what Load sets;
	// a configuration made by hand may leave it zero).
	as := slices.Clone(cfg.Actions)
	for i := range as {
		as[i].Index = i
	}
	return r.build(cfg.File, as, env)
}

// CheckActions checks the options of actions of the configuration file by
// building them and closing them (a builder touches nothing outside the
// process), and returns every problem, each a *rules.Error. It implements
// rules.ActionChecker: with the registry in rules.Options.Actions, Load
// checks the actions in the pass that checks the rest of the file.
func (r *Registry) CheckActions(file string, actions []rules.Action) error {
	cs, err := r.build(file, actions, Env{})
	closeAll(cs)
	return err
}

var _ rules.ActionChecker = (*Registry)(nil)

// build builds actions, each under its Index; on any problem it builds
// none and returns them all, joined.
func (r *Registry) build(file string, actions []rules.Action, env Env) ([]Configured, error) {
	if env.Now == nil {
		env.Now = time.Now
	}
	var out []Configured
	var errs []error
	names := map[string]int{}
	ones := map[string]int{}
	for _, a := range actions {
		t := r.lookup(a.Type)
		o := newOptions(file, a.Index, a)
		if t.one {
			if j, dup := ones[a.Type]; dup {
				errs = append(errs, fmtErr(file, o.lineOf("type"), o.path("type"), "a second %s action (the first is actions[%d]): one serves every bouncer", a.Type, j))
				continue
			}
			ones[a.Type] = a.Index
		}
		switch {
		case t.check != nil:
			t.check(o)
			if err := o.Err(); err != nil {
				errs = append(errs, err)
			}
			continue
		case t.build == nil:
			errs = append(errs, fmtErr(file, o.lineOf("type"), o.path("type"), "%q is not built into this logjail", a.Type))
			continue
		}
		kinds := o.kinds()
		name := o.String("name", a.Type)
		be, err := t.build(o, env)
		if err == nil {
			err = o.Err()
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if j, dup := names[name]; dup {
			o.errorf("name", "%q is the name of actions[%d] too: give each action of a type its own `name:`", name, j)
			errs = append(errs, o.Err())
			continue
		}
		names[name] = a.Index
		out = append(out, Configured{Backend: be, Type: a.Type, Kinds: kinds})
	}
	if len(errs) > 0 {
		closeAll(out)
		return nil, joinErrors(errs)
	}
	return out, nil
}

// Check builds the configured actions and closes them: the errors of Build.
func (r *Registry) Check(cfg *rules.Config) error {
	cs, err := r.Build(cfg, Env{})
	closeAll(cs)
	return err
}

// closeAll closes built actions that are not kept.
func closeAll(cs []Configured) {
	for _, c := range cs {
		c.Close()
	}
}

type joined []error

func (j joined) Error() string {
	s := make([]string, len(j))
	for i, e := range j {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

func (j joined) Unwrap() []error { return j }

func joinErrors(errs []error) error {
	var out joined
	for _, e := range errs {
		if u, ok := e.(joined); ok {
			out = append(out, u...)
		} else if e != nil {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Prefixes is what a ban of key blocks: the key itself when it is an
// address or a prefix (key: ip, key: prefix, the deny list), else the
// addresses seen on it, each as a single-address prefix. Everything is
// parsed with net/netip here; anything that does not parse blocks nothing.
// Prefixes knows no ranges: the Manager resolves a group range's key
// (range:NAME) to the range's CIDRs itself (ManagerOptions.Ranges), and
// calls Prefixes only for a key that is no configured range.
func Prefixes(key string, addrs []netip.Addr) []netip.Prefix {
	if p, err := netip.ParsePrefix(key); err == nil {
		return []netip.Prefix{unmapPrefix(p)}
	}
	if a, err := netip.ParseAddr(key); err == nil && a.Zone() == "" {
		a = a.Unmap()
		return []netip.Prefix{netip.PrefixFrom(a, a.BitLen())}
	}
	out := make([]netip.Prefix, 0, len(addrs))
	for _, a := range addrs {
		if !a.IsValid() {
			continue
		}
		a = a.Unmap().WithZone("")
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	slices.SortFunc(out, comparePrefix)
	return slices.Compact(out)
}

func unmapPrefix(p netip.Prefix) netip.Prefix {
	a := p.Addr()
	if a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96).Masked()
	}
	return p.Masked()
}

// comparePrefix orders prefixes by address, then by length.
func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

// SortEntries sorts entries by prefix: the order of every list file.
func SortEntries(es []Entry) {
	slices.SortFunc(es, func(a, b Entry) int { return comparePrefix(a.Prefix, b.Prefix) })
}

// Exempt returns the allowed prefixes that lie inside p without being p's
// supersets: what a backend blocking p must let through.
func Exempt(p netip.Prefix, allow []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for _, a := range allow {
		if a.Addr().Is4() == p.Addr().Is4() && a.Bits() > p.Bits() && p.Contains(a.Addr()) {
			out = append(out, a)
		}
	}
	return out
}

// String formats a prefix as list files write it: an address alone for a
// single address.
func PrefixString(p netip.Prefix) string {
	if p.IsSingleIP() {
		return p.Addr().String()
	}
	return p.String()
}

// fmtErr is an action error naming the configuration, the action's line
// and the option.
func fmtErr(file string, line int, path, format string, a ...any) error {
	return &rules.Error{File: file, Line: line, Path: path, Msg: fmt.Sprintf(format, a...)}
}
