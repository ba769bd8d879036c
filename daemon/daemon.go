// Package daemon is `logjail run`: it follows the configured sources live
// and drives the same pipeline as replay (pipeline.Pipeline), checkpointing
// its state into the store (package checkpoint), so that a restart goes on
// exactly where it stopped.
//
// Stages. Run (stages.go) is a sequence of named stages: load the
// configuration, serve the endpoints, open the state, restore, start the
// actions, open the control socket, start the sources, serve, drain. Each
// is a method of the decider, the one struct that holds the daemon's
// state, and fills in what the next ones use; what a stage opens is closed
// in the reverse order when Run returns, whichever stage failed. Once the
// decider's goroutine runs, it alone reads and writes the configuration
// (a reload replaces it): the stages that start goroutines hand them what
// they need of it (the sources) before.
//
// Goroutines, all under one errgroup and one context: one follower per
// source (package follow) sends batches of whole lines to its source's
// parsing goroutine, which parses them where they were read and sends them
// on to the decider (stages.go, follow); the decider alone owns the
// detector, the pipeline and the
// checkpoint writer: it processes the parsed batches in the order they
// arrived, records the decisions and the positions, checkpoints on the
// `checkpoint` interval and runs the cleaner on its schedule. Every channel
// is bounded and every send is guarded by the context: a slow decider slows
// the followers down, nothing queues without bound. A batch's memory (its
// entries, its slice of lines and, since issue 23's part LIVE round 4,
// the buffers its lines' text was read into: follow.Texts) is used again
// once the decider is done with it (spare.go), so that ingest makes no
// garbage of its own a line: the garbage, which sets how often the
// collector runs over the large live heap, is the detector's and the
// checkpoint's. Nothing keeps a string of a line past its batch but the
// guard's held line, whose batch is pinned (its buffers never used
// again); TestTextReuseChangesNothing holds the daemon to it with the
// buffers overwritten as they come back, and every other test of the
// package runs so too (poisonTexts).
//
// Time. Two clocks (DESIGN.md, "Time"). The detector lives on log time, as
// in replay, across restarts too: a key banned at log time t for D is
// banned, for the detector, for its lines up to t+D, however long logjail
// was down; it lifts its bans itself when the logs reach their log-time
// until. The store's active bans and the actions run on the wall clock: a
// ban lasts its duration from the wall time it was decided (the table of
// active bans and the history hold now + (until − time) for a decision on a
// live line; the decision's Time stays its log time). A decision on backlog
// (lines written while logjail was down) whose end has already passed on
// the wall clock is recorded in the history, marked as not applied
// (log_only, its log-time until kept), and acted on by nothing. At start
// (checkpoint.Writer.Resume) and in every cleaner pass the bans whose
// wall-clock until has passed leave the active bans and the actions with
// one unban in the history; the detector keeps them on log time, and its
// own unban, later, is dropped rather than recorded a second time
// (checkpoint.Writer.Keep). Whichever clock ends a ban first records its
// one unban. The cleaner prunes idle windows on log time (the detector's
// newest time), so a backlog being read is not pruned under it. So catch-up
// after downtime decides what a replay of the same lines decides.
//
// One line cannot move the clock (package pipeline's doc): a line more
// than `future` ahead of the wall clock is not charged (metric
// logjail_lines_future_total, `status`, a log line at most once a minute
// per source); the others pass the neighbour rule of their path
// (pipeline.Guard) before the pipeline, as in replay. A held line is
// charged when the next line of its file shows the jump is real, or once
// the wall clock reaches it with the file read to its end. While a line is
// held, the position saved for its path is the one before it, and each
// path's guard (its newest time) is saved in the meta table with the
// checkpoint ("guard PATH"), so a restart judges the next lines as the
// running daemon would have. A path's guard goes on across its rotations
// (a new file's lines follow the old one's), where a replay gives each file
// its own; the two differ only for a bad line at the head of a rotated
// file. A held line that is the first of a newly opened file has no saved
// position before it: the one after it is saved (a crash while it is held
// loses that line). The guards keep the future and skew of the
// configuration they were made with: a reload changes the wall-clock rule
// at once, the neighbour rule at the next start.
//
// Actions. At start the configured actions (package actions) are built
// and started from the store's active bans: each syncs whole, so that what
// an earlier run left agrees with the store. The decider hands every
// decision to the actions' manager, which queues it and returns: a slow or
// failing action is retried in its own goroutine and never slows
// detection. Each cleaner pass passes its unbans on and has every action
// sync again, repairing what was changed behind logjail's back. Every
// decision handed on, and every operator action, is also one line of the
// decision log (ops.DecisionLog; source: the log source, "deny", "range",
// "cleaner" or "operator"), written by the decider. The actions
// stay in place when the daemon stops: a restart opens no gap. The
// decision endpoints are opened and serve first, before the database:
// they answer by their `fail:` until the manager has loaded their bans,
// and one that stops serving stops the daemon with its error.
//
// Signals. SIGHUP reloads the configuration and its lists: a configuration
// that does not load is refused, its errors logged, and the running one
// kept (every load, at start and on reload, is the one pass of `logjail
// check`, the actions' options included: a reload refuses what check
// refuses, with the same problems); windows and bans survive (rules are matched by name). A change to
// the sources (paths, formats) or to the actions takes a restart; a reload
// says so. A changed allow list reaches the actions at once, and so do
// changed ranges: an active ban of range:NAME blocks the range's new CIDRs
// (actions.Manager.SetRanges). A new max_bans_per_minute takes effect at
// once, but an open circuit breaker stays open across a reload and a
// restart, which say so (breaker.go). The `file:` lists are watched and a
// change reloads as SIGHUP does; an address the allow list now covers
// loses its rule bans at once (watch.go).
// SIGTERM and SIGINT take a last checkpoint and return nil.
//
// The decision path (issue 23). /auth reads the endpoint's Bans, a
// snapshot swapped atomically, without a lock; /v1/throttle reads the
// detector under d.mu. The decider charges a batch in slices of
// sliceLines (256) entries and releases d.mu and yields between them, and
// the parsing goroutines yield between slices too: a reader waits at most one
// slice (about 0.5 ms), not a batch of 512 lines, and the order of the
// decisions is that of the lines, as before. Yielding alone does not
// bound /auth on one core: with one P (GOMAXPROCS 1, under taskset or a
// one-CPU cgroup) the Go scheduler polls the network only when it has no
// goroutine to run, or every 10 ms from sysmon (runtime/proc.go,
// findRunnable and sysmon), so a request that arrives while ingest keeps
// the P busy waits up to 10 ms plus a preemption slice of 10 ms. `logjail
// run` therefore raises GOMAXPROCS to 2 when the runtime would have one
// (cmd_run.go; GOMAXPROCS in the environment wins): the second P sleeps
// in the network poller, the kernel wakes its thread when a request
// arrives and shares the core between the two threads. The figures are
// in docs/performance.md.
//
// A line's cost (issue 23, part LIVE; docs/performance.md, "Live against
// replay, round 3"). Each source's batches are parsed on a goroutine of
// the source's own, next to its follower, and go to the decider parsed:
// two hand-offs a batch instead of a dispatcher's and a worker pool's five
// (stages.go, follow). That goroutine keeps a parser.TimeMemo from batch
// to batch and parses each line in place into its batch's entries
// (parsed.parse, parser.Parser.ParseStringMemo), as replay's workers do.
// Once the detector's key table is large enough to take them
// (pipeline.Pipeline.Prefetching), the batch loop gives the entries ahead
// of each charge to pipeline.Pipeline.PrefetchNext, as replay's merger
// does: hints that change no decision
// (TestHintsChangeNothing, Options.plain). The newest line's time of each
// source costs no map look-up for most lines (decider.newest).
//
// Boundaries: It owns `logjail run`: the stages that wire every other
// package together. It must not hold logic another package owns: each stage
// calls it.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/logjail/logjail/actions"
	"github.com/logjail/logjail/checkpoint"
	"github.com/logjail/logjail/control"
	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/follow"
	"github.com/logjail/logjail/goodbots"
	"github.com/logjail/logjail/ops"
	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/pipeline"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/source"
	"github.com/logjail/logjail/state"
)

// Hooks are what the daemon reports to its surroundings (systemd). Every
// field may be nil.
type Hooks struct {
	Ready     func()          // the state is restored and the sources are followed (READY=1)
	Reloading func()          // a SIGHUP reload starts (RELOADING=1)
	Reloaded  func(err error) // it ended; err is why the new configuration was refused
	Stopping  func()          // the daemon is stopping (STOPPING=1)
	// Alive is called by the goroutine that decides at least every second
	// while it is not stuck: what a watchdog and /healthz go by.
	Alive func()
	// Endpoints is called once the decision endpoints serve, with a check
	// that is nil while every one of them serves (/healthz, the watchdog).
	Endpoints func(health func() error)
	// Fleet is called once the fleet's node is open (a `fleet:` section),
	// with what /healthz adds to its "ok": "" while the node exchanges
	// with Redis, else why it works alone (no failure: it goes on).
	Fleet func(remark func() string)
}

// Options configure Run.
type Options struct {
	ConfigPath string
	Logger     *slog.Logger
	Hooks      Hooks
	// Poll follows files by polling instead of inotify.
	Poll bool
	// Rescan is how often globs are scanned again (default: follow's).
	Rescan time.Duration
	// Now is the wall clock (default time.Now).
	Now func() time.Time
	// Metrics, when set, is updated as the daemon works.
	Metrics *ops.Metrics
	// Control, when set, carries operators' requests (NewControl).
	Control *Control
	// ServeControl serves the control API on the configuration's
	// control_socket (package control), with Control or one of its own.
	ServeControl bool
	// Reload, when set, replaces the process's SIGHUP channel (tests);
	// SIGTERM and SIGINT arrive through ctx's cancellation.
	Reload <-chan struct{}
	// Verifier verifies crawlers under good_bots: {verify: dns}. nil: one
	// with the system's resolver, for the daemon's life.
	Verifier *goodbots.Verifier
	// plain turns the batch loop's hints off (TestHintsChangeNothing): no
	// pipeline.Pipeline.Prefetch, as before the hints.
	plain bool
	// poison overwrites the buffers of the lines' texts as they come back
	// for reuse (spares; TestTextReuseChangesNothing); noTexts reads the
	// lines into strings of their own, as before the reuse.
	poison, noTexts bool
}

// texts is the follow.Options.Texts of the file sources (nil with
// Options.noTexts).
func (d *decider) texts() *follow.Texts {
	if d.o.noTexts {
		return nil
	}
	return d.spare.texts
}

// DBPath is the database of a configuration: logjail.db in its state_dir.
func DBPath(cfg *rules.Config) string { return filepath.Join(cfg.StateDir, "logjail.db") }

// parsed is one batch after parsing.
type parsed struct {
	src      *rules.Source
	parser   *parser.Parser
	batch    follow.Batch
	entries  []parser.Entry
	lines    []int32 // index in batch.Lines of each entry
	rejected int
	firstErr error // why the first rejected line was rejected
	pin      bool  // the guard holds one of its lines past it (spares.put)
	// memo is the source's parsing goroutine's memo of the last CLF time
	// read (parser.TimeMemo; nil: none), kept from batch to batch: a
	// log's neighbouring lines mostly share their second.
	memo *parser.TimeMemo
}

// startActions builds the configured actions and starts them from the
// store's active bans: each begins with a whole sync, so that what an
// earlier run left (a crash, an unban while logjail was down) is made to
// agree with the store. Bans of rules no longer configured (Resume lifts
// them) and bans already over block nothing.
func startActions(cfg *rules.Config, db state.BanReader, log *slog.Logger, now func() time.Time, more []actions.Configured) (*actions.Manager, []state.Ban, error) {
	cs, err := actionTypes().Build(cfg, actions.Env{StateDir: cfg.StateDir, Now: now})
	if err != nil { // the load checked the options: not reached
		return nil, nil, configError(err)
	}
	cs = append(cs, more...)
	bans, err := db.ActiveBans()
	if err != nil {
		return nil, nil, err
	}
	kept := bans[:0]
	var allowed []state.Ban // rule bans the allow list now covers (watch.go)
	for _, b := range bans {
		if b.Origin == state.OriginDetector && cfg.Rule(b.Rule) == nil {
			continue
		}
		if b.Origin == state.OriginDetector && cfg.AllowedKey(b.Key) {
			allowed = append(allowed, b)
		}
		kept = append(kept, b)
	}
	m := actions.NewManager(cs, actions.ManagerOptions{Logger: log.With("component", "actions"), Now: now, Ranges: cfg.GroupRanges()})
	m.Load(kept, cfg.AllowList())
	m.Start(context.Background())
	for _, c := range cs {
		log.Info("action", "name", c.Name(), "type", c.Type, "on", c.Kinds)
	}
	return m, allowed, nil
}

// compile builds a source's parser; `format: auto` looks at the first batch.
func compile(src *rules.Source, b follow.Batch) (*parser.Parser, error) {
	po := src.Parser
	if po.Format == "auto" {
		var sample [][]byte
		for _, l := range b.Lines[:min(len(b.Lines), 50)] {
			sample = append(sample, []byte(l.Text))
		}
		preset, err := parser.Detect(sample, po)
		if err != nil {
			return nil, fmt.Errorf("source %s: format auto: %w", src.Name, err)
		}
		po.Format = preset
	}
	p, err := parser.New(po)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", src.Name, err)
	}
	return p, nil
}

// parse parses p's lines into its entries.
func (p *parsed) parse() {
	if p.parser == nil { // no format could be chosen: every line is rejected
		p.rejected, p.firstErr = len(p.batch.Lines), errors.New("no format reads these lines")
		return
	}
	// Sized once for the batch: grown by append, the entries (240 bytes
	// each) cost twice their size in garbage, the largest part of live
	// ingest's allocations (issue 23).
	// A batch's memory put back (spares) is used again when it is large
	// enough: in a steady state ingest allocates no entries.
	if n := len(p.batch.Lines); cap(p.entries) < n {
		p.entries, p.lines = make([]parser.Entry, 0, n), make([]int32, 0, n)
	}
	for i, l := range p.batch.Lines {
		if i > 0 && i%sliceLines == 0 {
			runtime.Gosched() // a slice parsed: the endpoint's goroutines may run (sliceLines)
		}
		// Parsed in place, into the next entry (ParseString's Entry,
		// returned, was a 240-byte copy), with the source's time memo;
		// the parse writes all of it (room for every line: above).
		k := len(p.entries)
		p.entries = p.entries[:k+1]
		e := &p.entries[k]
		_, err := p.parser.ParseStringMemo(l.Text, int(l.Line), nil, e, p.memo)
		if err == nil && l.Truncated {
			err = source.TooLong(int(l.Line)) // rejected, as replay rejects it
		}
		if err != nil {
			*e = parser.Entry{} // a truncated line's: nothing of it kept
			p.entries = p.entries[:k]
			if errors.Is(err, parser.ErrDirective) {
				continue // a format's own header (W3C's #Fields:): no request, not rejected
			}
			if p.rejected == 0 {
				p.firstErr = err
			}
			p.rejected++
			continue
		}
		p.lines = append(p.lines, int32(i))
	}
}

// decider is the daemon's state, in one struct: Run's stages (stages.go)
// fill it in; then the decider's goroutine (run) processes parsed batches
// in order and owns all the state.
type decider struct {
	// mu guards the detector and cfg against the endpoint's readers: the
	// decider holds it while it handles an event.
	mu         sync.RWMutex
	cfg        *rules.Config
	det        *detector.Detector
	p          *pipeline.Pipeline
	w          *checkpoint.Writer
	acts       *actions.Manager // the actions; never waited for
	cs         *crowdsecAPIs    // the CrowdSec decisions APIs among them
	lists      chan struct{}    // a list file changed (watch.go)
	log        *slog.Logger
	dl         *ops.DecisionLog // a line for every decision (ops, "The decision log")
	src        string           // the source of the line being charged
	o          *Options
	now        func() time.Time
	configPath string
	bots       *goodbots.Verifier // good_bots' verifier, for every reload
	last       time.Time          // log time of the newest entry processed
	out        []detector.Decision
	db         state.Store
	fl         *fleetLink // the fleet's node (fleet.go); nil without `fleet:`
	evictions  int64
	// actionErrors are the actions' error counts at the last metrics update.
	actionErrors map[string]int64
	flushed      time.Time        // wall time of the last checkpoint
	dirty        bool             // lines processed since the last checkpoint
	soon         <-chan time.Time // a checkpoint due for a recent decision
	// rejectLogged is when rejected lines of each file were last logged.
	rejectLogged map[string]time.Time
	started      time.Time            // wall time the daemon started, for status
	lastLine     map[string]time.Time // log time of the newest line read, by source
	newestSrc    *rules.Source        // the source whose newest line is d.last; nil: none known (charge)
	// guards are the neighbour rule's state by followed path; clocks count
	// the lines not charged for their time, by source (pipeline's doc,
	// "One line cannot move the clock").
	guards    map[string]*fileGuard
	clocks    map[string]*clockCounts
	positions map[string]state.Position // restored at start
	spare     *spares                   // the parsed batches' memory, used again (spare.go)

	// What the stages opened and started (stages.go).
	eps           *endpoints
	srv           *control.Server // the control socket's; nil when not served
	allowed       []state.Ban     // the resumed rule bans the allow list covers (startActions)
	stopFollowing func()          // stops the followers, once the decider has stopped
	undos         []func()        // closes what the stages opened, the last first
}

// fileGuard is the neighbour rule of one followed path (its rotated
// files included: the path's lines go on in the next file).
type fileGuard struct {
	g        *pipeline.Guard
	src      *rules.Source
	after    state.Position // just past the last line read
	before   state.Position // where the held line starts, while one is held
	atEnd    bool           // the last batch reached the end of the file
	outliers int64          // the guard's outliers already counted
	newest   time.Time      // the guard's newest time as last saved
}

// clockCounts are one source's lines not charged for their time.
type clockCounts struct {
	future, outliers            int64
	futureLogged, outlierLogged time.Time
}

// guard returns the neighbour rule of path, restored from the last
// checkpoint on first use.
func (d *decider) guard(src *rules.Source, path string) *fileGuard {
	fg := d.guards[path]
	if fg != nil {
		return fg
	}
	fg = &fileGuard{g: pipeline.NewGuard(d.cfg), src: src, after: d.positions[path]}
	if err := checkpoint.RestoreGuard(d.db, path, fg.g); err != nil {
		d.log.Warn("guard not restored: the file's next line is judged as a first line", "path", path, "err", err)
	}
	fg.newest = fg.g.Newest()
	d.guards[path] = fg
	if d.clocks[src.Name] == nil {
		d.clocks[src.Name] = &clockCounts{}
	}
	return fg
}

// decisionFlush is how soon after a decision a checkpoint records it: a ban
// reaches the database (and the operators, and the actions that read it)
// within this, however long the checkpoint interval.
const decisionFlush = 10 * time.Millisecond

// checkpointRows bounds a checkpoint: once this many key states changed
// since the last one, a batch of lines is followed by a checkpoint, however
// soon the interval would end. A catch-up over a million new keys then
// writes its states a slice at a time (about 4 MB of rows each, one being
// written while the next is taken) instead of holding a row for every
// key until the interval ends: following a log of 1M new clients under
// three rules peaks at 369 MB instead of 390 MB with 65,536 (and 1.1 GB
// with no bound), for 183 transactions instead of 46. Since the key
// states are written as runs (store, issue 23) a changed state costs about
// the same whatever the bound (its bytes, written once and merged once):
// the bound stays a memory bound.
const checkpointRows = 1 << 14

func (d *decider) run(ctx context.Context, ordered <-chan *parsed, reload <-chan struct{}) error {
	tick := time.NewTicker(d.cfg.Checkpoint)
	defer tick.Stop()
	alive := time.NewTicker(time.Second)
	defer alive.Stop()
	if d.o.Hooks.Alive != nil {
		d.o.Hooks.Alive()
	}
	var cleanAt <-chan time.Time
	var cleanTimer *time.Timer
	schedule := func() {
		sched, err := ops.ParseSchedule(d.cfg.Cleaner)
		if err != nil { // rules.Load checked it: not reached
			d.log.Error("cleaner schedule", "err", err)
			return
		}
		now := d.now()
		cleanTimer = time.NewTimer(max(0, sched.Next(now).Sub(now)))
		cleanAt = cleanTimer.C
	}
	schedule()
	defer func() {
		if cleanTimer != nil {
			cleanTimer.Stop()
		}
	}()
	for {
		select {
		case p, ok := <-ordered:
			if !ok {
				return d.stop()
			}
			d.mu.Lock()
			d.batch(p)
			d.mu.Unlock()
			d.spare.put(p) // nothing reads p any more (spares)
		case <-tick.C:
			if d.dirty {
				d.mu.Lock()
				d.flush()
				d.mu.Unlock()
			}
		case <-d.soon:
			d.soon = nil
			if d.dirty {
				d.mu.Lock()
				d.flush()
				d.mu.Unlock()
			}
		case <-alive.C:
			if d.o.Hooks.Alive != nil {
				d.o.Hooks.Alive()
			}
			d.dl.Tick()
			d.releaseDue()
		case <-cleanAt:
			d.mu.Lock()
			d.clean(ops.VacuumPages)
			d.mu.Unlock()
			schedule()
		case <-reload:
			d.mu.Lock()
			d.reload()
			d.mu.Unlock()
		case <-d.lists: // a list file changed (watch.go)
			d.mu.Lock()
			d.log.Info("a list file changed: reloading")
			d.reload()
			d.mu.Unlock()
		case <-d.fleetTick():
			d.mu.Lock()
			d.fleetSend()
			d.mu.Unlock()
		case ev, ok := <-d.fleetEvents():
			if !ok { // the node stopped (the daemon is stopping)
				d.fl.stopped = true
				continue
			}
			d.mu.Lock()
			d.fleetApply(ev)
			d.mu.Unlock()
		case r := <-d.control():
			d.mu.Lock()
			err := r.fn(d)
			d.mu.Unlock()
			r.done <- err
		case <-ctx.Done():
			return d.stop()
		}
	}
}

// batch processes one parsed batch and records the file's position after it.
// A line more than `future` ahead of the wall clock is not charged; the
// others pass the path's guard (pipeline.Guard) first. While the guard
// holds a line, the position saved is the one before it, so that a restart
// reads it again; a held line is charged once the wall clock reaches it if
// the file has been read to its end (else the next line decides).
func (d *decider) batch(p *parsed) {
	now := d.now()
	d.dirty = true
	lateBefore := d.det.Stats().Late
	fg := d.guard(p.src, p.batch.Path)
	cc := d.clocks[p.src.Name]
	var future int64
	var firstFuture time.Time
	decided := false
	hints := !d.o.plain && d.p.Prefetching()
	for i := range p.entries {
		if i > 0 && i%sliceLines == 0 {
			d.yield()
		}
		if hints {
			// Hints for the next entries (pipeline.Pipeline.PrefetchNext,
			// as replay's merger gives them): their key slots, records
			// and states load while this one is charged. They change
			// nothing.
			d.p.PrefetchNext(p.entries, i)
		}
		e := &p.entries[i]
		if e.Time.Sub(now) > d.cfg.Future {
			if future == 0 {
				firstFuture = e.Time
			}
			future++
			continue
		}
		released, charge := fg.g.Step(e)
		if released != nil {
			decided = d.charge(p.src, released, now) || decided
		}
		if charge {
			decided = d.charge(p.src, e, now) || decided
		} else { // e is held, its strings into the batch's texts: pinned
			fg.before = d.before(fg, p, int(p.lines[i]))
			p.pin = true
		}
	}
	if n := len(p.batch.Lines); n > 0 {
		last := p.batch.Lines[n-1]
		fg.after = p.batch.After(n - 1)
		fg.atEnd = last.Offset >= p.batch.File.Size
	}
	decided = d.release(fg, now) || decided
	d.guardDone(p.batch.Path, fg)
	if future > 0 {
		cc.future += future
		if m := d.o.Metrics; m != nil {
			m.LinesFuture.WithLabelValues(p.src.Name).Add(float64(future))
		}
		if now.Sub(cc.futureLogged) >= time.Minute {
			cc.futureLogged = now
			d.log.Warn("lines ahead of the wall clock: not charged", "source", p.src.Name, "path", p.batch.Path,
				"lines", future, "first", firstFuture, "future", d.cfg.Future)
		}
	}
	if p.rejected > 0 && now.Sub(d.rejectLogged[p.batch.Path]) >= time.Minute {
		// At most one line a minute per file: a broken format must not
		// flood the journal; the metrics count every line.
		d.rejectLogged[p.batch.Path] = now
		d.log.Warn("lines rejected", "path", p.batch.Path, "lines", p.rejected, "first", p.firstErr)
	}
	if m := d.o.Metrics; m != nil {
		m.LinesLate.WithLabelValues(p.src.Name).Add(float64(d.det.Stats().Late - lateBefore))
		m.LinesRead.WithLabelValues(p.src.Name).Add(float64(len(p.batch.Lines)))
		m.LinesRejected.WithLabelValues(p.src.Name).Add(float64(p.rejected))
		if n := len(p.batch.Lines); n > 0 {
			m.LagBytes.WithLabelValues(p.src.Name).Set(float64(max(0, p.batch.File.Size-p.batch.Lines[n-1].Offset)))
		}
		if len(p.entries) > 0 {
			m.LagSeconds.WithLabelValues(p.src.Name).Set(max(0, now.Sub(p.entries[len(p.entries)-1].Time).Seconds()))
		}
	}
	if decided {
		d.decided()
	}
	if d.det.Pending() >= checkpointRows {
		d.flush()
	}
}

// sliceLines is how many lines a parsing goroutine parses, and how many
// entries the decider charges, before it lets the other goroutines run
// (issue 23): on one core (GOMAXPROCS 1) a goroutine the endpoint woke
// waits at most one slice (about 0.5 ms of parsing or charging), not a
// whole batch of up to follow.DefaultMaxBatch lines, and /v1/throttle's
// read of the windows (under d.mu) waits at most one slice of the
// decider's. The decisions and their order do not change: the decider
// still charges the entries in order, and alone.
const sliceLines = 256

// yield, in the middle of a batch, releases d.mu and lets the other
// goroutines run before the decider takes it again. What the endpoint
// reads meanwhile is the detector between two whole lines.
func (d *decider) yield() {
	d.mu.Unlock()
	runtime.Gosched()
	d.mu.Lock()
}

// decided has a checkpoint record the decisions soon.
func (d *decider) decided() {
	if wait := decisionFlush - time.Since(d.flushed); wait <= 0 {
		d.flush()
	} else if d.soon == nil {
		d.soon = time.After(wait)
	}
}

// charge runs one entry through the pipeline and hands its decisions on;
// it reports whether there were any.
func (d *decider) charge(src *rules.Source, e *parser.Entry, now time.Time) bool {
	d.src = src.Name
	d.out = d.p.Process(src, e, d.out[:0])
	d.newest(src, e.Time)
	return d.local(src.Name, now)
}

// newest notes a line of src at log time t: d.last is the newest line's
// time, lastLine each source's. Most lines cost no look-up in lastLine:
// while src's newest line is the newest of all (newestSrc), a line no
// newer than d.last is no newer than src's (TestNewestAsMaps).
func (d *decider) newest(src *rules.Source, t time.Time) {
	if t.After(d.last) {
		d.last = t
		d.lastLine[src.Name] = t
		d.newestSrc = src
	} else if src != d.newestSrc && t.After(d.lastLine[src.Name]) {
		d.lastLine[src.Name] = t
	}
}

// before is the position of path just before line i of p's batch: where
// a restart must read again to see the held line.
func (d *decider) before(fg *fileGuard, p *parsed, i int) state.Position {
	if i > 0 {
		return p.batch.After(i - 1)
	}
	if a := fg.after; a.Path != "" && a.Dev == p.batch.File.Dev && a.Inode == p.batch.File.Inode {
		return a
	}
	// The first line of a file: its start is not known here; the position
	// after it is saved (a crash while it is held loses that one line).
	return p.batch.After(0)
}

// release charges fg's held line if the wall clock has reached it and the
// file has been read to its end: a quiet site's real resumption is not
// delayed until its next line.
func (d *decider) release(fg *fileGuard, now time.Time) bool {
	t, held := fg.g.Held()
	if !held || !fg.atEnd || t.After(now) {
		return false
	}
	return d.charge(fg.src, fg.g.ReleaseHeld(), now)
}

// guardDone records path's position (before a held line) and its guard's
// newest time for the next checkpoint, and counts its new outliers.
func (d *decider) guardDone(path string, fg *fileGuard) {
	pos := fg.after
	if _, held := fg.g.Held(); held {
		pos = fg.before
	}
	if pos.Path != "" {
		d.w.Position(pos)
	}
	if t := fg.g.Newest(); !t.Equal(fg.newest) {
		fg.newest = t
		d.w.SaveGuard(path, fg.g)
	}
	n, at := fg.g.Outliers()
	if n == fg.outliers {
		return
	}
	cc := d.clocks[fg.src.Name]
	cc.outliers += n - fg.outliers
	if m := d.o.Metrics; m != nil {
		m.LinesOutliers.WithLabelValues(fg.src.Name).Add(float64(n - fg.outliers))
	}
	if now := d.now(); now.Sub(cc.outlierLogged) >= time.Minute {
		cc.outlierLogged = now
		d.log.Warn("line far ahead of its neighbours: not charged", "source", fg.src.Name, "path", path,
			"lines", n-fg.outliers, "time", at)
	}
	fg.outliers = n
}

// releaseDue charges the held lines the wall clock has reached.
func (d *decider) releaseDue() {
	now := d.now()
	for path, fg := range d.guards {
		if t, held := fg.g.Held(); !held || !fg.atEnd || t.After(now) {
			continue
		}
		d.mu.Lock()
		d.dirty = true
		if d.release(fg, now) {
			d.decided()
		}
		d.guardDone(path, fg)
		d.mu.Unlock()
	}
}

// live turns a decision made on log time into one for the wall clock: a ban
// or throttle lasts its duration from now; one whose end has already passed
// (a line of the backlog) is recorded but not applied.
func live(d *detector.Decision, now time.Time) {
	if d.Kind == detector.Unban || d.Until.IsZero() {
		return
	}
	if !d.Until.After(now) {
		d.LogOnly = true
		d.Reason += "; already over when read (backlog): not applied"
		return
	}
	if d.Time.Before(now) {
		d.Until = now.Add(d.Until.Sub(d.Time))
	}
}

// static applies the configuration's static bans (the deny list, banned
// ranges) now, rather than with the next log line: at start and after a
// reload, a denied address is refused at once, and one removed from the
// list let through.
func (d *decider) static() {
	ds := d.det.Static(d.now(), d.cfg.StaticBans(), nil)
	if len(ds) == 0 {
		return
	}
	d.stamp(ds)
	d.w.Decisions(ds)
	for i := range ds { // source "deny" or "range": their origin
		d.dl.Decisions(ds[i].Origin, ds[i:i+1])
	}
	d.acts.Decisions(ds)
	d.publish(ds)
	d.dirty = true
	d.soon = time.After(decisionFlush)
}

// control is the channel of operators' requests; nil (never ready) without
// a Control.
func (d *decider) control() chan request {
	if d.o.Control == nil {
		return nil
	}
	return d.o.Control.reqs
}

func (d *decider) flush() {
	start := time.Now()
	d.flushed, d.dirty = start, false
	err := d.w.Flush(d.det, d.last)
	if err != nil {
		d.log.Error("checkpoint failed: it is retried with the next one", "err", err)
	}
	if m := d.o.Metrics; m != nil {
		m.CheckpointDuration.Observe(time.Since(start).Seconds())
		if err != nil {
			m.CheckpointsFailed.Inc()
		}
		st := d.det.Stats()
		m.TrackedKeys.Set(float64(st.Keys))
		mem := d.det.Memory()
		m.TrackedKeyBytes.Set(float64(mem.Bytes))
		m.BytesPerKey.Set(float64(mem.PerState()))
		if st.BreakerOpen {
			m.BreakerOpen.Set(1)
		} else {
			m.BreakerOpen.Set(0)
		}
		if n := st.Evictions - d.evictions; n > 0 {
			m.Evictions.Add(float64(n))
		}
		d.evictions = st.Evictions
		if d.actionErrors == nil {
			d.actionErrors = map[string]int64{}
		}
		for _, a := range d.acts.Status() {
			if n := a.Errors - d.actionErrors[a.Name]; n > 0 {
				m.ActionErrors.WithLabelValues(a.Name).Add(float64(n))
			}
			d.actionErrors[a.Name] = a.Errors
			m.ActionEntries.WithLabelValues(a.Name).Set(float64(a.Entries))
			m.ActionPending.WithLabelValues(a.Name).Set(float64(a.Pending))
			up := 1.0
			if a.LastError != "" {
				up = 0
			}
			m.ActionUp.WithLabelValues(a.Name).Set(up)
		}
	}
}

// clean runs one cleaner pass through the daemon's own writer, so that the
// lifts join its checkpoints in order with the positions: on the cleaner's
// schedule (ops.VacuumPages) or an operator's word (Control.Clean).
func (d *decider) clean(vacuumPages int) (ops.CleanStats, error) {
	st, err := ops.CleanWith(d.w, d.db, d.cfg, d.det, d.now(), vacuumPages)
	d.flushed, d.dirty = time.Now(), false
	d.dl.Decisions(ops.SourceCleaner, st.Unbans)
	d.acts.Decisions(st.Unbans)
	// Each pass also syncs every action whole: a stale block file, a rule
	// an operator deleted by hand, is repaired within one cleaner period.
	d.acts.Resync()
	if m := d.o.Metrics; m != nil {
		m.CleanerRuns.Inc()
		if err != nil {
			m.CleanerFailed.Inc()
		}
	}
	if err != nil {
		d.log.Error("cleaner", "err", err)
		return st, err
	}
	d.log.Debug("cleaner", "expired", st.Expired, "throttles", st.Throttles, "pruned_keys", st.Pruned.Keys, "pruned_history", st.Pruned.History)
	return st, nil
}

// stop takes the last checkpoint and waits for it.
func (d *decider) stop() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.flush()
	d.dl.Flush()
	if err := d.w.Close(); err != nil {
		return fmt.Errorf("last checkpoint: %w", err)
	}
	d.log.Info("stopped; state saved")
	return nil
}

// reload loads the configuration again; a broken one is refused.
func (d *decider) reload() {
	if d.o.Hooks.Reloading != nil {
		d.o.Hooks.Reloading()
	}
	cfg, err := d.load()
	if err == nil && !sameActions(d.cfg.Actions, cfg.Actions) {
		d.log.Warn("reload: the actions changed; they take a restart (the running ones stay)")
		cfg.Actions = d.cfg.Actions
	}
	if err == nil && !sameSources(d.cfg, cfg) {
		d.log.Warn("reload: the sources changed; they take a restart (rules and lists are reloaded)")
		cfg.Sources = d.cfg.Sources
	}
	if err == nil && !sameFleet(d.cfg.Fleet, cfg.Fleet) {
		d.log.Warn("reload: the fleet section changed; it takes a restart (the running node stays)")
		cfg.Fleet = d.cfg.Fleet
	}
	if err != nil {
		d.log.Error("reload refused: the running configuration stays", "err", err)
	} else {
		old := d.cfg
		d.cfg = cfg
		d.p = pipeline.NewWithDetector(cfg, d.det)
		d.fleetRules()
		d.acts.SetAllow(cfg.AllowList())
		d.acts.SetRanges(cfg.GroupRanges())
		d.static()
		if !slices.Equal(old.AllowList(), cfg.AllowList()) {
			d.liftAllowed(nil)
		}
		d.breakerAtReload(cfg)
		d.log.Info("configuration reloaded", "rules", len(cfg.Rules))
	}
	if d.o.Hooks.Reloaded != nil {
		d.o.Hooks.Reloaded(err)
	}
}

// sameActions says whether two configurations ask for the same actions:
// the same types with the same options, in the same order. Where they
// are written (lines) does not count: a comment added above an action
// changes nothing that runs.
func sameActions(a, b []rules.Action) bool {
	return slices.EqualFunc(a, b, func(x, y rules.Action) bool {
		return x.Type == y.Type && reflect.DeepEqual(x.Options, y.Options)
	})
}

// sameFleet says whether two fleet sections are the same node on the same
// Redis (where they are written does not count).
func sameFleet(a, b *rules.Fleet) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, y := *a, *b
	x.Line, y.Line = 0, 0
	return x == y
}

func sameSources(a, b *rules.Config) bool {
	if len(a.Sources) != len(b.Sources) {
		return false
	}
	for i := range a.Sources {
		x, y := a.Sources[i], b.Sources[i]
		if x.Name != y.Name || !reflect.DeepEqual(x.Paths, y.Paths) || !reflect.DeepEqual(x.Parser, y.Parser) || x.From != y.From || x.CPUFallback != y.CPUFallback || x.OldDir != y.OldDir ||
			x.Type != y.Type || !reflect.DeepEqual(x.Stream, y.Stream) {
			return false
		}
	}
	return true
}
