package limits

import "time"

// What a fleet (DESIGN.md, "Beyond one machine") asks of a Buckets
// window: each node charges locally, hands the buckets its charges
// filled to the others (Delta), and adds theirs into its own windows
// (Absorb). A bucket is a number of bucket widths since the epoch, the
// same on every node for the same limit, and its units are what Charge
// adds to it (a request for a rate, cost in the limit's unit for a
// share), so that a sum over the nodes is the window a single detector
// fed every node's lines would hold. Token buckets and last N keep
// exact times and orders that no sum gives back: they have no deltas
// (ok false), and a rule with one is per node (rules: scope).

// Delta returns the bucket b and the units n that a charge of cost at ns
// (unix ns, log time) adds to a window of c: exactly what Charge adds.
// ok is false for a limit whose layout is not Buckets.
func (c *Compiled) Delta(ns int64, cost Cost) (b, n uint64, ok bool) {
	if c.layout != Buckets {
		return 0, 0, false
	}
	b = bucket(ns, c.width)
	if s, ok := c.Kind.(Share); ok { // as Share.Charge weighs it
		sec := cost.CPU
		if s.Weight == Duration {
			sec = cost.Duration
		}
		return b, units(sec, c.unit), true
	}
	return b, 1, true // a rate: a request
}

// Absorb adds units to bucket b of w, a window of c, as Charge would (a
// bucket already out of the window is not counted; a bucket holds at
// most 2³²−1 units), and reads the window at ns: its value as Charge
// returns it and whether the limit is over. For a limit whose layout is
// not Buckets it changes nothing and returns 0, false.
func (c *Compiled) Absorb(w *Window, a *Rings, b, units uint64, ns int64) (v float64, over bool) {
	if c.layout != Buckets {
		return 0, false
	}
	if units > 0 {
		w.addBucket(a, min(b, maxUint32), units, c)
	}
	sum := w.bucketSum(a, c, ns)
	v = float64(sum)
	if c.unit > 0 { // a share: seconds of cost over the window
		v = v * float64(c.unit) / float64(c.Window)
	}
	return v, sum > c.thr
}

// BucketTTL is how long a bucket of a Buckets window matters: the window
// and one bucket width (a bucket is in the window until the window has
// slid past its end). 0 for other layouts.
func (c *Compiled) BucketTTL() time.Duration {
	if c.layout != Buckets {
		return 0
	}
	return time.Duration(c.Window + c.width)
}
