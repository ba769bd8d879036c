// Package ops holds the daemon's operational pieces: its logger (NewLogger:
// text on a terminal, JSON lines otherwise, each prefixed with its syslog
// priority when stderr is the journal's stream) and decision log
// (DecisionLog),
// its Prometheus metrics and health endpoint (Metrics, Serve), the
// cleaner's schedule and its one pass (ParseSchedule, Clean), and the
// systemd notifications and watchdog (Notifier; contrib/systemd holds the
// units).
//
// Nothing here is package-level state: each value is built by the caller
// (cmd/logjail) and passed down.
//
// # Metrics
//
// NewMetrics registers these on a registry of its own (no global registry),
// beside the Go runtime (go_*) and process (process_*) collectors:
//
//	logjail_lines_read_total{source}              counter: log lines read
//	logjail_lines_rejected_total{source}          counter: lines the parser rejected
//	logjail_lines_late_total{source}              counter: lines older than newest - skew
//	logjail_lines_future_total{source}            counter: lines more than `future` ahead of the wall clock (not charged)
//	logjail_lines_outliers_total{source}          counter: lines far ahead of their neighbours in their file (not charged)
//	logjail_decisions_total{rule,kind}            counter: decisions (kind throttle, ban, unban)
//	logjail_active_bans{kind}                     gauge: active throttles and bans, as `logjail list` shows them (read from the database at each scrape)
//	logjail_tracked_keys                          gauge: (rule, key) states in memory
//	logjail_evictions_total                       counter: keys evicted at max_keys
//	logjail_lag_bytes{source}                     gauge: bytes written to the source's files not read yet
//	logjail_lag_seconds{source}                   gauge: wall clock minus the newest line's time
//	logjail_checkpoint_duration_seconds           histogram: time to write one checkpoint
//	logjail_checkpoints_failed_total              counter: checkpoints that failed (retried with the next)
//	logjail_circuit_breaker_open                  gauge: 1 while max_bans_per_minute holds bans back
//	logjail_circuit_breaker_trips_total           counter: trips of the circuit breaker in this process
//	logjail_cleaner_runs_total                    counter: cleaner passes
//	logjail_cleaner_failed_total                  counter: cleaner passes that failed
//
// Metrics.Handler serves them at /metrics and a health check at /healthz.
//
// # The decision log
//
// DecisionLog writes one line for every decision and operator action to
// the daemon's logger (JSON lines under journald, text on a terminal),
// fail2ban's `NOTICE [nginx] Ban 203.0.113.7` for logjail. The msg is
// what was decided, at a level an operator filters on:
//
//	ban          INFO   a rule's ban (also a log-only one), or an operator's
//	unban        INFO   a ban's end: its log-time until reached (source: the log source), its
//	                    wall-clock until passed (source "cleaner"), an operator's unban, a
//	                    rule's ban whose key the allow list now covers (source "allow", at a
//	                    reload or at start), a ban lifted as the state is resumed (source
//	                    "resume": its rule is gone, or it ended while logjail was down;
//	                    ResumeLifts, since checkpoint.Writer.Resume logs nothing)
//	deny         INFO   a deny-list entry or a banned range banned (at start, at a reload)
//	allow-lift   INFO   such a ban lifted: the entry left the list (a reload)
//	forget       INFO   an operator's `unban --forget` dropped a key's windows and escalation memory
//	throttle     DEBUG  a throttle, and each doubling of its delay: a storm of them is the
//	                    ladder working, and the history has each one
//	breaker      ERROR  the circuit breaker tripped (kind breaker-trip), or is open at start
//	                    (breaker-open); INFO when an operator resets it (breaker-reset)
//	suppressed   WARN   lines of one message left out this second, counted (DEBUG for throttle)
//
// Every decision line carries rule, key, kind (the history's kind: ban,
// unban, throttle, forget), until (RFC 3339 to the second, the wall-clock
// end as applied; "" for none: a deny-list ban, an unban), reason, source
// (the log source's name, or "operator", "deny", "range", "cleaner",
// "allow", "resume"; "checkpoint" for a breaker restored open at start);
// and when they apply who (an operator), node (the fleet node that decided
// it; none outside a fleet), log_only (true: recorded, acted on by
// nothing: a log_only rule, an open breaker, a decision on backlog already
// over when read), delay (a throttle's), violations, addresses (those a
// key that is no single address blocks), log_time (the log time of the
// line that decided it). A forced operator ban adds forced and allowed.
// The same attributes in every line, so that a log stack indexes them
// once. With no daemon, `logjail ban`, `unban` and `breaker reset` write
// the same lines on their stderr once the change is in the database
// (cmd/logjail, offline_log.go).
//
// Storms. At most PerSecond lines (DefaultDecisionRate, 50) of one message
// are written in one second, an operator's lines counted apart from the
// rest (a storm of bans does not hide an operator's); the others are left
// out, and one line, msg "suppressed", with of (the message), operator,
// count, since, seconds and per_second, says so when the next second
// begins (at the next line of that message, or at the daemon's
// once-a-second Tick; at shutdown, Flush). A line not written at the
// logger's level (throttles at INFO) is not counted either. Nothing is
// lost but log lines: the history in the database keeps every decision
// (`logjail history`). Breaker lines are never left out. The limiter runs
// on the real clock (it measures the rate lines are written), not on the
// daemon's injected wall clock.
//
// The cleaner works on state's interfaces: CleanWith on a
// state.Maintenance (the bans due, prune, the WAL), Clean on the
// state.Store that `logjail clean` opened.
//
// Boundaries: It owns metrics, the logs, the cleaner and systemd
// notification. It must not decide bans, nor know the implementation of
// the state.
package ops
