// Package ops holds the daemon's operational pieces: its logger (NewLogger),
// its Prometheus metrics and health endpoint (Metrics, Serve), the
// cleaner's schedule and its one pass (ParseSchedule, Clean), and the
// systemd notifications and watchdog (Notifier; contrib/systemd holds the
// units).
//
// Nothing here is package-level state: each value is built by the caller
// (cmd/logjail) and passed down.
//
// # Metrics
//
// NewMetrics registers these on a registry of its own (no global registry),
// beside the Go runtime (go_*) and process (process_*) collectors:
//
//	logjail_lines_read_total{source}              counter: log lines read
//	logjail_lines_rejected_total{source}          counter: lines the parser rejected
//	logjail_lines_late_total{source}              counter: lines older than newest - skew
//	logjail_lines_future_total{source}            counter: lines more than `future` ahead of the wall clock (not charged)
//	logjail_lines_outliers_total{source}          counter: lines far ahead of their neighbours in their file (not charged)
//	logjail_decisions_total{rule,kind}            counter: decisions (kind throttle, ban, unban)
//	logjail_active_bans{kind}                     gauge: active throttles and bans
//	logjail_tracked_keys                          gauge: (rule, key) states in memory
//	logjail_evictions_total                       counter: keys evicted at max_keys
//	logjail_lag_bytes{source}                     gauge: bytes written to the source's files not read yet
//	logjail_lag_seconds{source}                   gauge: wall clock minus the newest line's time
//	logjail_checkpoint_duration_seconds           histogram: time to write one checkpoint
//	logjail_checkpoints_failed_total              counter: checkpoints that failed (retried with the next)
//	logjail_circuit_breaker_open                  gauge: 1 while max_bans_per_minute holds bans back
//	logjail_circuit_breaker_trips_total           counter: trips of the circuit breaker in this process
//	logjail_cleaner_runs_total                    counter: cleaner passes
//	logjail_cleaner_failed_total                  counter: cleaner passes that failed
//
// Metrics.Handler serves them at /metrics and a health check at /healthz.
package ops
