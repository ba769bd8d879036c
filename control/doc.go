// Package control is the operator's side of logjail: the control API that
// `logjail run` serves on its control_socket (HTTP and JSON over a unix
// socket, docs/control.md), its client, and what the commands list, ban,
// unban, top, history, status and breaker do with or without a daemon.
//
// The changes (Engine: ban, unban, the circuit breaker's reset) are made
// the same way by both: the daemon runs them in its decider goroutine, in
// order with the log lines, then hands the decisions to its actions; with
// no daemon the CLI runs them on a detector restored from the database and
// checkpoints them, and the daemon applies them when it starts. The
// breaker's trips and resets are history events of their own kinds
// (state.KindBreakerTrip, state.KindBreakerReset), with no rule and the
// key BreakerKey;
// BreakerStatus lists them (docs/control.md, "The circuit breaker"). The reads (List, ReadHistory,
// StatusOf, RestoreDetector) work on a read-only database, so a member of
// the logjail group can list while the daemon writes. They take state's
// interfaces (state.Ledger, state.Reader, state.RestoreSource,
// state.BanReader), not the SQLite store: what opens the state (the
// daemon, cmd/logjail's opener) hands it in.
//
// The JSON documents (types.go) are the API's and the commands' --output
// json: fields are added, never changed or removed, under SchemaVersion.
//
// Boundaries: It owns the operator's API on the control socket and the
// engine behind ban and unban. It must not follow logs or run actions
// itself: the daemon does, as asked.
package control
