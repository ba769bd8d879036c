package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/logjail/logjail/actions"
	"github.com/logjail/logjail/endpoint"
	"github.com/logjail/logjail/rules"
)

// endpoints are the configured decision endpoints: each one's Bans view is
// an action (on throttles and bans) that the manager keeps current, and its
// server listens from the start, answering by `fail:` until the view is
// loaded.
type endpoints struct {
	views     []actions.Configured
	servers   []*endpoint.Server
	listeners []net.Listener
}

func openEndpoints(cfg *rules.Config, log *slog.Logger) (*endpoints, error) {
	cs, err := endpoint.Configs(cfg)
	if err != nil {
		return nil, fmt.Errorf("actions: %w", err)
	}
	e := &endpoints{}
	for _, c := range cs {
		l, err := endpoint.Listen(c)
		if err != nil {
			e.close()
			return nil, fmt.Errorf("endpoint %s: %w", c.Name, err)
		}
		bans := endpoint.NewBans(c.Name)
		e.views = append(e.views, actions.Configured{Backend: bans, Type: "endpoint", Kinds: []actions.Kind{actions.KindThrottle, actions.KindBan}})
		e.servers = append(e.servers, endpoint.NewServer(c, bans, nil, log.With("endpoint", c.Name)))
		e.listeners = append(e.listeners, l)
		log.Info("endpoint", "name", c.Name, "listen", l.Addr().String(), "fail_closed", c.FailClosed)
	}
	return e, nil
}

// serve runs the servers until ctx ends; windows answers /v1/throttle.
func (e *endpoints) serve(ctx context.Context, windows endpoint.Windows, wg *sync.WaitGroup, log *slog.Logger) {
	for i, s := range e.servers {
		s.SetWindows(windows)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Serve(ctx, e.listeners[i]); err != nil {
				log.Error("endpoint stopped", "err", err)
			}
		}()
	}
}

func (e *endpoints) close() {
	for _, l := range e.listeners {
		l.Close()
	}
}

// windows is the endpoint's read-only view of the detector: it reads under
// the decider's lock, which the decider holds while it changes the
// detector.
type windows struct{ d *decider }

var errNoRule = errors.New("no such rule")

// Windows returns the windows of the key a is charged to under each rule
// keyed by address or prefix (or the one named).
func (w windows) Windows(a netip.Addr, rule string, now time.Time) ([]endpoint.Window, error) {
	d := w.d
	d.mu.RLock()
	defer d.mu.RUnlock()
	var out []endpoint.Window
	found := false
	for _, r := range d.cfg.Rules {
		if rule != "" && r.Name != rule {
			continue
		}
		found = true
		var key string
		switch r.Key {
		case rules.KeyIP:
			key = d.cfg.IPKey(a)
		case rules.KeyPrefix:
			key = d.cfg.PrefixKey(a)
		default:
			continue // keyed by what the address alone does not tell
		}
		if q, ok := d.det.Query(r, key, now); ok {
			out = append(out, endpoint.Window{Rule: r.Name, Key: key, KeyQuery: q})
		}
	}
	if !found {
		return nil, fmt.Errorf("event %q: %w", rule, errNoRule)
	}
	return out, nil
}
