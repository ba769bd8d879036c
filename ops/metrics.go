package ops

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the collectors the daemon updates, registered on a registry
// of their own (Registry). The package documentation lists them with their
// labels. Collectors, SetHealth and the handler are safe for concurrent use.
type Metrics struct {
	Registry *prometheus.Registry

	LinesRead          *prometheus.CounterVec // {source}
	LinesRejected      *prometheus.CounterVec // {source}
	LinesLate          *prometheus.CounterVec // {source}
	LinesFuture        *prometheus.CounterVec // {source}
	LinesOutliers      *prometheus.CounterVec // {source}
	Decisions          *prometheus.CounterVec // {rule, kind}
	ActiveBans         *prometheus.GaugeVec   // {kind}; read at each scrape when SetActiveBans gave a count
	TrackedKeys        prometheus.Gauge
	TrackedKeyBytes    prometheus.Gauge // the detector's estimated heap
	BytesPerKey        prometheus.Gauge // that over TrackedKeys
	Evictions          prometheus.Counter
	LagBytes           *prometheus.GaugeVec // {source}
	LagSeconds         *prometheus.GaugeVec // {source}
	CheckpointDuration prometheus.Histogram // seconds
	CheckpointsFailed  prometheus.Counter
	BreakerOpen        prometheus.Gauge // 0 or 1
	BreakerTrips       prometheus.Counter
	CleanerRuns        prometheus.Counter
	CleanerFailed      prometheus.Counter
	ActionErrors       *prometheus.CounterVec // {action}: failed calls (each is retried)
	ActionEntries      *prometheus.GaugeVec   // {action}: prefixes the action should block
	ActionPending      *prometheus.GaugeVec   // {action}: changes not applied yet
	ActionUp           *prometheus.GaugeVec   // {action}: 1 when its last call succeeded, else 0
	FleetDegraded      prometheus.Gauge       // 1 while the node works alone (Redis away), else 0
	FleetLag           prometheus.Gauge       // the last exchange's round trip, seconds
	FleetQueued        prometheus.Gauge       // decisions waiting to be published
	FleetDropped       prometheus.Counter     // publications the queue's bound dropped

	mu           sync.RWMutex
	health       func() error
	remark       func() string
	fleetDropped int64
	activeBans   func() (map[string]int, error)
}

// NewMetrics builds the collectors and their registry, with the Go runtime
// and process collectors.
func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	f := func(c prometheus.Collector) { reg.MustRegister(c) }
	m := &Metrics{Registry: reg}
	counterVec := func(name, help string, labels ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "logjail_" + name, Help: help}, labels)
		f(c)
		return c
	}
	gaugeVec := func(name, help string, labels ...string) *prometheus.GaugeVec {
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "logjail_" + name, Help: help}, labels)
		f(g)
		return g
	}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: "logjail_" + name, Help: help})
		f(c)
		return c
	}
	gauge := func(name, help string) prometheus.Gauge {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "logjail_" + name, Help: help})
		f(g)
		return g
	}
	m.LinesRead = counterVec("lines_read_total", "Log lines read, by source.", "source")
	m.LinesRejected = counterVec("lines_rejected_total", "Log lines the parser rejected, by source.", "source")
	m.LinesLate = counterVec("lines_late_total", "Log lines older than the newest seen minus skew, by source.", "source")
	m.LinesFuture = counterVec("lines_future_total", "Log lines more than `future` ahead of the wall clock, not charged, by source.", "source")
	m.LinesOutliers = counterVec("lines_outliers_total", "Log lines far ahead of their neighbours in their file, not charged, by source.", "source")
	m.Decisions = counterVec("decisions_total", "Decisions made, by rule and kind (throttle, ban, unban).", "rule", "kind")
	m.ActiveBans = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "logjail_active_bans", Help: "Active throttles and bans, by kind: what `logjail list` shows."}, []string{"kind"})
	f(activeBansCollector{m})
	m.TrackedKeys = gauge("tracked_keys", "(rule, key) states held in memory.")
	m.TrackedKeyBytes = gauge("tracked_key_bytes", "Estimated heap the (rule, key) states and the key index hold.")
	m.BytesPerKey = gauge("bytes_per_key", "Estimated heap per tracked (rule, key) state, the key index included.")
	m.Evictions = counter("evictions_total", "Key states evicted at max_keys: allowed ones first, least recently seen first; throttled ones only when no allowed one is left.")
	m.LagBytes = gaugeVec("lag_bytes", "Bytes of a source's files not read yet.", "source")
	m.LagSeconds = gaugeVec("lag_seconds", "Wall clock minus the time of the newest line read, by source.", "source")
	m.CheckpointDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "logjail_checkpoint_duration_seconds",
		Help:    "Time to write one checkpoint into the database.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	})
	f(m.CheckpointDuration)
	m.CheckpointsFailed = counter("checkpoints_failed_total", "Checkpoints that failed (the next one writes their content too).")
	m.BreakerOpen = gauge("circuit_breaker_open", "1 while the circuit breaker (max_bans_per_minute) is open, else 0.")
	m.BreakerTrips = counter("circuit_breaker_trips_total", "Times the circuit breaker tripped while this process ran.")
	m.CleanerRuns = counter("cleaner_runs_total", "Cleaner passes run.")
	m.CleanerFailed = counter("cleaner_failed_total", "Cleaner passes that failed.")
	m.ActionErrors = counterVec("action_errors_total", "Failed calls of an action (each is retried with back-off).", "action")
	m.ActionEntries = gaugeVec("action_entries", "Prefixes an action should block now.", "action")
	m.ActionPending = gaugeVec("action_pending", "Changes an action has not applied yet.", "action")
	m.ActionUp = gaugeVec("action_up", "1 when the action's last call succeeded, else 0.", "action")
	m.FleetDegraded = gauge("fleet_degraded", "1 while the fleet's Redis is away and this node works alone, else 0 (no fleet: 0).")
	m.FleetLag = gauge("fleet_lag_seconds", "The round trip of the last exchange with the fleet's Redis.")
	m.FleetQueued = gauge("fleet_queued", "Decisions waiting to be published to the fleet.")
	m.FleetDropped = counter("fleet_dropped_total", "Decisions the publication queue dropped (oldest first) while Redis was away.")
	f(collectors.NewGoCollector())
	f(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// SetHealth sets the check /healthz runs: healthy while it returns nil.
// A nil fn (the default) is always healthy.
func (m *Metrics) SetHealth(fn func() error) {
	m.mu.Lock()
	m.health = fn
	m.mu.Unlock()
}

// SetRemark sets what /healthz adds after its "ok" while it passes: a
// state worth an operator's eye that is no failure ("fleet: degraded").
// fn returns "" when there is nothing to add.
func (m *Metrics) SetRemark(fn func() string) {
	m.mu.Lock()
	m.remark = fn
	m.mu.Unlock()
}

// SetFleet sets the fleet's gauges from the node's status; dropped is the
// node's running count.
func (m *Metrics) SetFleet(degraded bool, lag time.Duration, dropped int64, queued int) {
	v := 0.0
	if degraded {
		v = 1
	}
	m.FleetDegraded.Set(v)
	m.FleetLag.Set(lag.Seconds())
	m.FleetQueued.Set(float64(queued))
	m.mu.Lock()
	if n := dropped - m.fleetDropped; n > 0 {
		m.FleetDropped.Add(float64(n))
	}
	m.fleetDropped = dropped
	m.mu.Unlock()
}

// SetActiveBans sets how logjail_active_bans is counted: fn is called at
// each scrape and gives the active throttles and bans by kind (the
// database's, as `logjail list` reads them), so that the metric and list
// always agree. Until it is set, the gauge holds what was Set on it.
func (m *Metrics) SetActiveBans(fn func() (map[string]int, error)) {
	m.mu.Lock()
	m.activeBans = fn
	m.mu.Unlock()
}

// activeBansCollector is ActiveBans, brought up to date from the count
// SetActiveBans gave before each scrape. A count that fails leaves the
// last values.
type activeBansCollector struct{ m *Metrics }

func (c activeBansCollector) Describe(ch chan<- *prometheus.Desc) { c.m.ActiveBans.Describe(ch) }

func (c activeBansCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.RLock()
	fn := c.m.activeBans
	c.m.mu.RUnlock()
	if fn != nil {
		if n, err := fn(); err == nil {
			for _, kind := range []string{"throttle", "ban"} {
				c.m.ActiveBans.WithLabelValues(kind).Set(float64(n[kind]))
			}
		}
	}
	c.m.ActiveBans.Collect(ch)
}

// Healthy runs the health check.
func (m *Metrics) Healthy() error {
	m.mu.RLock()
	fn := m.health
	m.mu.RUnlock()
	if fn == nil {
		return nil
	}
	return fn()
}

// Handler serves /metrics (the registry, in Prometheus' text or OpenMetrics
// format) and /healthz: 200 "ok" while the health check passes, else 503
// with its error; a remark (SetRemark) follows "ok" on its own line.
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := m.Healthy(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(err.Error() + "\n"))
			return
		}
		body := "ok\n"
		m.mu.RLock()
		fn := m.remark
		m.mu.RUnlock()
		if fn != nil {
			if r := fn(); r != "" {
				body += r + "\n"
			}
		}
		_, _ = w.Write([]byte(body))
	})
	return mux
}

// Serve listens on addr and serves h until ctx is done, then shuts down
// gracefully (requests in flight get 5 s). It returns nil after a shutdown
// for ctx, the listener's error otherwise. A non-loopback addr is allowed
// (the configuration's default is loopback); the address is logged.
func Serve(ctx context.Context, addr string, h http.Handler, log *slog.Logger) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return serve(ctx, ln, h, log)
}

func serve(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	log.Info("metrics listening", "addr", ln.Addr().String())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}
