// Package prefetch asks the CPU to start loading a cache line that a
// goroutine will read soon, so that a lookup into a table larger than the
// caches (the replay's ring of recent requests, the detector's key table at
// a million keys) finds its line loaded instead of waiting on memory.
//
// Line is a hint only: it reads nothing the program sees, faults on no
// address and changes no result, so a caller may pass the address of
// anything in a live Go value, of a slot another goroutine does not write.
// On amd64 it is one PREFETCHT0 (a call of an assembly function, about 1 ns,
// not inlined); elsewhere it does nothing.
//
// Boundaries: It owns the hint. It must not be used where a result would
// depend on it.
package prefetch
