package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/logjail/logjail/actions"
	"github.com/logjail/logjail/control"
	"github.com/logjail/logjail/endpoint"
	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/rules"
)

// endpoints are the configured decision endpoints: each one's Bans view is
// an action (on throttles and bans) that the manager keeps current, and its
// server serves from the daemon's first moment, before the database is
// opened, answering by `fail:` until the manager has loaded the view.
type endpoints struct {
	views     []actions.Configured
	servers   []*endpoint.Server
	listeners []net.Listener
	wg        sync.WaitGroup
	stop      context.CancelFunc
	// failed receives the error of a server that stopped serving unbidden.
	failed chan error
}

func openEndpoints(cfg *rules.Config, log *slog.Logger) (*endpoints, error) {
	cs, err := endpoint.Configs(cfg)
	if err != nil { // the load checked the options: not reached
		return nil, configError(err)
	}
	e := &endpoints{stop: func() {}}
	for _, c := range cs {
		l, err := endpoint.Listen(c)
		if err != nil {
			e.close()
			if errors.Is(err, syscall.EADDRINUSE) {
				// The endpoint listens before the database is locked: the
				// usual reason is the daemon's other self.
				return nil, fmt.Errorf("endpoint %s: %w (is logjail already running?)", c.Name, err)
			}
			return nil, fmt.Errorf("endpoint %s: %w", c.Name, err)
		}
		bans := endpoint.NewBans(c.Name)
		e.views = append(e.views, actions.Configured{Backend: bans, Type: "endpoint", Kinds: []actions.Kind{actions.KindThrottle, actions.KindBan}})
		e.servers = append(e.servers, endpoint.NewServer(c, bans, nil, log.With("endpoint", c.Name)))
		e.listeners = append(e.listeners, l)
		log.Info("endpoint", "name", c.Name, "listen", l.Addr().String(), "fail_closed", c.FailClosed,
			"max_conns", c.MaxConns, "read_timeout", c.ReadTimeout, "idle_timeout", c.IdleTimeout)
	}
	e.failed = make(chan error, len(e.servers))
	return e, nil
}

// serve starts the servers; they answer until close. One that stops
// unbidden sends its error on failed: the daemon then stops, with that
// error, so that systemd restarts it.
func (e *endpoints) serve(log *slog.Logger) {
	ctx, cancel := context.WithCancel(context.Background())
	e.stop = cancel
	for i, s := range e.servers {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			if err := s.Serve(ctx, e.listeners[i]); err != nil {
				log.Error("endpoint stopped", "err", err)
				e.failed <- err
			}
		}()
	}
}

// setWindows hands the servers the detector's view, for /v1/throttle.
func (e *endpoints) setWindows(w endpoint.Windows) {
	for _, s := range e.servers {
		s.SetWindows(w)
	}
}

// health is nil while every endpoint serves; else why one does not.
func (e *endpoints) health() error {
	var errs []error
	for _, s := range e.servers {
		if err := s.Err(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// states are the endpoints for a status; nil for none.
func (e *endpoints) states() []control.EndpointState {
	if e == nil {
		return nil
	}
	var out []control.EndpointState
	for i, s := range e.servers {
		st := s.Stats()
		es := control.EndpointState{Name: e.views[i].Name(), Listen: e.listeners[i].Addr().String(), Serving: st.Serving,
			Ready: st.Ready, Conns: st.Conns, Evicted: st.Evicted, AcceptErrors: st.AcceptErrors}
		if err := s.Err(); err != nil {
			es.Error = err.Error()
		}
		out = append(out, es)
	}
	return out
}

// close stops the servers (requests in flight are answered) and closes
// the listeners.
func (e *endpoints) close() {
	e.stop()
	e.wg.Wait()
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
// (or the one named) that charges a by its address alone: for an address
// in a range with limits, the range's rule only, under its key (range:NAME
// for a group), reported even before the range has state, so that the
// answer names the range; else the rules keyed by address or prefix. Rules
// keyed by user or user agent are left out (the address does not tell
// their key): /v1/throttle answers for them from the bans. An allowed,
// denied or exempt address has no windows.
func (w windows) Windows(a netip.Addr, rule string, now time.Time) ([]endpoint.Window, error) {
	d := w.d
	d.mu.RLock()
	defer d.mu.RUnlock()
	if rule != "" && d.cfg.Rule(rule) == nil {
		return nil, fmt.Errorf("event %q: %w", rule, errNoRule)
	}
	charges, verdict := d.cfg.Classify(nil, &parser.Entry{IP: a}, nil)
	if verdict != rules.VerdictCharged {
		return nil, nil
	}
	var out []endpoint.Window
	if len(charges) == 1 && strings.HasPrefix(charges[0].Rule.Name, "range:") {
		c := charges[0]
		if rule == "" || rule == c.Rule.Name {
			q, _ := d.det.Query(c.Rule, c.Key, now)
			out = append(out, endpoint.Window{Rule: c.Rule.Name, Key: c.Key, LogOnly: c.Rule.LogOnly, KeyQuery: q})
		}
		return out, nil
	}
	for _, r := range d.cfg.Rules {
		if (rule != "" && r.Name != rule) || strings.HasPrefix(r.Name, "range:") {
			continue
		}
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
			out = append(out, endpoint.Window{Rule: r.Name, Key: key, LogOnly: r.LogOnly, KeyQuery: q})
		}
	}
	return out, nil
}

// actionTypes is the registry of the action types the daemon checks (in
// every load of the configuration) and builds (at start): every built-in
// type, the endpoint checked by its own package.
func actionTypes() *actions.Registry { return actions.Builtin(endpoint.CheckOptions) }
