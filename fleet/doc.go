// Package fleet is the Redis side of fleet mode: it moves plain values
// between this node and the Redis that a fleet of web servers shares, so
// that a `scope: fleet` rule counts the fleet's requests and every ban,
// unban and throttle reaches every node. It knows nothing of rules,
// windows or actions: the detector hands it per-bucket deltas (Send) and
// absorbs the Adds it delivers; the daemon hands it decisions (Publish)
// and applies the decisions it delivers (Events).
//
// # Data model in Redis
//
// Every name starts with logjail:. A (rule, key) is written RULE|KEY
// inside braces, a Redis Cluster hash tag, so that everything of one key
// lives on one slot.
//
//   - logjail:w:{RULE|KEY} — a hash: the windows of one (rule, key), all its
//     limits. Field LIMIT:BUCKET is the fleet's total units in that bucket
//     (LIMIT: the limit's index in its rule; BUCKET: log time / bucket
//     width), field LIMIT:BUCKET:NODE is one node's own part of it. The
//     hash expires (PEXPIRE) at the longest TTL a node gave (window + one
//     bucket), pushed forward by every write. A window has at most 60
//     buckets (DESIGN.md), so a limit's buckets more than 64 behind its
//     newest are deleted: a node asks for that pruning (one HKEYS) once
//     every 16 buckets of a key, so a key that never goes quiet keeps a
//     bounded hash.
//   - logjail:ban:{RULE|KEY} — a string: the active ban or throttle of a
//     (rule, key), its Decision as JSON, expiring at its until (PXAT); one
//     without until (the deny list's) never expires.
//   - logjail:bans — a sorted set indexing those records: member the
//     record's name, score its until in ms (+inf: none).
//   - logjail:events — a stream announcing every decision: fields by (the
//     publishing node) and d (the Decision as JSON); trimmed at about
//     100,000 entries (XADD MAXLEN ~).
//   - logjail:epoch — a random value set once (SET NX). A Redis that
//     restarted without its data has none, or another one. On a Redis
//     Cluster, also logjail:epoch:{N} on every primary (below).
//   - logjail:nodes — a hash, one field per node: its last sync (ms), the
//     round trip of its last exchange, and whether it was degraded.
//
// # The protocol
//
// Send coalesces the detector's deltas by (rule, key, limit, bucket);
// Publish queues decisions. Neither waits on Redis. Every Sync (200 ms)
// Run makes one exchange, one pipelined round trip:
//
//   - for the (rule, key)s changed since the last exchange, one EVALSHA of
//     a small Lua script per batch of up to 256 of them (KEYS: their
//     hashes; one argument holds all their buckets and units): per key,
//     HINCRBY of the total and of this node's part for each bucket, HLEN,
//     PEXPIRE, and the answer: the total minus this node's part (the
//     others' units) of the buckets written; and, when the key's newest
//     bucket moved since this node last read it, of the 64 newest buckets
//     of each limit written, so that the buckets only other nodes wrote
//     arrive too. The answer is read with one HMGET of the fields it
//     needs, or one HGETALL when the hash holds no more fields than that
//     (a key that few nodes write). A call's answer is one string
//     ("LIMIT:BUCKET:UNITS" records, comma-separated, the keys' parts
//     separated by semicolons in KEYS' order), not a list of two values
//     per bucket: parsing such a list was most of a node's CPU in an
//     exchange under key churn. Batching pays a call's own cost (the
//     client's command, RESP framing, Redis's script set-up) per 256
//     keys, not per key; with a Redis Cluster client a batch holds keys
//     of one slot only (CRC16 of the hash tag, as Redis computes it), as
//     Cluster requires of a script's keys. The node keeps, per (rule,
//     key), one map entry: what it absorbed of each bucket (a slice
//     sorted by limit and bucket; none for a bucket of which nothing
//     arrived), its read state, its hash's slot. A (rule, key) is also
//     read (its newest buckets, adding nothing) at the exchange after its
//     last change, so that the others' units that reached Redis just
//     after this node's write still arrive. Redis traffic is thus bounded
//     by the keys changed per interval, not by lines (10,000 deltas over
//     100 keys are one script call carrying 100 keys), and a key's cost in
//     a script call by the buckets it reads, not by the number of nodes.
//   - the queued publications (below);
//   - GET of every epoch (one; on a cluster one per primary more), and
//     HSET logjail:nodes NODE {last sync, lag, degraded}.
//
// The node remembers, per (rule, key, limit, bucket), how much of the
// others' units it has delivered, and delivers an Add for each increase,
// never a negative one: when Redis says less (it restarted), the record is
// reset to what Redis says. A record is forgotten when its TTL has passed
// since it last changed. The Adds of an exchange arrive on Events as one
// Event.
//
// Publications: a ban or throttle is SET at logjail:ban:{RULE|KEY} with
// PXAT until, indexed in logjail:bans and announced (XADD). With Claim (a
// rule's ban, to be decided once for the fleet) the SET is NX GET: if
// another node's record is there, this node lost: the winner's record is
// delivered on Events with Lost set, and nothing is announced. A claim
// wins over a record of the same node (its own escalation, or a
// republication) and a ban's claim wins over a throttle's record; these
// and claims that won are indexed and announced in a second round trip,
// the only exchange with two. Without Claim (an operator's word, the deny
// list) the record is overwritten. An unban deletes the record and its
// index entry, whoever decided the ban, and is announced. A decision
// whose until has passed is only announced. Until is read as wall-clock
// time, since Redis expires the record then: the daemon publishes the
// until its actions use.
//
// The stream reader has its own connection: XREAD BLOCK 1 s from the last
// entry it read; at start from the newest entry that was there just before
// the first reconcile read the bans (so that nothing published between
// the two is missed). It delivers the decisions of other nodes, skipping
// what this node already knows (same kind, until and node) and decisions
// whose until has passed.
//
// Reconcile runs at start, after Redis comes back, when the epoch
// changed, and every 5 s: it expires index entries past their until,
// reads the active records (ZRANGEBYSCORE now +inf, then the records,
// pipelined), delivers those this node has not delivered or knows with
// another until, and delivers an unban (origin "fleet") for an active ban
// it knows that is gone from Redis. When logjail:epoch is missing or
// changed, Redis restarted without its data: instead of unbanning, the
// node republishes (Claim, each record keeping its own node) every active
// ban and throttle it knows, and reads the stream from its new start.
//
// # Redis Cluster
//
// With Config.Cluster the node's two clients (rdb for the exchanges and
// reconcile, srd for the stream) are go-redis ClusterClients: URL is one
// seed, more seeds in its addr= parameters; any seed that answers gives
// the slot map, and the clients then talk to the addresses the cluster
// announces (CLUSTER SLOTS), following MOVED and ASK. Password, TLS and
// the CA are those of one Redis, for every primary; go-redis checks every
// primary's certificate against the seed's host name (ParseClusterURL
// sets it as ServerName), so each primary's certificate must name it. A
// cluster has database 0 only. Every command the fleet sends works there:
//
//   - a pipeline is split by slot and sent to each primary at once (one
//     round trip per primary, in parallel); a command's failure on one
//     primary fails that command alone: the exchange takes the others'
//     answers (absorbed, published), puts the failed deltas back in
//     pending and the failed publications back in the queue, and the node
//     is degraded. No MULTI/EXEC is used.
//   - the window script has one key, KEYS[1] = logjail:w:{RULE|KEY}: one
//     slot. A pipeline sends SCRIPT LOAD (no key) to one primary only, so
//     on a cluster the node loads the script on every primary
//     (ClusterClient.ScriptLoad) before its first exchange, and again
//     after a NOSCRIPT (a primary that restarted).
//   - a ban's record (logjail:ban:{RULE|KEY}), the index logjail:bans,
//     the stream logjail:events, logjail:nodes and logjail:epoch are each
//     one key, on its own slot, each written by its own command: a
//     publication's commands may go to three primaries (every one must
//     succeed for it to count as done).
//   - XREAD BLOCK on the stream goes to the stream's primary, on srd's
//     own connection there.
//   - nothing scans the keyspace (no SCAN, no KEYS).
//
// The epoch on a cluster. One key tells about one primary only: when a
// primary other than logjail:epoch's restarts without its data, the ban
// records, index or stream it held are gone and logjail:epoch is not;
// reconcile would then take the bans it knew for lifted and deliver
// unbans. So the node checks one epoch per primary: at every reconcile it
// reads the slot map (CLUSTER SLOTS) and, for each primary, names
// logjail:epoch:{N}, N the smallest integer whose slot is in that
// primary's lowest slot range (the same N on every node); the primary
// that holds logjail:events gets the one on the stream's own slot. It
// sets them (SET NX GET) at each reconcile and reads them (GET) at each
// exchange. What it tells: a primary that restarted without its data (its
// epoch is gone or another): every node republishes the active bans it
// knows, whatever primary held them (claims, so each record stays one;
// a republished claim that loses indexes the surviving record again, in
// case the index was on the lost primary), and reads the stream from
// its start only when the stream's primary was the one; a primary that
// does not answer: its epoch's GET fails, so the node is degraded even
// when nothing else of its exchange was on that primary. What it cannot
// tell: a primary that kept its epoch but lost other writes: a failover
// to a replica that had not received the last writes (asynchronous
// replication), or an appendonly file that was not synced: a record
// written just before is gone while the epoch is not, and a node that
// knew the ban delivers an unban at its next reconcile (as for one Redis
// restarted with persistence: what Redis had not written is lost). And a
// resharding that moves a primary's epoch key elsewhere is only seen at
// the next reconcile, which names the keys anew (a key newly named is
// learnt, not taken for a loss).
//
// # Failures, and what is lost
//
// Every Redis call has a deadline, carried in its context: 3/4 of Sync,
// at least 150 ms, plus 0.5 ms per command of a pipeline and per (rule,
// key) its script calls carry (an exchange of 1,000 changed keys is not a
// partition); the stream's BLOCK 1 s plus
// that. go-redis does not retry: the next exchange is the retry. So a
// partition is noticed at the next exchange, never as a hang.
//
//   - Redis away (stopped, unreachable, partitioned from this node): the
//     exchange fails and the node is degraded (Status, one log line
//     "fleet: degraded: …" per outage). It keeps working alone: the
//     detector charges its local windows, so fleet limits count only this
//     node's units until Redis is back. Deltas stay pending, coalesced
//     (past 1,000,000 entries the oldest buckets are dropped, counted in
//     Status.DroppedDeltas); publications queue (QueueMax, default 10,000;
//     the oldest dropped, counted in Status.Dropped). Each Sync retries;
//     the first exchange that succeeds sends what is pending, publishes
//     the queue, reconciles and logs "fleet: reconnected". Lost: the
//     dropped publications and deltas (counted), and the others' counts in
//     windows that closed during the outage. An exchange cut in the
//     middle is sent again: it may count its deltas twice (at least once,
//     never lost).
//   - Redis restarted with persistence (appendonly): the epoch is the same;
//     the windows and bans are as Redis saved them; the nodes send what
//     they kept pending; reconcile delivers what changed. Lost: what Redis
//     had not written to disk.
//   - Redis restarted without persistence: the windows are gone (each node
//     resets its absorbed records to what Redis says: no negative Add, the
//     fleet's sums restart from the new deltas); the epoch is new, so every
//     node republishes the active bans it knows (claims: one record each)
//     and reads the new stream from its start. No active ban that any node
//     knew is lost.
//   - One primary of a cluster away (stopped, unreachable): the
//     exchange's commands on its slots fail, and its epoch's GET: the node
//     is degraded, as for Redis away, but keeps exchanging the keys of
//     the other primaries until the cluster marks the primary failed
//     (cluster-node-timeout) and, with no replica to promote and
//     cluster-require-full-coverage (the default), every primary answers
//     CLUSTERDOWN: then it works alone entirely. Lost: as for Redis away,
//     for that primary's keys.
//   - One primary of a cluster restarted without its data: its epoch is
//     gone: every node republishes every active ban it knows, as for one
//     Redis restarted without persistence; the windows it held restart
//     from the new deltas. No active ban that any node knew is lost. A
//     failover to a replica keeps the epoch: what the replica had not
//     received is lost (above).
//   - A node killed: its pending deltas and queued publications are lost;
//     its bans are in Redis and in its own SQLite. The others keep them;
//     when it starts again, its first reconcile delivers every active
//     ban, its own included.
//   - A partition that cuts some nodes from Redis: each side works alone
//     (the cut nodes are degraded); a ban decided on a cut node is queued
//     and published when it is back (claims are resolved then: the record
//     already in Redis wins); the others see the cut nodes as degraded in
//     Nodes (no write for five syncs).
//
// # Concurrency
//
// Send, Publish, Status and Events are safe from any goroutine and never
// wait on Redis. Run starts the stream reader, makes the exchanges and
// reconciles, and returns (closing Events) when its context ends or Close
// is called; Close waits for it, so no goroutine is left. Events is fed by
// Run and the reader, each waiting for the daemon to read it: a daemon
// that stops reading stalls the exchanges, not the hot path.
//
// Boundaries: it imports nothing of logjail's, only the standard library
// and github.com/redis/go-redis/v9; the daemon wires it to the detector
// and the actions. Tests run a real redis-server, and a real Redis
// Cluster of three primaries (internal/redistest; cluster_test.go).
package fleet
