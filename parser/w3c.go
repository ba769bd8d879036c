package parser

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// The W3C extended log format, as IIS (preset iis) and CloudFront's
// standard logs (preset cloudfront) write it: directive lines starting with
// '#' (`#Version:`, `#Software:`, `#Date:`, `#Fields:`, `#Remark:`), then
// one line per request whose columns the last `#Fields:` line names, blank-
// (IIS) or tab-separated (CloudFront). A `#Fields:` line replaces the
// columns in force from the next line on: IIS writes one at the top of
// each file and again after every restart, and a change of its logged
// fields changes them mid-file. Directive lines are no entries and no
// malformed lines: their *Error is ErrDirective. Before any `#Fields:` the
// preset's default columns are in force (IIS's default field set; the 33
// fields of CloudFront's standard log). A line whose column count is not
// that of the `#Fields:` in force is rejected, saying both counts: it is
// never read with another file's columns.
//
// Times are UTC (W3C's rule, and both servers'), whatever the source's
// timezone. time-taken is milliseconds in IIS and seconds in CloudFront.
// IIS writes a blank in a value as '+': the user agent has its '+' read as
// blanks, and "++" as " +" (Googlebot's "; +http://..." survives);
// CloudFront percent-encodes it: it is decoded once. The host is
// x-host-header (the Host the viewer sent to CloudFront), else cs(Host) or
// cs-host. Cookies are not kept. Other columns are named fields, in lower
// case with '-' and '(' as '_' (x-edge-location is x_edge_location,
// s-sitename s_sitename).
//
// IIS's ETW events exported as XML (`<Event ...><EventData><Data
// Name="c-ip">...`, one event a line, as Windows' event log forwarders
// write them) read with the iis preset too: the same columns, by name.
//
// Which `#Fields:` is in force is kept by the Parser, by line number: the
// `#Fields:` lines it has seen (the last 64 changes), each with its line
// number; a line is read with the last one seen before its own number, or
// with the default columns when none is. A caller that parses one file's
// lines in order needs nothing more; one that parses blocks of them on
// several goroutines (replay) hands each line to Parser.Directive as it
// reads them, in file order, before the blocks are parsed: then every line
// is read with the `#Fields:` in force at its place, whatever order the
// blocks are parsed in. A new file (line numbers starting again) read by
// the same Parser starts from its own `#Fields:` once that is seen. Lines of
// two files with different fields read by one Parser at once (a source
// whose paths are two IIS sites) cannot be told apart: give each its own
// source. The column count check rejects a line read with another layout
// unless the two have as many columns.

type w3cKind uint8

const (
	wField w3cKind = iota // a named field
	wSkip                 // not kept (cookies)
	wDate
	wTime
	wIP
	wXFF
	wMethod
	wStem
	wQuery
	wURI
	wStatus
	wBytes
	wUA
	wReferer
	wUser
	wHost
	wProto
	wDuration
)

type w3cCol struct {
	kind w3cKind
	name string // the named field's name
	prio int8   // for wHost: x-host-header outranks cs(Host) and cs-host
}

// w3cLayout is what one `#Fields:` line says.
type w3cLayout struct {
	text string // the field list as written
	cols []w3cCol
	edge bool // a CloudFront layout (x-edge-* fields)
}

// w3cFormat is a W3C preset and the layouts its `#Fields:` lines set.
type w3cFormat struct {
	name  string  // "iis" or "cloudfront"
	scale float64 // seconds per unit of time-taken
	def   *w3cLayout
	seen  atomic.Pointer[[]w3cAt] // copied on write; nil before any #Fields:
	// directed: a caller hands the lines to Parser.Directive in file
	// order, so the parse of a #Fields: line (on any goroutine, in any
	// order) notes nothing: noted again out of order, an earlier layout
	// would be taken for the newest (A, B, A: the first A's parse after
	// the second A's Directive made the lines under B read as A).
	directed atomic.Bool
}

// w3cAt is a `#Fields:` line and its line number.
type w3cAt struct {
	line int
	lay  *w3cLayout
}

// maxW3CLayouts bounds the `#Fields:` changes a Parser remembers.
const maxW3CLayouts = 64

// note records the `#Fields:` text read at line n, in file order: the
// same text as the newest one, at or after its line, goes on with it (a
// server that writes its header again, or the same line noted twice);
// anything else is the newest (a new file's header, its line numbers
// starting again, included).
func (f *w3cFormat) note(text string, n int) {
	for {
		old := f.seen.Load()
		var list []w3cAt
		if old != nil {
			list = *old
		}
		if k := len(list); k > 0 && list[k-1].line <= n && list[k-1].lay.text == text {
			return
		}
		var lay *w3cLayout
		for i := len(list) - 1; i >= 0; i-- {
			if list[i].lay.text == text {
				lay = list[i].lay
				break
			}
		}
		if lay == nil {
			lay = newW3CLayout(text)
		}
		next := append(slices.Clip(list[max(0, len(list)-maxW3CLayouts+1):]), w3cAt{line: n, lay: lay})
		if f.seen.CompareAndSwap(old, &next) {
			return
		}
	}
}

// layout returns the columns in force at line n.
func (f *w3cFormat) layout(n int) *w3cLayout {
	if l := f.seen.Load(); l != nil {
		for i := len(*l) - 1; i >= 0; i-- {
			if (*l)[i].line < n {
				return (*l)[i].lay
			}
		}
	}
	return f.def
}

// Directive notes line, the lineNo-th of a file, when it is a directive of
// the format, and reports whether it is one: for the W3C presets (iis,
// cloudfront), a `#Fields:` line sets the columns of the lines after it. A
// caller that parses a file's lines out of order (in blocks, on several
// goroutines) calls it on every line, in file order, as it reads them;
// ParseString then reads each line with the columns in force at its place.
// It is safe for concurrent use, and a no-op returning false for other
// formats.
func (p *Parser) Directive(line string, lineNo int) bool {
	if p.hand == nil || p.hand.w3c == nil || line == "" || line[0] != '#' {
		return false
	}
	if name, rest, _ := strings.Cut(line[1:], ":"); name == "Fields" {
		p.hand.w3c.directed.Store(true)
		p.hand.w3c.note(trimSpace(strings.TrimRight(rest, "\r\n")), lineNo)
	}
	return true
}

const (
	iisDefaultFields        = "date time s-ip cs-method cs-uri-stem cs-uri-query s-port cs-username c-ip cs(User-Agent) cs(Referer) sc-status sc-substatus sc-win32-status time-taken"
	cloudfrontDefaultFields = "date time x-edge-location sc-bytes c-ip cs-method cs(Host) cs-uri-stem sc-status cs(Referer) cs(User-Agent) cs-uri-query cs(Cookie) x-edge-result-type x-edge-request-id x-host-header cs-protocol cs-bytes time-taken x-forwarded-for ssl-protocol ssl-cipher x-edge-response-result-type cs-protocol-version fle-status fle-encrypted-fields c-port time-to-first-byte x-edge-detailed-result-type sc-content-type sc-content-len sc-range-start sc-range-end"
)

func w3cPreset(name string) *handFormat {
	f := &w3cFormat{name: name, scale: 1e-3}
	def := iisDefaultFields
	if name == "cloudfront" {
		f.scale, def = 1, cloudfrontDefaultFields
	}
	f.def = newW3CLayout(def)
	h := &handFormat{w3c: f, nFields: 12, read: f.read}
	// What a line can carry: the columns any layout can map to an own
	// field, and the default layout's named fields.
	h.fields = []item{field(kIP, "c-ip"), field(kXFF, "x-forwarded-for"), field(kTimeISO, "date"), field(kMethod, "cs-method"),
		field(kURI, "cs-uri-stem"), field(kStatus, "sc-status"), field(kBytes, "sc-bytes"), field(kUA, "cs(User-Agent)"),
		field(kReferer, "cs(Referer)"), field(kUser, "cs-username"), field(kHost, "cs-host"), field(kProtocol, "cs-version"),
		field(kDuration, "time-taken")}
	h.nFields = 0
	for _, c := range f.def.cols {
		if c.kind == wField {
			h.fields = append(h.fields, field(kField, c.name))
			h.nFields++
		}
	}
	return h
}

// w3cColumn maps a W3C field identifier to what it is read as.
func w3cColumn(id string) w3cCol {
	switch strings.ToLower(id) {
	case "date":
		return w3cCol{kind: wDate}
	case "time":
		return w3cCol{kind: wTime}
	case "c-ip":
		return w3cCol{kind: wIP}
	case "x-forwarded-for":
		return w3cCol{kind: wXFF}
	case "cs-method":
		return w3cCol{kind: wMethod}
	case "cs-uri-stem":
		return w3cCol{kind: wStem}
	case "cs-uri-query":
		return w3cCol{kind: wQuery}
	case "cs-uri":
		return w3cCol{kind: wURI}
	case "sc-status":
		return w3cCol{kind: wStatus}
	case "sc-bytes":
		return w3cCol{kind: wBytes}
	case "cs(user-agent)":
		return w3cCol{kind: wUA}
	case "cs(referer)", "cs(referrer)":
		return w3cCol{kind: wReferer}
	case "cs-username":
		return w3cCol{kind: wUser}
	case "x-host-header":
		return w3cCol{kind: wHost, prio: 2}
	case "cs(host)", "cs-host":
		return w3cCol{kind: wHost, prio: 1}
	case "cs-version", "cs-protocol-version":
		return w3cCol{kind: wProto}
	case "time-taken":
		return w3cCol{kind: wDuration}
	case "cs(cookie)", "sc(set-cookie)":
		return w3cCol{kind: wSkip}
	}
	name := strings.Map(func(r rune) rune {
		switch r {
		case '-', '(':
			return '_'
		case ')':
			return -1
		}
		return r
	}, strings.ToLower(id))
	return w3cCol{kind: wField, name: name}
}

func newW3CLayout(text string) *w3cLayout {
	l := &w3cLayout{text: text}
	for _, id := range strings.Fields(text) {
		l.cols = append(l.cols, w3cColumn(id))
		if strings.HasPrefix(id, "x-edge-") {
			l.edge = true
		}
	}
	return l
}

// w3cLine is what the columns of one line gave, read at its end.
type w3cLine struct {
	date, clock string
	hostPrio    int8
}

func (f *w3cFormat) read(p *Parser, s string, lineNo int, e *Entry, st *lineState) bool {
	if s[0] == '#' {
		name, rest, _ := strings.Cut(s[1:], ":")
		if name == "Fields" {
			if !f.directed.Load() { // else Directive noted it, in file order
				f.note(trimSpace(rest), lineNo)
			}
			st.directive = "W3C directive #Fields: the columns of the lines after it"
			return false
		}
		st.directive = "W3C directive #" + name
		return false
	}
	if f.name == "iis" {
		if t := trimSpace(s); strings.HasPrefix(t, "<Event") {
			return f.readEvent(p, t, e, st)
		}
	}
	lay := f.layout(lineNo)
	sep := " "
	if strings.IndexByte(s, '\t') >= 0 {
		sep = "\t"
	}
	if n := strings.Count(s, sep) + 1; n != len(lay.cols) {
		return st.failLine("line", fmt.Sprintf("%d columns, but the #Fields: in force names %d (%s)", n, len(lay.cols), lay.text))
	}
	var l w3cLine
	rest := s
	for i := range lay.cols {
		v := rest
		if j := strings.Index(rest, sep); j >= 0 {
			v, rest = rest[:j], rest[j+1:]
		}
		f.apply(p, &lay.cols[i], v, &l, e, st)
	}
	if !f.finish(p, &l, e, st) {
		return false
	}
	return lay.edge == (f.name == "cloudfront")
}

// apply reads the value v of column c.
func (f *w3cFormat) apply(p *Parser, c *w3cCol, v string, l *w3cLine, e *Entry, st *lineState) {
	switch c.kind {
	case wField:
		p.addField(c.name, v, e, st)
	case wDate:
		l.date = v
	case wTime:
		l.clock = v
	case wIP:
		p.put(kIP, "c-ip", v, e, st)
	case wXFF:
		p.put(kXFF, "x-forwarded-for", v, e, st)
	case wMethod:
		p.put(kMethod, "cs-method", v, e, st)
	case wStem:
		if !absent(v) {
			e.Path, e.Has = v, e.Has|HasPath
		}
	case wQuery:
		p.put(kQuery, "cs-uri-query", v, e, st)
	case wURI:
		p.put(kURI, "cs-uri", v, e, st)
	case wStatus:
		p.put(kStatus, "sc-status", v, e, st)
	case wBytes:
		p.put(kBytes, "sc-bytes", v, e, st)
	case wUA:
		if f.name == "cloudfront" {
			v = percentDecode(v)
		} else {
			v = plusBlanks(v)
		}
		p.put(kUA, "cs(User-Agent)", v, e, st)
	case wReferer:
		p.put(kReferer, "cs(Referer)", v, e, st)
	case wUser:
		p.put(kUser, "cs-username", v, e, st)
	case wHost:
		if c.prio > l.hostPrio && !absent(v) {
			e.Host, e.Has, l.hostPrio = v, e.Has|HasHost, c.prio
		}
	case wProto:
		p.put(kProtocol, "cs-version", v, e, st)
	case wDuration:
		p.putDuration(v, f.scale, e, st)
	}
}

// finish reads the date and time columns into the entry's time (UTC).
func (f *w3cFormat) finish(p *Parser, l *w3cLine, e *Entry, st *lineState) bool {
	d, c := l.date, l.clock
	if len(d) != 10 || d[4] != '-' || d[7] != '-' || len(c) < 8 || c[2] != ':' || c[5] != ':' {
		return st.failLine("time", fmt.Sprintf("date %q time %q: not W3C's yyyy-mm-dd hh:mm:ss", d, c))
	}
	y, ok1 := digits(d, 0, 4)
	mo, ok2 := digits(d, 5, 2)
	dd, ok3 := digits(d, 8, 2)
	h, ok4 := digits(c, 0, 2)
	mi, ok5 := digits(c, 3, 2)
	sec, ok6 := digits(c, 6, 2)
	ns, end := fraction(c, 8)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || end != len(c) {
		return st.failLine("time", fmt.Sprintf("date %q time %q: not W3C's yyyy-mm-dd hh:mm:ss", d, c))
	}
	t, ok := p.tr.date(y, mo, dd, h, mi, sec, ns, 0, true)
	if !ok {
		return st.failLine("time", fmt.Sprintf("date %q time %q: no such time", d, c))
	}
	e.Time, st.hasTime = t.In(time.UTC), true
	return true
}

// readEvent reads an IIS ETW event exported as XML: its <Data Name="...">
// elements are the W3C columns, by name.
func (f *w3cFormat) readEvent(p *Parser, s string, e *Entry, st *lineState) bool {
	const open = `<Data Name="`
	var l w3cLine
	seen := 0
	for i := 0; ; {
		j := strings.Index(s[i:], open)
		if j < 0 {
			break
		}
		i += j + len(open)
		q := strings.IndexByte(s[i:], '"')
		if q < 0 {
			break
		}
		name := s[i : i+q]
		i += q + 1
		if strings.HasPrefix(s[i:], "/>") || strings.HasPrefix(s[i:], " />") {
			continue
		}
		if i >= len(s) || s[i] != '>' {
			break
		}
		i++
		k := strings.Index(s[i:], "</Data>")
		if k < 0 {
			break
		}
		v := xmlUnescape(s[i : i+k])
		i += k
		c := w3cColumn(eventColumn(name))
		if c.kind == wField && (c.name == "enabledfieldsflags" || c.name == "customfields") {
			continue
		}
		f.apply(p, &c, v, &l, e, st)
		seen++
	}
	if seen == 0 {
		return st.failLine("line", "an XML event without <Data Name=...> elements")
	}
	return f.finish(p, &l, e, st)
}

// eventColumn turns the ETW event's names for header columns
// ("csUser-Agent", "csReferer", "csCookie") into the W3C identifiers
// ("cs(User-Agent)").
func eventColumn(name string) string {
	if len(name) > 2 && (strings.HasPrefix(name, "cs") || strings.HasPrefix(name, "sc")) && name[2] >= 'A' && name[2] <= 'Z' {
		return name[:2] + "(" + name[2:] + ")"
	}
	return name
}

// xmlUnescape decodes the five predefined XML entities and numeric ones.
func xmlUnescape(s string) string {
	if strings.IndexByte(s, '&') < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '&' {
			b.WriteByte(s[i])
			continue
		}
		j := strings.IndexByte(s[i:], ';')
		if j < 0 {
			b.WriteString(s[i:])
			break
		}
		ent := s[i+1 : i+j]
		switch {
		case ent == "amp":
			b.WriteByte('&')
		case ent == "lt":
			b.WriteByte('<')
		case ent == "gt":
			b.WriteByte('>')
		case ent == "quot":
			b.WriteByte('"')
		case ent == "apos":
			b.WriteByte('\'')
		case strings.HasPrefix(ent, "#x"):
			n, err := strconv.ParseUint(ent[2:], 16, 21)
			if err != nil {
				b.WriteString(s[i : i+j+1])
			} else {
				b.WriteRune(rune(n))
			}
		case strings.HasPrefix(ent, "#"):
			n, err := strconv.ParseUint(ent[1:], 10, 21)
			if err != nil {
				b.WriteString(s[i : i+j+1])
			} else {
				b.WriteRune(rune(n))
			}
		default:
			b.WriteString(s[i : i+j+1])
		}
		i += j
	}
	return b.String()
}

// plusBlanks reads IIS's '+' for a blank: "a+b" is "a b", and "++" is " +"
// (a '+' right after a blank is the value's own, as in "; +http://").
func plusBlanks(v string) string {
	if strings.IndexByte(v, '+') < 0 {
		return v
	}
	b := []byte(v)
	for i := range b {
		if b[i] == '+' && (i == 0 || b[i-1] != ' ') {
			b[i] = ' '
		}
	}
	return string(b)
}

// percentDecode decodes %XX escapes once; a '%' not followed by two hex
// digits stays.
func percentDecode(v string) string {
	if strings.IndexByte(v, '%') < 0 {
		return v
	}
	b := make([]byte, 0, len(v))
	for i := 0; i < len(v); i++ {
		if v[i] == '%' && i+2 < len(v) {
			h, ok1 := unhex(v[i+1])
			l, ok2 := unhex(v[i+2])
			if ok1 && ok2 {
				b = append(b, h<<4|l)
				i += 2
				continue
			}
		}
		b = append(b, v[i])
	}
	return string(b)
}
