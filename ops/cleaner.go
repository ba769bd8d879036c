package ops

import (
	"fmt"
	"strings"
	"time"

	"github.com/logjail/logjail/checkpoint"
	"github.com/logjail/logjail/control"
	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/state"
	"github.com/robfig/cron/v3"
)

// Schedule is when the cleaner runs (the configuration's `cleaner:`).
type Schedule struct {
	spec  string
	sched cron.Schedule
}

// cronParser reads what rules accepts: five fields (minute hour
// day-of-month month day-of-week) and the descriptors.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseSchedule reads a cleaner schedule: a five-field cron expression
// (minute hour day-of-month month day-of-week, with *, lists, ranges,
// steps and English month and day names; 0 or 7 is Sunday), "@every
// DURATION" (at least 1s; logjail's durations, so "@every 1d" too), or a
// descriptor (@hourly, @daily, @midnight, @weekly, @monthly, @yearly,
// @annually). Cron times are read in the location of the time given to
// Next.
func ParseSchedule(s string) (Schedule, error) {
	spec := strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(spec, "@every "); ok {
		d, err := rules.ParseDuration(strings.TrimSpace(rest))
		if err != nil {
			return Schedule{}, fmt.Errorf("schedule %q: %w", s, err)
		}
		if d < time.Second {
			return Schedule{}, fmt.Errorf("schedule %q: want at least @every 1s", s)
		}
		return Schedule{spec: spec, sched: cron.Every(d)}, nil
	}
	if f := strings.Fields(spec); len(f) == 5 {
		f[4] = sundaySeven(f[4])
		spec = strings.Join(f, " ")
	}
	sched, err := cronParser.Parse(spec)
	if err != nil {
		return Schedule{}, fmt.Errorf("schedule %q: %w", s, err)
	}
	return Schedule{spec: strings.TrimSpace(s), sched: sched}, nil
}

// sundaySeven rewrites a day-of-week field's 7 (Sunday, as cron allows)
// as 0, which is all the parser knows: "7" becomes "0", "5-7" becomes
// "5-6,0".
func sundaySeven(field string) string {
	parts := strings.Split(field, ",")
	var out []string
	for _, p := range parts {
		rng, step, hasStep := strings.Cut(p, "/")
		a, b, isRange := strings.Cut(rng, "-")
		switch {
		case !isRange && a == "7":
			rng = "0"
		case isRange && a == "7" && b == "7":
			rng = "0"
		case isRange && b == "7" && !hasStep:
			out = append(out, a+"-6", "0")
			continue
		case isRange && b == "7":
			rng = a + "-6" // a step over 6-7 cannot reach Sunday exactly; keep 0-6's
		}
		if hasStep {
			rng += "/" + step
		}
		out = append(out, rng)
	}
	return strings.Join(out, ",")
}

// Next returns the first time after t the schedule runs. The zero Schedule
// never runs: it returns the zero time.
func (s Schedule) Next(t time.Time) time.Time {
	if s.sched == nil {
		return time.Time{}
	}
	return s.sched.Next(t)
}

// String returns the schedule as it was written.
func (s Schedule) String() string { return s.spec }

// CleanStats say what one cleaner pass did.
type CleanStats struct {
	Expired   int                 // bans whose until had passed: lifted, with an unban in the history
	Throttles int                 // throttles whose until had passed: ended (silently, as throttles end)
	Pruned    state.PruneStats    // idle key states and old history deleted, pages given back
	WAL       bool                // the write-ahead log was truncated (false: readers held it; next time)
	Unbans    []detector.Decision // the unbans recorded, for the actions to undo
}

// Report is the operator's document of the pass on database (its path):
// what `logjail clean` prints, whether the daemon ran the pass (POST
// /v1/clean) or the command did on the database.
func (st *CleanStats) Report(database string) *control.CleanReport {
	r := &control.CleanReport{
		Database: database, Expired: st.Expired, Throttles: st.Throttles, Keys: st.Pruned.Keys, History: st.Pruned.History,
		VacuumedPages: st.Pruned.VacuumedPages, FreePages: st.Pruned.FreePages, WALTruncated: st.WAL,
		Unbans: make([]control.CleanUnban, 0, len(st.Unbans)),
	}
	for _, d := range st.Unbans {
		r.Unbans = append(r.Unbans, control.CleanUnban{Rule: d.Rule, Key: d.Key, Ended: d.Time})
	}
	return r
}

// VacuumPages is how many free pages a cleaner pass gives back to the file
// system by default (4 MiB with SQLite's 4 KiB pages): enough to keep up
// with steady pruning, small enough to keep a pass short.
const VacuumPages = 1000

// Checkpointer is what a cleaner pass writes its decisions through:
// checkpoint.Writer.
type Checkpointer interface {
	// Keep records decisions and returns those recorded: an unban of a
	// ban the store no longer holds is dropped (checkpoint.Writer.Keep).
	Keep(ds []detector.Decision) []detector.Decision
	Flush(det *detector.Detector, t time.Time) error
}

var _ Checkpointer = (*checkpoint.Writer)(nil)

// Clean runs one cleaner pass at now (the wall clock) for `logjail clean`,
// which restored det from db first (checkpoint.Restore), or for a daemon
// that has just flushed its own checkpoint writer and has it written (no
// line read since, no checkpoint in flight): Clean writes through a Writer
// of its own, whose checkpoint holds det's changes since the last one but
// no source position. Otherwise use CleanWith and the daemon's Writer.
//
// The pass works on two clocks (DESIGN.md, "Time"). The store's active
// bans end on the wall clock: a ban whose until is at or before now leaves
// them with an unban in the history (reason "ban expired"), which the
// actions undo; throttles that ended leave them silently; a ban of a rule
// no longer in cfg is lifted with an unban that says so; all of it in one
// checkpoint. The detector's bans and throttles end on log time: a ban the
// detector made is not lifted in det (it lifts it itself when the logs
// reach its log-time until, and that unban is then dropped, as the store
// has recorded one: checkpoint.Writer.Keep), so that a backlog read after
// downtime, or read while the pass runs, is decided as a replay decides
// it. An operator's ban, given on the wall clock, is lifted in det too.
// Then key states idle for twice the longest window, on log time (the
// detector's newest time where it is behind the wall clock: the windows
// of a backlog being read are not pruned under it), and history older than
// history_retention on the wall clock are pruned
// (checkpoint.PruneOptions), vacuumPages free pages given back (0 none,
// negative all), and the WAL truncated.
func Clean(db state.Store, cfg *rules.Config, det *detector.Detector, now time.Time, vacuumPages int) (CleanStats, error) {
	w := checkpoint.NewWriter(db)
	// Resume without a time: throttles are watched (they leave the active
	// bans silently at Flush once ended), bans of removed rules are lifted;
	// ended bans are lifted below with the cleaner's reason.
	if err := w.Resume(cfg, det, time.Time{}); err != nil {
		return CleanStats{}, fmt.Errorf("clean: %w", err)
	}
	return clean(w, db, cfg, det, now, vacuumPages, true)
}

// CleanWith is Clean writing through w, the caller's checkpoint writer
// (resumed at start, fed every decision since), so that the lifts join its
// checkpoints in order. The caller records its source positions in w before
// (the checkpoint Flush(det, now) takes holds det's state). It must be
// called from the goroutine that owns det and w.
func CleanWith(w Checkpointer, db state.Maintenance, cfg *rules.Config, det *detector.Detector, now time.Time, vacuumPages int) (CleanStats, error) {
	return clean(w, db, cfg, det, now, vacuumPages, false)
}

// clean is the pass; resumed says w.Resume has just lifted the bans of
// removed rules.
func clean(w Checkpointer, db state.Maintenance, cfg *rules.Config, det *detector.Detector, now time.Time, vacuumPages int, resumed bool) (CleanStats, error) {
	var st CleanStats
	ended, err := db.EndedBans(now)
	if err != nil {
		return st, fmt.Errorf("clean: ended bans: %w", err)
	}
	var out []detector.Decision
	for _, b := range ended {
		rule := cfg.Rule(b.Rule)
		if b.Kind == state.PhaseThrottle {
			st.Throttles++ // leaves the active bans at Flush; det's ends on log time
			continue
		}
		if rule == nil && resumed && b.Origin == state.OriginDetector {
			continue // Resume lifted it
		}
		n := len(out)
		if rule != nil && b.Origin != state.OriginDetector {
			out = det.Lift(b.Until, rule, b.Key, out)
		}
		if len(out) == n {
			// The store's ban ends here; the detector's, if it still
			// holds one, on log time.
			out = append(out, detector.Decision{
				Rule: b.Rule, Key: b.Key, Kind: detector.Unban, Time: b.Until,
				Addresses: b.Addresses, Origin: b.Origin, LogOnly: b.LogOnly,
			})
		}
		for i := n; i < len(out); i++ {
			out[i].Reason = "ban expired"
		}
	}
	// An unban the detector made since the database was read is already
	// recorded: Keep drops the second.
	out = w.Keep(out)
	st.Expired = len(out)
	st.Unbans = out
	if err := w.Flush(det, now); err != nil {
		return st, fmt.Errorf("clean: checkpoint: %w", err)
	}
	at := now
	if t := det.Newest(); !t.IsZero() && t.Before(now) {
		at = t
	}
	p := checkpoint.PruneOptions(cfg, at, vacuumPages)
	p.HistoryBefore = checkpoint.PruneOptions(cfg, now, vacuumPages).HistoryBefore
	st.Pruned, err = db.Prune(at, p)
	if err != nil {
		return st, fmt.Errorf("clean: prune: %w", err)
	}
	st.WAL, err = db.TruncateWAL()
	if err != nil {
		return st, fmt.Errorf("clean: truncating the WAL: %w", err)
	}
	return st, nil
}
