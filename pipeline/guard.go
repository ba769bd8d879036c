package pipeline

import (
	"strings"
	"time"

	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/rules"
)

// Guard keeps one file's bad timestamps from moving the detector's clock
// (the package doc, "One line cannot move the clock"). It sees the entries
// of one file in file order, before they are merged with other files, and
// passes them on, in the same order, except an outlier: a line at least
// Future ahead of the newest line passed before it in its file, followed
// by a line more than Skew older than it (a file's first line: followed by
// a line more than Future older). Such a line is held until the
// next line of its file tells (Next), or until the caller releases it
// (Release: at the end of the file, or live once the wall clock has
// reached it).
//
// The zero Guard is not usable; call NewGuard. A Guard is used by one
// goroutine. It never reads the wall clock.
type Guard struct {
	future, skew time.Duration
	newest       time.Time // newest time passed on
	started      bool      // a line was passed on
	slots        [2]parser.Entry
	h            int // slots[h] is the held entry, while holding
	holding      bool
	outliers     int64
	last         time.Time // time of the last outlier
}

// NewGuard returns the guard of one file under cfg's future and skew.
func NewGuard(cfg *rules.Config) *Guard {
	return &Guard{future: max(cfg.Future, time.Second), skew: cfg.Skew}
}

// Step takes the file's next entry e and says what to charge now, in
// order: released, the entry held until now, if the jump it made is real
// (nil otherwise); then e itself if charge is true (false: e is held, and
// copied). released points into the Guard: it is valid until the next
// call. Step copies nothing unless it holds e, so that the common case
// costs a comparison; an entry it holds is copied with its strings (and
// its Fields), so that it outlives the memory of its line (replay reads
// lines into buffers it uses again).
func (g *Guard) Step(e *parser.Entry) (released *parser.Entry, charge bool) {
	if g.holding {
		g.holding = false
		held := &g.slots[g.h]
		// A file's first line has no line before it to be ahead of: it
		// is an outlier only when the next is a whole Future older.
		tolerance := g.skew
		if !g.started {
			tolerance = g.future
		}
		if e.Time.Before(held.Time.Add(-tolerance)) {
			// The line after it is back where the file was: the held
			// line's time is wrong, not the file's.
			g.outliers++
			g.last = held.Time
			*held = parser.Entry{}
		} else {
			g.pass(held)
			released = held
			g.h ^= 1 // the next held entry goes to the other slot
		}
	}
	if !g.started || subAtLeast(e.Time, g.newest, g.future) {
		g.slots[g.h], g.holding = *e, true
		ownStrings(&g.slots[g.h])
		return released, false
	}
	g.pass(e)
	return released, true
}

// Next is Step for a caller that keeps the entries: it appends to out the
// entries to charge now, in order (none, e, or the held entry then e).
func (g *Guard) Next(e *parser.Entry, out []parser.Entry) []parser.Entry {
	released, charge := g.Step(e)
	if released != nil {
		out = append(out, *released)
	}
	if charge {
		out = append(out, *e)
	}
	return out
}

// subAtLeast reports whether t.Sub(u) >= d, for d ≥ 0, in fewer steps
// than Sub (whose overflow check adds u and the difference back, with
// Add's and Equal's own steps; 1.7% of a replay's merger): from the
// times' Unix seconds and nanoseconds when neither holds a monotonic
// reading and they are less than 2^33 s (272 years) apart, where the
// difference in ns cannot overflow and Sub does not saturate; else Sub
// itself (TestSubAtLeastAsSub). (Sub of two monotonic readings is their
// monotonic difference, which differs from the wall clock's only across a
// step of the wall clock between two time.Now: log times have none.)
func subAtLeast(t, u time.Time, d time.Duration) bool {
	if s := t.Unix() - u.Unix(); s > -1<<33 && s < 1<<33 && t == t.Round(0) && u == u.Round(0) {
		return s*int64(time.Second)+int64(t.Nanosecond()-u.Nanosecond()) >= int64(d)
	}
	return t.Sub(u) >= d
}

func (g *Guard) pass(e *parser.Entry) {
	if !g.started || e.Time.After(g.newest) {
		g.newest = e.Time
	}
	g.started = true
}

// Held reports the time of the entry held back, if any.
func (g *Guard) Held() (time.Time, bool) { return g.slots[g.h].Time, g.holding }

// Release passes the held entry on, if any, as a real jump of the file's
// time, appending it to out: at the end of a file nothing contradicts it;
// live, the wall clock has reached it.
func (g *Guard) Release(out []parser.Entry) []parser.Entry {
	if e := g.ReleaseHeld(); e != nil {
		out = append(out, *e)
	}
	return out
}

// ReleaseHeld is Release without a copy: the entry it returns (nil if
// none was held) is valid until the next call.
func (g *Guard) ReleaseHeld() *parser.Entry {
	if !g.holding {
		return nil
	}
	g.holding = false
	held := &g.slots[g.h]
	g.pass(held)
	g.h ^= 1
	return held
}

// Outliers returns how many entries were found to be outliers, and the
// time of the last one.
func (g *Guard) Outliers() (int64, time.Time) { return g.outliers, g.last }

// Newest returns the newest time passed on (zero before the first).
func (g *Guard) Newest() time.Time { return g.newest }

// Resume sets the newest time passed on, as a checkpoint saved it, so that
// a restart judges the file's next line as the running guard would have.
func (g *Guard) Resume(newest time.Time) {
	if !newest.IsZero() {
		g.newest, g.started = newest, true
	}
}

// ownStrings makes e's strings and Fields copies of their own, sharing no
// memory with the line e was parsed from (TestHeldEntryOwnsStrings checks
// every string of an Entry).
func ownStrings(e *parser.Entry) {
	for _, p := range []*string{&e.Method, &e.Path, &e.Query, &e.Protocol, &e.Referer, &e.UserAgent, &e.User, &e.Host} {
		*p = strings.Clone(*p)
	}
	if e.Fields != nil {
		fs := make([]parser.Field, len(e.Fields))
		for i, f := range e.Fields {
			fs[i] = parser.Field{Name: strings.Clone(f.Name), Value: strings.Clone(f.Value)}
		}
		e.Fields = fs
	}
}
