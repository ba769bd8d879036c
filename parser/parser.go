package parser

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Options says how to read a source's lines. Exactly one of Format,
// LogFormat, ApacheFormat, FPMFormat, JSONFields is set (Format "" with
// nothing else set means "combined").
type Options struct {
	Format         string            // preset: common, combined, vhost_combined, host_combined, nginx_timing, apache_timing, phpfpm, caddy, traefik_json, traefik_clf, haproxy, alb, cloudfront, iis, envoy (not "auto": use Detect first)
	LogFormat      string            // nginx log_format string
	ApacheFormat   string            // Apache LogFormat string
	FPMFormat      string            // PHP-FPM access.format string
	JSONFields     map[string]string // Entry field name -> dotted JSON path (JSON lines)
	CPUField       string            // name of a field holding CPU seconds ("upstream_http_x_cpu_time"), optional
	Location       *time.Location    // zone for zone-less times; nil means time.Local
	TrustedProxies []netip.Prefix    // X-Forwarded-For is believed only from these
}

// Parser reads lines of one format. It is immutable after New and safe for
// concurrent use by many goroutines.
type Parser struct {
	name    string
	items   []item      // line formats
	json    *jsonFormat // JSON lines
	hand    *handFormat // a preset read by hand (haproxy, alb, cloudfront, iis, envoy)
	handCPU string      // for a hand preset: Options.CPUField, a named field holding CPU seconds
	tr      timeReader
	trusted []netip.Prefix
	nFields int // named fields a line may carry, to size Entry.Fields
	fpmCPU  bool

	clfNext  int  // for a format of the CLF prefix: clfPrefix's item after the size, where readCLF hands over
	clfIdent bool // and whether its ident is a field
	clfRefUA bool // and whether the referer and the user agent follow (clfRefUA)
}

// Error is a line that cannot yield a client address and a time.
type Error struct {
	Line   int    // 1-based line number, as given to Parse
	Field  string // "ip", "time", "line", a field of the format, or "directive" (ErrDirective)
	Reason string // why, quoting the offending text
}

// Error returns a message like `line 12: time: "32/Foo/2020": cannot parse`.
func (e *Error) Error() string {
	return fmt.Sprintf("line %d: %s: %s", e.Line, e.Field, e.Reason)
}

// preset names, most specific first (the order Detect prefers on a tie).
var presetOrder = [...]string{"traefik_clf", "apache_timing", "nginx_timing", "vhost_combined", "host_combined", "combined", "common", "phpfpm", "haproxy", "alb", "envoy", "cloudfront", "iis", "caddy", "traefik_json"}

// Presets returns the names of the preset formats.
func Presets() []string {
	out := make([]string, len(presetOrder))
	copy(out, presetOrder[:])
	sort.Strings(out)
	return out
}

const (
	commonFormat   = `%h %l %u %t "%r" %>s %b`
	combinedFormat = commonFormat + ` "%{Referer}i" "%{User-Agent}i"`
	phpfpmFormat   = `%R - %u %t "%m %r%Q%q" %s %f %{mili}d %{kilo}M %C%%`
	// Apache's vhost_combined is `%v:%p %h %l %u %t "%r" %>s %O ...`: the
	// host:port item replaces %v, and the size is read as bytes like %b.
	vhostFormat = `%v ` + combinedFormat
	// nginx's host-first combined (the host may carry ":$server_port").
	hostFormat = `$host $remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"`
)

// hostFirstHint ends the reason of a host-first line rejected by a
// common-based preset.
const hostFirstHint = "the log puts the virtual host first; try format vhost_combined / host_combined or auto"

// strictIdent marks the ident of a common-based preset: a line whose ident
// is an address is host-first and is rejected (a host is never charged as
// the client).
func strictIdent(items []item) []item {
	for i := range items {
		if items[i].kind == kSkip && items[i].name == "ident" {
			items[i].hostPre = true
		}
	}
	return items
}

// hostPortFirst makes the first item (a host) read "host" or "host:port".
func hostPortFirst(items []item, port string) []item {
	items[0].kind, items[0].port = kHostPort, port
	return items
}

// presetItems returns the items of a line preset.
func presetItems(name string) ([]item, bool) {
	must := func(items []item, err error) []item {
		if err != nil {
			panic("parser: bad preset " + name + ": " + err.Error())
		}
		return items
	}
	switch name {
	case "common":
		return strictIdent(must(compileApache(commonFormat))), true
	case "combined":
		return strictIdent(must(compileApache(combinedFormat))), true
	case "vhost_combined":
		return hostPortFirst(must(compileApache(vhostFormat)), "port_canonical"), true
	case "host_combined":
		return hostPortFirst(must(compileNginx(hostFormat)), "server_port"), true
	case "nginx_timing":
		items := strictIdent(must(compileApache(combinedFormat)))
		rt := field(kDuration, "request_time")
		rt.scale = 1
		return append(items, lit(" "), rt), true
	case "apache_timing":
		return strictIdent(must(compileApache(combinedFormat + " %D"))), true
	case "traefik_clf":
		items := strictIdent(must(compileApache(combinedFormat)))
		return append(items, lit(" "), field(kField, "request_count"), lit(` "`), field(kField, "router_name"),
			lit(`" "`), field(kField, "server_url"), lit(`" `), field(kDurMS, "duration")), true
	case "phpfpm":
		return must(compileFPM(phpfpmFormat)), true
	}
	return nil, false
}

// jsonPreset returns the field mapping of a JSON preset.
func jsonPreset(name string) (map[string][]jsonPath, bool) {
	p := func(paths ...string) []jsonPath {
		out := make([]jsonPath, len(paths))
		for i, s := range paths {
			out[i] = jsonPath{path: s}
		}
		return out
	}
	switch name {
	case "caddy":
		return map[string][]jsonPath{
			// client_ip is Caddy's own reading of its trusted_proxies; remote_ip the peer.
			"ip":         p("request.client_ip", "request.remote_ip"),
			"time":       p("ts"),
			"method":     p("request.method"),
			"path":       p("request.uri"),
			"protocol":   p("request.proto"),
			"status":     p("status"),
			"bytes":      p("size"),
			"referer":    p("request.headers.Referer"),
			"user_agent": p("request.headers.User-Agent"),
			"user":       p("user_id"),
			"host":       p("request.host"),
			"duration":   p("duration"),
		}, true
	case "traefik_json":
		return map[string][]jsonPath{
			"ip":              p("ClientHost", "ClientAddr"),
			"time":            p("StartLocal", "StartUTC", "time"),
			"method":          p("RequestMethod"),
			"path":            p("RequestPath"),
			"protocol":        p("RequestProtocol"),
			"status":          p("DownstreamStatus", "OriginStatus"),
			"bytes":           p("DownstreamContentSize"),
			"referer":         p("request_Referer"),
			"user_agent":      p("request_User-Agent"),
			"user":            p("ClientUsername"),
			"host":            p("RequestHost", "RequestAddr"),
			"duration":        {{path: "Duration", scale: 1e-9}},
			"x_forwarded_for": p("request_X-Forwarded-For"),
			"router_name":     p("RouterName", "FrontendName"),
		}, true
	}
	return nil, false
}

// jsonDurationUnits reads the duration names with a unit in a JSON field
// mapping: `duration` is seconds; `duration_ms`, `duration_us` and
// `duration_ns` name a field in milliseconds (Envoy's %DURATION%),
// microseconds or nanoseconds (Traefik's Duration). One duration at most.
func jsonDurationUnits(m map[string][]jsonPath) error {
	have := ""
	if _, ok := m["duration"]; ok {
		have = "duration"
	}
	for _, u := range []struct {
		name  string
		scale float64
	}{{"duration_ms", 1e-3}, {"duration_us", 1e-6}, {"duration_ns", 1e-9}} {
		ps, ok := m[u.name]
		if !ok {
			continue
		}
		if have != "" {
			return fmt.Errorf("json fields %s and %s: one duration only", have, u.name)
		}
		have = u.name
		delete(m, u.name)
		m["duration"] = []jsonPath{{path: ps[0].path, scale: u.scale}}
	}
	return nil
}

// New compiles a format once. A bad format string is an error naming the
// offending directive.
func New(o Options) (*Parser, error) {
	set := 0
	for _, b := range []bool{o.Format != "", o.LogFormat != "", o.ApacheFormat != "", o.FPMFormat != "", len(o.JSONFields) > 0} {
		if b {
			set++
		}
	}
	if set > 1 {
		return nil, fmt.Errorf("parser: more than one of format, log_format, apache_format, fpm_format and json_fields is set")
	}
	loc := o.Location
	if loc == nil {
		loc = time.Local
	}
	p := &Parser{tr: timeReader{zones: new(zoneCache), loc: loc, clfs: new(clfCache)}}
	for _, pr := range o.TrustedProxies {
		p.trusted = append(p.trusted, pr.Masked())
	}
	var items []item
	var err error
	switch {
	case o.LogFormat != "":
		p.name = "nginx log_format"
		items, err = compileNginx(o.LogFormat)
	case o.ApacheFormat != "":
		p.name = "apache LogFormat"
		items, err = compileApache(o.ApacheFormat)
	case o.FPMFormat != "":
		p.name = "php-fpm access.format"
		items, err = compileFPM(o.FPMFormat)
	case len(o.JSONFields) > 0:
		p.name = "json"
		m := make(map[string][]jsonPath, len(o.JSONFields))
		for k, v := range o.JSONFields {
			m[k] = []jsonPath{{path: v}}
		}
		err = jsonDurationUnits(m)
		if err == nil {
			p.json, err = compileJSON(m, o.CPUField)
		}
	default:
		name := o.Format
		if name == "" {
			name = "combined"
		}
		p.name = name
		if name == "auto" {
			return nil, fmt.Errorf("parser: format auto: call Detect on the first lines and use the preset it returns")
		}
		if h, ok := handPreset(name, p); ok {
			p.hand, p.handCPU = h, o.CPUField
			p.nFields = h.nFields
			return p, nil
		}
		if m, ok := jsonPreset(name); ok {
			p.json, err = compileJSON(m, o.CPUField)
			break
		}
		var ok bool
		if items, ok = presetItems(name); !ok {
			return nil, fmt.Errorf("parser: unknown format %q (presets: %s)", name, strings.Join(Presets(), ", "))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("parser: %w", err)
	}
	if p.json == nil {
		if items, err = finish(items, o.CPUField); err != nil {
			return nil, fmt.Errorf("parser: %s: %w", p.name, err)
		}
		p.items = items
		p.clfNext, p.clfIdent = clfPrefix(items)
		p.clfRefUA = clfRefUA(items, p.clfNext)
		for _, it := range items {
			switch it.kind {
			case kField, kHostPort:
				p.nFields++
			case kCPUPct:
				p.fpmCPU = true
			case kRequest:
				p.nFields++ // a garbage request line is kept as a field
			}
		}
	} else {
		for _, t := range p.json.paths {
			if t.kind == kField {
				p.nFields++
			}
		}
	}
	return p, nil
}

// Name returns the format's name for summaries: "combined", "nginx log_format", ...
func (p *Parser) Name() string { return p.name }

// Parse reads one line. It copies the line once and the Entry's strings point
// into that copy. A trailing "\n" or "\r\n" is ignored.
func (p *Parser) Parse(line []byte, lineNo int) (Entry, error) {
	line = trimEOL(line)
	return p.ParseString(string(line), lineNo)
}

func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}

// ParseString reads one line without copying it: the Entry's strings may
// point into line. A line that cannot yield a client address and a time is
// an *Error; everything else missing or unreadable is absent from the Entry.
func (p *Parser) ParseString(line string, lineNo int) (Entry, error) {
	e, _, err := p.parse(line, lineNo)
	return e, err
}

// ParseStringBuf is ParseString with the Entry's other named fields
// (Entry.Fields) stored in buf's spare capacity instead of a slice of their
// own: it returns the Entry, whose Fields is then the part of buf it takes
// (capped, so that appending to it cannot write over a later entry's), and
// buf grown by it. A caller that parses many lines into one buffer with
// room for them (FieldsPerLine a line) allocates nothing for any of them;
// a line whose fields do not fit in what is left gets a slice of its own,
// as ParseString's. The Entry is otherwise ParseString's, field for field
// (an Entry without fields has a nil Fields), and buf is never written
// below its length.
func (p *Parser) ParseStringBuf(line string, lineNo int, buf []Field) (Entry, []Field, error) {
	var e Entry
	buf, err := p.ParseStringTo(line, lineNo, buf, &e)
	return e, buf, err
}

// ParseStringTo is ParseStringBuf writing the Entry into *e, whatever e
// held (every field of it is written), instead of returning it: a caller
// that keeps its entries in a slice (replay's blocks) parses each in
// place, with no copy of the Entry.
func (p *Parser) ParseStringTo(line string, lineNo int, buf []Field, e *Entry) ([]Field, error) {
	return p.ParseStringMemo(line, lineNo, buf, e, nil)
}

// TimeMemo is one caller's memo of the last usual CLF time its lines
// held ("02/Jan/2006:15:04:05 -0700", read by a CLF prefix: readCLF):
// the text, the parser that read it and its time. A log's neighbouring
// lines mostly share their second, and comparing the 26 bytes with the
// memo's is cheaper than the shared cache's look-up (clfCache: atomics,
// the slot, the time rebuilt). Its zero value is empty. One goroutine at
// a time may use it: a replay's block keeps one for the lines it parses,
// the daemon's parsing goroutine one for its source's batches.
type TimeMemo struct {
	p          *Parser
	k0, k1, k2 uint64 // the text's bytes 0-7, 8-15, 16-23
	k3         uint64 // its bytes 24-25, and 1<<16: 0 when empty
	t          time.Time
}

// ParseStringMemo is ParseStringTo with m (nil: none) remembering the
// last time read: the same Entry and error for every line.
func (p *Parser) ParseStringMemo(line string, lineNo int, buf []Field, e *Entry, m *TimeMemo) ([]Field, error) {
	tail := buf[len(buf):len(buf):cap(buf)]
	if cap(tail) == 0 {
		tail = nil
	}
	_, err := p.parseTo(line, lineNo, tail, e, m)
	if err != nil || len(e.Fields) == 0 {
		e.Fields = nil
		return buf, err
	}
	n := len(e.Fields)
	e.Fields = e.Fields[:n:n]
	if cap(tail) >= n && &tail[:1][0] == &e.Fields[0] {
		buf = buf[:len(buf)+n]
	}
	return buf, err
}

// FieldsPerLine is how many Entry.Fields a line of the format may carry
// at most, but for the rare duplicate: the room a line takes in
// ParseStringBuf's buffer.
func (p *Parser) FieldsPerLine() int { return p.nFields + 1 }

// parse also reports whether the line matched the format completely.
func (p *Parser) parse(line string, lineNo int) (Entry, bool, error) {
	return p.parseInto(line, lineNo, nil)
}

// parseInto is parse, appending the Entry's Fields to fields (a nil or
// empty slice; its spare capacity is used first).
func (p *Parser) parseInto(line string, lineNo int, fields []Field) (Entry, bool, error) {
	var e Entry
	full, err := p.parseTo(line, lineNo, fields, &e, nil)
	return e, full, err
}

// parseTo is parseInto writing the Entry into *e (all of it: the zero
// Entry on an error).
func (p *Parser) parseTo(line string, lineNo int, fields []Field, e *Entry, m *TimeMemo) (bool, error) {
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	}
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	*e = Entry{}
	if trimSpace(line) == "" {
		return false, &Error{Line: lineNo, Field: "line", Reason: "empty"}
	}
	e.Fields = fields
	st := lineState{memo: m}
	var full bool
	if p.hand != nil {
		// Like the JSON walk, a hand reader may hand what it is given to a
		// recursive walk (Envoy's JSON lines): keep its escape to them.
		he, hst := new(Entry), new(lineState)
		he.Fields = fields
		full = p.hand.read(p, line, lineNo, he, hst)
		*e, st = *he, *hst
		if st.directive != "" {
			*e = Entry{}
			return false, &Error{Line: lineNo, Field: "directive", Reason: st.directive}
		}
		if st.failField != "" {
			*e = Entry{}
			return false, &Error{Line: lineNo, Field: st.failField, Reason: st.fail}
		}
		if p.handCPU != "" {
			for _, f := range e.Fields {
				if v, ok := sumFloats(f.Value); ok && f.Name == p.handCPU && v >= 0 {
					e.CPU, e.Has = v, e.Has|HasCPU
				}
			}
		}
	} else if p.json != nil {
		// The JSON walk is recursive, so what it is handed escapes: keep
		// that to JSON lines.
		je, jst := new(Entry), new(lineState)
		je.Fields = fields
		full = p.scanJSON(p.json, line, je, jst)
		*e, st = *je, *jst
	} else {
		full = p.scan(line, e, &st)
	}
	if st.second != "" {
		*e = Entry{}
		return false, &Error{Line: lineNo, Field: "ip", Reason: hostFirstReason(line, st.second)}
	}
	// Client address.
	conn, xff := st.conn, st.xff
	if !conn.IsValid() && st.hasXFF && !st.hasIPRaw {
		// No connecting address in the format: the last XFF entry is the peer.
		head, last := splitLast(st.xff)
		if a, ok := parseAddr(last); ok {
			conn, xff = a, head
		} else {
			st.ipRaw, st.hasIPRaw = last, true
		}
	}
	if !conn.IsValid() {
		*e = Entry{}
		return false, &Error{Line: lineNo, Field: "ip", Reason: st.reason(st.ipRaw, st.hasIPRaw, "not an address")}
	}
	if !st.hasTime {
		*e = Entry{}
		return false, &Error{Line: lineNo, Field: "time", Reason: st.reason(st.timeRaw, st.hasTimeR, "cannot parse")}
	}
	e.IP = clientFrom(conn, xff, p.trusted)
	if p.fpmCPU && st.hasCPUPct && e.Has&HasDuration != 0 && e.Has&HasCPU == 0 {
		e.CPU, e.Has = st.cpuPct/100*e.Duration, e.Has|HasCPU
	}
	if p.json != nil {
		full = full && e.Has&HasStatus != 0
	}
	return full && !st.bad, nil
}

// hostFirstReason says why a common-based preset refuses a line whose
// second field (second) is an address: its first is a host, not the client.
func hostFirstReason(line, second string) string {
	first := line
	if j := strings.IndexByte(line, ' '); j >= 0 {
		first = line[:j]
	}
	if len(first) > 64 {
		first = first[:64] + "…"
	}
	if _, ok := parseAddr(first); ok {
		return fmt.Sprintf("remote_addr: %q is followed by another address %q: %s", first, second, hostFirstHint)
	}
	return fmt.Sprintf("remote_addr: %q is a host name, not an address: %s", first, hostFirstHint)
}

func (st *lineState) reason(raw string, has bool, why string) string {
	if has {
		if len(raw) > 64 {
			raw = raw[:64] + "…"
		}
		return strconv.Quote(raw) + ": " + why
	}
	if st.stopped {
		if st.stopWant != "" {
			return fmt.Sprintf("not found: the line does not match the format (expected %q at byte %d, after %s)", st.stopWant, st.stopPos, st.stopAt)
		}
		return fmt.Sprintf("not found: the line does not match the format (at byte %d, in %s)", st.stopPos, st.stopAt)
	}
	return "not found in the line"
}

// Detect picks the most specific preset that reads the sample lines: the one
// that reads the most lines completely, ties going to the more specific. The
// Options supply Location, TrustedProxies and CPUField.
func Detect(sample [][]byte, o Options) (string, error) {
	best, bestN := "", 0
	lines := 0
	for _, l := range sample {
		if len(trimEOL(l)) > 0 {
			lines++
		}
	}
	if lines == 0 {
		return "", fmt.Errorf("parser: detect: no lines to look at")
	}
	var hostN, ported int // lines host_combined reads; lines vhost_combined reads with a port
	for _, name := range presetOrder {
		p, err := New(Options{Format: name, Location: o.Location, TrustedProxies: o.TrustedProxies, CPUField: o.CPUField})
		if err != nil {
			return "", err
		}
		n := 0
		for i, l := range sample {
			e, full, err := p.parse(string(trimEOL(l)), i+1)
			if err != nil || !full {
				continue
			}
			n++
			if name == "vhost_combined" && len(e.Fields) > 0 && e.Fields[0].Name == "port_canonical" {
				ported++
			}
		}
		if name == "host_combined" {
			hostN = n
		}
		if n > bestN {
			best, bestN = name, n
		}
	}
	// vhost_combined and host_combined read the same lines ("host[:port]
	// client - user [time] ..."): Apache's %v:%p writes a port, nginx's
	// usual $host does not, so a sample mostly without ports is nginx's.
	if best == "vhost_combined" && hostN == bestN && ported*2 <= bestN {
		best = "host_combined"
	}
	if best == "" {
		return "", fmt.Errorf("parser: detect: no preset reads any of the %d sample lines", lines)
	}
	return best, nil
}
