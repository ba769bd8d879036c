// Package gcgoal bounds the memory the Go garbage collector lets the heap
// grow by between two collections, so that a process whose live heap is
// large (a detector tracking a million keys) does not need several times
// that heap in RSS.
//
// The collector starts a cycle when the heap reaches live × (1 + GOGC/100).
// With GOGC 400 (replay: its garbage, parsed lines, is large and its live
// heap small) a 300 MB detector would take 1.5 GB; with the default 100,
// 600 MB. Start sets GOGC to percent and, after every collection, lowers it
// for the next cycle so that the heap may grow by at most Room(live,
// spare) over the live heap: spare while the live heap is small (percent
// then applies in full in the common case, where it costs nothing),
// tapering to spare/2 as the live heap grows to twice spare, and spare/2
// from there on, however large it is. A lower GOGC means more collections;
// they cost little CPU because the large part of such a heap, the
// detector's slab and pools, holds no pointers (the collector does not
// scan it) and the garbage between two collections is the same few tens
// of megabytes as with a small heap.
//
// The state of a Start is its own (no package-level variables); the GC
// percent it sets is the process's, as GOGC is. Start is for main.
//
// Boundaries: It sets the runtime's GC percent (SetGCPercent) and nothing
// else; it imports nothing of logjail's.
package gcgoal

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// Room is how much the heap may grow over a live heap of live bytes:
// spare − live/4, and at least spare/2.
func Room(live, spare uint64) uint64 {
	if live/4 >= spare/2 {
		return spare / 2
	}
	return spare - live/4
}

// Percent returns the GOGC for a live heap of live bytes: percent, or less
// so that the heap grows by at most Room(live, spare) (at least 1).
func Percent(live uint64, percent int, spare uint64) int {
	if live == 0 || percent <= 0 {
		return percent
	}
	room := Room(live, spare)
	if uint64(percent)*live/100 <= room {
		return percent
	}
	return max(1, int(room*100/live))
}

// tuner is one Start: its settings and whether it was stopped.
type tuner struct {
	percent int
	spare   uint64
	stopped atomic.Bool
	sample  []metrics.Sample
}

// Start sets GOGC to percent, bounded after every collection as Percent
// says, and returns a function that stops the bounding and restores the
// GOGC in force before.
func Start(percent int, spare uint64) (stop func()) {
	t := &tuner{percent: percent, spare: spare, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	prev := debug.SetGCPercent(percent)
	t.arm()
	return func() {
		t.stopped.Store(true)
		debug.SetGCPercent(prev)
	}
}

// sentinel is garbage at once: its finalizer runs after the next
// collection, adjusts GOGC and makes the next sentinel.
type sentinel struct{ t *tuner }

func (t *tuner) arm() {
	runtime.SetFinalizer(&sentinel{t: t}, func(s *sentinel) {
		if s.t.stopped.Load() {
			return
		}
		s.t.adjust()
		s.t.arm()
	})
}

func (t *tuner) adjust() {
	metrics.Read(t.sample)
	if t.sample[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	p := Percent(t.sample[0].Value.Uint64(), t.percent, t.spare)
	if !t.stopped.Load() {
		debug.SetGCPercent(p)
	}
}
