// Package logjail is a log-driven ban daemon for web servers.
//
// Where things are:
//
//   - parser: one access-log line to a parser.Entry (formats, no I/O).
//   - rules: the one YAML configuration, compiled (match, keys, limits, lists, ranges).
//   - detector: sliding windows per (rule, key) and the ban ladder, on log time.
//   - replay: the pipeline from files to decisions, shared by replay and the daemon.
//   - actions: what makes a ban real (later issues).
//   - cmd/logjail: the command line, thin.
package logjail
