package gcgoal

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestPercent(t *testing.T) {
	const mb = 1 << 20
	for _, c := range []struct {
		name    string
		live    uint64
		percent int
		want    int
	}{
		{"small heap: percent in full", 10 * mb, 400, 400},
		{"room tapers: 64 - 4 MB", 16 * mb, 400, 375},
		{"room tapers: 64 - 8 MB", 32 * mb, 400, 175},
		{"room at half the spare", 128 * mb, 400, 25},
		{"large heap: 32 MB of room", 320 * mb, 400, 10},
		{"large heap, default GOGC", 320 * mb, 100, 10},
		{"nothing live yet", 0, 400, 400},
		{"huge heap: at least 1", 1 << 50, 400, 1},
		{"percent below the room", 800 * mb, 2, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Percent(c.live, c.percent, 64*mb); got != c.want {
				t.Errorf("Percent(%d MB, %d) = %d, want %d", c.live/mb, c.percent, got, c.want)
			}
		})
	}
}

// TestStart: a large live heap lowers GOGC after a collection; stop puts
// back the GOGC before Start.
func TestStart(t *testing.T) {
	before := debug.SetGCPercent(77)
	defer debug.SetGCPercent(before)
	stop := Start(400, 16<<20)
	live := make([]byte, 64<<20) // 64 MB live: 8 MB of room, GOGC 12
	for i := range live {
		live[i] = byte(i)
	}
	// The finalizer runs on its own goroutine after a cycle: collect until
	// it has lowered GOGC (a few cycles at most).
	got := 400
	for range 20 {
		runtime.GC()
		runtime.Gosched()
		if got = debug.SetGCPercent(-1); got != -1 {
			debug.SetGCPercent(got)
		}
		if got < 400 {
			break
		}
	}
	runtime.KeepAlive(live)
	if got < 10 || got > 12 { // 8 MB over the 64 MB and whatever else the test holds
		t.Errorf("GOGC with 64 MB live = %d, want 10 to 12", got)
	}
	stop()
	if p := debug.SetGCPercent(before); p != 77 {
		t.Errorf("GOGC after stop = %d, want 77", p)
	}
}
