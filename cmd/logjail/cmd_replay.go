package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/logjail/logjail/checkpoint"
	"github.com/logjail/logjail/goodbots"
	"github.com/logjail/logjail/internal/gcgoal"
	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/replay"
	"github.com/logjail/logjail/source"
	"github.com/logjail/logjail/state"
	"github.com/logjail/logjail/store"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// replayOptions are the flags of `logjail replay`.
type replayOptions struct {
	cfg    configFlag
	source string
	from   string
	to     string
	sweeps []string
	output string
	db     string
	html   string
	format formatFlags
}

func (o *replayOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	o.cfg.addFlag(cmd)
	f.StringVar(&o.source, "source", "", "read every file with this config source's format")
	f.StringVar(&o.from, "from", "", "skip entries before this time (RFC 3339 or a date, YYYY-MM-DD)")
	f.StringVar(&o.to, "to", "", "skip entries from this time on (RFC 3339 or a date)")
	f.StringArrayVar(&o.sweeps, "sweep", nil, "`RULE[I]=A..B:STEPS`: vary the first number of limit I of RULE over STEPS values from A to B (repeatable)")
	f.StringVarP(&o.output, "output", "o", "text", "text or json")
	f.StringVar(&o.db, "db", "", "write the decisions and the final state into this new database, to inspect like a live one")
	f.StringVar(&o.html, "html", "", "also write the report as one self-contained HTML page with charts to this `FILE`")
	o.format.addFlags(f)
}

func newReplayCmd(s streams) *cobra.Command {
	var o replayOptions
	cmd := &cobra.Command{
		Use:   "replay [flags] FILE...|-",
		Short: "Run the daemon's pipeline over old logs and report what it would do",
		Long: `replay reads old access logs (plain, .gz, globs, or - for stdin), merges them
by their lines' time, and runs them through the same rules and detector as the
daemon, acting on nothing. It reports, for tuning: lines read and rejected, per
rule the keys it would throttle and ban with their times and reasons, the top
keys by requests and CPU with their peak window values, and percentiles of
each limit's peak value over all keys. --sweep shows how many keys other
thresholds would catch, in the same pass. --html FILE also writes the report
as one self-contained page (no network): per rule, the busiest keys' window
values against each limit over time, the requests before each ban and the
keys closest to the limits, a timeline of the bans, and the decision table.

Each ban says after how many requests it came (AFTER, "12 req / 3s": the
requests the rule charged to the key, and the time from the client's first
request), and each rule the median. RISKY BANS, right after the summary,
lists the bans of clients that may be good, with the rule that made each:
burst (a rate rule banned a client whose last requests, up to 200 in 10 s,
were at least 80% 2xx/304 and half static files: a browser loading a heavy
page), monitor or crawler (a known user agent), range (a whole named range).

A file belongs to --source, else to the source whose paths (rotated siblings
included) match it, else to the only source: the rules' sources: see it as
that source. It is read with that source's format, unless a format flag
(--format, --log-format, --apache-format, --fpm-format, --json-field, the
same as parse's) says otherwise. When most lines of a file are rejected, a
hint on stderr names the presets that read it. The config is --config, else
` + defaultConfigPath + `, else the embedded example.

Exit codes: 0 done, every line parsed; 1 done, some lines rejected (the
report says how many and why); 2 usage error or a config that cannot be
loaded.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError(fmt.Errorf("replay: give the logs to replay (FILE..., globs, or - for stdin)\n\n%s", cmd.UsageString()))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			// A replay's live heap is small (the windows) while its garbage
			// (parsed lines) is large: collecting at 4x the live heap instead
			// of 2x saves a sixth of the CPU for some 20 MB more. A large
			// live heap (a million keys) grows by 32 MB at most between
			// collections (gcgoal). GOGC in the environment wins.
			if os.Getenv("GOGC") == "" {
				defer gcgoal.Start(400, 64<<20)()
			}
			return runReplay(cmd, &o, args, s)
		},
	}
	o.addFlags(cmd)
	return cmd
}

// parseWhen reads an RFC 3339 time or a date (midnight UTC).
func parseWhen(flag, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("--%s %q: want an RFC 3339 time or a date YYYY-MM-DD", flag, v)
}

func runReplay(cmd *cobra.Command, o *replayOptions, args []string, s streams) error {
	if o.output != "text" && o.output != "json" {
		return usageError(fmt.Errorf("--output %q: want text or json", o.output))
	}
	ro := replay.Options{AgentKind: agentKind, Charts: o.html != ""}
	var err error
	if ro.From, err = parseWhen("from", o.from); err != nil {
		return usageError(err)
	}
	if ro.To, err = parseWhen("to", o.to); err != nil {
		return usageError(err)
	}
	for _, sw := range o.sweeps {
		p, err := replay.ParseSweep(sw)
		if err != nil {
			return usageError(err)
		}
		ro.Sweeps = append(ro.Sweeps, p)
	}
	cfg, err := o.cfg.load(s.err, true)
	if err != nil {
		return err
	}
	files, err := source.Expand(args)
	if err != nil {
		return usageError(err)
	}
	inputs := make([]replay.Input, 0, len(files))
	for _, f := range files {
		src, err := sourceFor(cfg, f, o.source)
		if err != nil {
			return err
		}
		if o.format.overrides() {
			po, err := o.format.parserOptions(src)
			if err != nil {
				return usageError(err)
			}
			own := *src // the same source for the rules, read another way
			own.Parser = po
			src = &own
		}
		inputs = append(inputs, replay.Input{Name: f, Source: src})
	}
	ctx := cmd.Context()
	var db *replayDB
	if o.db != "" {
		// The database is made beside the replay (its fsyncs are waits,
		// not work): a failure cancels the replay, and its error is the
		// one returned.
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		db = openReplayDB(o.db, cancel)
		defer db.Close() // on the paths that return early
		ro.Recorder = db.w
		// A read of stdin is not cancelled: a replay of a pipe that stays
		// quiet would wait for it. Its database is made first.
		if slices.Contains(files, source.Stdin) {
			if err := db.openErr(); err != nil {
				return err
			}
		}
	}
	ro.Stdin = s.in
	if f, ok := s.err.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		ro.Progress = progress(s.err)
	}
	rep, err := replay.Run(ctx, cfg, inputs, ro)
	if ro.Progress != nil {
		fmt.Fprint(s.err, "\r\033[K")
	}
	if db != nil {
		if oerr := db.openErr(); oerr != nil {
			return oerr // the cause, not the replay's "context canceled"
		}
	}
	if err != nil {
		return err
	}
	// With --db, the report is written into a buffer while the database is
	// written, and printed once the database is complete: as before, a
	// database that cannot be written prints no report.
	out := s.out
	var buf bytes.Buffer
	if db != nil {
		out = &buf
	}
	if o.output == "json" {
		err = rep.WriteJSON(out)
	} else {
		err = rep.WriteText(out)
	}
	if err != nil {
		return err
	}
	if db != nil {
		if err := db.Close(); err != nil {
			return err
		}
		if _, err := buf.WriteTo(s.out); err != nil {
			return err
		}
	}
	if o.html != "" {
		if err := writeHTML(o.html, rep); err != nil {
			return err
		}
	}
	parsers := map[string]parser.Options{}
	for _, in := range inputs {
		parsers[in.Name] = in.Source.Parser
	}
	for _, f := range rep.Files {
		if h := formatHint(f.Name, parsers[f.Name], f.Format, f.Lines, f.Rejected); h != "" {
			fmt.Fprintln(s.err, h)
		}
	}
	if rep.Input.Rejected > 0 {
		return &exitError{code: exitNegative} // the report says how many and why
	}
	return nil
}

// writeHTML writes rep's HTML page into path.
func writeHTML(path string, rep *replay.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--html: %w", err)
	}
	if err := rep.WriteHTML(f); err != nil {
		f.Close()
		return fmt.Errorf("--html %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--html %s: %w", path, err)
	}
	return nil
}

// replayDB is the database of --db and the checkpoint Writer that fills
// it. Neither its making nor its writing waits on the replay's critical
// path (docs/performance.md, "replay --db's fixed cost"):
//
//   - openReplayDB makes it on a goroutine of its own while the replay
//     starts; the replay's one checkpoint waits for it (Checkpoint), and
//     a failure to make it cancels the replay. (With stdin among the
//     inputs, runReplay waits for it first: a read of stdin is not
//     cancelled.)
//   - The replay's Flush collects the final state on the replay's
//     goroutine (it reads the detector), into buffers the Writer made
//     ready beside the replay's last tenth (replay.Preparer), and w, an
//     asynchronous Writer, writes it on another, where Checkpoint then
//     closes the database, while the replay makes its report.
//   - Close waits for both.
//
// The database is opened with store.Options.NoSync: nothing waits for the
// disk (its making, its commit, its close: 3 to 12 ms of fsyncs on the
// replay's end, store's doc, "Settings"), and the one checkpoint is
// written once, into the database, not into a WAL first and copied at
// close (the rollback journal in memory until the close puts the database
// in WAL mode). A crash of logjail loses nothing written, but one while
// it writes that checkpoint, a power loss or a crash of the system in the
// half-minute before the system writes the pages back may leave the
// database unreadable, where synchronous=NORMAL and a WAL would have kept
// the database the replay made: the same replay of the same logs makes it
// again, and a database a replay fills at its end is worth nothing before.
type replayDB struct {
	path   string
	w      *checkpoint.Writer
	opened chan struct{} // closed once db or err is set
	db     *store.DB
	err    error // of the open
	// Set by Checkpoint, on the Writer's goroutine; read after w.Close,
	// which waits for it.
	closed   bool
	closeErr error
	done     bool // Close ran
	doneErr  error
}

var _ state.CheckpointSink = (*replayDB)(nil)

// openReplayDB starts making the database of --db at path, which must
// hold no state yet (a replay's keys mixed into another run's would mean
// nothing), and returns at once. An error making it is passed to fail.
func openReplayDB(path string, fail func(error)) *replayDB {
	r := &replayDB{path: path, opened: make(chan struct{})}
	r.w = checkpoint.NewAsyncWriter(r)
	go func() {
		defer close(r.opened)
		r.db, r.err = openNewDB(path)
		if r.err != nil {
			fail(r.err)
		}
	}()
	return r
}

// openNewDB opens the database at path, which must hold no state, not
// waiting for the disk (replayDB).
func openNewDB(path string) (*store.DB, error) {
	db, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		return nil, err
	}
	global, _, err := db.Global()
	if err == nil && global != nil {
		err = usageError(fmt.Errorf("--db %s already holds a state: give a new file", path))
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// openErr waits until the database is open and returns the error of its
// opening, if any.
func (r *replayDB) openErr() error {
	<-r.opened
	return r.err
}

// Checkpoint writes c, then closes the database: a replay writes one
// checkpoint, at its end (replay.Options.Recorder). A checkpoint that
// failed leaves it open, for the Writer to try once more.
func (r *replayDB) Checkpoint(c *state.Checkpoint) error {
	if err := r.openErr(); err != nil {
		return err
	}
	if r.closed {
		return fmt.Errorf("--db %s: a second checkpoint after the replay's last", r.path)
	}
	if err := r.db.Checkpoint(c); err != nil {
		return err
	}
	r.closed = true
	r.closeErr = r.db.Close()
	return nil
}

// ActiveBans is the database's (the Writer asks only when resumed, which a
// replay's is not).
func (r *replayDB) ActiveBans() ([]state.Ban, error) {
	if err := r.openErr(); err != nil {
		return nil, err
	}
	return r.db.ActiveBans()
}

// Global is the database's.
func (r *replayDB) Global() ([]byte, time.Time, error) {
	if err := r.openErr(); err != nil {
		return nil, time.Time{}, err
	}
	return r.db.Global()
}

// Close waits for the checkpoint being written (trying it once more if it
// failed) and closes the database, if the checkpoint did not. It returns
// the first error of the open, the checkpoint and the close; it is safe
// to call twice.
func (r *replayDB) Close() error {
	if r.done {
		return r.doneErr
	}
	r.done = true
	err := r.w.Close()
	if oerr := r.openErr(); oerr != nil {
		r.doneErr = oerr
		return oerr
	}
	if !r.closed {
		r.closed = true
		r.closeErr = r.db.Close()
	}
	r.doneErr = cmp.Or(err, r.closeErr)
	return r.doneErr
}

// progress returns a progress reporter that redraws one line on a
// terminal: a bar when the input's size is known, and the lines and rate.
func progress(w io.Writer) func(int64, float64) {
	start := time.Now()
	return func(lines int64, done float64) {
		rate := float64(lines) / max(time.Since(start).Seconds(), 1e-3)
		bar := ""
		if done >= 0 {
			const width = 30
			n := int(done * width)
			bar = fmt.Sprintf("[%s%s] %3.0f%% ", strings.Repeat("#", n), strings.Repeat(".", width-n), done*100)
		}
		fmt.Fprintf(w, "\rreplay: %s%s lines, %s lines/s    ", bar, human(lines), human(int64(rate)))
	}
}

func human(n int64) string {
	switch {
	case n >= 1e6:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.0fk", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

// agentKind tells replay which user agents are uptime monitors and
// crawlers, so that their bans are flagged as risky.
func agentKind(ua string) (name, kind string) {
	n, k := goodbots.Agent(ua)
	return n, k.String()
}
