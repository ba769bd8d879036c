// Package rules is logjail's configuration: it reads the one YAML file,
// validates it and compiles it into what the pipeline asks of it for every
// entry — which rules see the entry, which key it is charged to, what it
// costs, and whether the allow list, the deny list or a range decides first.
//
// Loading is strict. Every key is known (an unknown key is an error), every
// regular expression, CIDR, duration, limit, time zone and log format
// compiles at load, `file:` lists must exist, and a `% cpu` limit must see
// sources that carry CPU. Load and Parse report every problem at once, as an
// errors.Join of *Error values that each name the file, the line and the
// path of the key: `logjail.yaml:12: rules[1].limits[0]: "20 per
// fortnight": unknown period`. An action's options are checked in the same
// pass by the ActionChecker in Options.Actions (the actions registry, which
// every command and the daemon pass: rules cannot import actions), each
// problem an *Error at the line of the option's value, sorted with the
// rest; without one, only an action's type is checked. The embedded
// example (Example) documents every key and its default and is the
// reference.
//
// Keys have one canonical form (DESIGN.md, "Keys"): an address
// (203.0.113.7), an IPv6 client by its ipv6_prefix (2001:db8:1:2::/64), a
// prefix (203.0.113.0/24), range:NAME, user:NAME, ua:TEXT and
// ADDRESS|ua:TEXT. See Config.IPKey, Config.PrefixKey and Classify. An
// address or prefix key is also a FixedKey (Config.IPFixed, PrefixFixed:
// 128 bits, family, length), whose text is the key's, byte for byte;
// ClassifyKeys, the pipeline's, carries it alone (Charge.Key ""), so that
// no key text is made for a line (no allocation: TestClassifyKeys), and
// ParseFixedKey takes the canonical text back to it.
// NAME and TEXT are the user and the user agent through parser.Printable:
// a key never holds a control character (NUL, newline, ESC) nor a byte that
// is not UTF-8, so no action, file, argv or terminal gets one from a
// client; the operator's commands refuse such characters in a key they are
// given (control.ParseTarget).
//
// Precedence in Classify: allow (with the host's own addresses and every
// trusted proxy) wins over everything; then the deny list; then the most
// specific range (none, banned, or its own limits instead of the rules);
// then good_bots: a verified crawler (package goodbots: a user agent that
// claims it, from its published ranges, or under verify: dns from an
// address whose forward-confirmed reverse DNS is the crawler's) is charged
// to the rule good_bots (GoodBotsRule) under one key per crawler,
// range:NAME, against good_bots' limits only; then the ordinary rules.
// good_bots is on by default (verify: ranges). The crawlers' keys are
// group keys: GroupRanges gives their published ranges less the
// operator's ranges, what a ban of range:googlebot blocks (a crawler
// verified by DNS outside its ranges is charged to the key, but a ban of it
// blocks the published ranges only). An operator's range of a crawler's
// name shares its key. Only an entry whose user agent claims a crawler
// pays for a range lookup; an unverified claim is charged to the ordinary
// rules with Charge.Claims set, for replay to show. Uptime monitors are
// not treated apart here: their user agent is free to fake. Lookups use routing tables (longest-prefix match),
// not scans.
//
// Dangerous configurations are refused: an allow, deny or trusted_proxies
// entry of a whole address family (0.0.0.0/0, ::/0: it would exempt or ban
// every client), and such a CIDR in a `banned` range (a deny by another
// name) or a `none` range (an allow by another name; a range of it with
// limits stays valid: a catch-all range checked against its own limits
// is a choice, not an accident); trusted_proxies on a source whose format has no
// X-Forwarded-For field (every line a proxy logs would carry the proxy's
// own, allowed, address); a `match:` field that no source of the rule can
// carry (parser.Parser.Carries; a source of format `auto` may carry
// anything; fields under `not:` are not checked, since they match
// everything rather than nothing). What is valid but likely a mistake is a
// warning (Config.Warnings), not an error: /metrics on a non-loopback
// address, and a decision endpoint with allow_remote on an unspecified or
// public address (not loopback, private or link-local; a host name is
// taken as public). `silence: [metrics_remote, endpoint_public]` says it is
// intended.
//
// AllowedKey says whether the allow list covers every address a ban of a
// key blocks; the daemon lifts such rule bans at a reload.
//
// A limit is parsed by the first kind of LimitKinds (package limits: one
// type a kind, in one file) whose grammar its words are; a Limit carries
// its kind as that value.
//
// Fleet (DESIGN.md, "Beyond one machine"): the fleet: section is
// Config.Fleet (nil without it), comparable so that a reload can tell
// whether it changed. Readings where issue 20 is silent: a password in
// the redis URL and a password_file both are an error (give it once);
// password_file and ca_file must name existing files at load (relative
// ones to the configuration's directory), but their contents are the
// fleet's to read (no secret is kept here); a host name that is no valid
// node name is an error that asks for node:. A Redis Cluster is
// cluster: true, redis: one seed (database 0 only: a path other than /0
// is an error), more seeds as the URL's addr=host:port parameters (the
// form go-redis reads) or an addrs: list of host:port; Config keeps one
// string, the addrs: appended to the URL as addr= parameters, so that the
// section stays comparable. addrs: or addr= without cluster: true is an
// error (they would be ignored by a client of one Redis), and a seed that
// is no host:port (port 1 to 65535) is an error at its item. TLS, ca_file
// and password_file are those of one Redis, for every primary. A rule's Fleet is its
// scope: fleet; the default applies to every rule, ranges with limits
// and good_bots included (ranges accept scope: too): fleet when the
// section is there and every limit is of a kind the fleet can sum (its
// window layout is limits.Buckets: rate and shares), else node. An
// explicit scope: fleet on a token bucket or last N, or without a
// fleet: section, is an error at its line.
//
// A *Config is immutable once built and safe for concurrent use. Classify
// allocates nothing but the key strings it must build. The package has no
// state of its own: a reload is a new Load.
//
// Boundaries: It owns the configuration: decoding, checking, compiling, and
// Classify (an entry to its charges). It must not keep state across entries
// (that is the detector's), act, or open a database; its only I/O is reading
// the config and the files it names.
package rules

import _ "embed"

//go:embed example.yaml
var example []byte
