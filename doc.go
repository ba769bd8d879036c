// Package logjail is a log-driven ban daemon for web servers.
//
// Where things are (docs/architecture.md: what flows between them, and
// where to add a limit kind, a format, an action, a source, a state
// backend):
//
//   - parser: one access-log line to a parser.Entry (formats, no I/O).
//   - limits: the limit kinds (rate, share, token bucket, last N), one type
//     a file: grammar, window arithmetic, reasons; and their windows.
//   - rules: the one YAML configuration, compiled (match, keys, limits, lists, ranges).
//   - signatures: requests no visitor makes (secrets, VCS files, exploits,
//     traversal, shell droppers, admin panels), as tested family files,
//     and the literal-first matcher behind a rule's `signatures:`.
//   - goodbots: the known crawlers and uptime monitors (user agents,
//     published ranges, reverse DNS), and their verification.
//   - detector: sliding windows per (rule, key) and the ban ladder, on log time.
//   - pipeline: entries to decisions (rules, then detector), the one code path
//     that replay and the daemon share.
//   - source: opening logs (plain, compressed, stdin, globs) and reading
//     their lines.
//   - rotation: the one model of log rotation (rotated names, their order,
//     compressed archives, fingerprints) that follow, catch-up and replay use.
//   - replay: old logs through the pipeline, merged by time, acting on nothing;
//     the report for tuning.
//   - eval: the labelled evaluation of the default configuration
//     (scripts/eval.sh; figures in testdata/eval/figures.txt).
//   - state: the state's values (bans, history, key states, positions) and
//     the small interfaces of their users; state/statetest, the
//     conformance suite every implementation passes.
//   - store: the SQLite database, the one implementation of state.Store.
//   - checkpoint: the detector's state and the logs' positions into the store,
//     and back after a restart.
//   - follow: following a source's files live, with exact offsets, through
//     rotation.
//   - stream: the sources that are no files: the journal (through
//     journalctl, with cursors) and syslog datagrams (RFC 3164/5424).
//   - daemon: `logjail run`, the live pipeline (follow, parse, decide,
//     act, checkpoint, clean, reload).
//   - actions: what makes a ban real (block files, proxy list files,
//     iptables and ipset, nftables, exec), driven by one manager that keeps
//     the union of active bans per prefix and reconciles every backend;
//     the types are one table, actions.Builtin.
//   - endpoint: the decision endpoint a reverse proxy asks (/auth, and the
//     Cerberus /v1/throttle).
//   - crowdsec: the bouncer side of CrowdSec's local API, for a `type:
//     crowdsec` action, so that CrowdSec's bouncers take logjail's decisions.
//   - control: the operator's API on the control socket, and the engine
//     behind ban and unban, live or on the database.
//   - fleet: the Redis side of a fleet of nodes (`fleet:`): the window
//     deltas of `scope: fleet` rules summed over the nodes, bans carried
//     to every node and claimed once, reconcile, working alone while Redis
//     is away (its package doc is the data model and the failure modes).
//   - ops: metrics, logs (the decision log: one line per decision and
//     operator action), the cleaner, systemd notification.
//   - cmd/logjail: the command line, thin.
//   - internal/pool: runs of elements named by 32-bit references, so that
//     the detector's slab, rings and key table hold no pointers.
//   - internal/gcgoal: how far a large live heap may grow between
//     collections (replay and the daemon hold millions of windows).
//   - internal/nstest: network namespaces for the firewall tests.
//   - internal/openload: the open-loop HTTP load generator (a fixed rate,
//     each request timed from its due time) that scripts/bench-endpoint.sh
//     runs on /auth; its main is internal/cmd/openload.
//   - internal/feedtest: the tests' reading loop (one file through the
//     pipeline into a store, checkpointing as the daemon does).
//   - internal/testenv: how a test that cannot run here skips (and fails
//     under CI=true).
//   - internal/samplelog: the generated PHP-FPM sample log (with a known
//     CPU hog) that `make try`, the README's first command, replays.
//   - internal/redistest: a real redis-server on loopback (plain or TLS,
//     stopped and restarted by the test) for the fleet's tests.
//   - internal/dnstest: a real dnsmasq on loopback for the reverse-DNS
//     tests.
//   - internal/journaltest: real journal files, written by
//     systemd-journal-remote, for the journald source's tests.
//   - internal/evalgen: the generated scenarios of the evaluation, each a
//     log and its truth.
//   - scripts/try.sh (`make try`) and scripts/newcomer.sh: the first
//     command, and its check from a fresh clone (TestNewcomer here).
//   - scripts/bench-table.sh (`make bench`): issue 23's figures as one
//     table of ratios (docs/performance.md); TestBenchSmoke here runs it
//     at a small size.
//
// Boundaries: the root package holds this map, TestNewcomer (the
// README's first command, from a fresh clone) and TestBenchSmoke (every
// row of `make bench` measurable), and no code.
package logjail
