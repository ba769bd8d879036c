// Package detector owns the sliding windows and the ban ladder of logjail
// (DESIGN.md, "Windows and limits" and "The ban ladder").
//
// The rules package classifies an entry into charges, one per (rule, key); a
// Detector charges each to the windows of that (rule, key), checks the rule's
// limits against the window ending at the entry's time, runs the Perlbal
// ladder (allowed → throttled → banned → allowed) and appends the decisions
// it makes to a slice the caller owns.
//
// # Invariants
//
//   - Log time only. Every window, delay and ban is measured on the times the
//     caller passes (the entries' own times); the package never reads the wall
//     clock. The same input gives the same decisions, byte for byte.
//   - Time never runs backwards. The detector remembers the newest time it was
//     given. A charge up to Options.Skew older than that is counted in its own
//     bucket; an older one is counted at newest−Skew (the oldest bucket still
//     open) and in Stats.Late. A window never holds a bucket older than its
//     span: an entry that would fall out of the window at once is not counted.
//   - Windows are cut into buckets of max(1s, window/60), so a window spans a
//     whole number of buckets (at most 60) and (t−P, t] is read as the buckets
//     (b−n, b] where b is the bucket of the key's newest entry. With log times
//     in whole seconds and windows of at most a minute this is exact. Token
//     buckets and "last N within D" keep exact times.
//   - Costs (CPU and duration seconds) are stored as integers of a unit of at
//     least 1µs per limit (larger for buckets longer than 33s, so that one
//     bucket holds 128 busy cores); sums are exact and never drift, and a
//     limit at exactly its threshold is not over.
//   - A banned (rule, key) is not charged: its entries count in Stats.Blocked
//     and in KeyPeak.Blocked and make no decision. A ban ends (decision
//     unban, reason "ban expired") when log time reaches its until; Charge and
//     Advance emit the unbans that are due before anything else, in order of
//     until. A throttle ends silently: its decision carries its until.
//     ChargeAll charges one entry's charges (the pipeline's) with one step
//     of the clock, deciding what Charge of each would.
//   - Bans and throttles end on log time only, across restarts too (a
//     checkpoint keeps the newest time, Newest): a key banned at log time t
//     for D is banned here for its entries up to t+D however long the
//     caller was stopped. Only Lift ends one earlier, and the daemon calls it
//     for an operator's word alone (an unban, an operator's ban running
//     out): the wall clock that ends the actions' bans (the store's active
//     bans, DESIGN.md "Time") never lifts the detector's, so that a backlog
//     read after downtime is decided as a replay of it is. The unban the
//     detector then makes for a ban the store has already ended is the
//     caller's to drop (checkpoint.Writer.Keep).
//   - Entries reach Charge after the caller's pipeline.Guard: a line far
//     ahead of its neighbours in its file never moves the newest time.
//   - Memory is bounded: at most Options.MaxKeys (rule, key) states. Banned
//     states are never evicted; while every state is banned, new keys go
//     past the cap. The others are on two LRU lists (intrusive, O(1)): the
//     hot list holds the throttled states, the cold list the allowed ones.
//     Eviction takes the least recently charged state of the cold list, and
//     of the hot list only when the cold one is empty. So a flood of new keys
//     (a scanner walking the /64s of its /48, a botnet) forgets quiet keys
//     first and cannot make the detector forget a key that is over its
//     limits and violating its throttle: its violations still count towards
//     its ban (TestKeyFloodSparesViolators sprays 5M keys at a cap of
//     10,000). A key over its limits under a rule without a throttle is
//     banned at once, and off the lists. A throttled key that goes quiet
//     stays on the hot list until its next entry allows it again; the hot
//     list can only fill the cap if every state is throttled.
//   - Per key, windows keep only the buckets that hold something, in a ring
//     grown as needed (most keys hold one or two), and no charge allocates
//     once a key's rings have grown to its traffic. No state holds a
//     pointer: a state is 88 bytes in a slab of chunks; its key is an id in
//     the key table (an open-addressing index of ids over 32-byte records:
//     an address or prefix key as its 128 bits, family and length, any
//     other key as its 64-bit hash with its text once in a byte pool), its
//     compiled rule an index, its ladder and addresses seen a reference
//     into a pool, a ring of more than one element a run of a pool of
//     uint64 pages (keys.go, internal/pool, limits.Window).
//     The collector scans none of it, and a million keys are a few large
//     allocations. A key's
//     ladder (extra) exists only once it went over a limit; the addresses
//     seen exist only for keys that are not single addresses (an address is
//     kept as 16 bytes: IPv4-mapped addresses are read back as IPv4, zones
//     are dropped). Most such keys (a /64) show one address, the same to
//     every rule that charges the key: a state whose only address is its
//     key's first one, and whose newest time (state.seen) is that
//     address's, holds no aux and no run: the address is kept once a key
//     (16 bytes, in the key table) and its time is each state's own, so
//     what each rule saw stays exact (TestAddressesSeenPerRule). A second
//     address, or anything that moves the state's newest time without
//     that address (an entry without one, a blocked entry, an operator's
//     ban), first gives the state its own run, as before. The peaks of the limits, which only a replay's report
//     reads, are kept beside the slab, and not at all by a daemon
//     (Options.NoPeaks). What a client key charged under three rules costs
//     is in the README ("Memory and max_keys") and BenchmarkMemory; the
//     process needs 32 to 64 MB more between collections in a replay, 16
//     to 32 MB in a daemon (internal/gcgoal).
//     Memory estimates it from the sizes of the slab, pools and key table,
//     for status and metrics.
//   - Keys are copied into the key table before they are stored: callers may
//     pass strings that point into reused read buffers.
//   - Fixed keys (issue 23). An address or prefix key comes from the
//     pipeline as rules.Charge.Fixed (rules.Config.ClassifyKeys): its 128
//     bits, compared in the key's record, with no text made for a line;
//     its text (rules.FixedKey.String, byte for byte rules.Config.IPKey's
//     and PrefixKey's) is made only where a key is shown: decisions,
//     KeyState.Key, KeyNow, KeyPeak (a view valid during the call, as for
//     every key). A key given as text (Status, Lift, Query, an operator's
//     ban, a checkpoint's KeyState.Key, the fleet, a Charge without Fixed)
//     that is the canonical text of an address or prefix
//     (rules.ParseFixedKey) is that fixed key, so a key has one entry
//     whichever way it comes; any other text (user:NAME, ua:TEXT,
//     ADDRESS|ua:TEXT, range:NAME, a prefix not masked) is a text key: its
//     64-bit hash, then its whole text, compared, so that no collision
//     merges two keys. TestFixedKeysDecideAsText feeds the same events by
//     text, by fixed key and by both (v4, IPv6, /24, /64, /128, a range
//     keyed by prefix, a grouped range, users): the same decisions, texts,
//     peaks, checkpoints and state. A charge by text pays a parse
//     (about 100 ns; the pipeline never charges an address key by text).
//     At 1M keys in row 1's order a lookup's cost is the index slot (one
//     random read) and the record (57% and 40% of keyTable.findK's
//     samples): a record held in the slot itself would save the second,
//     but the slot would grow from 4 to 24 bytes over twice the keys'
//     count (the index is a power of two, at most three quarters full),
//     about 26 MB more at 1M keys, which issue 15's bound (1M /64 keys
//     under three rules, starved daemon, 386 MB of ≤ 400 MB) does not
//     leave; and the checkpoint (snapshot.go) sets a key's first state in
//     its record. A slot holds 5 bits of its key's hash beside the id
//     (keys.go, slotOf), so that a probe passes over another key's slot
//     without reading its record: at half full, linear probing met another
//     key's record first in about a third of the lookups, and more for a
//     new key, each a miss of the caches and the TLB that no hint had asked
//     for.
//   - Hints (issue 23, part REPLAY): Prefetch(k, ahead) asks the CPU to
//     load, ahead of a charge of the fixed key k, its index slot (ahead 2),
//     its record (ahead 1: the slot read) or its first state (ahead 0: the
//     record read); replay's merger and the daemon give the entries 8, 4
//     and 1 ahead of the one they charge (pipeline.Pipeline.PrefetchNext),
//     so that each of a charge's three dependent random reads has several
//     entries' time to arrive. A hint reads what a lookup reads
//     and writes nothing (TestPrefetchChangesNothing: the same decisions
//     and counters with and without), and does nothing below
//     prefetchSlots (65,536 index slots, about 48k keys), where the index,
//     records and states stay in the caches (lowered to 1,024 it changed
//     nothing measurable on the genlog's 5,000 keys). BenchmarkChargeKeys at
//     1M keys: 572 to 635 ns a charge by fixed key, 281 to 317 with the
//     hints (key=prefetched). ChargedOf and QueryOf read what Charged and
//     Query read, for a charge's key: by its fixed key when it has one,
//     with no parse of its text (replay's charts ask them for every
//     charge; TestQueryOfAsQuery).
//   - The charge path (issue 23, part RP, round 4) does each step once and
//     calls nothing it need not: a fixed key is compared with the previous
//     lookup's in place (lookupFixed) and a rule's state found by its
//     compile before its id; the slab's chunks are arrays, so a slot's
//     state is one load and no bounds check within its chunk; a charge
//     moves its state to the front of its LRU list in place when it stays
//     on that list (TestTouchAsRelink: the same lists, decisions, evictions
//     and changes as unlinking and linking it again); an allowed state
//     under its limits does not call the ladder, nor the expiries when
//     none is due, nor willSee but for a state that keeps one address.
//     With limits' one-second buckets divided by a constant and its ring
//     written in place, and classify's copies cut, replay's merger runs
//     about 19% fewer instructions a line on the genlog
//     (docs/performance.md).
//   - A Detector is not safe for concurrent use: one goroutine charges it and
//     reads it. A daemon that answers queries from other goroutines wraps it.
//   - Per-key state is made of plain values (integers, floats, references
//     into the pools), so that a checkpoint can write it out and read it back
//     (see Checkpoints).
//
// # The ladder
//
// Per (rule, key), as DESIGN.md "The ban ladder" says, with these readings
// where it is silent:
//
//   - The first entry over the limits throttles the key for initial_delay
//     (decision throttle, Violations 0). An entry before until is a violation:
//     the delay doubles, capped at max_delay (0: no cap), and until moves to
//     t+delay (never earlier than it was); a throttle decision is made when the
//     delay changed. Once violations exceed ban.after the key is banned
//     instead (Violations on the ban decision is that count).
//   - An entry at or after until is no violation. If no entry came for quiet
//     after the later of until and the key's previous entry, the key is
//     allowed again (violations and delay reset) and the entry is judged as an
//     allowed key's. Otherwise the key stays throttled; if the entry is over
//     the limits it is throttled again with its current delay (decision
//     throttle, same delay, new until), else nothing happens.
//   - A ban lasts ban.for × ban.factor^k, k the earlier bans of this (rule,
//     key) that started within ban.remember (0: 30 days) before it, capped at
//     ban.max (0: no cap, but never more than 100 years). A factor of 0 counts
//     as 1. A rule with neither throttle nor ban.for makes no decision; a rule
//     with a throttle and no ban.for throttles forever.
//   - log_only rules run the same ladder (their banned keys are not charged
//     either, so a replay shows what the rule would have done) and mark every
//     decision LogOnly.
//   - Eviction forgets a state's windows, ladder and earlier bans.
//
// # Circuit breaker
//
// A ban that would be the (MaxBansPerMinute+1)-th ban acted on within one
// minute of log time ((t−60s, t]) trips the breaker: that ban and every later
// throttle and ban are LogOnly until ResetBreaker. Bans of log_only rules and
// static bans do not count and are not affected. The unban that ends a ban is
// LogOnly exactly when the ban was, so that bans in force are lifted by the
// actions even while the breaker is open. The breaker does not log: the
// caller sees Stats.BreakerOpen and Breaker (the trips; the last trip's log
// time, count, limit, and the ban that tripped it) and may set
// Options.BreakerTripped, called once per trip.
//
// Nothing but ResetBreaker closes it (DESIGN.md: "until an operator resets
// it"): not time, not SetMaxBansPerMinute (a reload that raises the
// limit), not a restart (the checkpoint keeps it open, with its last trip).
// ResetBreaker forgets the ban times counted so far, so that the minute
// after a reset starts empty; the trips and the last trip stay. Bans made
// LogOnly while it was open stay LogOnly after a reset: their keys are
// banned for the detector (not charged) until those bans end, and are
// acted on by nothing; an operator who wants them enforced bans them.
//
// # Checkpoints
//
// Changes, SaveGlobal and Restore let the daemon save the detector
// incrementally and, after a crash, give a fresh one back exactly the state
// the crash lost (DESIGN.md, "Windows and limits"): it restores the last
// checkpoint and reads the logs again from the offsets saved with it.
//
// What a checkpoint holds:
//
//   - Per (rule, key), from Changes, in KeyState.Data (a format version, then
//     varints): the totals (requests, blocked, CPU, last entry time); every
//     window as it is (ring capacity and buckets or times oldest first, the
//     token level and refill time, the peak); the ladder (phase, until in
//     nanoseconds and as decided, with its zone offset; delay, last entry,
//     violations, first entry over, whether the ban is LogOnly, the earlier
//     bans); the addresses seen and those the ban blocks (the ladder and
//     the addresses are one block; a state with addresses and no ladder
//     writes the block with a ladder of zeros and a flag that says so,
//     and is restored without one; a block without that flag, as every
//     checkpoint before it wrote, is read as it always was, so a
//     checkpoint of an older logjail restores as it did, though one written
//     now is not read by an older logjail); the ban's place in
//     the expiry order (its sequence number); the state's place in the LRU
//     order (a stamp Changes hands out in list order); and a fingerprint of
//     the limits its windows were built for. A key with two rate windows
//     takes about 60 bytes. Static bans are key states too (rule "deny":
//     prefix, origin, reason), which is why the configuration refuses a
//     rule named "deny" or "operator" (rules.reservedRuleNames).
//   - Detector-wide, from SaveGlobal: the newest time (with its zone offset),
//     the Stats counters, the circuit breaker (the last ban times, open,
//     trips, the last trip) and the counters of ban sequence numbers and
//     LRU stamps.
//
// Not saved, as no decision depends on them: Options (those of the detector
// restored into apply), the compiled rules (resolved by name in the
// configuration given to Restore), slots and rule ids, stale entries of the
// expiry heap (the live ones are rebuilt from the banned states), the
// last-key cache, the fleet's journal. Every Stats counter but the
// fleet's (FleetDropped, FleetIgnored) is saved.
//
// Exactness: a detector restored from a checkpoint taken after entry k, then
// fed entries k+1..n, makes the same decisions, Stats, Peaks, Status and
// Banned answers as one fed 1..n without a stop, with the same configuration
// and options, also when MaxKeys is reached (the LRU order comes back exactly,
// so the same states are evicted). TestCheckpointRoundTrip checks it at cut
// points of a stream that throttles, bans, unbans, lifts, evicts and trips
// the breaker. What differs: Peaks lists states in the order they were
// restored; times come back in a fixed zone named as the parser names one
// ("+0100") rather than the Location they were made in: the same instant
// and offset, the same JSON. With another configuration, Restore does what
// a reload does, with two differences: the states of a removed rule are
// dropped (a ban among them is not lifted by the detector: the store's
// cleaner ends it at its until), and windows built for changed limits are
// reset at once rather than at the key's next charge. A lower MaxKeys
// evicts the least recent states; a lower MaxBansPerMinute keeps the newest
// ban times.
//
// Cost: a charge sets flags in its state and, once per checkpoint interval,
// appends the state's slot to a list: no allocation, 4 bytes a state changed
// since the last checkpoint (Pending counts them, so that a caller can bound
// a checkpoint: the daemon takes one every 16,384). A detector whose
// Changes is never called (a replay without a database) keeps no list: the
// first call finds the changed states in the slab. Changes costs time in proportion
// to the keys changed and dropped since the last call, not to those tracked
// (about 120ns a key: 1M changed keys in about 0.12s; BenchmarkChanges). It
// finds them in that list and at the front of the LRU list, where every
// state charged, unbanned or lifted since the last call is (Lift moves a
// throttled key to the front for that reason, as a charge does). Restore
// costs under 1µs a key, mostly the key index and allocations
// (BenchmarkRestore).
//
// Covers: the same flags say which states changed since the last
// MarkCover (a flag set with the dirty one; MarkCover clears it in every
// slot but the dirty ones, a pass over the slab), and CoverReady whether
// every state tracked will have been reported since, once the next
// Changes ran (a pass over the slab; the banned states and static bans
// not reported since are marked changed, so that it reports them: the
// store's Prune keeps them while they are held). checkpoint.Writer asks so
// that the store may drop its key states from before the mark unread
// (state.Checkpoint's Mark and Cover; TestCoverReady).
//
// # Fleet
//
// A fleet shares the windows of its fleet rules (rules.Rule.Fleet) and
// every node's bans (DESIGN.md, "Beyond one machine"; package fleet
// carries them through Redis, the daemon wires both). The detector's side
// (fleet.go), with these readings where issue 20 is silent:
//
//   - Options.Fleet on, each charge of a fleet rule's state records, per
//     limit the fleet can sum (limits.Compiled.Delta: rates and shares),
//     (slot, limit, bucket, units) in a journal: a flat slice of 24-byte
//     entries without pointers, which allocates nothing once grown to
//     one sync interval's charges. A charge of the same state, limit and
//     bucket as one of the last four entries adds to it, so a busy key
//     costs an entry a bucket. Off (replay, a daemon alone), a fleet rule
//     is an ordinary rule and nothing is journaled, so that a replay of
//     every node's logs merged decides what the fleet decides.
//   - FleetDeltas drains the journal, coalesced by (rule, key, limit,
//     bucket), each with its TTL (the window and one bucket). A state
//     dropped or evicted before the drain loses its entries: a slot's
//     generation changes when it is freed (and when a reload changes the
//     limits of its rule), and entries of another generation are
//     dropped. The journal is bounded at 1<<20 entries (24 MB): at the
//     bound it is coalesced in place; if it is still more than 7/8 full,
//     charges are not journaled (Stats.FleetDropped) until the next drain.
//   - Absorb adds other nodes' units to a (rule, key), made if it is not
//     tracked (an evicted or never seen key), which becomes the most
//     recently charged (a key busy in the fleet is not evicted first
//     here). Its time moves the clock as Advance does, and one older than
//     the newest less Skew is read at that, as a late charge is. It
//     counts no request and journals nothing. An allowed state over its
//     limits (read at that time, combined as a charge combines them)
//     moves along the ladder as an over charge would; throttled and
//     banned states keep the units and move not. Rules by name are the
//     newest compile this detector knows: Rules makes the configuration's
//     known before any charge. An unknown rule, or a limit out of range or
//     not summable, is ignored (Stats.FleetIgnored).
//   - A decision of a fleet rule on the fleet's sums (a charge's, under
//     Options.Fleet, or Absorb's) says so in its reason: "rate 16 per 1s
//     > 10 (rule flood, fleet)". Reasons of violations, and every reason
//     without Options.Fleet, are unchanged.
//   - Adopt takes a ban or throttle decided on another node (and an
//     unban: Lift). A fleet rule's ban counts as an earlier ban for
//     escalation, so escalation is fleet-wide; a scope: node rule's ban
//     is enforced but not counted (its windows and ladder are the node's
//     own: it escalates on this node's bans only); an operator's is not
//     counted (as Impose). A key already banned here is not counted again
//     (one incident, the first node's), and the circuit breaker does not
//     count an adopted ban (the deciding node's did). A zero until is a
//     ban until lifted. The decision's Addresses are those seen here (as
//     Impose's) merged with those the decision carries, so that a node
//     that never saw a user's addresses still blocks those the deciding
//     node saw. A throttle never replaces a ban; an adopted throttle's
//     violations are the larger of the two nodes'.
//   - Not saved by a checkpoint: the journal (a crash loses at most one
//     sync interval of this node's deltas) and the fleet counters. After a
//     restart the lines read again since the checkpoint are journaled
//     again: the fleet counts up to one checkpoint interval of this
//     node's lines twice, for as long as their buckets live (the window).
//     Absorbed units are in the windows and saved with them.
//
// # Static bans
//
// Static takes the configuration's deny list and banned ranges and emits a ban
// (rule "deny", until zero) for each key it has not seen in the previous call,
// and an unban (reason "removed from config") for each key that left the
// list, so that a reload lifts what was removed.
//
// What a limit kind does with its window (charge, query, reason) is its
// own, in package limits; the detector calls it for each limit of a
// charged rule and never switches on the kind.
//
// Boundaries: It owns the windows, the ban ladder and the key table, on log
// time. It must not do I/O or read the wall clock (every time comes from
// its caller), and a key's state in the slab holds no pointer.
package detector
