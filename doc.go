// Package logjail is a log-driven ban daemon for web servers.
//
// Where things are:
//
//   - parser: one access-log line to a parser.Entry (formats, no I/O).
//   - rules: the one YAML configuration, compiled (match, keys, limits, lists, ranges).
//   - detector: sliding windows per (rule, key) and the ban ladder, on log time.
//   - pipeline: entries to decisions (rules, then detector), the one code path
//     that replay and the daemon share.
//   - source: opening logs (plain, gzip, stdin, globs, rotated siblings) and
//     reading their lines.
//   - replay: old logs through the pipeline, merged by time, acting on nothing;
//     the report for tuning.
//   - store: the SQLite database (bans, history, key states, positions).
//   - checkpoint: the detector's state and the logs' positions into the store,
//     and back after a restart.
//   - follow: following a source's files live, with exact offsets, through
//     rotation.
//   - daemon: `logjail run`, the live pipeline (follow, parse, decide,
//     checkpoint, clean, reload).
//   - ops: metrics, logs, the cleaner, systemd notification.
//   - cmd/logjail: the command line, thin.
//
// Not yet built: the actions that make a ban real, the decision endpoint
// and the control socket with the operator commands.
package logjail
