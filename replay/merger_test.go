package replay

import (
	"os"
	"runtime"
	"syscall"
	"testing"

	"github.com/logjail/logjail/pipeline"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/source"
)

// parsedBlocks reads log under cfg's first source and parses it into
// blocks of blockLines lines, as the reader and the workers would.
func parsedBlocks(tb testing.TB, cfg *rules.Config, log string, maxLines int) []*block {
	tb.Helper()
	lg, err := source.OpenLog(log, cfg.Sources[0].Parser, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer lg.Close()
	var kc rules.KeyCache
	var blocks []*block
	for n := 0; n < maxLines; {
		b := &block{parser: lg.Parser, src: cfg.Sources[0], done: make(chan struct{})}
		for len(b.lines) < blockLines && n < maxLines {
			line, num, ok := lg.Lines.Next()
			if !ok {
				break
			}
			if len(b.lines) == 0 {
				b.first = num
			}
			b.lines = append(b.lines, line)
			n++
		}
		if len(b.lines) == 0 {
			break
		}
		b.parse(cfg, &kc)
		blocks = append(blocks, b)
		if len(b.lines) < blockLines {
			break
		}
	}
	return blocks
}

// BenchmarkMerger is the merging goroutine of a replay alone (merger.entry:
// the report, the pipeline's classifying and charges, the ring of recent
// requests), on entries parsed ahead, with testdata/genlog.yaml: the serial
// part of a replay, which bounds its wall time on free cores. The log is
// $LOGJAIL_GENLOG's first 300,000 lines (the 1M-line genlog of make bench,
// ~/.cache/logjail-bench/access-1000000-7.log), else a generated 200k-line
// log. ns/line is the merger's time a line.
func BenchmarkMerger(b *testing.B) {
	cfg, blocks := benchBlocks(b)
	lines := 0
	for _, bl := range blocks {
		lines += len(bl.entries)
	}
	src := cfg.Sources[0]
	// The merger's own CPU time (its thread's), which a busy host's
	// scheduling does not inflate as it does the wall time.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0 := threadCPU(b)
	b.ReportAllocs()
	for b.Loop() {
		o := Options{Top: 10, RejectSamples: 5}
		m := &merger{o: &o, rep: newReport(cfg, 5, nil), p: pipeline.New(cfg)}
		for _, bl := range blocks {
			for i := range bl.entries {
				m.entry(src, &bl.entries[i], bl, i)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(lines), "ns/line")
	b.ReportMetric(float64(threadCPU(b)-cpu0)/float64(b.N)/float64(lines), "cpu-ns/line")
}

// benchBlocks is the config and the parsed blocks BenchmarkMerger and
// BenchmarkWorkers run on: testdata/genlog.yaml and $LOGJAIL_GENLOG's first
// 300,000 lines, else a generated 200k-line log's.
func benchBlocks(b *testing.B) (*rules.Config, []*block) {
	cfg, err := rules.Load("../testdata/genlog.yaml", rules.Options{})
	if err != nil {
		b.Fatal(err)
	}
	log := os.Getenv("LOGJAIL_GENLOG")
	if log == "" {
		log, _ = genlog(b, 200000, 7)
	}
	return cfg, parsedBlocks(b, cfg, log, 300000)
}

// threadCPU is the calling thread's user and system CPU time, in ns.
func threadCPU(tb testing.TB) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1, &ru); err != nil { // RUSAGE_THREAD
		tb.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkWorkers is a replay's parse workers alone (block.parse: the
// parser, the claims, the flags and the ring's buckets of each line), on
// the same lines as BenchmarkMerger ($LOGJAIL_GENLOG's first 300,000, else
// a generated 200k-line log) cut into blocks of blockLines as the reader
// cuts them, read once before the timer; one worker, on its own thread.
// ns/line is a worker's time a line, cpu-ns/line its thread's CPU.
func BenchmarkWorkers(b *testing.B) {
	cfg, blocks := benchBlocks(b)
	lines := 0
	for _, bl := range blocks {
		lines += len(bl.lines)
	}
	var kc rules.KeyCache
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0 := threadCPU(b)
	b.ReportAllocs()
	for b.Loop() {
		for _, bl := range blocks {
			bl.rejects, bl.done = bl.rejects[:0], make(chan struct{})
			clear(bl.fields)
			bl.fields = bl.fields[:0]
			bl.parse(cfg, &kc)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(lines), "ns/line")
	b.ReportMetric(float64(threadCPU(b)-cpu0)/float64(b.N)/float64(lines), "cpu-ns/line")
}
