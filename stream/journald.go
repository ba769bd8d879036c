package stream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/logjail/logjail/follow"
	"github.com/logjail/logjail/source"
	"github.com/logjail/logjail/state"
)

// JournaldOptions say what journal entries a journald source reads.
type JournaldOptions struct {
	Name string // the source's name: its position is saved as JournaldPath(Name)
	// Matches are journalctl's matches, FIELD=value each (CheckMatch):
	// entries of different fields must all match, of one field any.
	Matches []string
	// Directory and Files read these journal files instead of the
	// system's journal (journalctl --directory, --file).
	Directory string
	Files     []string
	// From is the saved position: reading resumes just after its cursor
	// (HeadHash), and its Line and Offset go on counting. Without a cursor
	// the source starts at the journal's end, or its start with FromStart.
	From      state.Position
	FromStart bool
	// Journalctl is the program (default "journalctl", on PATH).
	Journalctl string
	MaxBatch   int           // most lines a batch (default follow.DefaultMaxBatch)
	MinBackoff time.Duration // wait before the first restart of a journalctl that died (default 1s)
	MaxBackoff time.Duration // the longest wait between restarts (default 1m)
	Logger     *slog.Logger  // may be nil
	// Started, if set, is called with the PID of each journalctl started.
	Started func(pid int)
}

// JournaldPath is the position path of journald source name.
func JournaldPath(name string) string { return "journald:" + name }

// CheckMatch checks one journalctl match, FIELD=value: the field name of
// the journal's alphabet ([A-Z0-9_], not starting with a digit, at most 64
// bytes), a value without NUL or newline. Anything else would be another
// journalctl argument, or a match that can never hold.
func CheckMatch(m string) error {
	name, value, ok := strings.Cut(m, "=")
	if !ok {
		return fmt.Errorf("%q: want FIELD=value", m)
	}
	if name == "" || len(name) > 64 || name[0] >= '0' && name[0] <= '9' {
		return fmt.Errorf("%q: bad field name %q", m, name)
	}
	for _, c := range []byte(name) {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return fmt.Errorf("%q: bad field name %q: journal fields are [A-Z0-9_]", m, name)
		}
	}
	if strings.ContainsAny(value, "\x00\n") {
		return fmt.Errorf("%q: the value holds a NUL or newline", m)
	}
	return nil
}

// Journald reads the journal entries of o until ctx is done, sending one
// batch of lines at a time on out (it never closes out), each entry's
// MESSAGE a line, with the entries' cursors (follow.Batch.Cursors). It
// runs journalctl, and starts it again, after a growing wait, whenever it
// exits: it returns only ctx.Err(), or an error in o.
func Journald(ctx context.Context, o JournaldOptions, out chan<- follow.Batch) error {
	if o.Name == "" {
		return errors.New("journald: no source name")
	}
	for _, m := range o.Matches {
		if err := CheckMatch(m); err != nil {
			return fmt.Errorf("journald source %q: match %w", o.Name, err)
		}
	}
	if o.Journalctl == "" {
		o.Journalctl = "journalctl"
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = follow.DefaultMaxBatch
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(time.Minute, o.MinBackoff)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	j := &journal{o: o, out: out, log: log, pos: o.From, start: time.Now()}
	if o.Directory == "" && len(o.Files) == 0 {
		if why := journalAccess(); why != "" {
			log.Warn("journald: this process may see only its own entries", "why", why)
		}
	}
	wait := o.MinBackoff
	for {
		began := time.Now()
		read, err := j.run(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if read > 0 || time.Since(began) > o.MaxBackoff {
			wait = o.MinBackoff // it worked for a while: a new failure starts over
		}
		log.Warn("journalctl exited: starting it again", "err", err, "after", wait, "cursor", j.pos.HeadHash)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, o.MaxBackoff)
	}
}

// journal is one journald source's reading state across journalctl runs.
type journal struct {
	o     JournaldOptions
	out   chan<- follow.Batch
	log   *slog.Logger
	pos   state.Position // after the last line handed out: cursor, lines, bytes
	start time.Time      // when the source started: the --since of a restart that has no cursor yet
	runs  int
}

// args is journalctl's argv (without the program) for the next run.
func (j *journal) args() []string {
	a := []string{"--output=json", "--output-fields=MESSAGE", "--all", "--follow", "--merge", "--quiet", "--no-pager"}
	if j.o.Directory != "" {
		a = append(a, "--directory="+j.o.Directory)
	}
	for _, f := range j.o.Files {
		a = append(a, "--file="+f)
	}
	switch {
	case j.pos.HeadHash != "":
		a = append(a, "--after-cursor="+j.pos.HeadHash, "--no-tail")
	case j.runs > 0 || j.o.FromStart:
		// A restart before the first entry: whatever came since the
		// source started (or everything, from: start).
		if !j.o.FromStart {
			a = append(a, "--since=@"+strconv.FormatInt(j.start.Unix(), 10))
		}
		a = append(a, "--no-tail")
	default:
		a = append(a, "--lines=0")
	}
	// --follow alone shows the current boot only: --merge keeps the
	// entries of a boot that ended while logjail was down.
	return append(append(a, "--"), j.o.Matches...)
}

// run runs journalctl once, until it exits or ctx is done; it returns the
// entries read and why it ended.
func (j *journal) run(ctx context.Context) (int, error) {
	args := j.args()
	j.runs++
	cmd := exec.CommandContext(ctx, j.o.Journalctl, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 5 * time.Second
	stderr := &tailBuffer{max: 4 << 10}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	j.log.Info("journalctl started", "pid", cmd.Process.Pid, "args", args)
	if j.o.Started != nil {
		j.o.Started(cmd.Process.Pid)
	}
	read, rerr := j.read(ctx, stdout)
	if rerr != nil {
		cmd.Process.Kill() // a broken output, or ctx done: this run is over
	}
	werr := cmd.Wait()
	if msg := strings.TrimSpace(stderr.String()); msg != "" {
		werr = fmt.Errorf("%v: %s", werr, msg)
	}
	if rerr != nil && !errors.Is(rerr, context.Canceled) {
		return read, fmt.Errorf("%w (journalctl: %v)", rerr, werr)
	}
	if werr == nil {
		werr = errors.New("journalctl ended")
	}
	return read, werr
}

// entry is what an entry's JSON carries that the source reads.
type entry struct {
	Cursor  string          `json:"__CURSOR"`
	Message json.RawMessage `json:"MESSAGE"`
}

// read hands journalctl's entries out in batches until its output ends.
// A batch is sent once no more output is buffered, or it is full.
func (j *journal) read(ctx context.Context, r io.Reader) (int, error) {
	br := bufio.NewReaderSize(r, 256<<10)
	var b follow.Batch
	var long []byte
	read, skipped := 0, 0
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if len(line) > 0 && (err == nil || err == io.EOF) {
			var e entry
			if jerr := json.Unmarshal(line, &e); jerr != nil || e.Cursor == "" {
				skipped++
				j.log.Warn("journalctl: an output line is no entry", "err", jerr, "line", truncate(line, 200))
			} else if text, ok := message(e.Message); ok {
				j.add(&b, text, e.Cursor)
				read++
			} else {
				// No MESSAGE (or one too large even for --all): nothing
				// to parse; the cursor moves on with the next line.
				skipped++
			}
		}
		if err != nil {
			if len(b.Lines) > 0 {
				if serr := j.send(ctx, &b); serr != nil {
					return read, serr
				}
			}
			if err == io.EOF {
				return read, nil
			}
			return read, err
		}
		if len(b.Lines) >= j.o.MaxBatch || (len(b.Lines) > 0 && br.Buffered() == 0) {
			if serr := j.send(ctx, &b); serr != nil {
				return read, serr
			}
		}
	}
}

// add appends an entry's message to b, the position moving past it.
func (j *journal) add(b *follow.Batch, text []byte, cursor string) {
	n := len(text)
	text = trimEnd(text)
	truncated := false
	if len(text) > source.MaxLine {
		text, truncated = text[:source.MaxLine], true
	}
	j.pos.Line++
	j.pos.Offset += int64(n) + 1
	j.pos.HeadHash = cursor
	b.Lines = append(b.Lines, follow.Line{Text: string(text), Line: j.pos.Line, Offset: j.pos.Offset, Truncated: truncated})
	b.Cursors = append(b.Cursors, cursor)
}

// send hands b out and starts a new batch. The batch's File is no file:
// its Size is the last line's Offset, so that a batch always reads to the
// end (nothing more is known to be waiting).
func (j *journal) send(ctx context.Context, b *follow.Batch) error {
	b.Path = JournaldPath(j.o.Name)
	b.File = source.FileID{Size: j.pos.Offset}
	select {
	case j.out <- *b:
	case <-ctx.Done():
		return ctx.Err()
	}
	*b = follow.Batch{Lines: make([]follow.Line, 0, len(b.Lines)), Cursors: make([]string, 0, len(b.Cursors))}
	return nil
}

// message is the text of an entry's MESSAGE: a JSON string, or, for a
// message that is not valid UTF-8 or holds control characters, the array
// of its bytes that journalctl writes instead. A field given several
// times in one entry (an array of those) gives its first value.
func message(raw json.RawMessage) ([]byte, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] == 'n' { // absent, or null
		return nil, false
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, false
		}
		return []byte(s), true
	}
	var arr []json.RawMessage
	if json.Unmarshal(raw, &arr) != nil || len(arr) == 0 {
		return nil, false
	}
	if first := bytes.TrimSpace(arr[0]); len(first) > 0 && (first[0] == '"' || first[0] == '[') {
		return message(first) // several values: the first
	}
	var bs []int
	if json.Unmarshal(raw, &bs) != nil {
		return nil, false
	}
	out := make([]byte, len(bs))
	for i, c := range bs {
		if c < 0 || c > 255 {
			return nil, false
		}
		out[i] = byte(c)
	}
	return out, true
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return string(b)
}

// tailBuffer keeps the last max bytes written to it: journalctl's last
// words, for the log.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = slices.Delete(t.b, 0, over)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// journalAccess says why this process may not read the system's whole
// journal ("" when it may): root, and members of systemd-journal (or adm,
// wheel, which journald's files also grant) read every entry; others see
// only their own.
func journalAccess() string {
	if os.Geteuid() == 0 {
		return ""
	}
	gids, err := os.Getgroups()
	if err != nil {
		return err.Error()
	}
	gids = append(gids, os.Getegid())
	for _, name := range []string{"systemd-journal", "adm", "wheel"} {
		g, err := user.LookupGroup(name)
		if err != nil {
			continue
		}
		if gid, err := strconv.Atoi(g.Gid); err == nil && slices.Contains(gids, gid) {
			return ""
		}
	}
	return "not root and in none of the groups systemd-journal, adm, wheel (the unit's SupplementaryGroups=systemd-journal)"
}
