package daemon

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/logjail/logjail/control"
	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/fleet"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/state"
)

// The daemon's side of a fleet (the configuration's `fleet:`; package
// fleet is the Redis side, package detector the windows):
//
//   - Every `sync` the decider drains the detector's deltas of `scope:
//     fleet` rules (Detector.FleetDeltas) and hands them to the node,
//     which never blocks: the exchange with Redis runs on the node's own
//     goroutine, so ingest never waits on the network.
//   - What the node brings back (fleet.Event) is applied by the decider
//     like a batch: the other nodes' units are absorbed into the windows
//     (a limit the fleet's sum crosses is decided here, as a local charge
//     would be), and the other nodes' bans, throttles and unbans are
//     adopted by the detector and handed to the store, the decision log
//     and the actions, with the node that decided them.
//   - Every throttle and ban this node decides (a rule's, the deny list's,
//     an operator's) and every unban of an operator or of the deny list
//     (an entry that left it) is published; a rule's ban is claimed
//     (the first claim in Redis wins; a node that loses adopts
//     the winner's record, so the fleet holds one ban with one node). The
//     detector's own unban at a ban's end is not published: every node
//     holds the same until and ends it itself. Decisions of a log_only rule
//     or of an open breaker are not published (no node acts on them).
//   - A decision for a rule this node's configuration lacks is logged and
//     skipped: the nodes of a fleet are meant to share one configuration.
//     A static ban (origin deny or range: another node's deny list or
//     banned range) is no rule's: it is adopted as an operator's is, by
//     the store and the actions, until lifted, and lifted by that node's
//     unban when the entry leaves its list. The last word wins, as for an
//     operator's: a node whose own list still holds an address another
//     node removed lets it through until its own list changes again.
//   - The `fleet:` section is read at start: a reload that changes it
//     keeps the running node and says it takes a restart, as for sources.

// fleetLink is the decider's handle on the node.
type fleetLink struct {
	node   *fleet.Node
	name   string
	redis  string // the URL without its password, for the status
	ticker *time.Ticker
	deltas []detector.FleetDelta
	send   []fleet.Delta
	// unknown counts decisions of rules this configuration lacks.
	unknown int64
	stopped bool // the node's events are closed
	// won are the other nodes' records of rule bans this node adopted,
	// by rule and key: after a lost claim, the stream and the claim's
	// answer both bring the winner's record, which is recorded once.
	won   map[[2]string]fleetWon
	ticks int
}

// openFleet opens the fleet's node when the configuration has one; its
// loop starts with the sources (serve).
func (d *decider) openFleet() error {
	f := d.cfg.Fleet
	if f == nil {
		return nil
	}
	log := d.log.With("component", "fleet")
	n, err := fleet.Open(context.Background(), fleet.Config{
		URL: f.Redis, Cluster: f.Cluster, PasswordFile: f.PasswordFile, CAFile: f.CAFile, Node: f.Node, Sync: f.Sync,
		Logf: func(format string, args ...any) { log.Info(fmt.Sprintf(format, args...)) },
	})
	if err != nil {
		return configError(fmt.Errorf("fleet: %w", err))
	}
	d.undo(func() { n.Close() })
	tick := time.NewTicker(f.Sync)
	d.undo(tick.Stop)
	d.fl = &fleetLink{node: n, name: f.Node, redis: redactURL(f.Redis), ticker: tick}
	if d.o.Hooks.Fleet != nil {
		d.o.Hooks.Fleet(d.fleetHealth)
	}
	d.log.Info("fleet", "node", f.Node, "redis", d.fl.redis, "sync", f.Sync)
	return nil
}

// redactURL is u without its password.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable)"
	}
	return p.Redacted()
}

// fleetHealth is "" while the node exchanges with Redis, else what
// /healthz adds to its "ok": the node works alone, which is no failure.
func (d *decider) fleetHealth() string {
	st := d.fl.node.Status()
	if !st.Degraded {
		return ""
	}
	return "fleet: degraded: " + st.Err
}

// fleetRules makes the configuration's rules known to the detector by
// name in a fleet, so that the other nodes' units of a rule this node has
// not charged yet are absorbed (Detector.Absorb finds rules by name).
func (d *decider) fleetRules() {
	if d.cfg.Fleet != nil {
		d.det.Rules(d.cfg.Rules)
	}
}

// fleetTick is the channel of the sync ticks; nil (never ready) outside a
// fleet.
func (d *decider) fleetTick() <-chan time.Time {
	if d.fl == nil {
		return nil
	}
	return d.fl.ticker.C
}

// fleetEvents is the node's events; nil outside a fleet and once the
// node stopped (its Run closes them).
func (d *decider) fleetEvents() <-chan fleet.Event {
	if d.fl == nil || d.fl.stopped {
		return nil
	}
	return d.fl.node.Events()
}

// fleetWon is a winner's record as adopted.
type fleetWon struct {
	node  string
	until time.Time
}

// fleetSend hands the node the detector's deltas since the last sync,
// and sets the logjail_fleet_* metrics (every sync, traffic or not: a
// quiet node's logjail_fleet_degraded follows Redis too).
func (d *decider) fleetSend() {
	fl := d.fl
	if m := d.o.Metrics; m != nil {
		st := fl.node.Status()
		m.SetFleet(st.Degraded, st.Lag, st.Dropped, st.Queued)
	}
	if fl.ticks++; fl.ticks%32 == 0 { // about every 6 s at 200ms: forget ended records
		now := d.now()
		for k, w := range fl.won {
			if !w.until.After(now) {
				delete(fl.won, k)
			}
		}
	}
	fl.deltas = d.det.FleetDeltas(fl.deltas[:0])
	if len(fl.deltas) == 0 {
		return
	}
	fl.send = fl.send[:0]
	for _, x := range fl.deltas {
		fl.send = append(fl.send, fleet.Delta(x)) // the same fields: fleet imports nothing of ours
	}
	fl.node.Send(fl.send)
	// Kept for the next sync, but not the key strings they point to: the
	// collector would mark every one of them until then.
	clear(fl.deltas)
	clear(fl.send)
}

// fleetApply applies what the node brought: the other nodes' units, then
// their decisions.
func (d *decider) fleetApply(ev fleet.Event) {
	now := d.now()
	decided := false
	t := d.last
	if t.IsZero() {
		t = now
	}
	for _, a := range ev.Adds {
		d.out = d.det.Absorb(t, detector.FleetAdd(a), d.out[:0])
		if len(d.out) > 0 {
			decided = d.local(sourceFleet, now) || decided
		}
	}
	for i := range ev.Decisions {
		decided = d.adopt(&ev.Decisions[i], t, now) || decided
	}
	if decided {
		d.dirty = true
		d.decided()
	}
}

// staticRule is the rule name of static bans (detector.Static).
const staticRule = "deny"

// sourceFleet is the decision log's source of what the fleet brought.
const sourceFleet = "fleet"

// local hands on the decisions in d.out that this node made (a charge, an
// absorb): live, recorded, logged, acted on and published. It reports
// whether there were any.
func (d *decider) local(src string, now time.Time) bool {
	for j := range d.out {
		live(&d.out[j], now)
	}
	d.stamp(d.out)
	// The detector's own unban of a ban the store has already ended on
	// the wall clock is not recorded, nor acted on, twice.
	d.out = d.w.Keep(d.out)
	if len(d.out) == 0 {
		return false
	}
	if m := d.o.Metrics; m != nil {
		for j := range d.out {
			m.Decisions.WithLabelValues(d.out[j].Rule, string(d.out[j].Kind)).Inc()
		}
	}
	d.dl.Decisions(src, d.out)
	d.acts.Decisions(d.out)
	d.publish(d.out)
	return true
}

// stamp names this node on its own decisions (in a fleet): the store and
// `list` show which node decided each ban.
func (d *decider) stamp(ds []detector.Decision) {
	if d.fl == nil {
		return
	}
	for j := range ds {
		if ds[j].Node == "" {
			ds[j].Node = d.fl.name
		}
	}
}

// publish hands the fleet this node's decisions that every node enforces.
func (d *decider) publish(ds []detector.Decision) {
	if d.fl == nil {
		return
	}
	for j := range ds {
		x := &ds[j]
		if x.LogOnly || x.Node != d.fl.name {
			continue
		}
		var kind string
		switch x.Kind {
		case detector.Ban:
			kind = "ban"
		case detector.Throttle:
			kind = "throttle"
		case detector.Unban:
			if x.Origin != state.OriginOperator && x.Origin != state.OriginDeny && x.Origin != state.OriginRange {
				continue // the end of a ban every node holds
			}
			kind = "unban"
		default:
			continue
		}
		d.fl.node.Publish(fleet.Decision{
			Kind: kind, Rule: x.Rule, Key: x.Key, Node: d.fl.name, Time: x.Time, Until: x.Until, Delay: x.Delay,
			Reason: x.Reason, Origin: x.Origin, Addresses: x.Addresses,
			Claim: x.Kind == detector.Ban && x.Origin == state.OriginDetector,
		})
	}
}

// adopt applies a decision another node made (or the winner's record of a
// ban this node lost the claim of) at log time t and reports whether it
// changed anything here.
func (d *decider) adopt(f *fleet.Decision, t, now time.Time) bool {
	var r *rules.Rule
	// An operator's and a static ban (the deny list's, a banned range's;
	// its unban by reconcile has origin "fleet") are no rule's: the store
	// and the actions hold them, as here.
	if f.Rule != control.OperatorRule && f.Rule != staticRule {
		if r = d.cfg.Rule(f.Rule); r == nil {
			d.fl.unknown++
			d.log.Warn("fleet: a decision of a rule not in this configuration: skipped", "rule", f.Rule, "key", f.Key, "node", f.Node)
			return false
		}
	}
	d.out = d.out[:0]
	switch f.Kind {
	case "ban", "throttle":
		if !f.Until.IsZero() && !f.Until.After(now) { // zero: until lifted
			return false
		}
		dec := detector.Decision{Rule: f.Rule, Key: f.Key, Kind: detector.Ban, Time: f.Time, Until: f.Until,
			Delay: f.Delay, Reason: f.Reason, Origin: f.Origin, Addresses: f.Addresses}
		if f.Kind == "throttle" {
			dec.Kind = detector.Throttle
		}
		if r != nil {
			k, w := [2]string{f.Rule, f.Key}, fleetWon{f.Node, f.Until}
			got, ok := d.det.Adopt(r, dec)
			if !ok && f.Lost {
				// This node's own ban of the key lasts as long: it stays,
				// but the fleet's record (the winner's) is what the store
				// and `list` show, as on every other node — once.
				if d.fl.won[k] == w {
					return false
				}
				got, ok = dec, true
			}
			if !ok {
				return false
			}
			if d.fl.won == nil {
				d.fl.won = map[[2]string]fleetWon{}
			}
			d.fl.won[k] = w
			if len(got.Addresses) == 0 {
				got.Addresses = f.Addresses
			}
			dec = got
		}
		dec.Node = f.Node
		d.out = append(d.out, dec)
	case "unban":
		if r != nil {
			d.out = d.det.Lift(t, r, f.Key, d.out)
		}
		if len(d.out) == 0 {
			// Not the detector's (an operator's ban): its end is recorded
			// all the same, as an operator's unban here would.
			d.out = append(d.out, detector.Decision{Rule: f.Rule, Key: f.Key, Kind: detector.Unban, Addresses: f.Addresses})
		}
		for j := range d.out {
			d.out[j].Time, d.out[j].Origin, d.out[j].Reason = now, f.Origin, f.Reason
			d.out[j].Node = f.Node
		}
	default:
		return false
	}
	d.w.Decisions(d.out)
	d.dl.Decisions(sourceFleet, d.out)
	d.acts.Decisions(d.out)
	return true
}

// fleetStatus is the fleet's part of a status: this node's link and the
// nodes Redis knows (read outside the decider: it waits on the network).
func (d *decider) fleetStatus() *control.FleetStatus {
	if d.fl == nil {
		return nil
	}
	st := d.fl.node.Status()
	fs := &control.FleetStatus{Node: d.fl.name, Redis: d.fl.redis, Degraded: st.Degraded, Error: st.Err,
		LagSeconds: st.Lag.Seconds(), Queued: st.Queued, Dropped: st.Dropped, Pending: st.Pending, UnknownRules: d.fl.unknown,
		LastSync: optTime(st.LastSync)}
	return fs
}

// fleetNodes adds the nodes Redis knows to fs.
func fleetNodes(ctx context.Context, n *fleet.Node, fs *control.FleetStatus) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	nodes, err := n.Nodes(ctx)
	if err != nil {
		fs.NodesError = err.Error()
		return
	}
	for _, x := range nodes {
		fs.Nodes = append(fs.Nodes, control.FleetNode{Node: x.Node, LagSeconds: x.Lag.Seconds(), Degraded: x.Degraded,
			LastSync: optTime(x.LastSync)})
	}
}
