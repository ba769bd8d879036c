package ops

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"
)

// addrHandler is a slog handler that hands over the "addr" attribute of the
// first record that has one.
type addrHandler struct{ addr chan string }

func (h addrHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h addrHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h addrHandler) WithGroup(string) slog.Handler            { return h }
func (h addrHandler) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "addr" {
			select {
			case h.addr <- a.Value.String():
			default:
			}
		}
		return true
	})
	return nil
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestMetricsServe(t *testing.T) {
	m := NewMetrics()
	m.LinesRead.WithLabelValues("nginx").Add(42)
	m.LinesRejected.WithLabelValues("nginx").Inc()
	m.LinesLate.WithLabelValues("nginx").Add(3)
	m.Decisions.WithLabelValues("flood", "ban").Add(2)
	m.ActiveBans.WithLabelValues("ban").Set(7)
	m.TrackedKeys.Set(1234)
	m.TrackedKeyBytes.Set(1234 * 200)
	m.BytesPerKey.Set(200)
	m.Evictions.Add(5)
	m.LagBytes.WithLabelValues("nginx").Set(4096)
	m.LagSeconds.WithLabelValues("nginx").Set(1.5)
	m.CheckpointDuration.Observe(0.02)
	m.CheckpointsFailed.Inc()
	m.BreakerOpen.Set(1)
	m.BreakerTrips.Inc()
	m.CleanerRuns.Inc()

	ctx, cancel := context.WithCancel(context.Background())
	ah := addrHandler{addr: make(chan string, 1)}
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, "127.0.0.1:0", m.Handler(), slog.New(ah)) }()
	var addr string
	select {
	case addr = <-ah.addr:
	case err := <-done:
		t.Fatalf("Serve: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Serve logged no address")
	}
	base := "http://" + addr

	code, body := get(t, base+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{
		`logjail_lines_read_total{source="nginx"} 42`,
		`logjail_lines_rejected_total{source="nginx"} 1`,
		`logjail_lines_late_total{source="nginx"} 3`,
		`logjail_decisions_total{kind="ban",rule="flood"} 2`,
		`logjail_active_bans{kind="ban"} 7`,
		`logjail_tracked_keys 1234`,
		`logjail_tracked_key_bytes 246800`,
		`logjail_bytes_per_key 200`,
		`logjail_evictions_total 5`,
		`logjail_lag_bytes{source="nginx"} 4096`,
		`logjail_lag_seconds{source="nginx"} 1.5`,
		`logjail_checkpoint_duration_seconds_bucket{le="0.025"} 1`,
		`logjail_checkpoint_duration_seconds_count 1`,
		`logjail_checkpoints_failed_total 1`,
		`logjail_circuit_breaker_open 1`,
		`logjail_circuit_breaker_trips_total 1`,
		`logjail_cleaner_runs_total 1`,
		`logjail_cleaner_failed_total 0`,
		"go_goroutines ",
		"process_open_fds ",
	} {
		if !strings.Contains(body, want+"\n") && !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	code, body = get(t, base+"/healthz")
	if code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz healthy: %d %q, want 200 \"ok\\n\"", code, body)
	}
	m.SetHealth(func() error { return errors.New("checkpoints failing: disk full") })
	code, body = get(t, base+"/healthz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "disk full") {
		t.Errorf("/healthz unhealthy: %d %q, want 503 with the error", code, body)
	}
	m.SetHealth(nil)
	if code, _ = get(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz after SetHealth(nil): %d", code)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("still serving after shutdown")
	}
}

func TestServeListenError(t *testing.T) {
	err := Serve(context.Background(), "256.0.0.1:1", http.NotFoundHandler(), slog.New(slog.DiscardHandler))
	if err == nil {
		t.Fatal("want a listen error")
	}
}

func TestMetricsRegistriesAreSeparate(t *testing.T) {
	// Two daemons in one process (tests) must not collide on a global
	// registry.
	a, b := NewMetrics(), NewMetrics()
	a.TrackedKeys.Set(1)
	b.TrackedKeys.Set(2)
	mfs, err := b.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "logjail_tracked_keys" && mf.GetMetric()[0].GetGauge().GetValue() != 2 {
			t.Errorf("b's tracked keys = %v", mf.GetMetric()[0].GetGauge().GetValue())
		}
	}
}
