package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/logjail/logjail/control"
	"github.com/logjail/logjail/ops"
	"github.com/spf13/cobra"
)

type importOptions struct {
	cfg    configFlag
	out    outputFlag
	format string
	forS   string
	forSet bool // --for given: it replaces the entries' own ends
	reason string
	rule   string
	force  bool
	dryRun bool
}

// importDefaultFor is how long an imported ban lasts when neither --for
// nor the entry says.
const importDefaultFor = 24 * time.Hour

func newImportCmd(s streams) *cobra.Command {
	var o importOptions
	cmd := &cobra.Command{
		Use:   "import FILE|- [--format auto|plain|csv|json|crowdsec] [--for 24h] [--reason TEXT] [--rule R] [--force] [--dry-run]",
		Short: "Ban every address and CIDR of a file (a list, CSV, logjail's or CrowdSec's JSON), all or none",
		Long: `import reads a whole file (- for stdin), checks every entry, and then bans
them all as an operator's bans in one change (one request to the running
daemon, applied in every action before the command returns; with no
daemon, one transaction on the database, applied when the daemon starts),
or, when any entry is bad, bans none: each bad entry is named on stderr as
FILE:LINE: FIELD: why, and the exit code is 1.

Formats (--format auto, the default, tells them by their first bytes and
the CSV header):
  plain     one address or CIDR a line; blank lines and # comments skipped
  csv       a header naming the columns, then one entry a row:
              logjail export -o csv: rule,key,kind,since,until,reason,origin
              cscli decisions list -o raw: id,source,ip,reason,action,...,
                expiration,simulated,... (ip is SCOPE:VALUE, expiration a
                Go duration)
              cscli decisions import's CSV: value, and optionally scope,
                type, duration, reason
  json      logjail export -o json (list --output json): {"bans": [...]}
  crowdsec  cscli decisions list -o json (an array of alerts, each with
            its decisions: value, scope, type, duration, until, scenario,
            simulated), or cscli decisions import's flat array of decisions

Every address and CIDR is read with net/netip: IPv4-mapped IPv6 addresses
are unmapped; a CIDR with bits set past its length (10.1.2.3/8) is refused,
as 'ban' refuses it, never masked; an address with a zone is refused.
logjail's own JSON and CSV may also hold keys that are no address (user:,
ua:, range:), as 'ban' takes them; the other formats hold addresses and
CIDRs only. Left out (counted on stderr, not errors): entries that are no
ban (throttles, captcha), simulated or log-only ones, scopes that are no
address (Country, AS), and entries whose own end has passed.

How long: --for, when given, for every entry; else the entry's own end
(until, or the time left of its duration) when it has one; else 24h.
The reason: --reason, else the entry's own (reason, scenario), else
"imported from FILE". The rule: --rule (a configured rule), else the
rule "operator": the file's rule names are not taken over.
An entry named twice is banned once, to the later end. An entry on the
allow list (or a CIDR inside it) is a bad entry unless --force, as for
'ban'. At most 100,000 entries a file.

--dry-run checks everything the same way and prints what would be banned,
changing nothing (neither the daemon nor the database is touched).

Exit codes: 0 done; 1 a bad entry (nothing imported), or no entry to
import; 2 a usage error (a bad flag, an unreadable file) or a configuration
that cannot be loaded; 3 the daemon is needed and unreachable.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError(errors.New("import takes one file (- for stdin)"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.out.check(); err != nil {
				return err
			}
			o.forSet = cmd.Flags().Changed("for")
			return runImport(cmd.Context(), &o, args[0], s, time.Now())
		},
	}
	o.cfg.addFlag(cmd)
	o.out.addFlag(cmd)
	f := cmd.Flags()
	f.StringVar(&o.format, "format", "auto", "auto, plain, csv, json or crowdsec")
	f.StringVar(&o.forS, "for", "24h", "how long, for every entry (default: the entry's own end, else 24h)")
	f.StringVar(&o.reason, "reason", "", `why, for every entry (default: the entry's own, else "imported from FILE")`)
	f.StringVar(&o.rule, "rule", "", "a configured rule to ban them under (default: operator)")
	f.BoolVar(&o.force, "force", false, "ban allowed entries all the same")
	f.BoolVar(&o.dryRun, "dry-run", false, "print what would be banned, change nothing")
	return cmd
}

// importEntry is one entry of a file to import.
type importEntry struct {
	line   int
	field  string    // where its address or key is: value, key, bans[3].key
	key    string    // as read; ParseTarget'd (canonical) once read
	end    time.Time // its own end; zero: none
	reason string
}

// importFile is what was read of a file: its entries, its bad entries
// (FILE:LINE: FIELD: why) and how many entries were left out, and why.
type importFile struct {
	name     string
	now      time.Time
	entries  []importEntry
	problems []importProblem
	skipped  map[string]int
	order    []string // skipped's reasons in their first order
}

// importProblem is a bad entry: its line and what to say.
type importProblem struct {
	line int
	msg  string
}

func (f *importFile) bad(line int, field, format string, a ...any) {
	f.problems = append(f.problems, importProblem{line, fmt.Sprintf("%s:%d: %s: %s", f.name, line, field, fmt.Sprintf(format, a...))})
}

func (f *importFile) skip(why string) {
	if f.skipped == nil {
		f.skipped = map[string]int{}
	}
	if f.skipped[why] == 0 {
		f.order = append(f.order, why)
	}
	f.skipped[why]++
}

// add adds the entry of an address or CIDR (addrOnly) or key read at
// line, if it reads.
func (f *importFile) add(e importEntry, addrOnly bool) {
	if addrOnly {
		if _, err := netip.ParseAddr(e.key); err != nil {
			if _, err := netip.ParsePrefix(e.key); err != nil {
				f.bad(e.line, e.field, "%q: not an address or CIDR", e.key)
				return
			}
		}
	}
	// ParseTarget: the canonical key (unmapped, an address for a full
	// length CIDR); host bits and zones refused.
	t, err := control.ParseTarget(e.key)
	if err != nil {
		f.bad(e.line, e.field, "%v", err)
		return
	}
	e.key = t.Key
	f.entries = append(f.entries, e)
}

// parseEnd reads an entry's own end: until (RFC 3339) or, without it,
// duration (a Go duration) from now. ok false: a bad value, reported.
func (f *importFile) parseEnd(line int, untilField, until, durField, dur string) (time.Time, bool) {
	if until != "" {
		t, err := time.Parse(time.RFC3339Nano, until)
		if err != nil {
			f.bad(line, untilField, "%q: not an RFC 3339 time", until)
			return time.Time{}, false
		}
		return t, true
	}
	if dur != "" {
		d, err := time.ParseDuration(dur)
		if err != nil {
			f.bad(line, durField, "%q: not a duration (4h0m0s)", dur)
			return time.Time{}, false
		}
		return f.now.Add(d), true
	}
	return time.Time{}, true
}

// ended reports whether an entry's own end has passed, and counts it as
// left out if so.
func (f *importFile) ended(end time.Time) bool {
	if end.IsZero() || end.After(f.now) {
		return false
	}
	f.skip("ended already")
	return true
}

// readImport reads data (the file name) in format.
func readImport(name string, data []byte, format string, now time.Time) (*importFile, error) {
	f := &importFile{name: name, now: now}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	if format == "auto" {
		format = detectImport(data)
	}
	switch format {
	case "plain":
		f.readPlain(data)
	case "csv":
		f.readCSV(data)
	case "json":
		f.readJSON(data, false)
	case "crowdsec":
		f.readJSON(data, true)
	default:
		return nil, usageError(fmt.Errorf("--format %q: want auto, plain, csv, json or crowdsec", format))
	}
	return f, nil
}

// detectImport tells a file's format by its first bytes: an object is
// logjail's JSON, an array CrowdSec's; a first line (not a comment) with
// a comma and a known column is CSV; else a plain list.
func detectImport(data []byte) string {
	t := bytes.TrimLeft(data, " \t\r\n")
	switch {
	case len(t) > 0 && t[0] == '{':
		return "json"
	case len(t) > 0 && t[0] == '[':
		return "crowdsec"
	}
	for line := range bytes.Lines(t) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		if bytes.IndexByte(line, ',') >= 0 {
			if cols, err := csv.NewReader(bytes.NewReader(line)).Read(); err == nil && csvValueColumn(cols) >= 0 {
				return "csv"
			}
		}
		break
	}
	return "plain"
}

func (f *importFile) readPlain(data []byte) {
	n := 0
	for line := range bytes.Lines(data) {
		n++
		s := string(line)
		if i := strings.IndexByte(s, '#'); i >= 0 {
			s = s[:i]
		}
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if strings.ContainsAny(s, " \t,;") {
			f.bad(n, "value", "%q: one address or CIDR a line", s)
			continue
		}
		f.add(importEntry{line: n, field: "value", key: s}, true)
	}
}

// csvValueColumn is the index of the column that names what to ban: key
// (logjail), value (cscli's import CSV) or ip (cscli's raw list); -1 for
// none.
func csvValueColumn(cols []string) int {
	for _, name := range []string{"key", "value", "ip"} {
		for i, c := range cols {
			if strings.EqualFold(strings.TrimSpace(c), name) {
				return i
			}
		}
	}
	return -1
}

func (f *importFile) readCSV(data []byte) {
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	header, err := r.Read()
	if err != nil {
		f.bad(1, "header", "%v", csvErr(err))
		return
	}
	col := map[string]int{}
	for i, c := range header {
		col[strings.ToLower(strings.TrimSpace(c))] = i
	}
	vi := csvValueColumn(header)
	if vi < 0 {
		f.bad(1, "header", "no key, value or ip column: want logjail's (rule,key,kind,since,until,reason,origin) or cscli's")
		return
	}
	valueName := strings.ToLower(strings.TrimSpace(header[vi]))
	get := func(rec []string, names ...string) (string, string) {
		for _, n := range names {
			if i, ok := col[n]; ok && i < len(rec) {
				return strings.TrimSpace(rec[i]), n
			}
		}
		return "", names[0]
	}
	for {
		rec, err := r.Read()
		if err == io.EOF {
			return
		}
		if err != nil {
			var pe *csv.ParseError
			line := 0
			if errors.As(err, &pe) {
				line = pe.Line
			}
			f.bad(line, "csv", "%v", csvErr(err))
			return
		}
		line, _ := r.FieldPos(0)
		if len(rec) != len(header) {
			f.bad(line, "csv", "%d fields, the header has %d", len(rec), len(header))
			continue
		}
		value := strings.TrimSpace(rec[vi])
		scope, _ := get(rec, "scope")
		if valueName == "ip" { // cscli's raw list: SCOPE:VALUE
			if sc, v, ok := strings.Cut(value, ":"); ok && !looksAddressy(sc) {
				scope, value = sc, v
			}
		}
		kind, _ := get(rec, "kind", "action", "type")
		simulated, _ := get(rec, "simulated")
		if !f.wanted(kind, scope, strings.EqualFold(simulated, "true")) {
			continue
		}
		until, uf := get(rec, "until")
		dur, df := get(rec, "expiration", "duration")
		end, ok := f.parseEnd(line, uf, until, df, dur)
		if !ok {
			continue
		}
		if f.ended(end) {
			continue
		}
		reason, _ := get(rec, "reason")
		f.add(importEntry{line: line, field: valueName, key: value, end: end, reason: reason}, valueName != "key")
	}
}

// looksAddressy reports whether s could be the start of an IPv6 address
// (hex digits), not a scope name.
func looksAddressy(s string) bool {
	return strings.Trim(strings.ToLower(s), "0123456789abcdef") == ""
}

func csvErr(err error) error {
	if errors.Is(err, io.EOF) {
		return errors.New("empty: no header")
	}
	return err
}

// wanted reports whether an entry of kind (type, action; "" for a ban)
// and scope ("" for an address) is one to ban, and counts it as left out
// if not.
func (f *importFile) wanted(kind, scope string, simulated bool) bool {
	switch {
	case kind != "" && !strings.EqualFold(kind, "ban"):
		f.skip("no ban (" + strings.ToLower(kind) + ")")
	case scope != "" && !strings.EqualFold(scope, "ip") && !strings.EqualFold(scope, "range"):
		f.skip("scope " + scope + ": no address")
	case simulated:
		f.skip("simulated or log-only")
	default:
		return true
	}
	return false
}

// lineCounter turns increasing offsets of a document into line numbers.
type lineCounter struct {
	data      []byte
	pos, line int
}

// at is the line of the value at or after off (past spaces, commas and
// colons).
func (c *lineCounter) at(off int64) int {
	i := int(off)
	for i < len(c.data) && strings.IndexByte(" \t\r\n,:", c.data[i]) >= 0 {
		i++
	}
	if i < c.pos {
		c.pos, c.line = 0, 0
	}
	c.line += bytes.Count(c.data[c.pos:i], []byte{'\n'})
	c.pos = i
	return c.line + 1
}

// jsonBan is an entry of logjail's JSON (control.Ban's fields import
// reads).
type jsonBan struct {
	Key     string  `json:"key"`
	Kind    string  `json:"kind"`
	Until   *string `json:"until"`
	Reason  string  `json:"reason"`
	LogOnly bool    `json:"log_only"`
}

// jsonDecision is a CrowdSec decision (models.Decision), or an entry of
// cscli decisions import's JSON (which says reason for scenario).
type jsonDecision struct {
	Value     *string `json:"value"`
	Scope     string  `json:"scope"`
	Type      string  `json:"type"`
	Duration  string  `json:"duration"`
	Until     string  `json:"until"`
	Scenario  string  `json:"scenario"`
	Reason    string  `json:"reason"`
	Simulated bool    `json:"simulated"`
}

// readJSON reads logjail's JSON (an object with bans) or, crowdsec,
// CrowdSec's (an array of alerts with decisions, or of decisions).
func (f *importFile) readJSON(data []byte, crowdsec bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	lc := &lineCounter{data: data}
	var err error
	if crowdsec {
		err = f.readCrowdSec(dec, lc)
	} else {
		err = f.readLogjailJSON(dec, lc)
	}
	if err != nil {
		var se *json.SyntaxError
		off := dec.InputOffset()
		if errors.As(err, &se) {
			off = se.Offset
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = errors.New("the file ends before the JSON does")
		}
		f.bad(lc.at(min(off, int64(len(data)))), "json", "%v", err)
	}
}

// delim reads the delimiter want, or says what came instead.
func delim(dec *json.Decoder, want json.Delim, what string) error {
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			return fmt.Errorf("want %s, the file ends", what)
		}
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("want %s, not %v", what, tok)
	}
	return nil
}

// fields reads an object, calling fn with each key to read its value.
func fields(dec *json.Decoder, what string, fn func(key string) error) error {
	if err := delim(dec, '{', what); err != nil {
		return err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if err := fn(tok.(string)); err != nil {
			return err
		}
	}
	return delim(dec, '}', "the end of "+what)
}

// elements reads an array (or null), calling fn at each element with its
// line.
func elements(dec *json.Decoder, lc *lineCounter, what string, fn func(i, line int) error) error {
	lc.at(dec.InputOffset()) // to the value's first byte
	if bytes.HasPrefix(lc.data[lc.pos:], []byte("null")) {
		var null any
		return dec.Decode(&null)
	}
	if err := delim(dec, '[', what); err != nil {
		return err
	}
	for i := 0; dec.More(); i++ {
		if err := fn(i, lc.at(dec.InputOffset())); err != nil {
			return err
		}
	}
	return delim(dec, ']', "the end of "+what)
}

func skipValue(dec *json.Decoder) error {
	var v json.RawMessage
	return dec.Decode(&v)
}

func (f *importFile) readLogjailJSON(dec *json.Decoder, lc *lineCounter) error {
	found := false
	err := fields(dec, `logjail's JSON (an object with "bans"; cscli's JSON is --format crowdsec)`, func(key string) error {
		if key != "bans" {
			return skipValue(dec)
		}
		found = true
		return elements(dec, lc, "the bans (an array)", func(i, line int) error {
			var b jsonBan
			field := fmt.Sprintf("bans[%d]", i)
			if err := dec.Decode(&b); err != nil {
				var te *json.UnmarshalTypeError
				if errors.As(err, &te) {
					f.bad(line, field+"."+te.Field, "want a %s, not a %s", te.Type, te.Value)
					return nil
				}
				return err
			}
			if !f.wanted(b.Kind, "", b.LogOnly) {
				return nil
			}
			until := ""
			if b.Until != nil {
				until = *b.Until
			}
			end, ok := f.parseEnd(line, field+".until", until, "", "")
			if !ok {
				return nil
			}
			if f.ended(end) {
				return nil
			}
			f.add(importEntry{line: line, field: field + ".key", key: b.Key, end: end, reason: b.Reason}, false)
			return nil
		})
	})
	if err == nil && !found {
		f.bad(1, "json", `no "bans": not logjail's JSON (export -o json)`)
	}
	return err
}

func (f *importFile) readCrowdSec(dec *json.Decoder, lc *lineCounter) error {
	decision := func(d *jsonDecision, line int, field, message string) {
		if d.Value == nil {
			f.bad(line, field, "no value")
			return
		}
		if !f.wanted(d.Type, d.Scope, d.Simulated) {
			return
		}
		end, ok := f.parseEnd(line, field+".until", d.Until, field+".duration", d.Duration)
		if !ok {
			return
		}
		if f.ended(end) {
			return
		}
		reason := message
		for _, r := range []string{d.Scenario, d.Reason} {
			if reason == "" {
				reason = r
			}
		}
		n := len(f.entries)
		f.add(importEntry{line: line, field: field + ".value", key: *d.Value, end: end, reason: reason}, true)
		if len(f.entries) > n && strings.EqualFold(d.Scope, "ip") && strings.Contains(f.entries[n].key, "/") {
			f.entries = f.entries[:n]
			f.bad(line, field+".scope", "Ip, but %q is a CIDR (scope Range)", *d.Value)
		}
	}
	return elements(dec, lc, "an array of alerts or decisions (cscli's JSON; logjail's is --format json)", func(i, line int) error {
		var flat jsonDecision
		var message string
		alert, bad := false, false
		type later struct {
			d     jsonDecision
			line  int
			field string
		}
		var ds []later
		field := fmt.Sprintf("[%d]", i)
		err := fields(dec, "an alert or a decision (an object)", func(key string) error {
			var p any
			switch key {
			case "decisions":
				alert = true
				return elements(dec, lc, "decisions (an array)", func(j, line int) error {
					var d jsonDecision
					df := fmt.Sprintf("%s.decisions[%d]", field, j)
					if err := dec.Decode(&d); err != nil {
						var te *json.UnmarshalTypeError
						if errors.As(err, &te) {
							f.bad(line, df+"."+te.Field, "want a %s, not a %s", te.Type, te.Value)
							return nil
						}
						return err
					}
					ds = append(ds, later{d, line, df})
					return nil
				})
			case "value":
				p = &flat.Value
			case "scope":
				p = &flat.Scope
			case "type":
				p = &flat.Type
			case "duration":
				p = &flat.Duration
			case "until":
				p = &flat.Until
			case "scenario":
				p = &flat.Scenario
			case "reason":
				p = &flat.Reason
			case "simulated":
				p = &flat.Simulated
			case "message":
				p = &message
			default:
				return skipValue(dec)
			}
			if err := dec.Decode(p); err != nil {
				var te *json.UnmarshalTypeError
				if errors.As(err, &te) {
					f.bad(line, field+"."+key, "want a %s, not a %s", te.Type, te.Value)
					bad = true
					return nil
				}
				return err
			}
			return nil
		})
		switch {
		case err != nil:
			return err
		case alert:
			// An alert's message is its decisions' reason: it comes
			// after them in cscli's JSON.
			for _, l := range ds {
				decision(&l.d, l.line, l.field, message)
			}
		case !bad:
			decision(&flat, line, field, "")
		}
		return nil
	})
}

// importBans turns a file's entries into the bans to make: merged by key
// (the later end), each with its duration, reason and rule; and the entry
// each comes from (its first).
func (o *importOptions) importBans(f *importFile) ([]control.BanRequest, []importEntry) {
	forAll, _ := control.ParseFor(o.forS) // checked before
	type merged struct {
		e   importEntry
		end time.Time
	}
	idx := map[string]int{}
	var ms []merged
	for _, e := range f.entries {
		end := e.end
		if o.forSet || end.IsZero() {
			d := importDefaultFor
			if o.forSet {
				d = forAll
			}
			end = f.now.Add(d)
		}
		if i, ok := idx[e.key]; ok {
			if end.After(ms[i].end) {
				ms[i].end = end
			}
			continue
		}
		idx[e.key] = len(ms)
		ms = append(ms, merged{e: e, end: end})
	}
	reqs := make([]control.BanRequest, len(ms))
	from := make([]importEntry, len(ms))
	for i, m := range ms {
		reason := o.reason
		if reason == "" {
			reason = m.e.reason
		}
		if reason == "" {
			reason = "imported from " + f.name
		}
		secs := int64((m.end.Sub(f.now) + time.Second - 1) / time.Second)
		reqs[i] = control.BanRequest{Key: m.e.key, For: strconv.FormatInt(secs, 10) + "s", Reason: reason, Rule: o.rule, Force: o.force}
		from[i] = m.e
	}
	return reqs, from
}

func readImportFile(name string, in io.Reader) (string, []byte, error) {
	if name == "-" {
		b, err := io.ReadAll(in)
		return "stdin", b, err
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return name, nil, usageError(err)
	}
	return name, b, nil
}

func runImport(ctx context.Context, o *importOptions, file string, s streams, now time.Time) error {
	if _, err := control.ParseFor(o.forS); err != nil {
		return apiError(err)
	}
	name, data, err := readImportFile(file, s.in)
	if err != nil {
		return err
	}
	f, err := readImport(name, data, o.format, now)
	if err != nil {
		return err
	}
	op, err := open(&o.cfg, s)
	if err != nil {
		return err
	}
	if o.rule != "" && o.rule != control.OperatorRule && op.cfg.Rule(o.rule) == nil {
		return usageError(fmt.Errorf("--rule %q: not in the configuration (leave --rule out for an operator's ban)", o.rule))
	}
	reqs, from := o.importBans(f)
	for i, r := range reqs {
		if _, err := control.CheckBan(op.cfg, r); err != nil {
			f.bad(from[i].line, from[i].field, "%v", err)
		}
	}
	for _, why := range f.order {
		fmt.Fprintf(s.err, "logjail: %s: %s left out: %s\n", name, plural(f.skipped[why], "entry", "entries"), why)
	}
	if len(f.problems) > 0 {
		slices.SortStableFunc(f.problems, func(a, b importProblem) int { return a.line - b.line })
		for _, p := range f.problems {
			fmt.Fprintln(s.err, p.msg)
		}
		return &exitError{code: exitNegative, err: fmt.Errorf("%s: %s: nothing imported", name, plural(len(f.problems), "bad entry", "bad entries"))}
	}
	if len(reqs) == 0 {
		return &exitError{code: exitNegative, err: fmt.Errorf("%s: no entry to import", name)}
	}
	if len(reqs) > control.MaxBatch {
		return &exitError{code: exitNegative, err: fmt.Errorf("%s: %d entries: at most %d in one import (split the file)", name, len(reqs), control.MaxBatch)}
	}
	batch := control.BatchBanRequest{Bans: reqs}
	if o.dryRun {
		return printDryRun(s, o, name, batch, now)
	}
	res, cfg, err := change(ctx, &o.cfg, s,
		func(ctx context.Context, c *control.Client) (*control.BatchBanResult, error) {
			return c.BanBatch(ctx, batch)
		},
		func(e *control.Engine, who string, dl *ops.DecisionLog) (*control.BatchBanResult, error) {
			res, ds, err := e.BanBatch(batch, who)
			if err == nil {
				for i := range ds {
					dl.Decisions(ops.SourceOperator, ds[i:i+1], res.Bans[i].LogAttrs()...)
				}
			}
			return res, err
		})
	if err != nil {
		return err
	}
	if o.out.json() {
		return writeJSON(s.out, res)
	}
	forced := 0
	for i := range res.Bans {
		if res.Bans[i].Allowed != "" {
			forced++
		}
	}
	rule := o.rule
	if rule == "" {
		rule = control.OperatorRule
	}
	fmt.Fprintf(s.out, "banned %s from %s (rule %s)\n", plural(len(res.Bans), "key", "keys"), name, rule)
	if forced > 0 {
		fmt.Fprintf(s.out, "  forced: %s on the allow list\n", plural(forced, "key", "keys"))
	}
	if res.Live {
		fmt.Fprintln(s.out, "  applied by the daemon in every action")
	} else {
		fmt.Fprintf(s.out, "  no daemon answers on %s: written to the database; applied when the daemon starts\n", cfg.ControlSocket)
	}
	return nil
}

// dryRun is import --dry-run --output json: the bans it would make.
type dryRun struct {
	Version int                  `json:"version"`
	DryRun  bool                 `json:"dry_run"`
	Bans    []control.BanRequest `json:"bans"`
}

func printDryRun(s streams, o *importOptions, name string, b control.BatchBanRequest, now time.Time) error {
	if o.out.json() {
		return writeJSON(s.out, dryRun{Version: control.SchemaVersion, DryRun: true, Bans: b.Bans})
	}
	t := newTable(s.out, isTerminal(s.out), "KEY", "RULE", "UNTIL", "REASON")
	for _, r := range b.Bans {
		d, _ := control.ParseFor(r.For)
		rule := r.Rule
		if rule == "" {
			rule = control.OperatorRule
		}
		t.row(r.Key, rule, fmtTime(now.Add(d)), r.Reason)
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintf(s.err, "logjail: dry run: would ban %s from %s; nothing changed\n", plural(len(b.Bans), "key", "keys"), name)
	return nil
}
