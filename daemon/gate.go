package daemon

import "runtime"

// gate bounds how many Ps ingest holds at once (issue 23, the package
// doc's "The decision path"): a parse worker holds a slot while it
// parses a batch, the decider while it charges one, and each gives it up
// between slices of sliceLines (pass). With fewer slots than Ps, a P is
// always left to the endpoint: it waits in the network poller, and the
// kernel wakes its thread when a request arrives, whatever ingest is
// doing. A goroutine waiting for a slot is parked, not spinning.
//
// The zero gate (nil) bounds nothing.
type gate chan struct{}

// newGate is a gate of ingestSlots slots, or nil when that bounds
// nothing (as many slots as Ps).
func newGate() gate {
	n := ingestSlots()
	if n >= runtime.GOMAXPROCS(0) {
		return nil
	}
	return make(gate, n)
}

// ingestSlots is how many Ps ingest may hold: as many as the process has
// CPUs (its affinity: one under taskset -c 0), at most GOMAXPROCS, at
// least one. `logjail run` gives a one-CPU process two Ps (cmd_run.go),
// so there ingest holds one and the endpoint has the other; on a
// machine of several cores GOMAXPROCS is the cores' count and the gate
// bounds nothing, as before.
func ingestSlots() int { return max(1, min(runtime.NumCPU(), runtime.GOMAXPROCS(0))) }

// enter takes a slot, waiting for one.
func (g gate) enter() {
	if g != nil {
		g <- struct{}{}
	}
}

// leave gives the slot back.
func (g gate) leave() {
	if g != nil {
		<-g
	}
}

// pass, between two slices, gives the slot to a goroutine waiting for
// it, lets the others run, and takes a slot again.
func (g gate) pass() {
	g.leave()
	runtime.Gosched()
	g.enter()
}
