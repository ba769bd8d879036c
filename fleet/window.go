package fleet

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// windowScript adds this node's units to the windows of up to batchKeys
// (rule, key)s, one hash each (KEYS), and returns, per key in KEYS' order,
// the fleet's total minus this node's own part, as one string: a key's
// "LIMIT:BUCKET:UNITS" records separated by commas, the keys' parts by
// semicolons (one bulk reply for the whole batch: parsing a reply of up
// to 2×64 values per key was most of a node's CPU in an exchange, and one
// call per key paid the call's own cost, on both sides, per key). A key's
// answer holds the buckets named for it (full "0"), or the newest
// keepBuckets buckets of each limit named, up to the newest bucket named
// for it (full "1": the node asks for that when a key's newest bucket
// moved, so that the buckets only other nodes wrote arrive). A pair with
// units "0" only names its bucket (a follow-up read). The answer is read
// with one HMGET of the fields asked, or one HGETALL when the hash holds
// no more fields than that (a key few nodes write): its cost does not
// grow with the number of nodes. With prune "1" the script also deletes
// the fields of buckets more than keepBuckets behind their limit's newest
// (one HKEYS scan; the node asks for it once every pruneEvery buckets of
// a key).
//
// ARGV[1] node, ARGV[2] the buckets kept, ARGV[3] the keys' specs in
// KEYS' order, separated by semicolons, each "TTL,PRUNE,FULL" (TTL: the
// expiry in ms) then ",LIMIT:BUCKET=UNITS" per bucket.
const windowScript = `
local node, keep = ARGV[1], tonumber(ARGV[2])
local suffix = ':' .. node
local function one(k, spec)
  local ttl, prune, full, rest = string.match(spec, '^(%d+),(%d),(%d)(.*)$')
  ttl = tonumber(ttl)
  local newest, asked = {}, {}
  for l, b, u in string.gmatch(rest, '(%d+):(%d+)=(%d+)') do
    local f = l .. ':' .. b
    if u ~= '0' then
      redis.call('HINCRBY', k, f, u)
      redis.call('HINCRBY', k, f .. suffix, u)
    end
    asked[#asked+1] = f
    b = tonumber(b)
    if newest[l] == nil or b > newest[l] then newest[l] = b end
  end
  local n = redis.call('HLEN', k)
  if n == 0 then return '' end
  if ttl > 0 and redis.call('PTTL', k) < ttl then redis.call('PEXPIRE', k, ttl) end
  if prune == '1' then
    local all, stale = redis.call('HKEYS', k), {}
    for i = 1, #all do
      local l, b = string.match(all[i], '^(%d+):(%d+)')
      if l and newest[l] and tonumber(b) + keep < newest[l] then stale[#stale+1] = all[i] end
    end
    for i = 1, #stale, 1000 do
      redis.call('HDEL', k, unpack(stale, i, math.min(i + 999, #stale)))
    end
  end
  local out, asks = {}, 0
  if full == '1' then
    for l, nb in pairs(newest) do asks = asks + 2 * (nb - math.max(nb - keep + 1, 0) + 1) end
  else
    asks = 2 * #asked
  end
  if asks >= n then
    local all, tot, own = redis.call('HGETALL', k), {}, {}
    for i = 1, #all, 2 do
      local l, b, who = string.match(all[i], '^(%d+):(%d+)(.*)$')
      if l then
        if who == '' then tot[#tot+1] = l; tot[#tot+1] = b; tot[#tot+1] = all[i+1]
        elseif who == suffix then own[l .. ':' .. b] = all[i+1] end
      end
    end
    local want
    if full ~= '1' then
      want = {}
      for i = 1, #asked do want[asked[i]] = true end
    end
    for i = 1, #tot, 3 do
      local l, b = tot[i], tot[i+1]
      local f = l .. ':' .. b
      local nb = newest[l]
      if (want and want[f]) or (not want and nb and tonumber(b) <= nb and tonumber(b) > nb - keep) then
        out[#out+1] = f .. ':' .. string.format('%d', tonumber(tot[i+2]) - (tonumber(own[f]) or 0))
      end
    end
    return table.concat(out, ',')
  end
  local fs = {}
  if full == '1' then
    for l, nb in pairs(newest) do
      for b = math.max(nb - keep + 1, 0), nb do
        local f = l .. ':' .. string.format('%d', b)
        fs[#fs+1] = f
        fs[#fs+1] = f .. suffix
      end
    end
  else
    for i = 1, #asked do
      fs[#fs+1] = asked[i]
      fs[#fs+1] = asked[i] .. suffix
    end
  end
  local v = redis.call('HMGET', k, unpack(fs))
  for i = 1, #fs, 2 do
    if v[i] then
      out[#out+1] = fs[i] .. ':' .. string.format('%d', tonumber(v[i]) - (tonumber(v[i+1]) or 0))
    end
  end
  return table.concat(out, ',')
end
local res, i = {}, 0
for spec in string.gmatch(ARGV[3], '[^;]+') do
  i = i + 1
  res[i] = one(KEYS[i], spec)
end
return table.concat(res, ';')
`

// batchKeys is the most (rule, key)s one script call carries: the call's
// own cost (the client's command, RESP framing, Redis's script set-up) is
// paid per batch, not per key, and one call still holds Redis for only a
// few milliseconds.
const batchKeys = 256

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

// keyInfo is what the node keeps per (rule, key), in one map entry so
// that a key costs one lookup an exchange:
//
//   - what it has delivered of the others' part of the key's buckets: a
//     small slice sorted by limit and bucket (a key has a few limits of
//     at most keepBuckets buckets each). A bucket of which nothing was
//     absorbed has no record: a record of 0 units would change nothing.
//   - while known (state): the newest bucket at the last full read and at
//     the last pruning, until expires.
//   - while followed up (left > 0): its limits and the newest bucket
//     written of each, read for followUps exchanges after its last change.
//   - its hash's Cluster slot.
//
// The entry goes when none of the three is left.
type keyInfo struct {
	rk       rk
	slot     uint16
	state    bool
	fullAt   uint64
	prunedAt uint64
	expires  time.Time
	left     int
	wttl     time.Duration
	limits   []limitBucket
	buckets  []absorbedBucket
	exch     uint64 // the exchange that last made a group of it
	gi       int32  // its group in that exchange
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

type limitBucket struct {
	limit  int
	newest uint64
}

// pent is one pending delta taken by an exchange: its (rule, key) is its
// group's. No pointer in it: the collector does not scan the exchange's
// arrays of them.
type pent struct {
	k struct {
		limit  int
		bucket uint64
	}
	p pend
}

// group is one (rule, key)'s part of a script call in an exchange.
type group struct {
	ki          *keyInfo
	ttl         time.Duration
	lo, hi      int32 // its deltas: the exchange's ents[lo:hi] (restored if its call fails)
	prune, full bool
}

// batch is one script call: its groups, in KEYS' order.
type batch struct {
	groups []int32
	cmd    *redis.Cmd
}

// staged is an exchange's window calls. The node keeps one and reuses
// its slices from exchange to exchange.
type staged struct {
	ents    []pent
	groups  []group
	batches []batch
	keys    int // (rule, key)s carried
	tmp     []pent
	gis     []int32
	order   []int32
}

const windowKeyPrefix = "logjail:w:{"

func windowKey(k rk) string { return windowKeyPrefix + k.rule + "|" + k.key + "}" }

// appendWindowKey appends windowKey(k) to b.
func appendWindowKey(b []byte, k rk) []byte {
	b = append(b, windowKeyPrefix...)
	b = append(b, k.rule...)
	b = append(b, '|')
	b = append(b, k.key...)
	return append(b, '}')
}

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

// stageWindows takes the pending deltas and adds to pipe one script call
// per batch of up to batchKeys (rule, key)s changed, or still followed
// up; with a Cluster client, a batch holds keys of one slot only.
func (n *Node) stageWindows(ctx context.Context, pipe redis.Pipeliner, pending map[dkey]pend) *staged {
	now := n.now()
	n.exchNo++
	st := &n.stage
	st.ents = slices.Grow(st.ents[:0], len(pending))[:len(pending)]
	st.gis = slices.Grow(st.gis[:0], len(pending))[:len(pending)]
	st.groups, st.batches = st.groups[:0], st.batches[:0]
	gis := st.gis
	i := 0
	for k, p := range pending {
		r := rk{k.rule, k.key}
		ki := n.keys[r]
		if ki == nil {
			ki = &keyInfo{rk: r}
			ki.slot = uint16(keySlot(windowKey(r)))
			n.keys[r] = ki
		}
		if ki.exch != n.exchNo {
			ki.exch, ki.gi = n.exchNo, int32(len(st.groups))
			st.groups = append(st.groups, group{ki: ki})
		}
		g := &st.groups[ki.gi]
		g.hi++ // a count until the offsets below
		g.ttl = max(g.ttl, p.ttl)
		gis[i] = ki.gi
		e := &st.ents[i]
		e.k.limit, e.k.bucket, e.p = k.limit, k.bucket, p
		i++
	}
	// Lay the deltas out by group.
	off := int32(0)
	for j := range st.groups {
		g := &st.groups[j]
		g.lo, g.hi, off = off, off, off+g.hi
	}
	ents := slices.Grow(st.tmp[:0], len(st.ents))[:len(st.ents)]
	for i, e := range st.ents {
		g := &st.groups[gis[i]]
		ents[g.hi] = e
		g.hi++
	}
	st.ents, st.tmp = ents, st.ents
	changed := len(st.groups)
	watching := make([]*keyInfo, 0, changed+len(n.watching))
	for j := range changed {
		g := &st.groups[j]
		ki := g.ki
		var newest uint64
		watching = append(watching, ki)
		ki.left = followUps
		ki.wttl = max(ki.wttl, g.ttl)
		for _, e := range st.ents[g.lo:g.hi] {
			k := e.k
			newest = max(newest, k.bucket)
			i := slices.IndexFunc(ki.limits, func(lb limitBucket) bool { return lb.limit == k.limit })
			if i < 0 {
				ki.limits = append(ki.limits, limitBucket{k.limit, k.bucket})
			} else {
				ki.limits[i].newest = max(ki.limits[i].newest, k.bucket)
			}
		}
		g.full = !ki.state || newest > ki.fullAt
		if !ki.state {
			ki.prunedAt, ki.fullAt = newest, 0
		}
		g.prune = newest >= ki.prunedAt+pruneEvery
		if g.prune {
			ki.prunedAt = newest
		}
		ki.state = true
		ki.fullAt = max(ki.fullAt, newest)
		ki.expires = now.Add(g.ttl)
	}
	// Follow-ups: the keys changed in an earlier exchange but not in this one.
	for _, ki := range n.watching {
		if ki.exch == n.exchNo && ki.gi < int32(changed) {
			continue // changed now: already in watching
		}
		ki.exch, ki.gi = n.exchNo, int32(len(st.groups))
		st.groups = append(st.groups, group{ki: ki, ttl: ki.wttl})
		if ki.left--; ki.left > 0 {
			watching = append(watching, ki)
		}
	}
	n.watching = watching
	st.keys = len(st.groups)
	n.stageBatches(ctx, pipe, st)
	// A key no longer followed up forgets its limits (after they were
	// written into its call).
	for j := range st.groups {
		if ki := st.groups[j].ki; ki.left == 0 {
			ki.limits, ki.wttl = nil, 0 // fewer objects for the collector to mark
		}
	}
	return st
}

// stageBatches cuts st's groups into script calls and adds them to pipe.
func (n *Node) stageBatches(ctx context.Context, pipe redis.Pipeliner, st *staged) {
	if n.cluster {
		// One slot per call: a stable order by slot, then batches.
		order := slices.Grow(st.order[:0], len(st.groups))[:len(st.groups)]
		st.order = order
		for j := range order {
			order[j] = int32(j)
		}
		slices.SortStableFunc(order, func(a, b int32) int {
			return int(st.groups[a].ki.slot) - int(st.groups[b].ki.slot)
		})
		for lo := 0; lo < len(order); {
			hi, slot := lo+1, st.groups[order[lo]].ki.slot
			for hi < len(order) && hi-lo < batchKeys && st.groups[order[hi]].ki.slot == slot {
				hi++
			}
			st.batches = append(st.batches, batch{groups: order[lo:hi]})
			lo = hi
		}
	} else {
		all := slices.Grow(st.order[:0], len(st.groups))[:len(st.groups)]
		st.order = all
		for j := range all {
			all[j] = int32(j)
		}
		for lo := 0; lo < len(all); lo += batchKeys {
			st.batches = append(st.batches, batch{groups: all[lo:min(lo+batchKeys, len(all))]})
		}
	}
	for bi := range st.batches {
		b := &st.batches[bi]
		args := make([]any, 0, 3+len(b.groups)+3)
		args = append(args, "evalsha", n.sha, len(b.groups))
		// The batch's hash names in one string, sliced: one allocation
		// per call, not one per key.
		names := n.names[:0]
		for _, gi := range b.groups {
			names = appendWindowKey(names, st.groups[gi].ki.rk)
		}
		n.names = names
		all := string(names)
		spec := n.spec[:0]
		for i, gi := range b.groups {
			g := &st.groups[gi]
			l := len(windowKeyPrefix) + len(g.ki.rk.rule) + 1 + len(g.ki.rk.key) + 1
			args = append(args, all[:l])
			all = all[l:]
			if i > 0 {
				spec = append(spec, ';')
			}
			spec = strconv.AppendInt(spec, g.ttl.Milliseconds(), 10)
			spec = append(spec, ',', flag(g.prune), ',', flag(g.full))
			if g.lo == g.hi {
				for _, lb := range g.ki.limits { // a follow-up: names the newest bucket of each limit
					spec = appendPair(spec, lb.limit, lb.newest, 0)
				}
				continue
			}
			for _, e := range st.ents[g.lo:g.hi] {
				spec = appendPair(spec, e.k.limit, e.k.bucket, e.p.units)
			}
		}
		n.spec = spec
		args = append(args, n.cfg.Node, keepBuckets, string(spec))
		b.cmd = pipe.Do(ctx, args...)
	}
}

// appendPair appends ",LIMIT:BUCKET=UNITS" to spec.
func appendPair(spec []byte, limit int, bucket, units uint64) []byte {
	spec = append(spec, ',')
	spec = strconv.AppendInt(spec, int64(limit), 10)
	spec = append(spec, ':')
	spec = strconv.AppendUint(spec, bucket, 10)
	spec = append(spec, '=')
	return strconv.AppendUint(spec, units, 10)
}

// absorb reads the calls' answers into Adds; a failed call's deltas go
// back to pending. It returns the first error that is not NOSCRIPT (a
// Redis that lost its scripts: they are loaded at the next exchange).
func (n *Node) absorb(st *staged, now time.Time) ([]Add, error) {
	var adds []Add
	var firstErr error
	for bi := range st.batches {
		b := &st.batches[bi]
		res, err := b.cmd.Text()
		if err != nil {
			if strings.HasPrefix(err.Error(), "NOSCRIPT") {
				n.loaded = false
			} else if firstErr == nil {
				firstErr = err
			}
			n.restoreBatch(st, b)
			continue
		}
		for _, gi := range b.groups {
			g := &st.groups[gi]
			part, rest, _ := strings.Cut(res, ";")
			res = rest
			adds = n.absorbKey(g.ki, part, now.Add(g.ttl), adds)
		}
	}
	return adds, firstErr
}

// absorbKey reads one key's part of an answer into ki's records, and
// appends an Add for each increase.
func (n *Node) absorbKey(ki *keyInfo, part string, exp time.Time, adds []Add) []Add {
	for part != "" {
		var rec string
		rec, part, _ = strings.Cut(part, ",")
		limit, bucket, others, ok := parseRecord(rec)
		if !ok || others < 0 {
			continue
		}
		j, found := slices.BinarySearchFunc(ki.buckets, limitBucket{limit, bucket}, cmpAbsorbed)
		if !found {
			if others == 0 {
				continue // nothing to record
			}
			ki.buckets = slices.Insert(ki.buckets, j, absorbedBucket{limit: limit, bucket: bucket})
		}
		r := &ki.buckets[j]
		if u := uint64(others); u > r.units {
			adds = append(adds, Add{Rule: ki.rk.rule, Key: ki.rk.key, Limit: limit, Bucket: bucket, Units: u - r.units})
			r.units = u
		} else if u < r.units {
			r.units = u // Redis lost it (restart): what it says now is the start again
		}
		r.expires = exp
	}
	return adds
}

func flag(b bool) byte {
	if b {
		return '1'
	}
	return '0'
}

// restore puts all of st's deltas back into pending: the round trip
// failed.
func (n *Node) restore(st *staged) {
	for bi := range st.batches {
		n.restoreBatch(st, &st.batches[bi])
	}
}

// restoreBatch puts a call's deltas back into pending: it did not reach
// Redis, or failed there.
func (n *Node) restoreBatch(st *staged, b *batch) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, gi := range b.groups {
		g := &st.groups[gi]
		g.ki.state = false // its next call reads all its buckets
		for _, e := range st.ents[g.lo:g.hi] {
			k := dkey{g.ki.rk.rule, g.ki.rk.key, e.k.limit, e.k.bucket}
			p := n.pending[k]
			p.units += e.p.units
			p.ttl = max(p.ttl, e.p.ttl)
			n.pending[k] = p
		}
	}
}

// forgetAbsorbed drops the absorbed records whose bucket no longer
// matters, the state of keys past their expiry, and the keys left with
// neither (and not followed up).
func (n *Node) forgetAbsorbed(now time.Time) {
	for k, ki := range n.keys {
		ki.buckets = slices.DeleteFunc(ki.buckets, func(b absorbedBucket) bool { return now.After(b.expires) })
		if ki.state && now.After(ki.expires) {
			ki.state = false
		}
		if !ki.state && ki.left == 0 && len(ki.buckets) == 0 {
			delete(n.keys, k)
		}
	}
}
