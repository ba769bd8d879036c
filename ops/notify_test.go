package ops

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// notifySocket listens where NOTIFY_SOCKET points, as systemd would.
func notifySocket(t *testing.T) *net.UnixConn {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify.sock")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	return c
}

// recv reads one message, or fails after d.
func recv(t *testing.T, c *net.UnixConn, d time.Duration) (string, bool) {
	t.Helper()
	buf := make([]byte, 4096)
	c.SetReadDeadline(time.Now().Add(d))
	n, err := c.Read(buf)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:n]), true
}

func TestNotifier(t *testing.T) {
	c := notifySocket(t)
	n := NewNotifier(slog.New(slog.DiscardHandler))
	if !n.Enabled() {
		t.Fatal("not enabled with NOTIFY_SOCKET set")
	}
	steps := []struct {
		name string
		call func() error
		want string
	}{
		{"ready", n.Ready, "READY=1"},
		{"status", func() error { return n.Status("following 3 files\n12 bans") }, "STATUS=following 3 files 12 bans"},
		{"reloading", n.Reloading, "RELOADING=1\nMONOTONIC_USEC="},
		{"ready again", n.Ready, "READY=1"},
		{"stopping", n.Stopping, "STOPPING=1"},
	}
	for _, s := range steps {
		if err := s.call(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		got, ok := recv(t, c, 5*time.Second)
		if !ok || !strings.HasPrefix(got, s.want) {
			t.Errorf("%s: got %q, want %q…", s.name, got, s.want)
		}
		if s.name == "reloading" {
			usec, err := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(got, "RELOADING=1\nMONOTONIC_USEC=")), 10, 64)
			if err != nil || usec <= 0 {
				t.Errorf("MONOTONIC_USEC in %q: %v", got, err)
			}
		}
	}
}

func TestNotifierWithoutSystemd(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	os.Unsetenv("NOTIFY_SOCKET")
	t.Setenv("WATCHDOG_USEC", "")
	os.Unsetenv("WATCHDOG_USEC")
	n := NewNotifier(slog.New(slog.DiscardHandler))
	if n.Enabled() {
		t.Error("enabled without NOTIFY_SOCKET")
	}
	for _, f := range []func() error{n.Ready, n.Reloading, n.Stopping, func() error { return n.Status("x") }} {
		if err := f(); err != nil {
			t.Errorf("no-op returned %v", err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- n.Watchdog(context.Background(), nil) }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Watchdog without WATCHDOG_USEC: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Watchdog without WATCHDOG_USEC did not return at once")
	}
}

func TestWatchdog(t *testing.T) {
	c := notifySocket(t)
	const timeout = 200 * time.Millisecond
	t.Setenv("WATCHDOG_USEC", strconv.Itoa(int(timeout/time.Microsecond)))
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	n := NewNotifier(slog.New(slog.DiscardHandler))

	var healthy atomicBool
	healthy.set(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- n.Watchdog(ctx, healthy.get) }()

	// Pings arrive at half the timeout.
	var at []time.Duration
	for len(at) < 4 {
		msg, ok := recv(t, c, 5*time.Second)
		if !ok {
			t.Fatalf("no ping within 5s; got %d", len(at))
		}
		if msg != "WATCHDOG=1" {
			t.Fatalf("got %q, want WATCHDOG=1", msg)
		}
		at = append(at, time.Since(start))
	}
	for i, d := range at {
		// The i-th ping is due at (i+1) × 100 ms; a loaded machine may
		// deliver it late, never early.
		if due := time.Duration(i+1) * timeout / 2; d < due-10*time.Millisecond {
			t.Errorf("ping %d at %v, before it is due at %v", i, d, due)
		}
	}

	// Unhealthy: no pings, so that systemd restarts the service.
	healthy.set(false)
	// drain a ping that may have been sent before the flag was read
	recv(t, c, timeout/2)
	if msg, ok := recv(t, c, 2*timeout); ok {
		t.Errorf("unhealthy, yet got %q", msg)
	}
	healthy.set(true)
	if _, ok := recv(t, c, 5*time.Second); !ok {
		t.Error("healthy again, yet no ping")
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Watchdog: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Watchdog did not return after cancel")
	}
}

func TestWatchdogOtherPID(t *testing.T) {
	notifySocket(t)
	t.Setenv("WATCHDOG_USEC", "200000")
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()+1))
	n := NewNotifier(slog.New(slog.DiscardHandler))
	if err := n.Watchdog(context.Background(), nil); err != nil {
		t.Errorf("watchdog of another process: %v, want nil at once", err)
	}
	t.Setenv("WATCHDOG_PID", "")
	t.Setenv("WATCHDOG_USEC", "soon")
	if err := n.Watchdog(context.Background(), nil); err == nil {
		t.Error("malformed WATCHDOG_USEC: want an error")
	}
}

type atomicBool struct{ v atomic.Bool }

func (b *atomicBool) set(v bool) { b.v.Store(v) }
func (b *atomicBool) get() bool  { return b.v.Load() }
