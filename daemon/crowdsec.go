package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/logjail/logjail/actions"
	"github.com/logjail/logjail/crowdsec"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/state"
)

// crowdsecAPIs are the configured CrowdSec decisions APIs (package
// crowdsec): each one is an action the manager keeps current, and serves
// its bouncers from the decisions the database kept, from before the
// manager's first Sync.
type crowdsecAPIs struct {
	apis  []*crowdsec.API
	views []actions.Configured
	stop  context.CancelFunc
	wg    sync.WaitGroup
}

func openCrowdsec(cfg *rules.Config, db state.Store, log *slog.Logger, now func() time.Time) (*crowdsecAPIs, error) {
	c := &crowdsecAPIs{stop: func() {}}
	ctx, cancel := context.WithCancel(context.Background())
	c.stop = cancel
	for i, a := range cfg.Actions {
		if a.Type != "crowdsec" {
			continue
		}
		o := actions.OptionsOf(cfg, i)
		cc := actions.ParseCrowdsec(o)
		if err := o.Err(); err != nil { // the load checked the options: not reached
			c.close()
			return nil, configError(err)
		}
		bdb, ok := db.(state.Bouncers)
		if !ok {
			c.close()
			return nil, fmt.Errorf("crowdsec %s: the state backend keeps no bouncers", cc.Name)
		}
		api, err := crowdsec.New(cc, crowdsec.Options{DB: bdb, Now: now, Logger: log.With("component", "crowdsec", "action", cc.Name)})
		if err != nil {
			c.close()
			return nil, fmt.Errorf("crowdsec %s: %w", cc.Name, err)
		}
		l, err := crowdsec.Listen(cc)
		if err != nil {
			c.close()
			if errors.Is(err, syscall.EADDRINUSE) {
				return nil, fmt.Errorf("crowdsec %s: %w (is logjail, or CrowdSec's own API, already running there?)", cc.Name, err)
			}
			return nil, fmt.Errorf("crowdsec %s: %w", cc.Name, err)
		}
		c.apis = append(c.apis, api)
		c.views = append(c.views, actions.Configured{Backend: api, Type: "crowdsec", Kinds: cc.Kinds})
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			if err := api.Serve(ctx, l); err != nil {
				log.Error("crowdsec api stopped", "action", cc.Name, "err", err)
			}
		}()
		log.Info("crowdsec api", "name", cc.Name, "listen", l.Addr().String(), "tls", cc.TLSCert != "", "on", cc.Kinds, "throttle_as", cc.ThrottleAs)
	}
	return c, nil
}

// reread makes the APIs read their bouncers again (a key just deleted).
func (c *crowdsecAPIs) reread() {
	for _, a := range c.apis {
		a.Reread()
	}
}

// close stops the APIs (requests under way are answered).
func (c *crowdsecAPIs) close() {
	c.stop()
	c.wg.Wait()
}
