// Package endpoint is the decision endpoint (`type: endpoint`): an HTTP
// server inside the daemon that a reverse proxy asks before serving each
// request (nginx auth_request, Traefik ForwardAuth, Caddy forward_auth),
// and a Cerberus-style query.
//
// GET /auth answers for the client: 200 allowed, 403 banned (the deny list
// included; with Retry-After, the seconds until the ban ends, rounded up,
// except for a ban until lifted, which has no end to tell), 429 throttled with Retry-After set to the ladder's current
// delay, 400 when the client cannot be told (below). Every answer of
// /auth but a 400 carries X-Logjail-Decision (allow, throttle, ban, unready), for
// nginx's auth_request_set; a JSON body only when the caller sends
// Accept: application/json. An allowed address (allow list, host
// addresses, trusted proxies) is let through a ban of a wider prefix that
// contains it; a ban of the allowed key itself, which only an operator's
// ban --force makes, holds.
//
// # The client: one trust rule
//
// A client can never choose the address it is judged as. The address is
// found so:
//
//  1. The TCP peer is the client, unless it is one of the endpoint's
//     trusted_proxies (default: loopback, where the proxy asking normally
//     is). From any other peer X-Forwarded-For and X-Real-IP are never
//     read, whatever they hold. A unix socket peer is always a proxy (only
//     local processes reach the socket).
//  2. From a trusted proxy, X-Forwarded-For decides when the request has
//     one: all its header lines, in the order received, are one list, read
//     from the right; trusted proxies are passed over and the first
//     address that is not one is the client (the rightmost-untrusted rule:
//     what a client wrote itself, at the left of what its proxies
//     appended, is never reached). Empty items are skipped; when every
//     item is a trusted proxy, the leftmost is the client. An item that is
//     not an address (an address with a port, [v6]:port and IPv4-mapped
//     IPv6 are) met before the client makes the answer a 400; what lies
//     left of the client is never parsed. A header with no item at all is
//     a 400.
//  3. With X-Forwarded-For present, X-Real-IP is not read at all: sent
//     once, twice, empty or malformed, it changes nothing.
//  4. Without X-Forwarded-For, X-Real-IP is the client: one header holding
//     one address (a port allowed); repeated, empty or malformed, a 400.
//  5. Without either, the peer itself (a unix socket peer: a 400).
//
// A 400 is never a guess, and never a way out of a ban through the
// README's snippets: nginx replaces both headers with $remote_addr, so a
// client's own never reach the endpoint; Caddy appends the peer to
// X-Forwarded-For. The rule is tested against a separate model of it by a
// fuzz test, through the real server.
//
// # Always answering
//
// The daemon serves the endpoint from its first moment, before it opens
// the database: until the actions manager has loaded the bans (seconds
// for hundreds of thousands), `fail: open` answers 200 and `fail: closed`
// 503 with Retry-After: 1, both with the decision unready. The README's
// nginx snippets turn a logjail that does not answer at all (stopped,
// restarting) into the same: 200 or 503, never nginx's 500.
//
// The server holds at most max_conns connections (default 4096): when a
// new one would exceed it, or Accept fails for want of file descriptors
// (EMFILE, ENFILE), it closes the connection that has gone longest without
// an answered request (an idle keep-alive connection, a client that sends
// nothing or its headers a byte at a time), so that idle and slow clients
// cannot starve the proxy's fresh questions. read_timeout (default 5s)
// bounds the reading of a request from the connect; idle_timeout (default
// 60s) how long a kept-alive connection waits for its next one. An error
// of Accept never ends serving: the server backs off (5 ms, doubling to
// 1 s; at once when it could free a descriptor) and tries again, logging at
// most once a minute. Should the listener stop all the same, Serve returns
// an error wrapping ErrStopped: the daemon stops with it (so that systemd
// restarts it), and until then Err, /healthz and `logjail status` say so;
// they also report an endpoint whose Accept has failed for 10 s without a
// success.
//
// # The Cerberus query
//
// GET /v1/throttle?ip=ADDRESS&event=RULE answers as Cerberus does:
// {"throttle": {"range", "reason", "sleep", "request_count"}}, and agrees
// with /auth for the same address: where /auth answers 403, sleep -1 and
// reason "banned"; where it answers 429, a sleep of at least its
// Retry-After (the seconds until an over limit's window falls back within
// it when that is longer, with the limit's period as the reason, else
// "throttled"); where it answers 200, sleep 0, unless a limit is over
// before the detector has decided (then the seconds until its window falls
// back within it, raised to second_penalty for limits of a second or less,
// and the period: "second", "minute", "10s"). A ban or throttle that /auth
// does not enforce — a log_only rule's, or one decided while the circuit
// breaker was open — is reason "log_only", sleep 0, as is a log_only
// rule's limit being over. range is "range:NAME" for a client in a range
// with limits (a group: true range, keyed range:NAME, or a range with its
// own limits, whose rule is range:NAME) and for the ban of a range key;
// else the key or prefix the answer concerns (the banned prefix, the key
// over its limit); else the address. event is a rule name; without it
// every rule is asked. The key of a rule is computed from the address
// alone: rules keyed by user or user agent are answered from the bans
// only.
//
// The answers come from memory: the bans from a Bans view the actions
// manager keeps current like any other action (on: [throttle, ban]), the
// windows through the Windows interface the daemon implements over its
// detector (set with SetWindows once it is restored, safely while
// serving). No request reads the database.
//
// No request waits for ingest (issue 23). /auth takes no lock: the Bans
// view is an immutable snapshot that every change of the actions manager
// replaces with one atomic swap (copy-on-write: a change makes a new small
// overlay over a shared base, or, past 1,024 prefixes, a new base). The
// view holds no pointer per prefix (bantable.go), so that the collector's
// every cycle, which marks the whole live heap while requests wait on one
// core, has next to nothing to scan in its 100,000 bans. /v1/throttle's
// windows are read under the daemon's lock on its detector, which the
// daemon releases between slices of a few hundred lines (package daemon,
// "The decision path"): a request waits at most one slice. /auth answers
// a proxy (no JSON asked) without allocating: the JSON body's strings are
// built only when asked for, and X-Forwarded-For is parsed in place of
// the request's header, so a busy endpoint makes no garbage for the
// collector to run for (its mark phases were most of the tail on one
// core; docs/performance.md, "Round 2"; TestAuthAllocatesNothing). How
// long a proxy waits is measured open loop: requests at a fixed rate,
// each timed from when it was due (scripts/bench-endpoint.sh with
// internal/openload), since a closed-loop load that saturates the core
// measures its own queue. Under 50,000 lines/s on one core ingest takes
// 80 to 90% of that core, and a request then waits for the kernel to run
// the endpoint's thread (docs/performance.md, "Row 3, open loop").
//
// The endpoint is the `endpoint` row of the actions registry: the daemon
// runs it itself (it reads the detector, not only the bans), and the
// registry only checks its options, with CheckOptions, which the callers
// hand to actions.Builtin (this package imports actions, not the other way
// round); every load of the configuration checks them through the
// registry, in the pass that checks the rest of the file. Nothing
// registers itself in init.
//
// The endpoint listens on loopback (127.0.0.1:7390 by default) or a unix
// socket (listen: unix:/run/logjail/auth.sock, mode 0666: nothing can be
// changed through it), and refuses a non-loopback address without
// allow_remote: true, since it tells anyone who asks who is banned.
//
// Boundaries: It owns the decision endpoint. It must not write state or
// decide bans: it answers from the ban set the daemon gives it.
package endpoint
