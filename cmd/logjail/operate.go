package main

// What the operator's commands (list, ban, unban, top, history, status,
// clean) share: the daemon's socket or, when no daemon answers, the
// database (the same deciding function either way: control/doc.go); exit
// codes for the API's errors; output.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/logjail/logjail/checkpoint"
	"github.com/logjail/logjail/control"
	"github.com/logjail/logjail/daemon"
	"github.com/logjail/logjail/ops"
	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/pipeline"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/state"
	"github.com/logjail/logjail/store"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// operatorExits is the exit code paragraph of the operator's commands.
const operatorExits = `Exit codes: 0 done; 1 a negative answer (nothing matched; a ban refused for
an allowed key); 2 a usage error or a configuration that cannot be loaded;
3 the daemon is needed and unreachable (it holds the database but does not
answer on its control socket), or the caller may not reach it (not root nor
in group logjail).`

// changeTimeout bounds a ban or an unban through the daemon: it returns
// once every action applied it.
const changeTimeout = 2 * time.Minute

// readTimeout bounds the other calls to the daemon.
const readTimeout = 30 * time.Second

// outputFlag is --output.
type outputFlag struct{ format string }

func (o *outputFlag) addFlag(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&o.format, "output", "o", "text", "text or json")
}

func (o *outputFlag) check() error {
	if o.format != "text" && o.format != "json" {
		return usageError(fmt.Errorf("--output %q: want text or json", o.format))
	}
	return nil
}

func (o *outputFlag) json() bool { return o.format == "json" }

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// headersFlag is --no-headers, of the commands that print a table (list,
// top, history): on a terminal they print a header and aligned columns,
// else (or with --no-headers) one row a line, fields separated by tabs.
type headersFlag struct{ none bool }

func (h *headersFlag) addFlag(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&h.none, "no-headers", false, "no header, one row a line with tab-separated fields, as when not on a terminal (for scripts)")
}

// table reports whether out gets the terminal's table: a header and
// aligned columns.
func (h *headersFlag) table(out io.Writer) bool { return !h.none && isTerminal(out) }

// sayEmpty writes msg, the line that says a listing is empty: on stdout
// under a terminal's table, else on stderr, so that a script reading stdout
// sees no rows and a person still reads why.
func sayEmpty(s streams, table bool, msg string) {
	if table {
		fmt.Fprintln(s.out, msg)
	} else {
		fmt.Fprintln(s.err, msg)
	}
}

// plural writes n and the noun for it: "1 source", "2 sources", "1 entry",
// "3 entries".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// isTerminal reports whether w is a terminal: then tables get a header and
// aligned columns.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// table writes rows: on a terminal, aligned under a header; else one row a
// line, fields separated by tabs, no header (for scripts).
type table struct {
	tw       *tabwriter.Writer
	w        io.Writer
	terminal bool
}

func newTable(w io.Writer, terminal bool, header ...string) *table {
	t := &table{w: w, terminal: terminal}
	if terminal {
		t.tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		t.row(header...)
	}
	return t
}

func (t *table) row(fields ...string) {
	var b []byte
	for i, f := range fields {
		b = appendCell(b, i == 0, f)
	}
	t.line(append(b, '\n'))
}

// line writes a row made with appendCell, its newline included.
func (t *table) line(b []byte) {
	if t.tw != nil {
		t.tw.Write(b)
		return
	}
	t.w.Write(b)
}

// appendCell appends a row's field s: the tab before it unless it is the
// first, and s cleaned (clean).
func appendCell(b []byte, first bool, s string) []byte {
	if !first {
		b = append(b, '\t')
	}
	return append(b, clean(s)...)
}

func (t *table) flush() error {
	if t.tw != nil {
		return t.tw.Flush()
	}
	return nil
}

// clean keeps a field on its line and in its column, and the terminal
// safe: a control character a client wrote (an ESC, a newline, a tab) is
// shown as its escape (`\x1b`), never written raw (parser.Printable).
func clean(s string) string {
	if s == "" {
		return "-"
	}
	return parser.Printable(s)
}

// fmtTime is a time for people: local, to the second.
func fmtTime(t time.Time) string { return string(appendTime(nil, t)) }

// appendTime appends fmtTime(t) to b: "-" for the zero time, else
// appendClock of t in the local zone (printable, never empty: it needs no
// clean).
func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, '-')
	}
	return appendClock(b, t.Local())
}

// appendClock appends t.Format("2006-01-02 15:04:05"). A list writes two
// a ban, so the years 1000 to 9999 are written digit by digit rather than
// through Format's layout (the same text: TestAppendClock).
func appendClock(b []byte, t time.Time) []byte {
	if y := t.Year(); y < 1000 || y > 9999 {
		return t.AppendFormat(b, "2006-01-02 15:04:05")
	}
	return control.AppendDateTime(b, t, ' ')
}

func fmtTimePtr(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return fmtTime(*t)
}

// fmtLeft is a time left, its two largest units: 3d4h, 1h2m, 5m30s, 42s.
func fmtLeft(d time.Duration) string { return string(appendLeft(nil, d)) }

// appendLeft appends fmtLeft(d) to b (printable, never empty).
func appendLeft(b []byte, d time.Duration) []byte {
	d = d.Round(time.Second)
	if d <= 0 {
		return append(b, "0s"...)
	}
	units := [...]struct {
		n   time.Duration
		sfx byte
	}{{24 * time.Hour, 'd'}, {time.Hour, 'h'}, {time.Minute, 'm'}, {time.Second, 's'}}
	shown := 0
	for _, u := range units {
		if shown == 2 {
			break
		}
		if q := d / u.n; q > 0 || shown > 0 {
			if q > 0 {
				b = append(strconv.AppendInt(b, int64(q), 10), u.sfx)
			}
			d -= q * u.n
			shown++
		}
	}
	return b
}

// opener finds the daemon or the database of a configuration.
type opener struct {
	cfg *rules.Config
	s   streams
}

// open loads the configuration of an operator's command and makes its
// opener of the daemon's socket and database.
func open(cf *configFlag, s streams) (*opener, error) {
	cfg, err := cf.load(s.err, false)
	if err != nil {
		return nil, err
	}
	return &opener{cfg: cfg, s: s}, nil
}

// oneTarget is the arguments of a command on one address, CIDR or key.
func oneTarget(name string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usageError(errors.New(name + " takes one address, CIDR or key"))
		}
		return nil
	}
}

func (o *opener) client() *control.Client { return control.NewClient(o.cfg.ControlSocket) }

func (o *opener) dbPath() string { return daemon.DBPath(o.cfg) }

// reader opens the database read-only; nil when there is none yet.
func (o *opener) reader() (state.Store, error) {
	path := o.dbPath()
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	db, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		return nil, dbError(err)
	}
	return db, nil
}

// writer opens the database as its one writer, for a change made while
// no daemon answers. A daemon that holds it without answering is exit 3.
func (o *opener) writer() (state.Store, error) {
	db, err := store.Open(o.dbPath(), store.Options{})
	if errors.Is(err, store.ErrLocked) {
		return nil, &exitError{code: exitUnreachable, err: fmt.Errorf("%w: the daemon holds the database but does not answer on %s: is control_socket the same for it?", err, o.cfg.ControlSocket)}
	}
	if err != nil {
		return nil, dbError(err)
	}
	return db, nil
}

func dbError(err error) error {
	if errors.Is(err, fs.ErrPermission) {
		return &exitError{code: exitUnreachable, err: fmt.Errorf("%w: root and the members of group logjail may use the database", err)}
	}
	return err
}

// change makes an operator's change through the daemon, or, when no daemon
// answers, on the database (applied when the daemon starts): the one path
// of ban and unban.
func change[R any](ctx context.Context, cf *configFlag, s streams,
	live func(context.Context, *control.Client) (R, error),
	offline func(*control.Engine, string, *ops.DecisionLog) (R, error)) (R, *rules.Config, error) {
	var res R
	op, err := open(cf, s)
	if err != nil {
		return res, nil, err
	}
	c := op.client()
	defer c.Close()
	cctx, cancel := withTimeout(ctx, changeTimeout)
	defer cancel()
	res, err = live(cctx, c)
	if errors.Is(err, control.ErrNoDaemon) {
		err = op.offlineChange(func(e *control.Engine, dl *ops.DecisionLog) error {
			var err error
			res, err = offline(e, currentUser(), dl)
			return err
		})
	}
	return res, op.cfg, apiError(err)
}

// offlineChange runs fn on the database's state as the daemon's decider
// would (a detector restored from the last checkpoint, a writer resumed on
// it, control.NewEngine) and checkpoints what it decided: the daemon
// applies it when it starts.
func (o *opener) offlineChange(fn func(e *control.Engine, dl *ops.DecisionLog) error) error {
	db, err := o.writer()
	if err != nil {
		return err
	}
	defer db.Close()
	det := pipeline.NewDetector(o.cfg)
	if _, _, err := checkpoint.Restore(db, o.cfg, det); err != nil {
		return err
	}
	_, at, err := db.Global()
	if err != nil {
		return err
	}
	resumed, err := db.ActiveBans()
	if err != nil {
		return err
	}
	dl := newHeldLog(o.s.err) // offline_log.go
	w := checkpoint.NewWriter(db)
	if err := w.Resume(o.cfg, det, time.Time{}); err != nil {
		return err
	}
	dl.Decisions(ops.SourceResume, ops.ResumeLifts(resumed, o.cfg, time.Time{}))
	bans, err := db.ActiveBans()
	if err != nil {
		return err
	}
	e := control.NewEngine(o.cfg, det, w, bans, time.Now(), at)
	if err := fn(e, dl.DecisionLog); err != nil {
		return err
	}
	if err := w.Flush(det, at); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := db.Close(); err != nil {
		return err
	}
	dl.release()
	return nil
}

// apiError maps an error of the API to its exit code.
func apiError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, control.ErrBadRequest):
		return &exitError{code: exitUsage, err: err}
	case errors.Is(err, control.ErrNotFound), errors.Is(err, control.ErrAllowed):
		return &exitError{code: exitNegative, err: err}
	case errors.Is(err, control.ErrForbidden), errors.Is(err, control.ErrSocketDenied):
		return &exitError{code: exitUnreachable, err: err}
	}
	return err
}

// noDaemon says on stderr that the command works on the database.
func (o *opener) noDaemon(what string) {
	fmt.Fprintf(o.s.err, "logjail: no daemon answers on %s: %s\n", o.cfg.ControlSocket, what)
}

func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}

// currentUser names the caller of an offline change for the history.
func currentUser() string {
	uid := os.Getuid()
	name := ""
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		name = u.Username
	}
	return control.Who(uint32(uid), name)
}
