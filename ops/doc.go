// Package ops holds the daemon's operational pieces: its logger (NewLogger).
//
// Nothing here is package-level state: each value is built by the caller
// (cmd/logjail) and passed down.
package ops
