package ops

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// Notifier tells systemd how the service is doing (sd_notify), for
// Type=notify and Type=notify-reload units. Where NOTIFY_SOCKET is unset
// (not started by systemd, or another Type) every method is a no-op that
// returns nil. A Notifier is safe for concurrent use.
type Notifier struct {
	log *slog.Logger
}

// NewNotifier returns a Notifier that logs failures to send (at Warn) to
// log.
func NewNotifier(log *slog.Logger) *Notifier {
	return &Notifier{log: log.With("component", "systemd")}
}

// Enabled reports whether systemd listens (NOTIFY_SOCKET is set).
func (n *Notifier) Enabled() bool { return os.Getenv("NOTIFY_SOCKET") != "" }

// notify sends state, keeping the environment for the next message.
func (n *Notifier) notify(state string) error {
	if _, err := daemon.SdNotify(false, state); err != nil {
		return fmt.Errorf("sd_notify %q: %w", strings.ReplaceAll(state, "\n", " "), err)
	}
	return nil
}

// Ready says the service has started, or has finished reloading.
func (n *Notifier) Ready() error { return n.notify(daemon.SdNotifyReady) }

// Reloading says the service reloads its configuration; Ready follows when
// done. It carries MONOTONIC_USEC, which Type=notify-reload requires (and
// Type=notify accepts).
func (n *Notifier) Reloading() error {
	return n.notify(daemon.SdNotifyReloading + "\n" + strings.TrimSuffix(daemon.SdNotifyMonotonicUsec(), "\n"))
}

// Stopping says the service is shutting down.
func (n *Notifier) Stopping() error { return n.notify(daemon.SdNotifyStopping) }

// Status sets the one-line status `systemctl status` shows.
func (n *Notifier) Status(text string) error {
	return n.notify("STATUS=" + strings.ReplaceAll(text, "\n", " "))
}

// Watchdog pings systemd's watchdog (WATCHDOG=1) every half of
// WATCHDOG_USEC while healthy returns true, until ctx is done. A ping
// skipped because the service is unhealthy is logged: systemd then kills
// and restarts the service once WatchdogSec passes without one. Without a
// watchdog (WATCHDOG_USEC unset, or WATCHDOG_PID another process's) it
// returns nil at once; a malformed WATCHDOG_USEC is an error.
func (n *Notifier) Watchdog(ctx context.Context, healthy func() bool) error {
	timeout, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		return fmt.Errorf("systemd watchdog: %w", err)
	}
	if timeout <= 0 {
		return nil
	}
	interval := timeout / 2
	n.log.Debug("watchdog", "timeout", timeout, "interval", interval)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if healthy != nil && !healthy() {
			n.log.Warn("unhealthy: watchdog ping skipped", "timeout", timeout)
			continue
		}
		if err := n.notify(daemon.SdNotifyWatchdog); err != nil {
			n.log.Warn("watchdog ping", "err", err)
		}
	}
}
