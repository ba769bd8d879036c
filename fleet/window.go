package fleet

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// windowScript adds this node's units to one (rule, key)'s hash and
// returns the fleet's total minus this node's own part, as one string of
// "LIMIT:BUCKET:UNITS" records separated by commas (one bulk reply, not
// two values per bucket: parsing a reply of up to 2×64 values per key was
// most of a node's CPU in an exchange): for the buckets named (ARGV[5] = "0"), or for the
// newest keepBuckets buckets of each limit named, up to the newest bucket
// named for it (ARGV[5] = "1": the node asks for that when a key's newest
// bucket moved, so that the buckets only other nodes wrote arrive). A pair
// with units "0" only names its bucket (a follow-up read). The answer is
// read with one HMGET: its cost does not grow with the number of nodes.
// With ARGV[4] = "1" the script also deletes the fields of buckets more
// than keepBuckets behind their limit's newest (one HKEYS scan; the node
// asks for it once every pruneEvery buckets of a key).
//
// KEYS[1] the hash; ARGV[1] node, ARGV[2] the expiry (ms), ARGV[3] the
// buckets kept, ARGV[4] prune, ARGV[5] full, then field, units pairs.
const windowScript = `
local k, node, ttl, keep, prune, full = KEYS[1], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4] == '1', ARGV[5] == '1'
local newest = {}
for i = 6, #ARGV, 2 do
  local f, u = ARGV[i], ARGV[i+1]
  local l, b = string.match(f, '^(%d+):(%d+)$')
  b = tonumber(b)
  if u ~= '0' then
    redis.call('HINCRBY', k, f, u)
    redis.call('HINCRBY', k, f .. ':' .. node, u)
  end
  if newest[l] == nil or b > newest[l] then newest[l] = b end
end
if redis.call('EXISTS', k) == 0 then return '' end
if ttl > 0 and redis.call('PTTL', k) < ttl then redis.call('PEXPIRE', k, ttl) end
if prune then
  local all, stale = redis.call('HKEYS', k), {}
  for i = 1, #all do
    local l, b = string.match(all[i], '^(%d+):(%d+)')
    if l and newest[l] and tonumber(b) + keep < newest[l] then stale[#stale+1] = all[i] end
  end
  for i = 1, #stale, 1000 do
    redis.call('HDEL', k, unpack(stale, i, math.min(i + 999, #stale)))
  end
end
local out, fs, suffix = {}, {}, ':' .. node
if full then
  for l, nb in pairs(newest) do
    for b = math.max(nb - keep + 1, 0), nb do
      local f = l .. ':' .. string.format('%d', b)
      fs[#fs+1] = f
      fs[#fs+1] = f .. suffix
    end
  end
else
  for i = 6, #ARGV, 2 do
    fs[#fs+1] = ARGV[i]
    fs[#fs+1] = ARGV[i] .. suffix
  end
end
local v = redis.call('HMGET', k, unpack(fs))
for i = 1, #fs, 2 do
  if v[i] then
    out[#out+1] = fs[i] .. ':' .. string.format('%d', tonumber(v[i]) - (tonumber(v[i+1]) or 0))
  end
end
return table.concat(out, ',')
`

// keepBuckets is how many buckets of a limit, up to its newest, are read
// and kept in Redis: a window is cut into at most 60 buckets (DESIGN.md,
// "Windows and limits"), so 64 hold every bucket a window can still
// count, whatever the bucket width.
const keepBuckets = 64

// pruneEvery is how many buckets a key's newest bucket advances between
// two prunings of its hash.
const pruneEvery = 16

// followUps is how many exchanges after its last change a (rule, key) is
// still read (with no units): another node's units sent at the same time
// as this node's may reach Redis just after this node's exchange; they
// are there at the next one (each node exchanges within a sync of a
// Send).
const followUps = 1

// dkey names one bucket of one limit of one (rule, key).
type dkey struct {
	rule, key string
	limit     int
	bucket    uint64
}

// rk names one (rule, key).
type rk struct{ rule, key string }

// pend is a pending delta: units to add, and the bucket's expiry.
type pend struct {
	units uint64
	ttl   time.Duration
}

// absorbed is what this node has delivered of the others' part of one
// (rule, key)'s buckets: one map entry per (rule, key), its buckets in a
// small slice sorted by limit and bucket (a key has a few limits of at
// most keepBuckets buckets each), so that an answer costs one map lookup,
// not one per bucket. A bucket of which nothing was absorbed has no
// record: a record of 0 units would change nothing.
type absorbed struct {
	buckets []absorbedBucket
}

type absorbedBucket struct {
	limit   int
	bucket  uint64
	units   uint64
	expires time.Time
}

func cmpAbsorbed(a absorbedBucket, t limitBucket) int {
	if a.limit != t.limit {
		if a.limit < t.limit {
			return -1
		}
		return 1
	}
	if a.bucket != t.newest {
		if a.bucket < t.newest {
			return -1
		}
		return 1
	}
	return 0
}

// watch is a (rule, key) still read for followUps exchanges: its limits
// and the newest bucket written of each.
type watch struct {
	left   int
	ttl    time.Duration
	limits []limitBucket
}

type limitBucket struct {
	limit  int
	newest uint64
}

// keyState is, per (rule, key), the newest bucket at the last full read
// and at the last pruning.
type keyState struct {
	fullAt, prunedAt uint64
	expires          time.Time
}

// group is one (rule, key)'s script call in an exchange.
type group struct {
	rk     rk
	ttl    time.Duration
	args   []any
	deltas []dkey // the pending deltas it carries (restored if it fails)
	units  []pend
	prune  bool
	full   bool
	cmd    *redis.Cmd
}

func windowKey(k rk) string { return "logjail:w:{" + k.rule + "|" + k.key + "}" }

func field(limit int, bucket uint64) string {
	b := make([]byte, 0, 24)
	b = strconv.AppendInt(b, int64(limit), 10)
	b = append(b, ':')
	b = strconv.AppendUint(b, bucket, 10)
	return string(b)
}

// parseRecord reads one "LIMIT:BUCKET:UNITS" record of the script's answer.
func parseRecord(rec string) (limit int, bucket uint64, units int64, ok bool) {
	l, rest, ok1 := strings.Cut(rec, ":")
	b, u, ok2 := strings.Cut(rest, ":")
	if !ok1 || !ok2 {
		return 0, 0, 0, false
	}
	limit, err1 := strconv.Atoi(l)
	bucket, err2 := strconv.ParseUint(b, 10, 64)
	units, err3 := strconv.ParseInt(u, 10, 64)
	return limit, bucket, units, err1 == nil && err2 == nil && err3 == nil
}

// addPending coalesces ds into m; n.mu is held.
func addPending(m map[dkey]pend, ds []Delta) {
	for _, d := range ds {
		k := dkey{d.Rule, d.Key, d.Limit, d.Bucket}
		p := m[k]
		p.units += d.Units
		p.ttl = max(p.ttl, d.TTL)
		m[k] = p
	}
}

// trimPending drops the oldest buckets once more than n.maxPending
// entries wait, down to nine tenths of it (so that a node long away from
// Redis does not sort on every Send); n.mu is held.
func (n *Node) trimPending() {
	if len(n.pending) <= n.maxPending {
		return
	}
	keys := make([]dkey, 0, len(n.pending))
	for k := range n.pending {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b dkey) int {
		if a.bucket != b.bucket {
			if a.bucket < b.bucket {
				return -1
			}
			return 1
		}
		return 0
	})
	drop := len(keys) - n.maxPending*9/10
	for _, k := range keys[:drop] {
		delete(n.pending, k)
	}
	n.droppedDeltas += int64(drop)
}

// stageWindows takes the pending deltas and adds one script call per
// (rule, key) changed, or still followed up, to pipe.
func (n *Node) stageWindows(ctx context.Context, pipe redis.Pipeliner, pending map[dkey]pend) []*group {
	now := n.now()
	groups := make(map[rk]*group)
	for k, p := range pending {
		r := rk{k.rule, k.key}
		g := groups[r]
		if g == nil {
			g = &group{rk: r, args: make([]any, 5, 9)}
			groups[r] = g
		}
		g.ttl = max(g.ttl, p.ttl)
		g.args = append(g.args, field(k.limit, k.bucket), strconv.FormatUint(p.units, 10))
		g.deltas = append(g.deltas, k)
		g.units = append(g.units, p)
	}
	for r, g := range groups {
		w := n.watch[r]
		w.left = followUps
		w.ttl = max(w.ttl, g.ttl)
		var newest uint64
		for _, k := range g.deltas {
			newest = max(newest, k.bucket)
			i := slices.IndexFunc(w.limits, func(lb limitBucket) bool { return lb.limit == k.limit })
			if i < 0 {
				w.limits = append(w.limits, limitBucket{k.limit, k.bucket})
			} else {
				w.limits[i].newest = max(w.limits[i].newest, k.bucket)
			}
		}
		n.watch[r] = w
		ks, ok := n.keys[r]
		g.full = !ok || newest > ks.fullAt
		if !ok {
			ks.prunedAt = newest
		}
		g.prune = newest >= ks.prunedAt+pruneEvery
		if g.prune {
			ks.prunedAt = newest
		}
		ks.fullAt = max(ks.fullAt, newest)
		ks.expires = now.Add(g.ttl)
		n.keys[r] = ks
	}
	for r, w := range n.watch {
		if _, ok := groups[r]; ok {
			continue
		}
		g := &group{rk: r, ttl: w.ttl, args: make([]any, 5, 5+2*len(w.limits))}
		for _, lb := range w.limits {
			g.args = append(g.args, field(lb.limit, lb.newest), "0")
		}
		groups[r] = g
		if w.left--; w.left <= 0 {
			delete(n.watch, r)
		} else {
			n.watch[r] = w
		}
	}
	out := make([]*group, 0, len(groups))
	for _, g := range groups {
		g.args[0], g.args[1], g.args[2], g.args[3], g.args[4] = n.cfg.Node, g.ttl.Milliseconds(), keepBuckets, flag(g.prune), flag(g.full)
		g.cmd = pipe.EvalSha(ctx, n.sha, []string{windowKey(g.rk)}, g.args...)
		out = append(out, g)
	}
	return out
}

// absorb reads the groups' answers into Adds; a failed group's deltas go
// back to pending. It returns the first error that is not NOSCRIPT (a
// Redis that lost its scripts: they are loaded at the next exchange).
func (n *Node) absorb(groups []*group, now time.Time) ([]Add, error) {
	var adds []Add
	var firstErr error
	for _, g := range groups {
		res, err := g.cmd.Text()
		if err != nil {
			if strings.HasPrefix(err.Error(), "NOSCRIPT") {
				n.loaded = false
			} else if firstErr == nil {
				firstErr = err
			}
			n.restore(g)
			continue
		}
		var a *absorbed
		exp := now.Add(g.ttl)
		for rec := range strings.SplitSeq(res, ",") {
			limit, bucket, others, ok := parseRecord(rec)
			if !ok || others < 0 {
				continue
			}
			if a == nil {
				if a = n.absorbed[g.rk]; a == nil {
					if others == 0 {
						continue // nothing to record yet
					}
					a = &absorbed{}
					n.absorbed[g.rk] = a
				}
			}
			j, found := slices.BinarySearchFunc(a.buckets, limitBucket{limit, bucket}, cmpAbsorbed)
			if !found {
				if others == 0 {
					continue
				}
				a.buckets = slices.Insert(a.buckets, j, absorbedBucket{limit: limit, bucket: bucket})
			}
			r := &a.buckets[j]
			if u := uint64(others); u > r.units {
				adds = append(adds, Add{Rule: g.rk.rule, Key: g.rk.key, Limit: limit, Bucket: bucket, Units: u - r.units})
				r.units = u
			} else if u < r.units {
				r.units = u // Redis lost it (restart): what it says now is the start again
			}
			r.expires = exp
		}
	}
	return adds, firstErr
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// restore puts a group's deltas back into pending: its call did not
// reach Redis, or failed there.
func (n *Node) restore(g *group) {
	delete(n.keys, g.rk) // its next call reads all its buckets
	n.mu.Lock()
	for i, k := range g.deltas {
		p := n.pending[k]
		p.units += g.units[i].units
		p.ttl = max(p.ttl, g.units[i].ttl)
		n.pending[k] = p
	}
	n.mu.Unlock()
}

// forgetAbsorbed drops the absorbed records whose bucket no longer matters.
func (n *Node) forgetAbsorbed(now time.Time) {
	for k, a := range n.absorbed {
		a.buckets = slices.DeleteFunc(a.buckets, func(b absorbedBucket) bool { return now.After(b.expires) })
		if len(a.buckets) == 0 {
			delete(n.absorbed, k)
		}
	}
	for k, s := range n.keys {
		if now.After(s.expires) {
			delete(n.keys, k)
		}
	}
}
