package prefetch

import "unsafe"

// Line asks for the cache line holding p to be loaded into every cache
// level.
//
//go:noescape
func Line(p unsafe.Pointer)
