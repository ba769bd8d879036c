// Package limits owns what a limit kind is (DESIGN.md, "Windows and
// limits"): each kind is one type in one file, with its grammar, its
// checks, what it compiles to for the detector, its window arithmetic
// (charge, query, the operator's view), its reason text and how a report
// ranks and prints its peak:
//
//	rate.go    Rate    "20 per second", "5 per 10s"
//	share.go   Share   "7% cpu over 15s [of machine]", "10% duration over 1m"
//	bucket.go  Bucket  "10/s burst 20"
//	lastn.go   LastN   "last 10 within 2s"
//
// The kinds implement Kind. The rules package holds the one table of
// them (rules.LimitKinds, a function: no init(), no registry variable)
// and its ParseLimit tries them in order; a rules.Limit (Limit) carries
// its kind as a value, and the detector, replay, control and endpoint
// call its methods instead of switching on it. Adding a kind is a file
// here, its test, and a row in rules.LimitKinds (docs/architecture.md,
// "A limit kind").
//
// The windows live here too (window.go): a Window holds no pointer (its
// ring is inline up to two elements, else a run of the detector's Rings,
// an internal/pool.Pool), so a million keys are a few large allocations.
// A Buckets window whose ring is in the pool keeps its newest bucket
// beside the ring's reference (Window.v[1], otherwise unused), so that a
// charge after the window has passed (most of a busy log's keys between
// their visits) writes its bucket without reading the ring, a random
// read; addBucket and DecodeWindow keep it.
// A window has one of three Layouts (Buckets for rate and shares, Times
// for last N, Tokens for the token bucket), which say what its ring holds
// and how AppendWindow and DecodeWindow write and read it in a snapshot;
// a Layout's number is its tag on disk, and a kind's Traits().Code is its
// number in the fingerprint of a saved state's limits (Fingerprint):
// neither may change once shipped, so that saved states restore
// unchanged. A kind whose window fits none of the layouts adds one in
// window.go.
//
// A fleet shares Buckets windows (fleet.go): Delta is the bucket and
// units a charge adds, Absorb adds another node's units to a window and
// reads it, BucketTTL is how long a bucket matters. Times and Tokens
// windows have no deltas: a rule with such a limit is per node.
//
// Charge is called for every limit of every charged rule (the detector
// calls Compiled.Charge: for a rate or a share the kind's arithmetic
// itself, no dispatch through Kind): it allocates nothing once a key's
// ring has grown to its traffic. Nothing here is safe
// for concurrent use; the detector serialises it.
//
// Boundaries: It owns the limit kinds and their windows. It must not do
// I/O, read the clock (every time is the caller's, in unix ns of log time)
// or import any package of logjail's but internal/pool; what a rule, a
// key or a ban is belongs to rules and detector.
package limits
