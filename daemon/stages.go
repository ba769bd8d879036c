package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/logjail/logjail/checkpoint"
	"github.com/logjail/logjail/control"
	"github.com/logjail/logjail/follow"
	"github.com/logjail/logjail/goodbots"
	"github.com/logjail/logjail/ops"
	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/pipeline"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/store"
	"golang.org/x/sync/errgroup"
)

// Run's stages (the package doc, "Stages"), and the fields of the
// decider each fills in for the next: loadConfig (cfg, bots),
// serveEndpoints (eps), openState (db), restore (det, positions, dl, w),
// startActions (acts, allowed), openControl (srv), startSources
// (stopFollowing), serve (p, lists, started). undo and undoAll close what
// they opened.

// Run runs the daemon until ctx is done (then it checkpoints and returns
// nil) or an error makes it stop.
func Run(ctx context.Context, o Options) error {
	d := newDecider(&o)
	defer d.undoAll()
	for _, stage := range []func() error{
		d.loadConfig, d.serveEndpoints, d.openState, d.restore, d.startActions, d.openFleet, d.openControl,
	} {
		if err := stage(); err != nil {
			return err
		}
	}
	reload := d.reloads()
	g, gctx := errgroup.WithContext(ctx)
	ordered := d.startSources(gctx, g)
	d.serve(gctx, g, ordered, reload)
	return d.drain(g)
}

// newDecider is the decider of a run, before its stages: Options' defaults
// filled in.
func newDecider(o *Options) *decider {
	d := &decider{o: o, log: o.Logger, now: o.Now, configPath: o.ConfigPath, bots: o.Verifier,
		lastLine: map[string]time.Time{}, rejectLogged: map[string]time.Time{},
		guards: map[string]*fileGuard{}, clocks: map[string]*clockCounts{}}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if d.now == nil {
		d.now = time.Now
	}
	return d
}

// undo has f run when Run returns, before what earlier stages opened.
func (d *decider) undo(f func()) { d.undos = append(d.undos, f) }

// undoAll closes what the stages opened, the last first.
func (d *decider) undoAll() {
	for i := len(d.undos) - 1; i >= 0; i-- {
		d.undos[i]()
	}
}

// loadConfig loads the configuration.
func (d *decider) loadConfig() error {
	// good_bots: {verify: dns} verifies crawlers by reverse DNS through
	// the system's resolver, with one cache for the daemon's life: every
	// reload gets the same Verifier. Under verify: ranges it is unused.
	if d.bots == nil {
		d.bots = goodbots.NewVerifier(goodbots.Options{Resolver: net.DefaultResolver})
		d.undo(d.bots.Close)
	}
	cfg, err := d.load()
	if err != nil {
		return configError(err)
	}
	for _, w := range cfg.Warnings() {
		d.log.Warn("configuration", "warning", w.Error())
	}
	d.cfg = cfg
	return nil
}

// load loads the configuration file, at start and on every reload, in
// the one pass that checks the actions' options with the rest
// (rules.Options.Actions): a reload that breaks an option is refused
// before it replaces the running configuration.
func (d *decider) load() (*rules.Config, error) {
	return rules.Load(d.configPath, rules.Options{Verifier: d.bots, Actions: actionTypes()})
}

// configError is the daemon's error for a configuration it cannot use,
// whatever part of the file is wrong: one prefix.
func configError(err error) error { return fmt.Errorf("configuration: %w", err) }

// serveEndpoints opens the decision endpoints and serves them: they answer
// from the first moment, by their `fail:` until the actions manager has
// loaded the bans, however many there are to read: a proxy is never left
// without an answer.
func (d *decider) serveEndpoints() error {
	eps, err := openEndpoints(d.cfg, d.log)
	if err != nil {
		return err
	}
	eps.serve(d.log)
	d.undo(eps.close)
	d.eps = eps
	if d.o.Hooks.Endpoints != nil {
		d.o.Hooks.Endpoints(eps.health)
	}
	return nil
}

// openState opens the database.
func (d *decider) openState() error {
	db, err := store.Open(DBPath(d.cfg), store.Options{})
	if err != nil {
		return err
	}
	d.undo(func() { db.Close() })
	d.db = db
	if d.o.Metrics != nil {
		d.o.Metrics.SetActiveBans(db.CountActiveBansByKind) // what list shows, operators' bans included
	}
	return nil
}

// restore builds the detector from the last checkpoint and resumes the
// store's bans on the wall clock (the package doc's "Time").
func (d *decider) restore() error {
	d.det = pipeline.NewLiveDetector(d.cfg, d.tripped) // the breaker trips only in the decider's hands
	positions, st, err := checkpoint.Restore(d.db, d.cfg, d.det)
	if err != nil {
		return err
	}
	d.positions = positions
	d.fleetRules()
	// The newest log time so far is the checkpoint's until a line comes:
	// a checkpoint written before then keeps it (rather than saving none),
	// and the operator's engine and top act at it.
	d.last = d.det.Newest()
	d.log.Info("state restored", "db", DBPath(d.cfg), "keys", st.Keys, "dropped", st.Dropped, "reset", st.Reset, "files", len(positions))
	d.dl = ops.NewDecisionLog(d.log, ops.DecisionLogOptions{})
	breakerAtStart(d.det, d.cfg, d.dl, d.o.Metrics)
	d.w = checkpoint.NewAsyncWriter(d.db)
	resumed, err := d.db.ActiveBans()
	if err != nil {
		return err
	}
	t0 := d.now()
	if err := d.w.Resume(d.cfg, d.det, t0); err != nil {
		return err
	}
	d.dl.Decisions(ops.SourceResume, ops.ResumeLifts(resumed, d.cfg, t0))
	return nil
}

// startActions builds the actions and starts them from the store's active
// bans (the function startActions, in daemon.go); the decision endpoints'
// views are among them.
func (d *decider) startActions() error {
	cs, err := openCrowdsec(d.cfg, d.db, d.log, d.now)
	if err != nil {
		return err
	}
	d.undo(cs.close)
	d.cs = cs
	d.acts, d.allowed, err = startActions(d.cfg, d.db, d.log, d.now, slices.Concat(d.eps.views, cs.views))
	if err != nil {
		return err
	}
	// Restoring a large state (a million keys) leaves as much garbage as it
	// keeps: collect it now rather than in a collection that would run
	// alongside the first minutes of work and of the endpoint's answers.
	runtime.GC()
	d.undo(func() {
		// A stop first gives the backends a moment to apply what they still
		// owe (an unban decided in the last moment of the run), so that a
		// stopped daemon leaves its block files and ban lists as its state
		// says; a backend still behind then (one that fails, or is slow) is
		// named in the log, and the next start syncs it.
		ctx, cancel := context.WithTimeout(context.Background(), stopGrace)
		defer cancel()
		if err := d.acts.Wait(ctx); err != nil {
			d.log.Warn("stopping with actions behind (the next start applies the rest)", "err", err)
		}
		if err := d.acts.Close(); err != nil {
			d.log.Error("closing actions", "err", err)
		}
	})
	return nil
}

// stopGrace is how long a stop waits for the actions to apply what they
// owe before it closes them: well inside systemd's TimeoutStopSec (90 s).
const stopGrace = 3 * time.Second

// openControl listens on the control socket, when it is to be served, and
// hands the Control the endpoints for its status.
func (d *decider) openControl() error {
	if d.o.ServeControl && d.cfg.ControlSocket != "" {
		if d.o.Control == nil {
			d.o.Control = NewControl()
		}
		srv, err := control.Listen(control.ServerOptions{Path: d.cfg.ControlSocket, Daemon: d.o.Control, DB: d.db,
			Logger: d.log.With("component", "control"), Now: d.now, BouncerDeleted: d.cs.reread})
		if err != nil {
			return err
		}
		d.undo(func() { srv.Close() })
		d.srv = srv
	}
	if d.o.Control != nil {
		d.o.Control.endpoints.Store(d.eps)
	}
	return nil
}

// reloads is the channel of reload requests: Options.Reload, or the
// process's SIGHUPs (several pending are one).
func (d *decider) reloads() <-chan struct{} {
	if d.o.Reload != nil {
		return d.o.Reload
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	d.undo(func() { signal.Stop(hup) })
	ch := make(chan struct{}, 1)
	stop := make(chan struct{})
	d.undo(func() { close(stop) })
	go func() {
		for {
			select {
			case <-hup:
				select {
				case ch <- struct{}{}:
				default:
				}
			case <-stop:
				return
			}
		}
	}()
	return ch
}

// startSources starts, in g, one follower per source, each with the
// goroutine that parses its batches; it returns the parsed batches in the
// order they were parsed.
func (d *decider) startSources(gctx context.Context, g *errgroup.Group) <-chan *parsed {
	// The sources are the configuration's at start: a reload keeps them
	// (they take a restart), and the decider alone reads d.cfg from now on.
	sources := d.cfg.Sources
	ordered := make(chan *parsed, 2*len(sources)+2)
	// As many batches as can be in flight: the channel's, the one the
	// decider holds, one being parsed and one being read each source.
	d.spare = newSpares(cap(ordered)+1+2*len(sources), d.o.poison || poisonTexts)

	followCtx, stopFollowing := context.WithCancel(gctx)
	d.undo(stopFollowing)
	d.stopFollowing = stopFollowing
	g.Go(func() error {
		defer close(ordered)
		err := d.follow(followCtx, sources, ordered)
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	})
	return ordered
}

// follow follows the sources, one follower each, and parses each
// source's batches in their order, on a goroutine of the source's own,
// sending them on ordered until ctx is done.
//
// A batch is parsed where it was read (issue 23, part LIVE): the follower
// hands it to its source's parsing goroutine, which sends it, parsed, to
// the decider; two hand-offs a batch. Until then a dispatcher took every
// source's batches and handed each to a pool of parsing workers (one per
// core) and, in arrival order, to the decider, which waited for it to be
// parsed: five hand-offs a batch, a thread woken for most, and each
// batch's lines read on another core than the one that had just copied
// them. One goroutine a source parses as fast as the decider charges
// (parsing is a third of a line's cost), so a catch-up is no slower. The
// decisions and their order are the same: a source's batches reach the
// decider in their order, and two sources' batches interleave as they
// were read, as before.
//
// A follower that fails ends them all (followers' context), so that the
// error reaches the daemon: with a plain group the parsing goroutines,
// waiting for a batch that never came, kept Wait from returning.
func (d *decider) follow(ctx context.Context, sources []*rules.Source, ordered chan<- *parsed) error {
	followers, ctx := errgroup.WithContext(ctx)
	for _, src := range sources {
		out := make(chan follow.Batch)
		followers.Go(func() error {
			if src.Type != rules.SourceFile {
				return d.readStream(ctx, src, out) // journald, syslog (streams.go)
			}
			return follow.Follow(ctx, follow.Options{
				Paths: src.Paths, Positions: d.positions, FromStart: src.From == "start",
				Poll: d.o.Poll, Rescan: d.o.Rescan, Logger: d.log.With("source", src.Name),
				OldDir: src.OldDir, Spare: d.spare.lines, Texts: d.texts(),
			}, out)
		})
		followers.Go(func() error {
			var pr *parser.Parser
			var memo parser.TimeMemo // this goroutine's alone (parsed.memo)
			for {
				var b follow.Batch
				select {
				case b = <-out:
				case <-ctx.Done():
					return nil
				}
				if pr == nil {
					pr = d.compile(src, b)
				}
				if pr != nil {
					// A format's directives (W3C's #Fields:) are noted in
					// file order, so that each line is read with the
					// columns in force at its place (parser.Parser.Directive;
					// a no-op for other formats).
					// The parser keeps a directive's text: a copy, the
					// line's own is used again (follow.Texts).
					for _, l := range b.Lines {
						if strings.HasPrefix(l.Text, "#") {
							pr.Directive(strings.Clone(l.Text), int(l.Line))
						}
					}
				}
				p := d.spare.get()
				p.src, p.parser, p.batch, p.memo = src, pr, b, &memo
				p.parse()
				select {
				case ordered <- p:
				case <-ctx.Done():
					return nil
				}
			}
		})
	}
	return followers.Wait()
}

// compile builds src's parser for its batch b, or nil when `format: auto`
// reads nothing it knows in b's lines: they are rejected, and the next
// batch is tried.
func (d *decider) compile(src *rules.Source, b follow.Batch) *parser.Parser {
	pr, err := compile(src, b)
	if err != nil {
		d.log.Error("format", "source", src.Name, "path", b.Path, "lines", len(b.Lines), "err", err)
		return nil
	}
	d.log.Info("format", "source", src.Name, "format", pr.Name())
	return pr
}

// serve starts, in g, the control socket's server, the decider's own
// goroutine (which stops the followers when it ends), the list watcher
// and the watch on the endpoints, then says the daemon is ready.
func (d *decider) serve(gctx context.Context, g *errgroup.Group, ordered <-chan *parsed, reload <-chan struct{}) {
	if srv := d.srv; srv != nil {
		g.Go(func() error { return srv.Serve(gctx) })
		d.log.Info("control socket", "path", srv.Path())
	}
	sources := len(d.cfg.Sources) // read before the decider runs: it owns d.cfg then
	d.started = d.now()
	d.p = pipeline.NewWithDetector(d.cfg, d.det)
	d.static()
	if len(d.allowed) > 0 {
		d.liftAllowed(d.allowed)
	}
	if fl := d.fl; fl != nil {
		g.Go(func() error { return fl.node.Run(gctx) })
	}
	d.lists = make(chan struct{}, 1)
	lw := newListWatcher(d.listFiles)
	g.Go(func() error { lw.run(gctx, d.lists); return nil })
	g.Go(func() error {
		err := d.run(gctx, ordered, reload)
		d.stopFollowing()
		return err
	})
	d.eps.setWindows(windows{d})
	failed := d.eps.failed
	g.Go(func() error { // an endpoint that stops serving stops the daemon
		select {
		case err := <-failed:
			return err
		case <-gctx.Done():
			return nil
		}
	})
	if d.o.Hooks.Ready != nil {
		d.o.Hooks.Ready()
	}
	d.log.Info("following", "sources", sources)
}

// drain waits for the goroutines of g: the decider's took the last
// checkpoint when it stopped. A stop asked for by ctx is no error.
func (d *decider) drain(g *errgroup.Group) error {
	err := g.Wait()
	if d.o.Hooks.Stopping != nil {
		d.o.Hooks.Stopping()
	}
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}
