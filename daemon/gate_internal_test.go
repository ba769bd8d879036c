package daemon

import (
	"sync"
	"sync/atomic"
	"testing"
)

// TestGateHoldsOneAtATime: a gate of one slot lets one goroutine in at a
// time, across its passes between slices, and every goroutine gets its
// turn (none is left waiting: the test ends).
func TestGateHoldsOneAtATime(t *testing.T) {
	g := make(gate, 1)
	var in, most atomic.Int32
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			g.enter()
			defer g.leave()
			for range 100 {
				n := in.Add(1)
				if n > most.Load() {
					most.Store(n)
				}
				in.Add(-1)
				g.pass()
			}
		})
	}
	wg.Wait()
	if m := most.Load(); m != 1 {
		t.Errorf("%d goroutines held the gate's one slot at once", m)
	}
	var none gate // the zero gate bounds nothing
	none.enter()
	none.pass()
	none.leave()
}
