package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/logjail/logjail/daemon"
	"github.com/logjail/logjail/internal/gcgoal"
	"github.com/logjail/logjail/ops"
	"github.com/logjail/logjail/store"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	"golang.org/x/term"
)

type runOptions struct {
	cfg      configFlag
	logLevel string
	poll     bool
}

func newRunCmd(s streams) *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run [--config F]",
		Short: "Follow the logs and ban: the daemon",
		Long: `run follows the configured sources live, decides with the same pipeline as
replay, keeps its state in <state_dir>/logjail.db (checkpointed every
'checkpoint', and on SIGTERM), and goes on exactly where it stopped after a
restart or a crash. SIGHUP reloads the configuration; a broken one is refused
and the running one kept. It needs a configuration file: the embedded
example is for replay and parse only.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// A daemon tracking a million keys grows by 16 MB at most
			// between collections, not by all of its live heap (gcgoal):
			// its garbage is small, so it pays for its peak RSS with a few
			// more collections of a heap the collector does not scan.
			// GOGC in the environment wins.
			if os.Getenv("GOGC") == "" {
				defer gcgoal.Start(100, 32<<20)()
			}
			// On one core (taskset, a cgroup of one CPU) the runtime has
			// one P, which polls the network only when it has nothing
			// else to run, or every 10 ms: an /auth request would wait
			// behind ingest. A second P waits in the poller, and the
			// kernel runs the endpoint's goroutine at once (package
			// daemon's doc, "The decision path"). GOMAXPROCS in the
			// environment wins.
			if os.Getenv("GOMAXPROCS") == "" && runtime.GOMAXPROCS(0) == 1 {
				runtime.GOMAXPROCS(2)
			}
			return runDaemon(cmd, &o, s)
		},
	}
	o.cfg.addFlag(cmd)
	f := cmd.Flags()
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	f.BoolVar(&o.poll, "poll", false, "follow files by polling instead of inotify")
	return cmd
}

func runDaemon(cmd *cobra.Command, o *runOptions, s streams) error {
	// Refuse a missing or broken configuration before anything starts; the
	// daemon reloads it from the same file.
	cfg, err := o.cfg.load(s.err, false)
	if err != nil {
		return err
	}
	path := cfg.File
	terminal := false
	if f, ok := s.err.(*os.File); ok {
		terminal = term.IsTerminal(int(f.Fd()))
	}
	log, err := ops.NewLogger(s.err, o.logLevel, terminal)
	if err != nil {
		return usageError(err)
	}
	// go-redis (a fleet's node) logs each failed dial itself, several a
	// second while Redis is away, to stderr by default: to the daemon's
	// log at debug instead. The fleet says degraded and reconnected once
	// each, at info (package fleet).
	redis.SetLogger(redisLog{log.With("component", "redis")})
	// Another daemon on the same database: say who, before binding the
	// addresses it holds too.
	if err := store.Held(daemon.DBPath(cfg)); err != nil {
		return alreadyRunning(err)
	}
	ctx, cancel := context.WithCancel(cmd.Context())
	defer cancel()
	g, ctx := errgroup.WithContext(ctx)
	metrics := ops.NewMetrics()
	var alive atomic.Int64 // unix ns of the decider's last sign of life
	alive.Store(time.Now().UnixNano())
	var endpoints atomic.Pointer[func() error] // the decision endpoints' check, once they serve
	healthy := func() error {
		if since := time.Since(time.Unix(0, alive.Load())); since > 10*time.Second {
			return fmt.Errorf("the decider has not moved for %v", since.Round(time.Second))
		}
		if check := endpoints.Load(); check != nil {
			return (*check)()
		}
		return nil
	}
	metrics.SetHealth(healthy)
	if cfg.Metrics != "" {
		g.Go(func() error { return ops.Serve(ctx, cfg.Metrics, metrics.Handler(), log) })
	}
	sd := ops.NewNotifier(log)
	g.Go(func() error { return sd.Watchdog(ctx, func() bool { return healthy() == nil }) })
	hooks := daemon.Hooks{
		Ready:     func() { sd.Ready() },
		Reloading: func() { sd.Reloading() },
		Reloaded: func(err error) {
			if err != nil {
				sd.Status("reload refused: " + err.Error())
			} else {
				sd.Status("configuration reloaded")
			}
			sd.Ready()
		},
		Stopping: func() { sd.Stopping() },
		Alive:    func() { alive.Store(time.Now().UnixNano()) },
		// An endpoint that stopped serving fails /healthz and the watchdog;
		// the daemon stops with its error too, so that systemd restarts it.
		Endpoints: func(check func() error) { endpoints.Store(&check) },
		// A fleet's node working alone (Redis away) is said by /healthz
		// after its "ok": no failure, systemd must not restart it.
		Fleet: metrics.SetRemark,
	}
	g.Go(func() error {
		defer cancel() // the daemon stopped: so do the metrics server and the watchdog
		return daemon.Run(ctx, daemon.Options{ConfigPath: path, Logger: log, Poll: o.poll, Metrics: metrics, Hooks: hooks, ServeControl: true})
	})
	err = g.Wait()
	if errors.Is(err, store.ErrLocked) {
		return alreadyRunning(err)
	}
	return err
}

// alreadyRunning is the error of a second daemon on a database another
// process holds (a *store.LockedError): who holds it, and what to do.
func alreadyRunning(err error) error {
	var le *store.LockedError
	if !errors.As(err, &le) {
		return &exitError{code: exitUsage, err: fmt.Errorf("%w: is logjail already running?", err)}
	}
	who := "a process whose pid could not be read"
	if le.PID > 0 {
		who = fmt.Sprintf("pid %d", le.PID)
	}
	return &exitError{code: exitUsage, err: fmt.Errorf("already running: %s holds the database %s (lock %s.lock); stop it first (systemctl stop logjail), or give this one another state_dir", who, le.Path, le.Path)}
}

// redisLog is go-redis's logger on the daemon's log, at debug.
type redisLog struct{ log *slog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, fmt.Sprintf(format, v...))
}
