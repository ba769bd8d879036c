package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/source"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// parseOptions are the flags of `logjail parse`.
type parseOptions struct {
	cfg    configFlag
	source string
	format formatFlags
	output string
}

func (o *parseOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	o.cfg.addFlag(cmd)
	f.StringVar(&o.source, "source", "", "read with the format of this config source (default: the source whose paths match, else the only one)")
	o.format.addFlags(f)
	f.StringVarP(&o.output, "output", "o", "table", "table or json (one object a line)")
}

// formatGiven reports whether a format came from the command line.
func (o *parseOptions) formatGiven() bool { return o.format.given() }

// parserOptions builds the parser options: the command line's format when
// given, else the config source's; the other flags override the source's.
func (o *parseOptions) parserOptions(src *rules.Source) (parser.Options, error) {
	return o.format.parserOptions(src)
}

// parsePrefix reads a CIDR or a single address (as a /32 or /128).
func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return p, err
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap().WithZone("")
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func newParseCmd(s streams) *cobra.Command {
	var o parseOptions
	cmd := &cobra.Command{
		Use:   "parse [flags] [FILE...|-]",
		Short: "Show how each line of a log is read under a format",
		Long: `parse reads access logs (plain, .gz, or - for stdin) and shows how each line
is read: a table by default, or with --output json one object a line with the
keys line, ip, time, method, path, query, protocol, status, bytes, referer,
user_agent, user, host, duration and cpu (absent values null), and
{"line": N, "error": "..."} for a line it rejects. A summary goes to stderr.

The format comes from the flags, else from the config's source (--source, or
the source whose paths match the file, or the only source).

Exit codes: 0 every line parsed; 1 some lines rejected; 2 usage error.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.output != "table" && o.output != "json" {
				return usageError(fmt.Errorf("--output %q: want table or json", o.output))
			}
			if len(args) == 0 {
				args = []string{source.Stdin}
				if f, ok := s.in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
					fmt.Fprintln(s.err, "parse: reading log lines from the terminal: paste some and end with Ctrl-D, or give FILE... or - (logjail parse --help)")
				}
			}
			files, err := source.Expand(args)
			if err != nil {
				return usageError(err)
			}
			var cfg *rules.Config
			if !o.formatGiven() || o.source != "" {
				if cfg, err = o.cfg.load(s.err, true); err != nil {
					return err
				}
			}
			sum := &parseSummary{rejected: map[string]int{}}
			for _, name := range files {
				if err := runParse(&o, cfg, name, s, sum); err != nil {
					return err
				}
			}
			sum.print(s.err)
			for _, h := range sum.hints {
				fmt.Fprintln(s.err, h)
			}
			if sum.lines > sum.parsed {
				return &exitError{code: exitNegative}
			}
			return nil
		},
	}
	o.addFlags(cmd)
	return cmd
}

// parseSummary counts what parse saw over all files.
type parseSummary struct {
	lines, parsed int
	rejected      map[string]int // by field and reason
	formats       []string
	hints         []string // formatHint's, per file
}

func (p *parseSummary) print(w io.Writer) {
	fmt.Fprintf(w, "lines %d, parsed %d, rejected %d; format %s\n", p.lines, p.parsed, p.lines-p.parsed, strings.Join(p.formats, ", "))
	reasons := make([]string, 0, len(p.rejected))
	for r := range p.rejected {
		reasons = append(reasons, r)
	}
	sort.Slice(reasons, func(i, j int) bool {
		if p.rejected[reasons[i]] != p.rejected[reasons[j]] {
			return p.rejected[reasons[i]] > p.rejected[reasons[j]]
		}
		return reasons[i] < reasons[j]
	})
	for _, r := range reasons {
		fmt.Fprintf(w, "  rejected %6d  %s\n", p.rejected[r], parser.Printable(r))
	}
}

// sourceFor picks the config source whose format reads name.
func sourceFor(cfg *rules.Config, name, want string) (*rules.Source, error) {
	if cfg == nil {
		return nil, nil
	}
	if want != "" {
		src := cfg.Source(want)
		if src == nil {
			return nil, usageError(fmt.Errorf("--source %q: no such source in %s", want, cfg.File))
		}
		return src, nil
	}
	if src := cfg.SourceFor(name); src != nil {
		return src, nil
	}
	return nil, usageError(fmt.Errorf("%s: no source of %s reads it: give --source or a format flag", name, cfg.File))
}

func runParse(o *parseOptions, cfg *rules.Config, name string, s streams, sum *parseSummary) error {
	var src *rules.Source
	if cfg != nil {
		var err error
		if src, err = sourceFor(cfg, name, o.source); err != nil {
			return err
		}
	}
	po, err := o.parserOptions(src)
	if err != nil {
		return usageError(err)
	}
	lg, err := source.OpenLog(name, po, s.in)
	if err != nil {
		return usageError(err)
	}
	defer lg.Close()
	p, lr := lg.Parser, lg.Lines
	sum.formats = append(sum.formats, fmt.Sprintf("%s (%s)", p.Name(), name))
	lines0, parsed0 := sum.lines, sum.parsed
	defer func() {
		n, ok := int64(sum.lines-lines0), int64(sum.parsed-parsed0)
		if h := formatHint(name, po, p.Name(), n, n-ok); h != "" {
			sum.hints = append(sum.hints, h)
		}
	}()

	bw := bufio.NewWriterSize(s.out, 64<<10)
	defer bw.Flush()
	var emit func(n int, e *parser.Entry, perr error) error
	if o.output == "json" {
		enc := json.NewEncoder(bw)
		enc.SetEscapeHTML(false)
		emit = func(n int, e *parser.Entry, perr error) error {
			if perr != nil {
				return enc.Encode(jsonReject{Line: n, Error: perr.Error()})
			}
			return enc.Encode(toJSONEntry(n, e))
		}
	} else {
		tw := tabwriter.NewWriter(bw, 0, 8, 1, ' ', 0)
		defer tw.Flush()
		fmt.Fprintln(tw, "LINE\tIP\tTIME\tMETHOD\tPATH\tSTATUS\tBYTES\tDURATION\tCPU\tUSER AGENT")
		rows := 0
		emit = func(n int, e *parser.Entry, perr error) error {
			if rows++; rows%1000 == 0 { // keep columns aligned without holding the whole file
				tw.Flush()
			}
			if perr != nil {
				_, err := fmt.Fprintf(tw, "%d\terror: %s\n", n, parser.Printable(perr.Error()))
				return err
			}
			_, err := fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n, e.IP, e.Time.Format(time.RFC3339Nano),
				parser.Printable(opt(e, parser.HasMethod, e.Method)), parser.Printable(opt(e, parser.HasPath, pathQuery(e))), opt(e, parser.HasStatus, fmt.Sprint(e.Status)),
				opt(e, parser.HasBytes, fmt.Sprint(e.Bytes)), opt(e, parser.HasDuration, fmt.Sprintf("%.3f", e.Duration)),
				opt(e, parser.HasCPU, fmt.Sprintf("%.3f", e.CPU)), parser.Printable(opt(e, parser.HasUserAgent, truncate(e.UserAgent, 60))))
			return err
		}
	}
	for {
		line, n, ok := lr.Next()
		if !ok {
			break
		}
		sum.lines++
		e, perr := p.ParseString(line, n)
		if perr == nil && lr.Truncated() {
			perr = source.TooLong(n)
		}
		if errors.Is(perr, parser.ErrDirective) {
			sum.lines-- // a format's own header (W3C's #Fields:): no request, not rejected
			continue
		}
		if perr != nil {
			sum.rejected[rejectReason(perr)]++
		} else {
			sum.parsed++
		}
		if err := emit(n, &e, perr); err != nil {
			return err
		}
	}
	if err := lr.Err(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// rejectReason groups rejections by field and reason, without the value.
func rejectReason(err error) string {
	var pe *parser.Error
	if errors.As(err, &pe) {
		return pe.Field + ": " + pe.Reason
	}
	return err.Error()
}

func opt(e *parser.Entry, bit parser.Has, s string) string {
	if e.Has&bit == 0 {
		return "-"
	}
	return s
}

func pathQuery(e *parser.Entry) string {
	if e.Has&parser.HasQuery != 0 {
		return truncate(e.Path+"?"+e.Query, 60)
	}
	return truncate(e.Path, 60)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

// jsonEntry is the stable `parse --output json` schema: exactly these keys,
// absent values null.
type jsonEntry struct {
	Line      int      `json:"line"`
	IP        string   `json:"ip"`
	Time      string   `json:"time"`
	Method    *string  `json:"method"`
	Path      *string  `json:"path"`
	Query     *string  `json:"query"`
	Protocol  *string  `json:"protocol"`
	Status    *int     `json:"status"`
	Bytes     *int64   `json:"bytes"`
	Referer   *string  `json:"referer"`
	UserAgent *string  `json:"user_agent"`
	User      *string  `json:"user"`
	Host      *string  `json:"host"`
	Duration  *float64 `json:"duration"`
	CPU       *float64 `json:"cpu"`
}

type jsonReject struct {
	Line  int    `json:"line"`
	Error string `json:"error"`
}

func toJSONEntry(n int, e *parser.Entry) jsonEntry {
	j := jsonEntry{Line: n, IP: e.IP.String(), Time: e.Time.Format(time.RFC3339Nano)}
	str := func(bit parser.Has, v string) *string {
		if e.Has&bit == 0 {
			return nil
		}
		return &v
	}
	j.Method = str(parser.HasMethod, e.Method)
	j.Path = str(parser.HasPath, e.Path)
	j.Query = str(parser.HasQuery, e.Query)
	j.Protocol = str(parser.HasProtocol, e.Protocol)
	j.Referer = str(parser.HasReferer, e.Referer)
	j.UserAgent = str(parser.HasUserAgent, e.UserAgent)
	j.User = str(parser.HasUser, e.User)
	j.Host = str(parser.HasHost, e.Host)
	if e.Has&parser.HasStatus != 0 {
		j.Status = &e.Status
	}
	if e.Has&parser.HasBytes != 0 {
		j.Bytes = &e.Bytes
	}
	if e.Has&parser.HasDuration != 0 {
		j.Duration = &e.Duration
	}
	if e.Has&parser.HasCPU != 0 {
		j.CPU = &e.CPU
	}
	return j
}
