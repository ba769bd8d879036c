package detector

import (
	"unsafe"

	"github.com/logjail/logjail/internal/prefetch"
	"github.com/logjail/logjail/rules"
)

// prefetchSlots is the smallest index Prefetch works on: below it (about
// 48k keys) the index, the records and the states stay in the caches, and a
// hint would only cost.
const prefetchSlots = 1 << 16

// Prefetching reports whether Prefetch does anything: whether the key
// table has grown to prefetchSlots, so that a caller skips making keys for
// it while it would not.
func (d *Detector) Prefetching() bool { return len(d.keys.slots) >= prefetchSlots }

// Prefetch asks the CPU to start loading what a charge of the fixed key k,
// due a few entries from now, will read (the package doc, "Fixed keys"):
// ahead 2 or more, the key's index slot; ahead 1, the record of the first
// slot from there whose hash bits are k's (slotMay: the slot loaded by the
// earlier call, or the next ones); ahead 0, the key's first state, once its
// record is found there. Each is one random read at a million keys; a
// caller that calls Prefetch with ahead 2, then 1, then 0 for the key of an
// entry it will charge, each some time before the next (replay's merger and
// the daemon: pipeline.Pipeline.PrefetchNext), has them loaded by the
// charge.
//
// A hint only: it changes nothing and reads only what a lookup reads; a key
// not in the table, a text key (k zero) or a table of fewer than
// prefetchSlots slots is left alone.
func (d *Detector) Prefetch(k rules.FixedKey, ahead int) {
	t := &d.keys
	if len(t.slots) < prefetchSlots || k.IsZero() {
		return
	}
	h := t.hashFixed(k)
	mask := uint32(len(t.slots) - 1)
	i := uint32(h) & mask
	if ahead >= 2 {
		prefetch.Line(unsafe.Pointer(&t.slots[i]))
		return
	}
	st := slotTag(h)
	s := t.slots[i]
	for n := 0; s != 0 && !slotMay(s, st); n++ {
		if n == prefetchProbes {
			return
		}
		i = (i + 1) & mask
		s = t.slots[i]
	}
	if s == 0 {
		return // not in the table
	}
	r := t.rec(slotID(s))
	if ahead == 1 {
		prefetch.Line(unsafe.Pointer(r))
		return
	}
	if r.hi != k.Hi || r.lo != k.Lo || r.tag != fixedTag(k) || r.head < 0 {
		return // another key with k's hash bits: the charge probes on
	}
	s0 := d.at(r.head)
	prefetch.Line(unsafe.Pointer(s0))
	prefetch.Line(unsafe.Add(unsafe.Pointer(s0), unsafe.Sizeof(*s0)-1))
}

// prefetchProbes is how many slots of other keys Prefetch passes over
// before it gives up: at most three quarters full, a run of other keys'
// slots that long is rare.
const prefetchProbes = 8

// reportAhead is how many states before it report asks for a state's
// loads (prefetchReport): report takes some 100 ns a state, about a load
// from memory, and the hint must come before the load, not with it.
const reportAhead = 8

// prefetchReport asks the CPU to start loading what report will read of
// the state in slot i: the state's two cache lines (changes' walk of its
// list loaded its first, long before for a large checkpoint), its key's
// record (its bits, formatted as its text) and its first peak. Changes
// reports the states moved on a list in the order they were charged, no
// order in the slab, so that at a large table each is a random read. A
// hint only, as Prefetch; below prefetchSlots, nothing.
func (d *Detector) prefetchReport(i int32) {
	if len(d.keys.slots) < prefetchSlots {
		return
	}
	s := d.at(i)
	prefetch.Line(unsafe.Pointer(d.keys.rec(s.kid)))
	prefetch.Line(unsafe.Pointer(s))
	prefetch.Line(unsafe.Add(unsafe.Pointer(s), unsafe.Sizeof(*s)-1))
	if p := d.peak(i, 0); p != nil {
		prefetch.Line(unsafe.Pointer(p))
	}
}

// prefetchMoved asks for the states changed since the last Changes
// (d.dirty, the moved ones among them) before changes walks each LRU
// list from its head to the moved states' end: a walk of a linked list,
// each state a load that waits for the one before, where these loads
// overlap. The newest first (the walk starts at the newest charged), at
// most prefetchMovedMax: more would leave the caches before the walk
// reaches them. BenchmarkChangesCold (16,384 of 200,000 states, caches
// flushed): 403-708 ns a state before, 312-457 with this and report's
// state loads asked for too (prefetchReport). A hint only.
func (d *Detector) prefetchMoved() {
	if len(d.keys.slots) < prefetchSlots {
		return
	}
	for k := len(d.dirty) - 1; k >= max(0, len(d.dirty)-prefetchMovedMax); k-- {
		prefetch.Line(unsafe.Pointer(d.at(d.dirty[k])))
	}
}

// prefetchMovedMax bounds prefetchMoved: 32,768 states, about 5 MiB with
// their second lines, twice the daemon's checkpoint (checkpointRows).
const prefetchMovedMax = 1 << 15
