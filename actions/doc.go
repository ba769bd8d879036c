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
// a ban of any other key (user, user agent, range) blocks the addresses the
// detector saw on it, each alone. Keys and addresses are parsed with
// net/netip here, before anything reaches a file name, a rule or an
// argument.
//
// Each backend runs in a goroutine of its own behind a coalescing queue: the
// daemon's decider records a change and goes on, a slow or failing backend
// never stalls detection. A failed call is logged, counted and retried with
// back-off (1s doubling to 1m); a backend that failed is brought back with a
// full Sync, which also runs at start so that rules, set elements and files
// left by an earlier run agree with the store's active bans: a crash
// neither loses a ban nor leaves a stale one.
//
// Throttles reach only the actions configured with `on: [throttle, ban]`
// (and the decision endpoint). Allowed prefixes (the allow list, the host's
// own addresses, trusted proxies) inside a blocked prefix are exempted by
// every backend that can express it.
package actions
