package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

func banKey(r rk) string { return "logjail:ban:{" + r.rule + "|" + r.key + "}" }

// pub is one queued publication in an exchange.
type pub struct {
	d   Decision
	rec string
	// set is a claim's SET NX GET; last is the command whose success means
	// the publication is done (a non-claim's announce).
	set  *redis.StatusCmd
	last redis.Cmder
	// cmds are every command staged for it but set: on a cluster they go
	// to different primaries, and one may fail alone.
	cmds []redis.Cmder
	// quiet: a republication, whose lost claim is delivered only if it
	// differs from what this node knows.
	quiet bool
}

// active reports whether d is kept in Redis: a ban or throttle whose
// until is zero (until lifted) or still ahead.
func active(d Decision, now time.Time) bool {
	return d.Kind != "unban" && (d.Until.IsZero() || d.Until.After(now))
}

// err is the first error of p's commands but its claim's SET.
func (p *pub) err() error {
	for _, c := range p.cmds {
		if e := c.Err(); e != nil {
			return e
		}
	}
	return nil
}

// retryable says whether a publication that failed with err is queued
// again: when Redis did not answer, or answered that the cluster is
// moving or down, not when it refused the command itself.
func retryable(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return true
	}
	for _, p := range []string{"CLUSTERDOWN", "TRYAGAIN", "LOADING", "MASTERDOWN", "MOVED", "ASK", "READONLY"} {
		if strings.HasPrefix(re.Error(), p) {
			return true
		}
	}
	return false
}

func score(d Decision) float64 {
	if d.Until.IsZero() {
		return math.Inf(1)
	}
	return float64(d.Until.UnixMilli())
}

// store stages d's record, its index entry and its announce.
func (n *Node) store(ctx context.Context, pipe redis.Pipeliner, p *pub, overwrite bool) {
	r := rk{p.d.Rule, p.d.Key}
	if overwrite {
		p.cmds = append(p.cmds, pipe.SetArgs(ctx, banKey(r), p.rec, redis.SetArgs{ExpireAt: p.d.Until}))
	}
	p.cmds = append(p.cmds, pipe.ZAdd(ctx, keyBans, redis.Z{Score: score(p.d), Member: banKey(r)}))
	p.last = n.announce(ctx, pipe, p.rec)
	p.cmds = append(p.cmds, p.last)
}

func (n *Node) announce(ctx context.Context, pipe redis.Pipeliner, rec string) redis.Cmder {
	return pipe.XAdd(ctx, &redis.XAddArgs{Stream: keyEvents, MaxLen: streamMaxLen, Approx: true,
		Values: []any{"by", n.cfg.Node, "d", rec}})
}

// stagePublish adds the queued publications to pipe: an unban deletes
// the record and its index entry; a ban or throttle with Claim is SET NX
// GET (resolved after the round trip), without Claim it overwrites; each
// is announced on the stream. A decision whose until is past is only
// announced.
func (n *Node) stagePublish(ctx context.Context, pipe redis.Pipeliner, queue []Decision) []*pub {
	now := n.now()
	pubs := make([]*pub, 0, len(queue))
	for _, d := range queue {
		rec, err := json.Marshal(d)
		if err != nil {
			continue // a Decision always marshals
		}
		p := &pub{d: d, rec: string(rec)}
		r := rk{d.Rule, d.Key}
		switch {
		case d.Kind == "unban":
			p.cmds = append(p.cmds, pipe.Del(ctx, banKey(r)), pipe.ZRem(ctx, keyBans, banKey(r)))
			p.last = n.announce(ctx, pipe, p.rec)
			p.cmds = append(p.cmds, p.last)
		case !active(d, now):
			p.last = n.announce(ctx, pipe, p.rec)
			p.cmds = append(p.cmds, p.last)
		case d.Claim:
			p.set = pipe.SetArgs(ctx, banKey(r), p.rec, redis.SetArgs{Mode: "NX", Get: true, ExpireAt: d.Until})
		default:
			n.store(ctx, pipe, p, true)
		}
		pubs = append(pubs, p)
	}
	return pubs
}

// resolvePublish settles the claims after the first round trip (a claim
// won, or over a record of this node's or over a throttle when it is a
// ban, is indexed and announced in a second one; a claim lost returns the
// winner's record) and records what this node now knows to be active.
func (n *Node) resolvePublish(ctx context.Context, pubs []*pub) (lost []Decision, err error) {
	var second []*pub
	var retry []Decision // failed for want of Redis: queued again
	var reindex []*redis.IntCmd
	var errs []error
	cctx, cancel := context.WithTimeout(ctx, n.timeout+time.Duration(3*len(pubs))*perCommand)
	defer cancel()
	pipe := n.rdb.Pipeline()
	for _, p := range pubs {
		if p.set == nil {
			if e := p.err(); e != nil {
				errs = append(errs, fmt.Errorf("fleet: publish %s %s %s: %w", p.d.Kind, p.d.Rule, p.d.Key, e))
				if retryable(e) && !p.quiet {
					retry = append(retry, p.d)
				}
				continue
			}
			n.mu.Lock()
			if active(p.d, n.now()) || p.d.Kind == "unban" {
				n.learnLocked(p.d)
			}
			n.mu.Unlock()
			continue
		}
		old, e := p.set.Result()
		switch {
		case errors.Is(e, redis.Nil):
			n.store(cctx, pipe, p, false)
			second = append(second, p)
		case e != nil:
			errs = append(errs, fmt.Errorf("fleet: claim %s %s: %w", p.d.Rule, p.d.Key, e))
			if retryable(e) && !p.quiet {
				retry = append(retry, p.d)
			}
		default:
			var w Decision
			if json.Unmarshal([]byte(old), &w) != nil || w.Node == p.d.Node || (w.Kind == "throttle" && p.d.Kind == "ban") {
				n.store(cctx, pipe, p, true)
				second = append(second, p)
				continue
			}
			if p.quiet {
				// A republication after a loss of data: on a cluster the
				// winner's record may have outlived the index entry (on
				// another primary); index it again, else the next
				// reconcile would take the ban for gone.
				reindex = append(reindex, pipe.ZAdd(cctx, keyBans, redis.Z{Score: score(w), Member: banKey(rk{w.Rule, w.Key})}))
			}
			w.Lost = true
			n.mu.Lock()
			isNew := n.learnLocked(w)
			n.mu.Unlock()
			if !p.quiet || isNew {
				lost = append(lost, w)
			}
		}
	}
	if len(second) > 0 || len(reindex) > 0 {
		if err := execPipe(cctx, pipe); err != nil {
			errs = append(errs, err)
			for _, p := range second {
				if p.last.Err() == nil {
					p.last.SetErr(err)
				}
			}
		}
		for _, p := range second {
			if e := p.err(); e != nil {
				retry = append(retry, p.d)
				errs = append(errs, fmt.Errorf("fleet: claim %s %s: %w", p.d.Rule, p.d.Key, e))
				continue
			}
			n.mu.Lock()
			n.learnLocked(p.d)
			n.mu.Unlock()
		}
		for _, z := range reindex {
			if e := z.Err(); e != nil {
				errs = append(errs, fmt.Errorf("fleet: republish: %s: %w", keyBans, e))
			}
		}
	}
	// A claim set but not indexed is set again (its record is this
	// node's now: it overwrites) at the next exchange.
	n.requeue(retry)
	return lost, errors.Join(errs...)
}

// learnLocked records d as what this node knows of its (rule, key) and
// reports whether it is news (another kind, until or node than known; an
// unban always is). n.mu is held.
func (n *Node) learnLocked(d Decision) bool {
	r := rk{d.Rule, d.Key}
	if d.Kind == "unban" {
		delete(n.known, r)
		return true
	}
	d.Lost = false
	k, ok := n.known[r]
	n.seq++
	n.known[r] = knownDecision{d: d, seq: n.seq}
	return !ok || k.d.Kind != d.Kind || !k.d.Until.Equal(d.Until) || k.d.Node != d.Node
}

func ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// reconcile compares what this node knows with Redis: it delivers the
// active records it has not delivered (or with another until), an unban
// for a ban it knows that is gone from Redis, and, when the epoch changed
// (Redis lost its data), republishes every active ban it knows instead.
func (n *Node) reconcile(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 4*n.timeout)
	defer cancel()
	now := n.now()
	n.mu.Lock()
	seq := n.seq
	n.mu.Unlock()
	if err := n.readEpochKeys(ctx); err != nil {
		return fmt.Errorf("fleet: reconcile: %w", err)
	}
	mine := newEpoch()
	pipe := n.rdb.Pipeline()
	eps := make([]*redis.StatusCmd, len(n.epochKeys))
	for i, k := range n.epochKeys {
		eps[i] = pipe.SetArgs(cctx, k, mine, redis.SetArgs{Mode: "NX", Get: true})
	}
	pipe.ZRemRangeByScore(cctx, keyBans, "-inf", "("+ms(now))
	members := pipe.ZRangeByScore(cctx, keyBans, &redis.ZRangeBy{Min: ms(now), Max: "+inf"})
	top := pipe.XRevRangeN(cctx, keyEvents, "+", "-", 1)
	if err := execPipe(cctx, pipe); err != nil {
		return fmt.Errorf("fleet: reconcile: %w", err)
	}
	epochs := make(map[string]string, len(eps))
	lostData, streamLost := false, false
	streamEpoch := keyEpoch
	if n.cluster {
		streamEpoch = n.evEpoch
	}
	for i, k := range n.epochKeys {
		epoch, err := eps[i].Result()
		if errors.Is(err, redis.Nil) {
			epoch, err = mine, nil
		}
		if err != nil {
			return fmt.Errorf("fleet: reconcile: %s: %w", k, err)
		}
		epochs[k] = epoch
		if n.epochChanged(k, epoch) {
			lostData = true
			streamLost = streamLost || k == streamEpoch
		}
	}
	keys, err := members.Result()
	if err != nil {
		return fmt.Errorf("fleet: reconcile: %s: %w", keyBans, err)
	}
	msgs, err := top.Result()
	if err != nil {
		return fmt.Errorf("fleet: reconcile: %s: %w", keyEvents, err)
	}
	streamTop := "0-0"
	if len(msgs) > 0 {
		streamTop = msgs[0].ID
	}
	if streamLost {
		// The stream is Redis's new one: read it from its start, for
		// what other nodes published since Redis came back before this
		// reconcile (their queued bans). This node republishes instead
		// of reading the records, so from the top it would miss them
		// until the next reconcile.
		streamTop = "0-0"
	}

	var ds []Decision
	if lostData {
		n.loaded = false
		if err := n.republish(ctx, now); err != nil {
			return err // the epoch stays the old one: the next reconcile republishes again
		}
	} else {
		gets := make([]*redis.StringCmd, len(keys))
		if len(keys) > 0 {
			gctx, cancel := context.WithTimeout(ctx, n.timeout+time.Duration(len(keys))*perCommand)
			defer cancel()
			pipe := n.rdb.Pipeline()
			for i, k := range keys {
				gets[i] = pipe.Get(gctx, k)
			}
			if err := execPipe(gctx, pipe); err != nil {
				return fmt.Errorf("fleet: reconcile: %w", err)
			}
		}
		inRedis := make(map[rk]bool, len(keys))
		n.mu.Lock()
		for i, g := range gets {
			raw, err := g.Result()
			if errors.Is(err, redis.Nil) {
				continue // expired since the index was read
			}
			if err != nil {
				n.mu.Unlock()
				return fmt.Errorf("fleet: reconcile: %s: %w", keys[i], err)
			}
			var d Decision
			if err := json.Unmarshal([]byte(raw), &d); err != nil {
				if n.cfg.Logf != nil {
					n.cfg.Logf("fleet: reconcile: %s: %v", keys[i], err)
				}
				continue
			}
			inRedis[rk{d.Rule, d.Key}] = true
			if active(d, now) && n.learnLocked(d) {
				ds = append(ds, d)
			}
		}
		for r, k := range n.known {
			if inRedis[r] || k.seq > seq {
				continue // in Redis, or learnt after Redis was read
			}
			delete(n.known, r)
			if active(k.d, now) {
				ds = append(ds, Decision{Kind: "unban", Rule: r.rule, Key: r.key, Node: k.d.Node, Time: now,
					Reason: "fleet: gone from Redis", Origin: "fleet"})
			}
		}
		n.mu.Unlock()
	}
	n.epochs = epochs
	n.mu.Lock()
	if n.lastID == "" || streamLost {
		n.lastID = streamTop
		n.idGen++
		select {
		case n.kick <- struct{}{}:
		default:
		}
	}
	n.mu.Unlock()
	n.reconciled, n.lastReconcile = true, now
	if len(ds) > 0 {
		n.deliver(ctx, Event{Decisions: ds})
	}
	return nil
}

// republish claims again, keeping each record's own node, every active
// ban and throttle this node knows, after Redis lost its data.
func (n *Node) republish(ctx context.Context, now time.Time) error {
	n.mu.Lock()
	var ds []Decision
	for _, k := range n.known {
		if active(k.d, now) {
			d := k.d
			d.Claim = true
			ds = append(ds, d)
		}
	}
	n.mu.Unlock()
	if len(ds) == 0 {
		return nil
	}
	if n.cfg.Logf != nil {
		n.cfg.Logf("fleet: Redis lost its data (new epoch): republishing %d active bans", len(ds))
	}
	cctx, cancel := context.WithTimeout(ctx, n.timeout+time.Duration(3*len(ds))*perCommand)
	defer cancel()
	pipe := n.rdb.Pipeline()
	pubs := n.stagePublish(cctx, pipe, ds)
	for _, p := range pubs {
		p.quiet = true
	}
	if err := execPipe(cctx, pipe); err != nil {
		return fmt.Errorf("fleet: republish: %w", err)
	}
	for _, p := range pubs {
		if p.set != nil && p.set.Err() != nil && !errors.Is(p.set.Err(), redis.Nil) {
			return fmt.Errorf("fleet: republish: %w", p.set.Err())
		}
	}
	lost, err := n.resolvePublish(ctx, pubs)
	if len(lost) > 0 {
		n.deliver(ctx, Event{Decisions: lost})
	}
	return err
}

// readStream reads logjail:events on its own connection (XREAD BLOCK 1 s)
// from the position the first reconcile set, and delivers other nodes'
// decisions that are news.
func (n *Node) readStream(ctx context.Context) {
	for {
		n.mu.Lock()
		id, gen := n.lastID, n.idGen
		n.mu.Unlock()
		if id == "" {
			select {
			case <-ctx.Done():
				return
			case <-n.kick:
			}
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, time.Second+n.timeout)
		res, err := n.srd.XRead(rctx, &redis.XReadArgs{Streams: []string{keyEvents, id}, Count: 1000, Block: time.Second}).Result()
		cancel()
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			// Redis is away: the exchange loop notices and says so; retry
			// after a sync, or as soon as a reconcile moved the position.
			t := time.NewTimer(n.cfg.Sync)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-n.kick:
			case <-t.C:
			}
			t.Stop()
			continue
		}
		now := n.now()
		var ds []Decision
		n.mu.Lock()
		if gen != n.idGen {
			n.mu.Unlock()
			continue
		}
		for _, s := range res {
			for _, m := range s.Messages {
				n.lastID = m.ID
				if by, _ := m.Values["by"].(string); by == n.cfg.Node {
					continue
				}
				raw, _ := m.Values["d"].(string)
				var d Decision
				if err := json.Unmarshal([]byte(raw), &d); err != nil {
					if n.cfg.Logf != nil {
						n.cfg.Logf("fleet: %s %s: %v", keyEvents, m.ID, err)
					}
					continue
				}
				if d.Kind != "unban" && !active(d, now) {
					continue
				}
				if n.learnLocked(d) {
					ds = append(ds, d)
				}
			}
		}
		n.mu.Unlock()
		if len(ds) > 0 {
			n.deliver(ctx, Event{Decisions: ds})
		}
	}
}
