// Package replay runs the daemon's pipeline over old logs and acts on
// nothing: files (plain, gzip, bzip2, xz, zstd, stdin) are parsed on their
// own goroutines, merged by their lines' time (a k-way merge, so the order
// of the arguments does not matter and rotated siblings interleave), and fed
// to a pipeline.Pipeline. The result is a Report for a person tuning thresholds.
//
// Parsing: each input's reader cuts it into blocks of consecutive lines
// (blockLines, 512), which GOMAXPROCS workers parse beside the merger, one
// channel send a block. A line costs no allocation: its strings point into
// the chunk it was read in, and the entries' named fields (Entry.Fields,
// genlog.yaml's cpu=$upstream_http_x_cpu_time) go into one slice a block
// (parser.Parser.ParseStringBuf), used again with the block. Each line is
// parsed in its place in the block (parser.Parser.ParseStringTo: no Entry
// is copied), and the blocks the merger is done with wait in the pool's
// one free list for any reader to use again (pool: its length, and why).
//
// The chunks are read into buffers used again too
// (source.LineReader.RecycleChunks): a chunk's buffer is read into again
// once the merger has released every block with a line in it (blocks are
// released in file order: reader.inUse). Before, each 64 KiB chunk was new
// memory, its pages faulted in and garbage soon after: on the 1M-line
// genlog six collections and 22,600 page faults, now one and about 14,000.
// So nothing may keep a piece of a line past its block: the guard copies
// the entry it holds (with its strings and Fields), the report the user
// agents of risky bans, the parser a W3C directive (the reader copies
// lines that start with '#'), the workers' user-agent cache its texts;
// keys are built or interned (the detector's key table). Options.Observe
// is given entries whose strings are valid during the call only.
// TestRecycledChunksChangeNothing replays logs through 600-byte buffers
// and through new memory: the same report.
//
// What the merger would read of the configuration and of a line's text
// alone, the worker that parsed the line finds beside it (block.claims,
// block.ring), so that the merger reads neither the user
// agent nor the path, nor looks the address up in the lists: the entry's
// rules.Claim (rules.Config.ClaimOf, through the worker's own user-agent
// cache: the allow list, the deny list, the ranges, the crawler or
// monitor its user agent names), its record's flags in the ring of recent
// requests (recFlags: answered 2xx or 304, a static file) and its bucket
// there (recentHash of its address). The merger takes them for the entry
// it charges (pipeline.Pipeline.ProcessClaimed) and finds
// them itself for an entry the guard held (then not its block's).
// Everything that depends on the detector's or the report's state stays
// in the merger, in the log's order. TestWorkersFindAsMerger replays
// crawlers, bursts, an outlier and a jump both ways (Options.plain: the
// merger finds all): the same report; rules' TestClassifyClaimedAsKeys
// checks the claims against ClassifyKeys. Classifying whole in the workers
// (branch h-par, the charges made there) was tried twice and not kept: on
// a busy 2-core host it cost 10% more CPU a line and more wall time than
// the merger classifying (docs/performance.md, "Replay's CPU per line").
//
// Hints: the merger asks the CPU to load what it will read soon
// (internal/prefetch), where a lookup into a table larger than the caches
// would wait on memory. Before charging an entry it starts loading the
// bucket head in the ring of recent requests of the entry ringAhead (4)
// entries further in its block (recent.prefetchBucket: a head is a miss
// longer than one entry's charge) and the ring's next record, and adds the entry to the ring after its
// charge and decisions (nothing reads the ring in between: a ban is
// explained in a later entry's observe, or at the end); once the
// detector's key table is large (detector.Detector.Prefetching, about 48k
// keys) it gives pipeline.Pipeline.PrefetchNext the next entries of the
// block (the guard's reordering ignored: a hint changes nothing), so that
// their keys' index slots, records and states load during the charges
// before theirs. TestHintsChangeNothing replays 60,000 clients with and
// without the hints (Options.plain): the same report. The replay of the
// genlog costs about 6% less CPU a line, row 1's 1M-key log about 23% less
// (docs/performance.md, "Replay's hints": 1.65 to 1.55 µs, 1.46 to 1.13).
//
// Each file's entries pass its own pipeline.Guard before the merge: a line
// far ahead of its neighbours in its file is an outlier (Report
// Input.Outliers and Files[].Outliers), not charged, and cannot reorder the
// merge; a file that resumes after a real gap is followed. A line held at
// the end of its file is charged. There is no wall-clock rule in a replay.
//
// A replay is deterministic: the same input and configuration give the same
// report, whatever the machine's clock or zone.
//
// The text report (Report.WriteText) reads top-down: a summary first (lines
// read, parsed and rejected with the first rejected lines, requests charged
// and seen while banned, keys tracked, throttles, bans and unbans; a table
// of keys throttled and banned and of throttle and ban decisions per rule;
// the five busiest keys by requests and the five costliest by CPU seconds,
// each with the rules that banned it), then the risky bans, then each
// rule, then sweeps. A key's totals differ by rule (each rule charges the
// entries it matches): the summary shows the most any rule saw, taken from
// the rules' own top lists.
// No Go value is printed with %v: every line is written field by field.
//
// # Why a ban, after how many requests, and which bans are risky
//
// Every ban a rule makes carries After (JSON "after"; the text's AFTER
// column, "12 req / 3s"): the requests the rule had charged to the key,
// the banning one included (detector.Detector.Charged, exact), the
// client's requests seen in the log in its visit, and the time from its
// first request to the ban. Each rule's line gives the median of the
// charged count over the first ban of each key it banned (the lower
// middle one of an even count). The reason stays the detector's ("rate
// 31 per 10s > 30 (rule scanners)"), as the daemon logs it.
//
// A ban of a client that may be good is flagged (Decision.Risks,
// Report.Risky, the text's RISKY BANS section right after the summary,
// the rules with the most such bans first, at most 20 lines):
//
//   - burst: a rule with a rate, token-bucket or last-N limit banned a
//     client whose requests of the 10 s up to the ban (at most 200, and
//     at least 5) were at least 80% answered 2xx or 304 and at least 50%
//     static files (style sheets, scripts, images, fonts, media, by the
//     path's extension): a browser loading a heavy page. A flood of
//     404s, or of 200s on pages (a scraper), is not flagged.
//   - monitor, crawler: Options.AgentKind names the banning request's
//     user agent as one (goodbots.Agent, for the command to wire in;
//     nil checks nothing).
//   - range: the key is a whole named range (range:NAME), such as a
//     crawler's published range.
//
// All but the charged count come from a fixed ring of the last 65,536
// requests of the merged log (recent.go, about 4 MB whatever the number
// of keys: no map per client), each chained to the previous request of
// its address and carrying its client's visit so far (the time of its
// first request and the requests since). A visit starts at the client's
// first request in the log, or at its first after more than 65,536 lines
// without it; for most logs that is its whole history in them. The
// client is the banning request's address, or for a key that is not one
// address (a prefix, a range, a user, a user agent) the addresses the
// decision lists (those seen on the key within the rule's longest
// window): their visits summed, from the earliest; the burst is read on
// the banning address alone. A ban is explained once the log has passed
// its second (or at the end), with every request of that second in the
// ring, so that the explanation, like the decision, does not depend on
// how lines of one second from several files interleave; only a risky
// ban's user agent (RiskyBan.UserAgent, the banning request's, at most 256
// bytes, kept for risky bans only) may.
//
// # The HTML report
//
// WriteHTML writes one self-contained page (`logjail replay --html FILE`):
// its style, its script and its data are inline, and it refers to nothing
// outside itself (no link, no image, no font, no network), so it opens
// offline from a file and can be mailed. The page is rendered from the same
// Report as --output json: the report's JSON is in the page as data (the
// script element "report", JSON with <, >, &, U+2028 and U+2029 escaped, so
// that no log text can end the element or start a comment), beside the
// charts' own data (the script element "charts", charts.go). The script
// reads both with JSON.parse and draws SVG charts with
// createElementNS and textContent only: log text never goes through
// innerHTML. Without JavaScript, the tables (rendered by html/template)
// still show every number.
//
// The page shows, per rule: each limit's chart of the busiest keys' window
// values at their charges against the limit's line (the rule's top list by
// requests, or by CPU for a rule that weighs only CPU or duration, at most
// Options.Top keys), the requests before each ban, and the keys closest to
// the limits that the rule did not ban; then a timeline of every ban, and
// the decision table with reasons (sortable by any column).
//
// Decisions left silent elsewhere:
//   - Series are collected only with Options.Charts (the replay pays
//     nothing otherwise): each entry is classified a second time (the
//     pipeline keeps its charges to itself) and each charged key's windows
//     read back with detector.QueryOf (by the charge's fixed key, no parse
//     of its text), in the report's terms (a share "of machine" of all the
//     cores), rounded as the peaks. Each rule keeps
//     the series of its 64 heaviest keys by a space-saving count of
//     requests (of CPU and duration seconds for a rule that weighs only
//     those; charts.go), so a key with more than a 64th of the rule's
//     total is always among them; a key that entered the 64 late has its
//     series from then on. A series holds at most 500 points: past that,
//     neighbouring points merge into the severer value of each limit (at
//     the later time), so that the peak the JSON report gives survives.
//     A request blocked while its key is banned is no charge and no point.
//   - A near miss is a key the rule tracks at the end of the log (as
//     the percentiles) and did not ban (throttled ones included), ranked by its peak's ratio to the nearest limit (1
//     at the limit; for last N, the window over the shortest span); the
//     ten closest per rule. A limit with a zero threshold ("0 per 1d")
//     bans at the first charge and gives no near miss.
//   - The page's tables are bounded, the JSON in the page never is: the
//     decision table lists the first 10,000 decisions, each rule's ban
//     table its first 1,000 bans (a note says how many more); the charts
//     draw every ban.
//
// Boundaries: It owns replaying old logs through the pipeline and the
// report. It must not act on anything nor write the database itself: a
// Recorder it is given (checkpoint.Writer for --db) does.
package replay

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/internal/word"
	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/pipeline"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/source"
	"golang.org/x/sync/errgroup"
)

// Input is one log to replay and the source whose format reads it.
type Input struct {
	Name   string // file name, or "-" for stdin
	Source *rules.Source
}

// Options tune a replay.
type Options struct {
	From, To time.Time // entries outside [From, To) are skipped; zero: no bound
	Sweeps   []Sweep
	Stdin    io.Reader
	// Progress, when set, is called from the merging goroutine about every
	// 64k lines with the lines merged so far and the share of the input's
	// bytes read (0 to 1; -1 when unknown, as for stdin).
	Progress func(lines int64, done float64)
	// RejectSamples is how many rejected lines the report quotes (default 5).
	RejectSamples int
	// Top is how many keys each top list holds (default 10).
	Top int
	// Recorder, when set, receives every decision in order, and the
	// detector at the end of the replay with the log time of the newest
	// entry: `replay --db` writes them into a database.
	Recorder Recorder
	// Observe, when set, is called for every entry replayed (within From
	// and To), in the replay's order, after the pipeline processed it,
	// with the decisions it caused (the slice is reused): package eval
	// counts each client's requests up to its ban with it. e's strings are
	// valid during the call only (the chunk's buffer is read into again):
	// strings.Clone what is kept.
	Observe func(e *parser.Entry, ds []detector.Decision)
	// AgentKind, when set, names the uptime monitor or crawler a user
	// agent belongs to: kind "monitor" or "crawler" flags a ban of a
	// request with that user agent as risky (Risk); any other kind, or
	// "", is no agent it knows. Nil: user agents are not checked.
	AgentKind func(ua string) (name, kind string)
	// Charts, when set, keeps what Report.WriteHTML draws beyond the
	// report: the window values of each rule's busiest keys over time and
	// its near misses (the package doc, "The HTML report"). Unset, the
	// replay costs nothing more.
	Charts bool
	// plain turns the merger's hints off (TestHintsChangeNothing): no
	// Prefetch, and each entry goes into the ring of recent requests
	// before its charge, as before the hints.
	plain bool
	// noRecycle reads each chunk of the inputs into new memory, as before
	// the readers used their buffers again; chunkSize, when set, is the
	// size of those buffers (TestRecycledChunksChangeNothing).
	noRecycle bool
	chunkSize int
}

// Recorder keeps what a replay decides (checkpoint.Writer is one).
type Recorder interface {
	Decisions(ds []detector.Decision)
	Flush(det *detector.Detector, t time.Time) error
}

// Preparer is a Recorder that can ready its Flush ahead (checkpoint.Writer
// is one): once the readers have read prepareAt of the inputs' bytes, the
// merging goroutine calls Prepare with the key states then pending over
// the share read, which the Recorder readies room for beside the replay's
// end rather than after its last line. Inputs of unknown size (stdin) are
// never prepared for.
type Preparer interface {
	Prepare(states int)
}

// prepareAt is the share of the inputs read at which a Preparer is called:
// late enough that the states pending are about those at the end, early
// enough to leave it the rest of the replay (the merge lags the reads by
// the blocks in flight).
const prepareAt = 0.9

// blockLines is how many lines a reader hands to a parsing worker at once:
// large enough to make the channel cost vanish, small enough to stay in cache.
// An input's first block is only firstBlockLines long: until the merge
// reaches an input, its head is all it needs, and a replay of many rotated
// files holds one small block of each.
const (
	blockLines      = 512
	firstBlockLines = 16
)

// block is a run of consecutive lines of one input, parsed by a worker.
type block struct {
	parser  *parser.Parser
	src     *rules.Source // the input's, for its entries' claims
	lines   []string
	trunc   []int // indices of lines longer than source.MaxLine
	first   int   // 1-based number of lines[0]
	entries []parser.Entry
	// fields holds the entries' Entry.Fields (parser.ParseStringBuf): one
	// slice a block, not one a line, used again with the block (an entry
	// the guard holds has a copy of its own).
	fields []parser.Field
	// claims and ring are found by the worker for each entry, beside the
	// line it has just read, so that the merger does not read the line's
	// text again: its user-agent claim (rules.Config.ClaimOf) and what
	// the ring of recent requests takes (ringHint).
	claims []rules.Claim
	ring   []ringHint
	// memo is the last CLF time its worker read (parser.TimeMemo): a
	// block's lines mostly share their second.
	memo    parser.TimeMemo
	rejects []rejectAt
	chunk   uint64        // the reader's chunk its last line is in (source.LineReader.Chunk)
	token   bool          // holds one of the pool's tokens
	done    chan struct{} // closed when entries and rejects are ready
}

// ringHint is what the ring of recent requests takes of an entry
// (recent.addAt), found by the worker that parsed it, so that the merger
// neither reads the entry's address nor hashes it (recent.addAt says
// why): its address as words (word.Addr), its bucket (their recentHash,
// which the merger asks for ringAhead entries ahead: that brings the hint
// in too) and its record's flags (recFlags). One stream of 24 bytes an
// entry.
type ringHint struct {
	hi, lo uint64
	bucket uint32
	flags  uint8
}

type rejectAt struct {
	n   int
	err error
}

// parse parses every line of b, and finds its entries' claims (under cfg,
// through the worker's own kc) and flags.
func (b *block) parse(cfg *rules.Config, kc *rules.KeyCache) {
	t := 0
	b.entries = slices.Grow(b.entries[:0], len(b.lines))
	b.claims, b.ring = slices.Grow(b.claims[:0], len(b.lines)), slices.Grow(b.ring[:0], len(b.lines))
	for i, line := range b.lines {
		n := b.first + i
		// Parsed in its place in the block (parser.Parser.ParseStringTo),
		// not copied there: taken back if the line is no entry.
		k := len(b.entries)
		b.entries = b.entries[:k+1]
		e := &b.entries[k]
		var err error
		b.fields, err = b.parser.ParseStringMemo(line, n, b.fields, e, &b.memo)
		if per := b.parser.FieldsPerLine(); len(e.Fields) > 0 && i+1 < len(b.lines) && cap(b.fields)-len(b.fields) < per {
			// The block's first line with fields, or the room is used
			// up: room for a whole block at this line's count, and one
			// line more at the most, which the block keeps when it is
			// parsed into again (a format whose lines carry none, or
			// rarely, allocates nothing more). Room for the rest of
			// this block alone, or a new slice after its last line, was
			// a new slice every second parse of a block: 32 KB a block
			// of the genlog's, most of replay's page faults.
			b.fields = make([]parser.Field, 0, len(b.lines)*len(e.Fields)+per)
		}
		if err == nil && t < len(b.trunc) && b.trunc[t] == i {
			err = source.TooLong(n)
		}
		if t < len(b.trunc) && b.trunc[t] == i {
			t++
		}
		if err != nil {
			*e = parser.Entry{} // holds nothing of the line's chunk
			b.entries = b.entries[:k]
			if !errors.Is(err, parser.ErrDirective) { // a W3C directive: neither an entry nor a rejected line
				b.rejects = append(b.rejects, rejectAt{n, err})
			}
			continue
		}
		// The claim in its place (rules.Config.ClaimTo): a Claim built
		// aside and copied in was read back before its stores were done.
		j := len(b.claims)
		b.claims = b.claims[:j+1]
		cfg.ClaimTo(kc, b.src, e, &b.claims[j])
		hi, lo := word.Addr(e.IP)
		b.ring = append(b.ring, ringHint{hi, lo, uint32(recentHash(hi, lo)), recFlags(e)})
	}
	close(b.done)
}

// pool is the parsing workers all inputs share, and the budget that bounds
// the blocks in flight, so that replaying a year of rotated files costs
// about as much memory as replaying one.
//
// Every reader may always have one block in flight (sent and not yet
// released by the merger): the merger can always get the head of every
// input, so the merge never waits on a reader that waits on the budget.
// More blocks in flight, which let the workers parse ahead in parallel,
// each take one of the pool's tokens.
//
// The blocks the merger is done with wait in free for the readers to use
// again, whichever reader had them: as many as the tokens and two more,
// so that a busy host, where the merger may release several blocks before
// a reader runs again, drops none (with four places in a list of each
// reader's, as before, a replay of row 2's log made 449 blocks for 976,
// and each new block's 135 kB of entries was new memory, page faults and
// the kernel's zeroing). An input the merge has not reached holds its
// first block, and no more.
type pool struct {
	work   chan *block
	tokens chan struct{}
	free   chan *block
}

func newPool(workers int) *pool {
	p := &pool{work: make(chan *block, workers), tokens: make(chan struct{}, 4*workers+4)}
	p.free = make(chan *block, cap(p.tokens)+2)
	for range cap(p.tokens) {
		p.tokens <- struct{}{}
	}
	return p
}

// reader reads one input on its own goroutine: it splits the input into
// blocks of lines, in file order, which the pool's workers parse in
// parallel; the merger takes the blocks in file order (each when its worker
// is done), so a file's entries keep their order whatever the workers' timing.
type reader struct {
	in       Input
	pool     *pool
	order    chan *block   // the blocks in flight, in file order
	inflight atomic.Int32  // blocks sent and not yet released
	reached  atomic.Bool   // the merger has released one of its blocks
	drained  chan struct{} // the merger released the last block in flight
	// inUse is the oldest chunk of the input a line of a block not yet
	// released may be in: the chunk of the last released block's last
	// line (source.LineReader.RecycleChunks reads into the buffers of the
	// chunks before it again). noRecycle reads each chunk into new memory.
	inUse     atomic.Uint64
	noRecycle bool
	chunkSize int // the buffers' size (0: source's default)

	// Written by the goroutine of run before it sends its first block.
	format string
	log    atomic.Pointer[source.Log] // set once the input is open

	// Written by the merger only (account, the guard), read after the
	// replay.
	guard    *pipeline.Guard
	lines    int64
	rejected []RejectedLine // the first samples
	reasons  map[string]int64
	nrej     int64
}

func newReader(in Input, p *pool) *reader {
	return &reader{
		in:      in,
		pool:    p,
		reasons: map[string]int64{},
		order:   make(chan *block, cap(p.tokens)+1),
		drained: make(chan struct{}, 1),
	}
}

func (r *reader) run(ctx context.Context, stdin io.Reader) error {
	defer close(r.order)
	lg, err := source.OpenLog(r.in.Name, r.in.Source.Parser, stdin)
	if err != nil {
		return err
	}
	defer lg.Close()
	r.format = lg.Parser.Name()
	r.log.Store(lg)
	if !r.noRecycle {
		lg.Lines.RecycleChunks(r.inUse.Load, r.chunkSize)
	}

	size := firstBlockLines
	for {
		// Wait for room in the budget before reading on: an input the merge
		// has not reached yet holds only its first block.
		b := r.newBlock(lg.Parser, size)
		if err := r.acquire(ctx, b); err != nil {
			return err
		}
		for len(b.lines) < size {
			// The lines in one loop (source.LineReader.AppendLines), up
			// to a truncated one.
			k := len(b.lines)
			var first int
			var ok bool
			if b.lines, first, ok = lg.Lines.AppendLines(b.lines, size-k); !ok {
				break
			}
			if k == 0 {
				b.first = first
			}
			if lg.Lines.Truncated() {
				b.trunc = append(b.trunc, len(b.lines)-1)
			}
			for j := k; j < len(b.lines); j++ {
				if line := b.lines[j]; line != "" && line[0] == '#' {
					// A directive (W3C's #Fields:) or a comment: the
					// parser may keep a directive's text, which must
					// outlive the chunk's buffer (rare lines, copied).
					// Noted in file order: the blocks are parsed in any.
					b.lines[j] = strings.Clone(line)
					lg.Parser.Directive(b.lines[j], first+j-k)
				}
			}
			b.chunk = lg.Lines.Chunk()
		}
		if len(b.lines) == 0 {
			r.release(b)
			break
		}
		full := len(b.lines) == size // b is not the reader's once sent: the pool's free list may give it to another
		if err := r.send(ctx, b); err != nil {
			return err
		}
		if !full {
			break
		}
		size = blockLines
	}
	if err := lg.Lines.Err(); err != nil {
		return fmt.Errorf("%s: %w", r.in.Name, err)
	}
	return nil
}

// acquire waits for room in the budget for b: the reader's own slot when
// it has no block in flight, else, once the merge has reached the input, one
// of the pool's tokens. An input the merge has not reached takes no token:
// with many rotated files, the tokens go to the file being replayed.
func (r *reader) acquire(ctx context.Context, b *block) error {
	for r.inflight.Load() > 0 {
		var tokens chan struct{}
		if r.reached.Load() {
			tokens = r.pool.tokens
		}
		select {
		case <-tokens:
			b.token = true
			r.inflight.Add(1)
			return nil
		case <-r.drained: // look again: the reader's own slot may be free
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r.inflight.Add(1)
	return nil
}

// send hands b to the merger (in file order) and to the workers.
func (r *reader) send(ctx context.Context, b *block) error {
	select {
	case r.order <- b:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case r.pool.work <- b:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// release gives back what b held in the budget and keeps b for reuse. The
// merger calls it when it is done with b.
func (r *reader) release(b *block) {
	r.reached.Store(true)
	if b.chunk > 0 {
		// Blocks are released in file order: no line of a chunk before
		// b's last line's is read any more (the guard copies the entry it
		// holds, the report the user agents it keeps).
		r.inUse.Store(b.chunk)
	}
	if b.token {
		b.token = false
		r.pool.tokens <- struct{}{}
	}
	if r.inflight.Add(-1) == 0 {
		select {
		case r.drained <- struct{}{}:
		default:
		}
	}
	// The entries and fields keep their strings (views of the chunks'
	// buffers, read into again anyway) until the block is parsed into
	// again, which writes every entry whole (parser.Parser.ParseStringTo):
	// clearing them here was the merger's (the replay's serial part) 240
	// bytes a line.
	b.fields = b.fields[:0]
	select {
	case r.pool.free <- b:
	default:
	}
}

func (r *reader) newBlock(p *parser.Parser, size int) *block {
	select {
	case b := <-r.pool.free:
		clear(b.lines)
		b.lines, b.trunc, b.entries, b.rejects, b.chunk = b.lines[:0], b.trunc[:0], b.entries[:0], b.rejects[:0], 0
		b.parser, b.src, b.done = p, r.in.Source, make(chan struct{})
		return b
	default:
		return &block{
			parser:  p,
			src:     r.in.Source,
			lines:   make([]string, 0, size),
			entries: make([]parser.Entry, 0, size),
			done:    make(chan struct{}),
		}
	}
}

// account adds a parsed block's counts and rejected lines, in file order.
func (r *reader) account(b *block, samples int) {
	r.lines += int64(len(b.lines))
	for _, rj := range b.rejects {
		r.nrej++
		reason := rj.err.Error()
		var pe *parser.Error
		if errors.As(rj.err, &pe) {
			reason = pe.Field + ": " + pe.Reason
		}
		r.reasons[reason]++
		if len(r.rejected) < samples {
			r.rejected = append(r.rejected, RejectedLine{File: r.in.Name, Line: rj.n, Error: rj.err.Error()})
		}
	}
}

// cursor is a reader's position in the k-way merge. Its entries pass the
// input's own pipeline.Guard before they reach the merge, so that a line
// far ahead of its neighbours neither moves the clock nor reorders the
// merge (pipeline's doc, "One line cannot move the clock").
type cursor struct {
	r       *reader
	b       *block
	i       int
	samples int
	g       *pipeline.Guard
	// q holds the entries the guard passed on and the merge has not
	// taken: at most the entry it released and the block's own entry
	// (pointers into the guard and the block, valid until the next step).
	q      [2]*parser.Entry
	qn, qi int
}

func (c *cursor) head() *parser.Entry { return c.q[c.qi] }

// next moves to the next entry the guard passes on; it reports false at
// the end of the reader's input.
func (c *cursor) next(ctx context.Context) (bool, error) {
	c.qi++
	for c.qi >= c.qn {
		c.qn, c.qi = 0, 0
		ok, err := c.nextRaw(ctx)
		if err != nil {
			return false, err
		}
		if !ok {
			// The end of the file: nothing contradicts a held line.
			if e := c.g.ReleaseHeld(); e != nil {
				c.q[0], c.qn = e, 1
				return true, nil
			}
			return false, nil
		}
		e := &c.b.entries[c.i]
		released, charge := c.g.Step(e)
		if released != nil {
			c.q[c.qn] = released
			c.qn++
		}
		if charge {
			c.q[c.qn] = e
			c.qn++
		}
	}
	return true, nil
}

// nextRaw moves to the input's next parsed entry, waiting for the next
// parsed block when needed; it reports false at the end of the input.
func (c *cursor) nextRaw(ctx context.Context) (bool, error) {
	c.i++
	for c.b == nil || c.i >= len(c.b.entries) {
		if c.b != nil {
			c.r.release(c.b)
			c.b = nil
		}
		var b *block
		var ok bool
		select {
		case b, ok = <-c.r.order:
			if !ok {
				return false, nil // the input is done
			}
		case <-ctx.Done():
			return false, ctx.Err()
		}
		select {
		case <-b.done:
		case <-ctx.Done():
			return false, ctx.Err()
		}
		c.r.account(b, c.samples)
		c.b, c.i = b, 0
	}
	return true, nil
}

// done is the share of the inputs' bytes read so far, -1 when unknown.
func done(readers []*reader) float64 {
	var read, size int64
	for _, r := range readers {
		lg := r.log.Load()
		if lg == nil || lg.Size == 0 {
			return -1
		}
		read, size = read+lg.Read(), size+lg.Size
	}
	return min(1, float64(read)/float64(size))
}

// cursorHeap orders cursors by their head entry's time, then by input order,
// so that equal times come out in a stable order.
type cursorHeap []*cursor

func (h cursorHeap) Len() int { return len(h) }
func (h cursorHeap) Less(i, j int) bool {
	a, b := h[i].head().Time, h[j].head().Time
	if !a.Equal(b) {
		return a.Before(b)
	}
	return h[i].r.in.Source.Index < h[j].r.in.Source.Index || (h[i].r.in.Source.Index == h[j].r.in.Source.Index && h[i].r.in.Name < h[j].r.in.Name)
}
func (h cursorHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *cursorHeap) Push(x any)   { *h = append(*h, x.(*cursor)) }
func (h *cursorHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// merger is what the merging goroutine does with each entry of the
// merged log, in order: the report's and the pipeline's work, which depends
// on the entries before it.
type merger struct {
	o         *Options
	rep       *Report
	p         *pipeline.Pipeline
	sweeps    []*sweepRun
	decisions []detector.Decision
	bounded   bool // o.From or o.To is set
}

// entry processes e, the next entry of the merged log, read from src. b
// and i are e's block and its place in it, b nil for an entry that is no
// longer its block's (the guard held it): then the merger finds e's claim
// and flags itself.
func (m *merger) entry(src *rules.Source, e *parser.Entry, b *block, i int) {
	o, rep, main := m.o, m.rep, m.p
	if m.bounded && (!(o.From.IsZero() || !e.Time.Before(o.From)) || !(o.To.IsZero() || e.Time.Before(o.To))) {
		rep.Input.Skipped++
		return
	}
	pre := !o.plain && b != nil
	rep.observe(e)
	if pre {
		// e's bucket head in the ring of recent requests was asked for
		// ringAhead entries ago (or now, for the first entries of its
		// block): ask for the head of the entry ringAhead further.
		if i == 0 {
			for j := range min(ringAhead, len(b.ring)) {
				rep.recent.prefetchBucket(b.ring[j].bucket)
			}
		}
		if j := i + ringAhead; j < len(b.ring) {
			rep.recent.prefetchBucket(b.ring[j].bucket)
		}
		rep.recent.prefetchNext()
	} else {
		rep.recent.prefetch(e)
	}
	if rep.charts != nil {
		rep.charts.before(main.Detector(), src, e)
	}
	if o.plain {
		rep.record(e)
	} else if b != nil && main.Prefetching() {
		// Hints for the next entries of e's block
		// (pipeline.Pipeline.PrefetchNext): their key slots, records and
		// states load while e is charged.
		main.PrefetchNext(b.entries, i)
	}
	// e's claim and flags, found by its worker; not for an entry the
	// guard held (b nil).
	var cl *rules.Claim
	if pre {
		cl = &b.claims[i]
	}
	m.decisions = main.ProcessClaimed(src, e, cl, m.decisions[:0])
	decisions := m.decisions
	if len(decisions) > 0 {
		rep.decide(decisions, e, main.Detector())
	}
	switch {
	case pre:
		h := &b.ring[i]
		rep.recent.addAt(e, h.hi, h.lo, h.flags, uint64(h.bucket))
	case !o.plain:
		rep.record(e)
	}
	if rep.charts != nil {
		rep.charts.after(main.Detector(), e)
	}
	if o.Recorder != nil && len(decisions) > 0 {
		o.Recorder.Decisions(decisions)
	}
	if o.Observe != nil {
		o.Observe(e, decisions)
	}
	for _, s := range m.sweeps {
		s.process(src, e)
	}
}

// Run replays inputs under cfg and returns the report.
func Run(ctx context.Context, cfg *rules.Config, inputs []Input, o Options) (*Report, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if o.RejectSamples == 0 {
		o.RejectSamples = 5
	}
	if o.Top == 0 {
		o.Top = 10
	}
	main := pipeline.New(cfg)
	sweeps, err := newSweepRuns(cfg, o.Sweeps)
	if err != nil {
		return nil, err
	}

	g, gctx := errgroup.WithContext(ctx)
	readers := make([]*reader, len(inputs))
	workers := max(1, runtime.GOMAXPROCS(0))
	pl := newPool(workers)
	var splitters sync.WaitGroup
	for i, in := range inputs {
		r := newReader(in, pl)
		r.guard = pipeline.NewGuard(cfg)
		r.noRecycle, r.chunkSize = o.noRecycle, o.chunkSize
		readers[i] = r
		splitters.Add(1)
		g.Go(func() error {
			defer splitters.Done()
			return r.run(gctx, o.Stdin)
		})
	}
	for range workers {
		g.Go(func() error {
			var kc rules.KeyCache // this worker's cache of user agents (ClaimOf)
			for b := range pl.work {
				b.parse(cfg, &kc)
			}
			return nil
		})
	}
	go func() {
		splitters.Wait()
		close(pl.work)
	}()

	rep := newReport(cfg, o.RejectSamples, o.AgentKind)
	if o.Charts {
		rep.charts = newCharts(cfg)
	}
	g.Go(func() error {
		// Drain every reader even after an error elsewhere, so none blocks.
		defer func() {
			for _, r := range readers {
				for range r.order {
				}
			}
		}()
		h := make(cursorHeap, 0, len(readers))
		for _, r := range readers {
			c := &cursor{r: r, i: -1, samples: o.RejectSamples, g: r.guard}
			ok, err := c.next(gctx)
			if err != nil {
				return err
			}
			if ok {
				h = append(h, c)
			}
		}
		heap.Init(&h)
		m := &merger{o: &o, rep: rep, p: main, sweeps: sweeps, bounded: !o.From.IsZero() || !o.To.IsZero()}
		prep, _ := o.Recorder.(Preparer)
		var seen int64
		for len(h) > 0 {
			c := h[0]
			e := c.head()
			seen++
			if seen&0xffff == 0 && (o.Progress != nil || prep != nil) {
				share := done(readers)
				if o.Progress != nil {
					o.Progress(seen, share)
				}
				if prep != nil && share >= prepareAt {
					// Scaled to the whole input, as if the states
					// pending grew with the bytes read (new keys to
					// the end): a guess short of the end's states
					// would be of no use to it.
					prep.Prepare(int(float64(main.Detector().Pending()) / share))
					prep = nil
				}
			}
			// e is c's block's entry c.i unless the guard held it.
			if c.b != nil && c.i < len(c.b.entries) && e == &c.b.entries[c.i] {
				m.entry(c.r.in.Source, e, c.b, c.i)
			} else {
				m.entry(c.r.in.Source, e, nil, 0)
			}
			ok, err := c.next(gctx)
			if err != nil {
				return err
			}
			if ok {
				if len(h) > 1 { // one input (most replays): no order to fix
					heap.Fix(&h, 0)
				}
			} else {
				heap.Pop(&h)
			}
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for _, r := range readers {
		rep.addReader(r)
	}
	if o.Recorder != nil {
		if err := o.Recorder.Flush(main.Detector(), rep.last); err != nil {
			return nil, err
		}
	}
	rep.finish(main, o.Top)
	for _, s := range sweeps {
		rep.Sweeps = append(rep.Sweeps, s.result())
	}
	return rep, nil
}
