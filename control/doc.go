// Package control is the operator's side of logjail: the control API that
// `logjail run` serves on its control_socket (HTTP and JSON over a unix
// socket, docs/control.md), its client, and what the commands list, ban,
// unban, top, history, status, clean and breaker do with or without a
// daemon.
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
// One engine, two transports (issue 19): each operator command has one
// function that decides, given what it works on; with a daemon the CLI
// reaches it through the socket and the daemon runs it on its own state,
// with none the CLI runs it on state read from the database.
//
//   - ban, unban (--forget too): Engine.Ban and Engine.Unban, on the
//     daemon's detector and writer in its decider (the active bans read
//     after a checkpoint of everything decided), or on a detector restored
//     from the checkpoint and a writer resumed on it; Now the wall clock,
//     LogTime the newest log time (the daemon's, the checkpoint's). The
//     decision log gets the same lines (BanResult.LogAttrs), held offline
//     until the change is written.
//   - import: Engine.BanBatch (POST /v1/bans/batch), every ban checked
//     by CheckBan first (the command checks them too, to name the file's
//     lines), then all made in one Recorder call: the daemon takes one
//     checkpoint, the command one transaction. All or none.
//   - list, history: List and ReadHistory on the database, both ways (the
//     daemon checkpoints a decision within 10 ms, an operator's change
//     before it answers), at the reader's wall clock: the CLI always reads
//     the database itself; GET /v1/bans and /v1/history run the same
//     functions in the daemon, for other clients.
//   - top: TopAt on the daemon's detector (its newest log time) or on one
//     restored from the checkpoint (its log time), read at the later of
//     that and the wall clock.
//   - clean: ops.CleanWith in the daemon's decider through its writer
//     (POST /v1/clean: in order with the log lines, the unbans then handed
//     to its actions and every action synced, as its schedule does), or
//     ops.Clean on a detector restored from the database; the same
//     CleanReport (ops.CleanStats.Report). --vacuum-pages is honoured both
//     ways (the decider reads no line while pages are given back); the
//     write-ahead log is truncated both ways unless a reader holds it.
//     --flush refuses while the daemon runs.
//   - status: StatusOf (database, positions, bans by rule) and
//     DetectorStatus (breaker, tracked keys, evictions, heap) on the
//     daemon's detector or one restored from the checkpoint, keys and
//     all; live only: pid, uptime, actions, endpoints, lag of the newest
//     line.
//
// cmd/logjail's operator_both_test.go runs every command both ways on two
// copies of one database and compares the answers and what a daemon
// started on each result enforces.
//
// The JSON documents (types.go) are the API's and the commands' --output
// json: fields are added, never changed or removed, under SchemaVersion.
// A ban's and an event's node (the fleet node that decided it, issue 20)
// is such an addition, and omitted when empty: the documents of a daemon
// without a fleet are what they were. BanList.WriteJSON writes a list as encoding/json would, byte for byte
// (its tests hold it to encoding/json), without reflection.
//
// A list of 100,000 active bans (issue 23: ≤ 0.2 s for the whole
// command): List streams them (state.Ledger.EachActiveBan) in (rule, key)
// order, keeps the until and time left of all in two arrays (not two
// allocations a ban), and, the keys being unique and in order, sorts by
// one integer a ban (until, or since newest first) with a stable radix
// sort whose ties keep the (rule, key) order, then moves each ban once in
// place: the order of the comparison sort before it, which still serves
// bans that come in another order (--expired) and since times a UnixNano
// cannot hold (TestSortBans).
//
// Boundaries: It owns the operator's API on the control socket and the
// engine behind ban, unban, list, history, top and status (clean's pass is
// package ops'). It must not follow logs or run actions itself: the daemon
// does, as asked.
package control
