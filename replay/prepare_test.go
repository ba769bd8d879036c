package replay

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/logjail/logjail/detector"
)

// prepRecorder is a Recorder and a Preparer that notes what it was asked.
type prepRecorder struct {
	prepares, prepared int
	flushes, atFlush   int // Flushes, and the states pending at the last
	preparedFirst      bool
}

func (r *prepRecorder) Decisions([]detector.Decision) {}

func (r *prepRecorder) Prepare(states int) {
	r.prepares++
	r.prepared = states
	r.preparedFirst = r.flushes == 0
}

func (r *prepRecorder) Flush(det *detector.Detector, _ time.Time) error {
	r.flushes++
	r.atFlush = det.Pending()
	return nil
}

// TestPrepareNearEnd: a replay of a file calls its Recorder's Prepare once,
// before its Flush, once it has read most of the file, with about the
// states its Flush then finds pending (here every one of its 3,000 keys
// comes back all along); a replay of stdin, whose size is unknown, never
// does.
func TestPrepareNearEnd(t *testing.T) {
	cfg := parseConfig(t, rateConfig)
	const lines, keys = 200_000, 3_000
	ls := make([]string, lines)
	for i := range ls {
		ls[i] = line(fmt.Sprintf("2001:db8:0:%x::1", i%keys), float64(i)/1000, 200) // a /64 each
	}
	r := &prepRecorder{}
	if _, err := Run(context.Background(), cfg, []Input{{Name: writeLog(t, ls), Source: cfg.Sources[0]}}, Options{Recorder: r}); err != nil {
		t.Fatal(err)
	}
	if r.prepares != 1 || !r.preparedFirst || r.flushes != 1 {
		t.Fatalf("Prepare called %d times (before the Flush: %v), Flush %d; want once each, Prepare first", r.prepares, r.preparedFirst, r.flushes)
	}
	// Every key is pending from the first seconds on: Prepare's guess, the
	// states over the share read (0.9 to 1), is their number to a ninth.
	if r.atFlush != keys || r.prepared < keys || r.prepared > keys*10/9 {
		t.Errorf("Prepare(%d), then %d states pending at the Flush; want %d, and the guess within [%d, %d]", r.prepared, r.atFlush, keys, keys, keys*10/9)
	}

	r = &prepRecorder{}
	in := strings.Join(ls, "\n") + "\n"
	if _, err := Run(context.Background(), cfg, []Input{{Name: "-", Source: cfg.Sources[0]}}, Options{Stdin: strings.NewReader(in), Recorder: r}); err != nil {
		t.Fatal(err)
	}
	if r.prepares != 0 || r.flushes != 1 {
		t.Errorf("stdin: Prepare called %d times, Flush %d; want 0 and 1", r.prepares, r.flushes)
	}
}
