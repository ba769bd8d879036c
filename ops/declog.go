package ops

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/state"
)

// The messages of the decision log: each line's msg says what was decided
// (package doc, "The decision log").
const (
	MsgBan        = "ban"        // a rule's or an operator's ban
	MsgUnban      = "unban"      // a ban's end: expiry, an operator's unban
	MsgThrottle   = "throttle"   // a throttle, or its delay doubled
	MsgDeny       = "deny"       // a deny-list entry or a banned range, banned
	MsgAllowLift  = "allow-lift" // a deny-list or banned-range ban lifted: the list lets the key through again
	MsgForget     = "forget"     // an operator's unban --forget dropped a key's windows and escalation memory
	MsgBreaker    = "breaker"    // the circuit breaker tripped, was reset, or is open at start
	MsgSuppressed = "suppressed" // lines of one message left out under a storm, with their count
)

// The sources of decisions that no log line made.
const (
	SourceOperator = "operator" // an operator's ban, unban or breaker reset
	SourceDeny     = "deny"     // the deny list (at start and at a reload)
	SourceRange    = "range"    // a range with `limits: banned`
	SourceCleaner  = "cleaner"  // a ban ended on the wall clock by the cleaner
	SourceAllow    = "allow"    // a rule's ban lifted: the allow list covers its key (at start, at a reload)
	SourceResume   = "resume"   // a ban lifted as the state is resumed: its rule is gone, or it ended while logjail was not running (ResumeLifts)
)

// DefaultDecisionRate is how many lines of one message (and one class:
// an operator's or not) the decision log writes in a second before it
// leaves the rest out and counts them. 50 a second for each of ban,
// unban and throttle together stays under journald's default rate limit
// (RateLimitBurst 10000 per RateLimitIntervalSec 30s for a service), so
// that journald itself never drops a line of logjail's.
const DefaultDecisionRate = 50

// DecisionLogOptions configure a DecisionLog.
type DecisionLogOptions struct {
	// PerSecond is at most how many lines of one message the log writes
	// in one second (DefaultDecisionRate when 0; no limit when < 0).
	PerSecond int
	// Now is the limiter's clock (default time.Now). It measures the
	// rate at which lines are written, not when things were decided.
	Now func() time.Time
}

// DecisionLog writes one structured line for every decision and operator
// action (ban, unban, throttle, deny, allow-lift, forget, breaker) to the
// daemon's logger, and leaves lines out under a storm, counting them in a
// "suppressed" line: the database's history keeps every decision, so the
// log only has to be readable, and never the bottleneck.
//
// A DecisionLog is safe for concurrent use. Its zero value is not usable:
// make it with NewDecisionLog.
type DecisionLog struct {
	log  *slog.Logger
	rate int
	now  func() time.Time

	mu      sync.Mutex
	buckets [nClasses]bucket
	attrs   []slog.Attr // scratch, under mu
}

// bucket counts one class's lines in the current second.
type bucket struct {
	start      time.Time // when the current second began (zero: no line yet)
	written    int       // lines written since start
	suppressed int64     // lines left out since the last "suppressed" line
	since      time.Time // the first line left out
}

// The classes that are rate-limited each on their own: every message but
// breaker (never limited), by whether an operator made it, so that a
// storm of bans does not hide an operator's.
const (
	clsBan = iota
	clsUnban
	clsThrottle
	clsDeny
	clsAllowLift
	clsForget
	nMsgs
	nClasses = 2 * nMsgs
)

var classMsgs = [nMsgs]string{MsgBan, MsgUnban, MsgThrottle, MsgDeny, MsgAllowLift, MsgForget}

// NewDecisionLog returns a decision log writing to log.
func NewDecisionLog(log *slog.Logger, o DecisionLogOptions) *DecisionLog {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rate := o.PerSecond
	if rate == 0 {
		rate = DefaultDecisionRate
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	return &DecisionLog{log: log, rate: rate, now: now}
}

// Level is the level of a message's lines: Debug for throttle (a storm of
// throttles is the ladder working, and each is in the history), Error for
// breaker, Info for the others.
func Level(msg string) slog.Level {
	switch msg {
	case MsgThrottle:
		return slog.LevelDebug
	case MsgBreaker:
		return slog.LevelError
	}
	return slog.LevelInfo
}

// classify is the message of d, and its class index.
func classify(d *detector.Decision) (string, int) {
	static := d.Origin == state.OriginDeny || d.Origin == state.OriginRange
	switch {
	case d.Kind == detector.Ban && static:
		return MsgDeny, clsDeny
	case d.Kind == detector.Ban:
		return MsgBan, clsBan
	case d.Kind == detector.Unban && static:
		return MsgAllowLift, clsAllowLift
	case d.Kind == detector.Unban:
		return MsgUnban, clsUnban
	case d.Kind == detector.Throttle:
		return MsgThrottle, clsThrottle
	case string(d.Kind) == state.KindForget:
		return MsgForget, clsForget
	}
	return "", -1
}

// Decisions writes a line for each of ds, decided on a line of source
// (a source's name) or by SourceOperator, SourceDeny, SourceRange or
// SourceCleaner; attrs are added to every line. A decision of a kind the
// log does not know (a breaker trip: see Breaker) is skipped.
func (l *DecisionLog) Decisions(source string, ds []detector.Decision, attrs ...slog.Attr) {
	if len(ds) == 0 {
		return
	}
	ctx := context.Background()
	l.mu.Lock()
	defer l.mu.Unlock()
	var now time.Time
	for i := range ds {
		d := &ds[i]
		msg, cls := classify(d)
		if cls < 0 {
			continue
		}
		level := Level(msg)
		if !l.log.Enabled(ctx, level) {
			continue // not written, so nothing left out either
		}
		if d.Origin == state.OriginOperator {
			cls += nMsgs
		}
		if now.IsZero() {
			now = l.now()
		}
		if !l.admit(cls, now) {
			continue
		}
		a := append(l.attrs[:0],
			slog.String("rule", d.Rule),
			slog.String("key", d.Key),
			slog.String("kind", string(d.Kind)),
			slog.String("until", FormatUntil(d.Until)),
			slog.String("reason", d.Reason),
			slog.String("source", source))
		if d.Who != "" {
			a = append(a, slog.String("who", d.Who))
		}
		if d.Node != "" {
			a = append(a, slog.String("node", d.Node))
		}
		if d.LogOnly {
			a = append(a, slog.Bool("log_only", true))
		}
		if d.Kind == detector.Throttle {
			a = append(a, slog.String("delay", d.Delay.String()))
		}
		if d.Violations > 0 {
			a = append(a, slog.Int("violations", d.Violations))
		}
		if len(d.Addresses) > 0 {
			a = append(a, slog.Any("addresses", d.Addresses))
		}
		if !d.Time.IsZero() && d.Origin == state.OriginDetector && source != SourceCleaner {
			a = append(a, slog.String("log_time", d.Time.Format(time.RFC3339)))
		}
		a = append(a, attrs...)
		l.log.LogAttrs(ctx, level, msg, a...)
		l.attrs = a
	}
}

// FormatUntil is how the decision log writes an until: RFC 3339, to the
// second, in the time's own zone; "" for none (a deny-list ban, an
// unban).
func FormatUntil(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format(time.RFC3339)
}

// admit says whether a line of class cls may be written at now, and
// counts it either way; a new second first writes the "suppressed" line
// of the one before, if lines were left out.
func (l *DecisionLog) admit(cls int, now time.Time) bool {
	if l.rate < 0 {
		return true
	}
	b := &l.buckets[cls]
	if b.start.IsZero() || now.Sub(b.start) >= time.Second || now.Before(b.start) {
		l.suppressedLine(cls, now)
		b.start, b.written = now, 0
	}
	if b.written >= l.rate {
		if b.suppressed == 0 {
			b.since = now
		}
		b.suppressed++
		return false
	}
	b.written++
	return true
}

// suppressedLine writes, if lines of class cls were left out, one line
// that counts them, and starts counting afresh.
func (l *DecisionLog) suppressedLine(cls int, now time.Time) {
	b := &l.buckets[cls]
	if b.suppressed == 0 {
		return
	}
	msg := classMsgs[cls%nMsgs]
	level := slog.LevelWarn
	if Level(msg) < slog.LevelInfo {
		level = Level(msg)
	}
	l.log.LogAttrs(context.Background(), level, MsgSuppressed,
		slog.String("of", msg),
		slog.Bool("operator", cls >= nMsgs),
		slog.Int64("count", b.suppressed),
		slog.String("since", b.since.Format(time.RFC3339)),
		slog.String("seconds", now.Sub(b.since).Round(time.Millisecond).String()),
		slog.Int("per_second", l.rate))
	b.suppressed = 0
}

// Tick writes the "suppressed" lines that are due: a storm that ended
// still has its count written within about a second. The daemon calls it
// every second; Flush at shutdown.
func (l *DecisionLog) Tick() {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	for cls := range l.buckets {
		if b := &l.buckets[cls]; b.suppressed > 0 && now.Sub(b.start) >= time.Second {
			l.suppressedLine(cls, now)
		}
	}
}

// Flush writes every pending "suppressed" line now.
func (l *DecisionLog) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	for cls := range l.buckets {
		l.suppressedLine(cls, now)
	}
}

// BreakerEvent is one line of the circuit breaker.
type BreakerEvent struct {
	Level  slog.Level
	Event  string // "trip", "reset" or "open" (restored open at start)
	Rule   string // the rule and key of the ban that tripped it
	Key    string
	Reason string
	Source string // the log source of that ban, or SourceOperator for a reset
	Who    string // who reset it
	Note   string // what to do, for a person
	Attrs  []slog.Attr
}

// Breaker writes a breaker line (msg "breaker", kind "breaker-trip",
// "breaker-reset" or "breaker-open"). It is never left out: a trip is
// the alarm.
func (l *DecisionLog) Breaker(e BreakerEvent) {
	a := []slog.Attr{
		slog.String("rule", e.Rule),
		slog.String("key", e.Key),
		slog.String("kind", "breaker-"+e.Event),
		slog.String("until", ""),
		slog.String("reason", e.Reason),
		slog.String("source", e.Source),
	}
	if e.Who != "" {
		a = append(a, slog.String("who", e.Who))
	}
	if e.Note != "" {
		a = append(a, slog.String("note", e.Note))
	}
	a = append(a, e.Attrs...)
	l.log.LogAttrs(context.Background(), e.Level, MsgBreaker, a...)
}
