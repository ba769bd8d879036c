package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/logjail/logjail/ops"
)

// A change made with no daemon (`ban`, `unban`, `breaker reset` on the
// database) writes the decision-log lines the daemon would have written
// for it (ops.DecisionLog: the same messages and attributes, source
// "operator"), and those of the bans lifted as the state is resumed
// (source "resume"). They go to stderr, as the daemon's log does: text on
// a terminal, JSON lines otherwise, with the journal's priority prefix
// under systemd. They are written once the change is in the database, not
// before: a change that fails leaves no line. The daemon, when it starts
// and applies the change, does not log it again.

// heldLog is a decision log whose lines wait until release (the change
// is in the database) or are dropped (it failed).
type heldLog struct {
	*ops.DecisionLog
	held []heldRecord
}

type heldRecord struct {
	h slog.Handler
	r slog.Record
}

// newHeldLog is a decision log for an offline change, writing to w.
func newHeldLog(w io.Writer) *heldLog {
	log, _ := ops.NewLogger(w, "info", isTerminal(w)) // "info" is a valid level
	l := &heldLog{}
	l.DecisionLog = ops.NewDecisionLog(slog.New(holdHandler{l, log.Handler()}), ops.DecisionLogOptions{PerSecond: -1})
	return l
}

// release writes the lines held.
func (l *heldLog) release() {
	for _, h := range l.held {
		h.h.Handle(context.Background(), h.r) // a log line that cannot be written is not the change's failure
	}
	l.held = nil
}

// holdHandler holds the records for h in l.
type holdHandler struct {
	l *heldLog
	h slog.Handler
}

func (h holdHandler) Enabled(ctx context.Context, lvl slog.Level) bool { return h.h.Enabled(ctx, lvl) }

func (h holdHandler) Handle(_ context.Context, r slog.Record) error {
	h.l.held = append(h.l.held, heldRecord{h.h, r.Clone()})
	return nil
}

func (h holdHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return holdHandler{h.l, h.h.WithAttrs(as)}
}

func (h holdHandler) WithGroup(name string) slog.Handler {
	return holdHandler{h.l, h.h.WithGroup(name)}
}
