// Package actions enforces bans: it turns the active bans of the store and
// the detector's decisions into block files, list files that proxies read
// (nginx, Apache, HAProxy, plain lists), firewall rules (iptables and
// ip6tables in logjail's own chain, ipset sets, an nftables table) and
// commands (exec).
//
// Every backend works on the same thing: the set of blocked prefixes (a
// single address is a /32 or a /128). An address is blocked while any
// active ban of a key containing it exists: the Manager keeps, for each
// prefix, the bans that hold it, and a backend sees an Entry set when the
// first arrives or the longest one changes, and deleted when the last one is
// lifted. A ban of a key that is an address or a prefix blocks that prefix;
// a ban of a group range's key (range:NAME) blocks the range's CIDRs, every
// address in them, seen in the logs or not (ManagerOptions.Ranges, from
// rules.Config.GroupRanges); a ban of any other key (user, user agent)
// blocks the addresses the detector saw on it, each alone. Keys and
// addresses are parsed with net/netip here, before anything reaches a file
// name, a rule or an argument.
//
// Range bans, where the design leaves it open:
//
//   - Bans from the store at start (Load) and decisions (Decisions, the
//     detector's and an operator's `logjail ban range:NAME`) are resolved
//     the same way, against the ranges of the running configuration: the
//     CIDRs are not recorded with the ban, the addresses seen are.
//   - A reload hands the new ranges to SetRanges: the active bans of a
//     range whose CIDRs changed block the new CIDRs at once (the backends
//     get the difference); a ban of a range no longer in the configuration
//     (or no longer `group: true`) falls back to the addresses recorded
//     with it, as a ban of a user does, and logs a warning; the range coming
//     back restores its CIDRs. A restart does the same from the store.
//   - A range ban blocks the addresses of the range, those charged to its
//     key: its CIDRs less the more specific ranges nested in them (a
//     `none` range of partners inside a provider's range is not blocked
//     by the provider's ban), as prefixes (rules.Config.GroupRanges). The
//     allow list inside them is exempt, as inside any blocked prefix.
//   - A throttle of range:NAME covers the same prefixes, in the actions
//     that act on throttles (`on: [throttle, ban]`, the endpoint).
//   - Each CIDR is an entry of its own, with the range's key: a web server
//     checks it as it checks a prefix ban (nginx deny or geo, Apache
//     Require not ip, HAProxy ACL, ipset hash:net, nftables interval sets,
//     iptables -s CIDR); the blockfile writes one file per CIDR
//     (66.249.64.0_19), which `-f dir/$remote_addr` cannot find: the
//     README points to the geo map or the endpoint for range bans.
//
// Each backend runs in a goroutine of its own behind a coalescing queue: the
// daemon's decider records a change and goes on, a slow or failing backend
// never stalls detection. A failed call is logged, counted and retried with
// back-off (1s doubling to 1m); a backend that failed is brought back with a
// full Sync, which also runs at start so that rules, set elements and files
// left by an earlier run agree with the store's active bans: a crash
// neither loses a ban nor leaves a stale one.
//
// # What the manager holds (issue 23)
//
// The collector marks every pointer the manager keeps on each cycle, so
// the active bans are kept with as few as the semantics allow: each ban is
// a value in one slice of slots (a map from its rule and key to its slot),
// its prefix inline when it blocks one (a single address: the common case;
// a slice only for a range or the addresses of a user), a prefix's holder
// one slot number (a slice of them only for a prefix several bans hold,
// oldest first, as before), an end in the heap a slot number and the
// slot's generation (a slot freed and reused skips its old ends), and the
// kinds the package's constants rather than the store's copies of the
// text. What each backend should hold is not kept beside the bans: the
// manager finds a prefix's entry from its holders when it changes, and
// all of them for a whole Sync, Entries and the count in Status, each
// found exactly as it was stored before (TestManagerAsModel: the plain
// model against the manager on a random mix). With 100,000 bans a whole
// collection takes 12 ms instead of 63-76 ms on one P; a whole Sync's
// entries take a fifth longer to gather (72 against 60 ms, sorted), at
// start and on the cleaner's resync.
//
// The bans' rule names and reasons are held once each (Manager.name):
// the store and the detector give every ban its own copy of the same few
// texts ("rate 4 per 10s > 3 (rule flood)" on every ban of a flood), and
// each copy is one more object for the collector to mark on every cycle.
// A ban set keeps the manager's copy of a text equal to its own; a text
// is never dropped, so the set is bounded: at most maxNames (1,024) texts
// of at most maxNameLen (256) bytes, about 256 KiB; past it a ban keeps
// the copy it came with. The keys are not held so: each is its own
// ban's (TestManagerNamesOnce). The map of each prefix's holder is keyed
// by the prefix's bytes, bits and family (pkey), not by the netip.Prefix,
// whose address holds a pointer: a map whose keys and values hold none is
// not scanned (TestPrefixKeyRoundTrip: the key gives back the prefix).
// Both together: a whole collection with 100,000 bans (manager and
// endpoint view) from 11.5-15.5 to 9.0-12.6 ms on one P
// (BenchmarkCollectBans in endpoint), 53.6 to 47.1 MB live.
//
// # The registry of action types
//
// The action types are one table, in Builtin: each type's name and its
// builder, and the endpoint's row, whose options the endpoint package
// checks (endpoint.CheckOptions). No type registers itself, and nothing of
// it is a package variable: Builtin returns a Registry value, which the
// callers pass where the configuration is loaded and where actions are
// built. It is the rules.ActionChecker of every load (rules.Options.Actions:
// the daemon at start and on reload, every command): CheckActions runs the
// builders in the pass that checks the rest of the file, so each option's
// problem is reported with the others, at the line of its value; Build
// (the daemon's start, `logjail clean --flush`) then finds none. Two
// registries share nothing. The endpoint package imports this one (its
// Bans view is a Backend, its options are read with Options), so this one
// cannot name it: Builtin takes the endpoint's check from its caller
// rather than have the table live in a third package. A registry built
// with nil for it knows the type all the same, and Build reports an
// endpoint action as not built into this logjail (the daemon and the
// command line always pass it; the package's own tests need not). Adding
// a type is a file here with its builder and one row of the table;
// rules.ActionTypes, the types a configuration accepts, must name it too
// (TestBuiltinTypes compares the two and the example's comment).
//
// The crowdsec action (package crowdsec, CrowdSec's decisions API) is
// the daemon's too: its row only checks its options (ParseCrowdsec, here,
// so that the row needs nothing from the caller), since its backend needs
// the database, which a Builder is not given; the daemon builds it and
// hands it to the manager beside the endpoint's views. Its `on:` defaults
// to [throttle, ban]: bouncers choose by type themselves.
//
// Throttles reach only the actions configured with `on: [throttle, ban]`
// (and the decision endpoint). Allowed prefixes (the allow list, the host's
// own addresses, trusted proxies) inside a blocked prefix are exempted by
// every backend that can express it.
//
// Boundaries: It owns making bans real: the backends, the registry of action
// types (Builtin) and the manager that reconciles them. It must not decide
// who is banned (the detector and the operator do), and every command it
// runs is argv, never a shell.
package actions
