package parser

import (
	"math/bits"
	"net/netip"
	"strings"
	"time"

	"github.com/logjail/logjail/internal/word"
)

// kind says what a field of a format is read as.
type kind uint8

const (
	kLit       kind = iota // a literal separator, not a field
	kIP                    // the connecting address
	kXFF                   // an X-Forwarded-For list
	kXFFAdd                // nginx $proxy_add_x_forwarded_for: "xff, remote_addr"
	kTimeCLF               // 02/Jan/2006:15:04:05 -0700
	kTimeISO               // 2006-01-02T15:04:05-07:00
	kTimeEpoch             // 1700000000.123
	kTimeStrf              // a strftime layout
	kRequest               // "GET /p?q HTTP/1.1"
	kMethod
	kURI   // path with optional ?query
	kPath  // path only
	kQuery // query, with or without a leading '?'
	kProtocol
	kStatus
	kBytes
	kReferer
	kUA
	kUser
	kHost
	kDuration // seconds × item.scale
	kDurMS    // Traefik "12ms"
	kCPUPct   // PHP-FPM %C: percent of the duration
	kSkip     // read and ignored (Apache %l ident, FPM %Q)
	kField    // a named field of its own
	kHostPort // "host" or "host:port" (vhost_combined, host_combined): the host, and the port as item.port
)

// item is one step of a compiled format: a literal or a field.
type item struct {
	kind     kind
	lit      string // the literal, for kLit
	name     string // the field's name (for Entry.Fields, CPUField, errors)
	strf     *strftime
	scale    float64 // for kDuration: seconds per unit
	strength int8    // for kIP: a stronger source of the client address wins
	quoted   bool    // between a literal ending in '"' and one starting with '"'
	list     bool    // "a, b, c": a separator right after a ',' does not end it
	toEOL    bool    // the last field, read to the end of the line
	nextNum  bool    // the field after the closing literal is a number
	closing  bool    // a quoted field whose closing literal ends the format
	cpu      bool    // this field is Options.CPUField
	numeric  bool    // the value is a number (for nextNum of the field before)
	intOnly  bool    // a duration written as an integer (Apache %D)
	hostPre  bool    // the ident of a common-based preset: an address here means the line is host-first
	port     string  // for kHostPort: the name of the port field

	// Set by finish for the scan, from the literal after the field:
	sep      string // that literal ("" for the last item)
	sepAt    uint8  // the byte of sep findSep looks for first (sepAt)
	gap      bool   // sep is a blank and '[' or '"': the field and its blank may be missing
	clfFixed bool   // a CLF time followed by a literal: the usual 26 bytes are tried first
	quad     bool   // an address field (not a list, not CPU) whose sep starts with no digit or '.': a dotted quad is read first
	hex6     bool   // such a field whose sep starts with no hex digit or ':': a hex IPv6 address is read first
	num      bool   // a duration (not Apache's %D) or a plain field, unquoted, whose sep starts with no digit or '.': a number is read first (numAt)

	// Set by finish for one 8-byte compare (hasWord), when at most 8 bytes
	// long: a literal item's lit, and sep.
	litW, litM uint64
	sepW, sepM uint64
}

// lineState is what a scan learns besides the Entry fields.
type lineState struct {
	conn      netip.Addr
	connLevel int8
	xff       string
	hasXFF    bool
	cpuPct    float64
	hasCPUPct bool
	hasTime   bool
	ipRaw     string // the first address text seen, for error messages
	hasIPRaw  bool
	timeRaw   string
	hasTimeR  bool
	stopAt    string // item name where the scan stopped
	stopWant  string // literal it expected
	stopPos   int
	stopped   bool
	bad       bool   // a value was there but could not be read
	second    string // an address in the ident field of a common-based preset (host-first line)
	directive string // a hand format's directive or comment line: why it is no entry (ErrDirective)
	failField string // a hand format's unreadable line: the field that failed,
	fail      string // and why
	noEscape  bool   // the whole line has no '\\': no value needs unescape
	memo      *TimeMemo
}

// unescape is the package's unescape, skipped for a line that has no
// backslash at all (scan looks once, for the whole line, instead of once a
// field).
func (st *lineState) unescape(v string) string {
	if st.noEscape {
		return v
	}
	return unescape(v)
}

// scan reads s with the format's items. It returns whether every item was read.
func (p *Parser) scan(s string, e *Entry, st *lineState) bool {
	st.noEscape = strings.IndexByte(s, '\\') < 0
	if p.clfNext > 0 {
		i, pos := p.readCLF(s, e, st)
		if i < len(p.items) && p.items[i].num {
			i, pos = p.readNums(s, i, pos, e, st)
		}
		return p.scanFrom(p.items, i, pos, s, e, st)
	}
	return p.scanItems(p.items, s, e, st)
}

// scanItems reads s with items. A field whose end is found by searching
// for the literal after it (finish's sep) takes that literal at once: the
// search has matched it whole.
func (p *Parser) scanItems(items []item, s string, e *Entry, st *lineState) bool {
	return p.scanFrom(items, 0, 0, s, e, st)
}

// scanFrom is scanItems going on from item i0 at pos0, items[:i0] having
// been read up to pos0 (by readCLF and readNums).
func (p *Parser) scanFrom(items []item, i0, pos0 int, s string, e *Entry, st *lineState) bool {
	pos := pos0
	for i := i0; i < len(items); i++ {
		it := &items[i]
		if it.kind == kLit {
			if !hasWord(s, pos, it.lit, it.litW, it.litM) {
				// Be lenient with runs of blanks between fields.
				if trimmed := strings.TrimLeft(it.lit, " "); len(trimmed) < len(it.lit) {
					k := pos
					for k < len(s) && s[k] == ' ' {
						k++
					}
					if k > pos && strings.HasPrefix(s[k:], trimmed) {
						pos = k + len(trimmed)
						continue
					}
				}
				st.stop(items, i, pos)
				return false
			}
			pos += len(it.lit)
			continue
		}
		if it.num {
			// A timing field's usual value, a plain number: where it ends
			// is where the literal after it must be (no byte of the number
			// starts that literal, so findSep would find it there).
			if f, q, ok := numAt(s, pos); ok && (it.sep == "" && q == len(s) || it.sep != "" && hasWord(s, q, it.sep, it.sepW, it.sepM)) {
				p.setNum(it, f, s[pos:q], e, st)
				if it.sep == "" {
					pos = q
					continue
				}
				pos = q + len(it.sep)
				i++
				continue
			}
		}
		var end int
		found := false // end is where the whole of it.sep starts
		switch {
		case it.clfFixed && len(s)-pos > 26 && s[pos+26] == it.sep[0] && s[pos+20] == ' ':
			// The usual fixed-width "02/Jan/2006:15:04:05 -0700".
			end = pos + 26
		case it.sep == "":
			if it.toEOL {
				end = len(s)
			} else {
				end = pos
				for end < len(s) && s[end] != ' ' {
					end++
				}
			}
		case it.quoted:
			// The first quote, when it is not escaped and the next literal
			// and what follows it are as findClose wants them, is what
			// findClose would return: only other lines take its full rules.
			end = -1
			if j := strings.IndexByte(s[pos:], '"'); j >= 0 {
				if k := pos + j; (k == pos || s[k-1] != '\\') && hasWord(s, k, it.sep, it.sepW, it.sepM) && closeFits(s[k+len(it.sep):], it) {
					end = k
				}
			}
			if end < 0 {
				end = findClose(s, pos, it.sep, it)
			}
			found = true
		default:
			if it.quad || it.hex6 {
				// A client address, read where it starts: its end is where
				// the literal after it must be (no byte the address is
				// made of starts that literal, so it cannot be found
				// earlier).
				if a, n, ok := addrAt(it, s, pos); ok {
					p.setConnAddr(a, it.strength, st)
					pos = n + len(it.sep)
					i++
					continue
				}
			}
			if it.gap && pos > 0 && s[pos-1] == ' ' && hasAt(s, pos, it.sep[1:]) {
				// The field and its blank are missing ("1.2.3.4 - [time]"):
				// read it as empty and go on from the bracket or quote.
				p.set(it, "", e, st)
				pos--
				continue
			}
			end = findSep(s, pos, it.sep, int(it.sepAt), it.list)
			found = true
		}
		if end < 0 {
			// The line ends early: what is left is this field's value
			// (a number up to a blank), and the scan stops there.
			end = len(s)
			if it.numeric {
				if j := strings.IndexByte(s[pos:], ' '); j >= 0 {
					end = pos + j
				}
			}
			if !it.quoted {
				p.set(it, s[pos:end], e, st)
			}
			st.stop(items, i+1, pos)
			return false
		}
		p.set(it, s[pos:end], e, st)
		if found {
			pos = end + len(it.sep)
			i++
			continue
		}
		pos = end
	}
	return true
}

func (st *lineState) stop(items []item, i, pos int) {
	st.stopped = true
	st.stopPos = pos
	if i < len(items) {
		st.stopWant = items[i].lit
	}
	for k := i; k >= 0; k-- {
		if k < len(items) && items[k].kind != kLit {
			st.stopAt = items[k].name
			return
		}
	}
}

// findSep returns the index of sep at or after pos. For a list field, a sep
// right after a ',' belongs to the list. at is the byte of sep to look for
// first (sepAt) in a vector search, which only what is past a value's
// first 16 bytes takes: most values (an address, a status, a size, a
// time taken) are shorter, and are looked at byte by byte.
func findSep(s string, pos int, sep string, at int, list bool) int {
	from := pos
	for {
		k := -1
		end := min(from+16, len(s)-len(sep)+1) // the bytes looked at one by one, where sep can start
		for q := from; q < end; q++ {
			if s[q] == sep[0] {
				m := 1
				for m < len(sep) && s[q+m] == sep[m] {
					m++
				}
				if m == len(sep) {
					k = q
					break
				}
			}
		}
		if k < 0 {
			if end < from+16 {
				return -1
			}
			if len(sep) == 1 {
				j := strings.IndexByte(s[end:], sep[0])
				if j < 0 {
					return -1
				}
				k = end + j
			} else if k = indexSep(s, end, sep, at); k < 0 {
				return -1
			}
		}
		if list && k > pos && s[k-1] == ',' {
			from = k + 1
			continue
		}
		return k
	}
}

// indexSep is strings.Index(s[from:], sep)+from (or -1), looking first for
// sep[at], the byte of sep that sepAt expects to be rarest in a line, and
// then at the rest.
func indexSep(s string, from int, sep string, at int) int {
	c := sep[at]
	for i := from + at; i+len(sep)-at <= len(s); {
		j := strings.IndexByte(s[i:len(s)-len(sep)+at+1], c)
		if j < 0 {
			return -1
		}
		k := i + j - at
		m := 0
		for m < len(sep) && s[k+m] == sep[m] {
			m++
		}
		if m == len(sep) {
			return k
		}
		i += j + 1
	}
	return -1
}

// sepAt picks the byte of a separator to search a line for: the first of
// its rarest kind (punctuation that values seldom hold, then letters,
// digits and the common '-', '.', '/', ':', ',', then a blank).
func sepAt(sep string) int {
	rank := func(c byte) int {
		switch {
		case c == ' ' || c == '\t':
			return 3
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-./:,", c) >= 0:
			return 2
		}
		return 1
	}
	at := 0
	for i := 1; i < len(sep); i++ {
		if rank(sep[i]) < rank(sep[at]) {
			at = i
		}
	}
	return at
}

// findClose finds the closing quote of a quoted field: an unescaped '"' that
// starts the next literal. Old Apache versions wrote quotes inside values
// unescaped, so among the candidates it prefers one after which the line goes
// on as the format says (a number for status, the end of the line or a blank
// after the last field); failing that, the first candidate.
func findClose(s string, pos int, next string, it *item) int {
	first := -1
	for i := pos; i < len(s); {
		j := strings.IndexByte(s[i:], '"')
		if j < 0 {
			break
		}
		k := i + j
		i = k + 1
		if escaped(s, pos, k) || !hasAt(s, k, next) {
			continue
		}
		if first < 0 {
			first = k
		}
		if closeFits(s[k+len(next):], it) {
			return k
		}
	}
	return first
}

// closeFits reports whether rest, what follows a candidate closing quote
// and the literal after it, goes on as the format says: a number for
// nextNum, the end of the line or a blank for the closing field, anything
// otherwise.
func closeFits(rest string, it *item) bool {
	switch {
	case it.nextNum:
		return rest != "" && (rest[0]-'0' <= 9 || rest[0] == '-')
	case it.closing:
		return rest == "" || rest[0] == ' ' || rest[0] == '\t'
	}
	return true
}

// hasAt is strings.HasPrefix(s[i:], lit) for the short literals of a
// format, compared byte by byte instead of by a call to memequal.
func hasAt(s string, i int, lit string) bool {
	if len(s)-i < len(lit) {
		return false
	}
	for m := 0; m < len(lit); m++ {
		if s[i+m] != lit[m] {
			return false
		}
	}
	return true
}

// word8 returns lit's bytes as a little-endian word and the mask of
// those bytes, for hasWord: lit at most 8 bytes long (any longer: 0, 0,
// and hasWord compares byte by byte).
func word8(lit string) (w, m uint64) {
	if len(lit) > 8 {
		return 0, 0
	}
	for i := len(lit) - 1; i >= 0; i-- {
		w, m = w<<8|uint64(lit[i]), m<<8|0xff
	}
	return w, m
}

// hasWord is hasAt(s, i, lit) with lit's word8 (w, m): where 8 bytes of s
// follow i, one load and one compare instead of a compare a byte (a
// format's literals are a few bytes: " - ", "\" rt="). m is 0 for an
// empty literal and for one longer than 8 bytes: those go byte by byte.
func hasWord(s string, i int, lit string, w, m uint64) bool {
	if m != 0 && len(s)-i >= 8 {
		return word.LE(s, i)&m == w
	}
	return hasAt(s, i, lit)
}

// escaped reports whether the byte at k is preceded by an odd number of backslashes.
func escaped(s string, from, k int) bool {
	n := 0
	for k-1-n >= from && s[k-1-n] == '\\' {
		n++
	}
	return n%2 == 1
}

// unescape decodes the escapes nginx and Apache write in values: \xNN, \",
// \\, \n, \r, \t. It allocates only when there is something to decode.
func unescape(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b = append(b, c)
			continue
		}
		switch n := s[i+1]; n {
		case 'x', 'X':
			if i+3 < len(s) {
				h, ok1 := unhex(s[i+2])
				l, ok2 := unhex(s[i+3])
				if ok1 && ok2 {
					b = append(b, h<<4|l)
					i += 3
					continue
				}
			}
			b = append(b, c)
		case '"', '\\':
			b = append(b, n)
			i++
		case 'n':
			b = append(b, '\n')
			i++
		case 'r':
			b = append(b, '\r')
			i++
		case 't':
			b = append(b, '\t')
			i++
		default:
			b = append(b, c)
		}
	}
	return string(b)
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// absent reports whether a logged value means "not there".
func absent(v string) bool { return v == "" || v == "-" }

// set stores one field's value.
func (p *Parser) set(it *item, v string, e *Entry, st *lineState) {
	if it.cpu {
		if f, ok := sumFloats(v); ok && f >= 0 {
			e.CPU, e.Has = f, e.Has|HasCPU
		}
	}
	switch it.kind {
	case kIP:
		if strings.IndexByte(v, ',') >= 0 {
			// A list in an address field is a forwarding chain: the last
			// entry is the peer, the others are believed as X-Forwarded-For.
			head, last := splitLast(v)
			p.setConn(last, it.strength, st)
			if head != "" && !st.hasXFF {
				st.xff, st.hasXFF = head, true
			}
			return
		}
		p.setConn(v, it.strength, st)
	case kXFF:
		if v = trimSpace(v); !absent(v) {
			st.xff, st.hasXFF = v, true
		}
	case kXFFAdd:
		head, last := splitLast(v)
		p.setConn(last, it.strength, st)
		if head != "" {
			st.xff, st.hasXFF = head, true
		}
	case kTimeCLF, kTimeISO, kTimeEpoch, kTimeStrf:
		if st.hasTime {
			return
		}
		var t time.Time
		var ok bool
		switch it.kind {
		case kTimeCLF:
			t, ok = p.tr.clf(v)
		case kTimeISO:
			t, ok = p.tr.iso(v)
		case kTimeEpoch:
			t, ok = p.tr.epoch(v)
		default:
			t, ok = it.strf.parse(&p.tr, v)
		}
		if ok {
			e.Time, st.hasTime = t, true
		} else {
			st.bad = true
			if !st.hasTimeR {
				st.timeRaw, st.hasTimeR = v, true
			}
		}
	case kRequest:
		setRequest(v, e, st)
	case kMethod:
		if v = st.unescape(v); !absent(v) {
			e.Method, e.Has = v, e.Has|HasMethod
		}
	case kURI:
		setURI(st.unescape(v), e)
	case kPath:
		if v = st.unescape(v); !absent(v) {
			e.Path, e.Has = v, e.Has|HasPath
		}
	case kQuery:
		v = st.unescape(v)
		if len(v) > 0 && v[0] == '?' {
			v = v[1:]
		}
		if v != "" && v != "-" {
			e.Query, e.Has = v, e.Has|HasQuery
		}
	case kProtocol:
		if v = st.unescape(v); !absent(v) {
			e.Protocol, e.Has = v, e.Has|HasProtocol
		}
	case kStatus:
		if n, ok := atoi(trimSpace(v)); ok && n >= 100 && n <= 599 {
			e.Status, e.Has = int(n), e.Has|HasStatus
		} else if !absent(v) {
			st.bad = true
		}
	case kBytes:
		if n, ok := atoi(trimSpace(v)); ok {
			e.Bytes, e.Has = n, e.Has|HasBytes
		} else if !absent(v) {
			st.bad = true
		}
	case kReferer:
		if v = st.unescape(v); !absent(v) {
			e.Referer, e.Has = v, e.Has|HasReferer
		}
	case kUA:
		if v = st.unescape(v); !absent(v) {
			e.UserAgent, e.Has = v, e.Has|HasUserAgent
		}
	case kUser:
		if v = st.unescape(trimSpace(v)); !absent(v) {
			e.User, e.Has = v, e.Has|HasUser
		}
	case kHost:
		if e.Has&HasHost != 0 {
			p.addField(it.name, v, e, st)
			return
		}
		if v = st.unescape(v); !absent(v) {
			e.Host, e.Has = v, e.Has|HasHost
		}
	case kDuration:
		if f, ok := sumFloats(v); ok && f >= 0 && (!it.intOnly || isDigits(v)) {
			e.Duration, e.Has = f*it.scale, e.Has|HasDuration
		} else if !absent(v) {
			st.bad = true
		}
	case kDurMS:
		v = strings.TrimSuffix(trimSpace(v), "ms")
		if n, ok := atoi(v); ok {
			e.Duration, e.Has = float64(n)/1000, e.Has|HasDuration
		} else if !absent(v) {
			st.bad = true
		}
	case kCPUPct:
		v = strings.TrimSuffix(trimSpace(v), "%")
		if f, ok := parseFloat(v); ok && f >= 0 {
			st.cpuPct, st.hasCPUPct = f, true
		}
	case kField:
		p.addField(it.name, v, e, st)
	case kSkip:
		if it.hostPre && v != "-" && v != "" && addrLike(v) {
			// "www.example.com 203.0.113.5 - - [...]" read as combined: the
			// ident is the client, the first field the virtual host.
			st.second = v
		}
	case kHostPort:
		host, port := splitHostPort(v)
		if host = st.unescape(host); !absent(host) {
			e.Host, e.Has = host, e.Has|HasHost
		}
		if port != "" {
			p.addField(it.port, port, e, st)
		}
	}
}

// addrLike reports whether an ident (Apache's %l, "-" unless identd answers
// with a user name) is an address instead, as in a host-first line read as
// common or combined: an IP address, anything with a '.' or a ':' (a host
// name, a malformed IPv6 address, "unix:"), or "localhost".
func addrLike(v string) bool {
	return strings.IndexByte(v, '.') >= 0 || strings.IndexByte(v, ':') >= 0 || v == "localhost"
}

// splitHostPort splits the "host:port" of a host-first format (Apache's
// %v:%p, nginx's $host:$server_port); the port is optional. "[v6]:port" and
// "[v6]" lose their brackets. An unbracketed value with several colons is an
// IPv6 host: its last ":digits" is read as a port only when what is before it
// is itself an IPv6 address ("2001:db8::1:443" is host 2001:db8::1, port
// 443; "2001:db8::1" stays whole).
func splitHostPort(v string) (host, port string) {
	if v != "" && v[0] == '[' {
		if j := strings.IndexByte(v, ']'); j > 0 {
			if rest := v[j+1:]; rest == "" || isPort(rest) {
				return v[1:j], strings.TrimPrefix(rest, ":")
			}
		}
		return v, ""
	}
	c := strings.LastIndexByte(v, ':')
	if c <= 0 || !isPort(v[c:]) {
		return v, ""
	}
	if strings.IndexByte(v[:c], ':') >= 0 {
		if a, err := netip.ParseAddr(v[:c]); err != nil || !a.Is6() {
			return v, ""
		}
	}
	return v[:c], v[c+1:]
}

func (p *Parser) addField(name, v string, e *Entry, st *lineState) {
	v = st.unescape(v)
	if absent(v) {
		return
	}
	if e.Fields == nil {
		e.Fields = make([]Field, 0, p.nFields)
	}
	e.Fields = append(e.Fields, Field{Name: name, Value: v})
}

func (p *Parser) setConn(v string, level int8, st *lineState) {
	if st.hasIPRaw && level <= st.connLevel {
		return
	}
	a, ok := parseAddr(v)
	if !ok {
		st.bad = true
		if !st.hasIPRaw {
			st.ipRaw, st.hasIPRaw = v, true
		}
		return
	}
	p.setConnAddr(a, level, st)
}

// setConnAddr is setConn of an address already read.
func (p *Parser) setConnAddr(a netip.Addr, level int8, st *lineState) {
	if st.hasIPRaw && level <= st.connLevel {
		return
	}
	st.conn, st.connLevel, st.hasIPRaw = a, level, true
	st.ipRaw = ""
}

// setRequest splits "METHOD target PROTOCOL". A request line that is not one
// (a TLS handshake, garbage, "-") leaves method, path and protocol absent and
// is kept as the field "request", as logged.
func setRequest(raw string, e *Entry, st *lineState) {
	if absent(raw) {
		return
	}
	v := st.unescape(raw)
	// The method: 1 to 32 letters, '-' or '_', up to the first blank
	// (isMethod, read as the blank is looked for).
	sp := -1
	switch {
	case len(v) >= 4 && v[:4] == "GET ": // the usual: the loop's answer, as one compare
		sp = 3
	case len(v) >= 5 && v[:5] == "POST ":
		sp = 4
	default:
		for i := 0; i < len(v) && i <= 32; i++ {
			c := v[i]
			if c == ' ' {
				sp = i
				break
			}
			if !(c|0x20-'a' <= 'z'-'a' || c == '-' || c == '_') {
				break
			}
		}
	}
	if sp <= 0 {
		e.Fields = append(e.Fields, Field{Name: "request", Value: raw})
		return
	}
	b := sp + 1
	for b < len(v) && v[b] == ' ' {
		b++
	}
	rest := v[b:]
	proto := ""
	// The protocol: after the last blank. The usual " HTTP/1.1" (no blank
	// in its last three bytes) ends the request where its 9 bytes start,
	// which is where the last blank is; anything else looks for it.
	n := len(rest)
	var l int
	if n >= 9 && rest[n-9] == ' ' && rest[n-8:n-3] == "HTTP/" && rest[n-3] != ' ' && rest[n-2] != ' ' && rest[n-1] != ' ' {
		l = n - 9
	} else {
		l = strings.LastIndexByte(rest, ' ')
	}
	if l >= 0 && len(rest)-l > 5 && rest[l+1:l+6] == "HTTP/" {
		proto, rest = rest[l+1:], rest[:l]
		for len(rest) > 0 && rest[len(rest)-1] == ' ' {
			rest = rest[:len(rest)-1]
		}
	}
	if rest == "" {
		e.Fields = append(e.Fields, Field{Name: "request", Value: raw})
		return
	}
	e.Method, e.Has = v[:sp], e.Has|HasMethod
	if proto != "" {
		e.Protocol, e.Has = proto, e.Has|HasProtocol
	}
	setURI(rest, e)
}

func isMethod(m string) bool {
	if len(m) == 0 || len(m) > 32 {
		return false
	}
	for i := 0; i < len(m); i++ {
		c := m[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func setURI(v string, e *Entry) {
	if absent(v) {
		return
	}
	if q := strings.IndexByte(v, '?'); q >= 0 {
		e.Query, e.Has = v[q+1:], e.Has|HasQuery
		v = v[:q]
	}
	e.Path, e.Has = v, e.Has|HasPath
}

// atoi reads a non-negative decimal integer of at most 18 digits.
func atoi(s string) (int64, bool) {
	if s == "" || len(s) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i] - '0'
		if c > 9 {
			return 0, false
		}
		n = n*10 + int64(c)
	}
	return n, true
}

// parseFloat reads a non-negative decimal number ("0.123", "12", ".5"),
// blanks around it allowed: numAt's number, which must be all of it.
func parseFloat(s string) (float64, bool) {
	s = trimSpace(s)
	f, end, ok := numAt(s, 0)
	if !ok || end != len(s) {
		return 0, false
	}
	return f, true
}

// readNums reads, from item i at pos, the items of num and their
// literals for as long as each holds a plain number (numAt), as
// scanFrom's loop would, and returns the item and position it stopped
// at: a CLF prefix's tail of timing fields without the loop.
func (p *Parser) readNums(s string, i, pos int, e *Entry, st *lineState) (int, int) {
	for i < len(p.items) {
		it := &p.items[i]
		if !it.num {
			break
		}
		f, q, ok := numAt(s, pos)
		if !ok {
			break
		}
		if it.sep == "" {
			if q != len(s) {
				break
			}
			p.setNum(it, f, s[pos:q], e, st)
			return i + 1, q
		}
		// hasWord written out: with word.LE in it, it is not inlined.
		var at bool
		if it.sepM != 0 && len(s)-q >= 8 {
			at = word.LE(s, q)&it.sepM == it.sepW
		} else {
			at = hasAt(s, q, it.sep)
		}
		if !at {
			break
		}
		p.setNum(it, f, s[pos:q], e, st)
		pos, i = q+len(it.sep), i+2
	}
	return i, pos
}

// numAt reads a non-negative decimal number at pos (parseFloat's, which
// is numAt's over a whole value): digits, a '.' and digits, at least one
// digit, at most 40 bytes. It returns the number and where it ends; not
// ok for anything else.
func numAt(s string, pos int) (f float64, end int, ok bool) {
	var ip, fp, scale float64 = 0, 0, 1
	q := pos
	for q < len(s) && s[q]-'0' <= 9 {
		ip = ip*10 + float64(s[q]-'0')
		q++
	}
	any := q > pos
	if q < len(s) && s[q] == '.' {
		q++
		d := q
		for q < len(s) && s[q]-'0' <= 9 {
			fp = fp*10 + float64(s[q]-'0')
			scale *= 10
			q++
		}
		any = any || q > d
	}
	if !any || q-pos > 40 {
		return 0, q, false
	}
	return ip + fp/scale, q, true
}

// setNum is set for an item of num with the number numAt read (f) from
// v: what set stores for that value.
func (p *Parser) setNum(it *item, f float64, v string, e *Entry, st *lineState) {
	if it.cpu {
		e.CPU, e.Has = f, e.Has|HasCPU
	}
	if it.kind == kDuration {
		e.Duration, e.Has = f*it.scale, e.Has|HasDuration
		return
	}
	p.addField(it.name, v, e, st)
}

// sumFloats reads a number or a list of them ("0.010, 0.020 : 0.005", as
// nginx writes upstream times) and returns their sum. "-" entries count 0;
// a value with no number at all is not ok.
func sumFloats(s string) (float64, bool) {
	if f, ok := parseFloat(s); ok {
		// One number (no ',' or ':' then): the loop's 0+f is f.
		return f, true
	}
	sum, n := 0.0, 0
	for s != "" {
		j := indexListSep(s)
		part := s
		if j >= 0 {
			part, s = s[:j], s[j+1:]
		} else {
			s = ""
		}
		part = trimSpace(part)
		if part == "-" || part == "" {
			continue
		}
		f, ok := parseFloat(part)
		if !ok {
			return 0, false
		}
		sum += f
		n++
	}
	return sum, n > 0
}

// indexListSep is strings.IndexAny(s, ",:") for the short values of a
// timing field, without IndexAny's set building.
func indexListSep(s string) int {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == ',' || c == ':' {
			return i
		}
	}
	return -1
}

func isDigits(s string) bool {
	s = trimSpace(s)
	for i := 0; i < len(s); i++ {
		if s[i]-'0' > 9 {
			return false
		}
	}
	return s != ""
}

// clfPrefix returns, for a format that begins as Apache's common and
// nginx's combined do (`$remote_addr - $remote_user [$time_local]
// "$request" $status $body_bytes_sent`, or `%h %l %u %t "%r" %>s %b`)
// and goes on after the size with a literal, the index of the item
// after that literal, where readCLF hands over to scanFrom; and whether
// the ident (%l) is a field of its own. 0 for any other format.
func clfPrefix(items []item) (next int, ident bool) {
	is := func(i int, k kind) bool {
		return i < len(items) && items[i].kind == k && !items[i].cpu && !items[i].list
	}
	litAt := func(i int, lit string) bool { return i < len(items) && items[i].kind == kLit && items[i].lit == lit }
	if !is(0, kIP) || !items[0].quad && !items[0].hex6 {
		return 0, false
	}
	i := 2
	switch {
	case litAt(1, " - "):
	case litAt(1, " ") && is(2, kSkip) && litAt(3, " "):
		i, ident = 4, true
	default:
		return 0, false
	}
	if !is(i, kUser) || !litAt(i+1, " [") || !is(i+2, kTimeCLF) || !items[i+2].clfFixed || !litAt(i+3, "] \"") ||
		!is(i+4, kRequest) || !items[i+4].quoted || !items[i+4].nextNum || !litAt(i+5, "\" ") ||
		!is(i+6, kStatus) || !litAt(i+7, " ") || !is(i+8, kBytes) || i+9 >= len(items) || items[i+9].kind != kLit {
		return 0, false
	}
	if c := items[i+9].lit[0]; c-'0' <= 9 || c == '-' {
		return 0, false
	}
	return i + 10, ident
}

// addrAt reads the client address of it (an item with quad or hex6) where
// it starts at pos: a dotted quad, else a hex IPv6 address, either ended
// by it.sep (no byte the address is made of starts that literal, so it
// cannot be found earlier). n is where it.sep starts; not ok for any
// other value (the general scan reads it).
func addrAt(it *item, s string, pos int) (a netip.Addr, n int, ok bool) {
	if it.quad {
		if a4, n4, ok := dottedQuadAt(s, pos); ok && hasWord(s, n4, it.sep, it.sepW, it.sepM) {
			return a4, n4, true
		}
	}
	if it.hex6 {
		if a6, n6, ok := hexIPv6At(s, pos); ok && hasWord(s, n6, it.sep, it.sepW, it.sepM) {
			return a6.Unmap(), n6, true
		}
	}
	return netip.Addr{}, 0, false
}

// readCLF reads the prefix of a format clfPrefix accepts in a straight
// line, with no dispatch on the items, for the usual values: an IPv4 or
// hex IPv6 client, "-" for the ident and the user, the 26-byte time, a
// request whose first quote closes it, a status of three digits, a size
// of digits or "-". It stops at the first value that is any other and
// returns the item and the position scanFrom goes on from (p.clfNext
// and past the literal after the size when it read the whole prefix, or
// past the user agent's closing literal when clfRefUA has it read the
// referer and the user agent too):
// each step stores what scanItems's would for the values it takes, and
// takes nothing else (TestScanAsReference, TestCLFPrefix).
func (p *Parser) readCLF(s string, e *Entry, st *lineState) (i, pos int) {
	items := p.items
	it := &items[0]
	a, n, ok := addrAt(it, s, 0)
	if !ok {
		return 0, 0
	}
	p.setConnAddr(a, it.strength, st)
	pos, i = n+len(it.sep), 2
	if p.clfIdent {
		// The ident "-": its search for the blank would end at once, and
		// "-" is no address.
		if len(s)-pos < 2 || s[pos:pos+2] != "- " {
			return i, pos
		}
		pos, i = pos+2, 4
	}
	// The user: "-" (absent), or up to the first " [" (not a missing one:
	// scanFrom reads "1.2.3.4 - [time]").
	if len(s)-pos >= 3 && s[pos:pos+3] == "- [" {
		pos += 3
	} else {
		it = &items[i]
		if pos >= len(s) || s[pos] == '[' {
			return i, pos
		}
		end := findSep(s, pos, it.sep, int(it.sepAt), false)
		if end < 0 {
			return i, pos
		}
		if v := st.unescape(trimSpace(s[pos:end])); !absent(v) {
			e.User, e.Has = v, e.Has|HasUser
		}
		pos = end + 2
	}
	i += 2
	// The time, the usual 26 bytes and the literal after it.
	if len(s)-pos <= 29 || s[pos+20] != ' ' || s[pos+26:pos+29] != "] \"" {
		return i, pos
	}
	if m := st.memo; m != nil && m.p == p && m.k3 == uint64(s[pos+24])|uint64(s[pos+25])<<8|1<<16 &&
		m.k2 == word.LE(s, pos+16) && m.k1 == word.LE(s, pos+8) && m.k0 == word.LE(s, pos) {
		// The text the memo read last (ParseStringMemo).
		e.Time, st.hasTime = m.t, true
	} else if t, ok := p.tr.clf(s[pos : pos+26]); ok {
		e.Time, st.hasTime = t, true
		if m != nil {
			*m = TimeMemo{p, word.LE(s, pos), word.LE(s, pos+8), word.LE(s, pos+16), uint64(s[pos+24]) | uint64(s[pos+25])<<8 | 1<<16, t}
		}
	} else {
		st.bad = true
		st.timeRaw, st.hasTimeR = s[pos:pos+26], true
	}
	pos, i = pos+29, i+2
	// The request, closed by its first quote (findClose's first candidate,
	// taken when a number follows).
	j := strings.IndexByte(s[pos:], '"')
	if j < 0 {
		return i, pos
	}
	k := pos + j
	if k > pos && s[k-1] == '\\' || len(s)-k <= 2 || s[k+1] != ' ' || s[k+2]-'0' > 9 && s[k+2] != '-' {
		return i, pos
	}
	setRequest(s[pos:k], e, st)
	pos, i = k+2, i+2
	// The status: three digits, the first 1 to 5, and a blank.
	if len(s)-pos <= 3 || s[pos]-'1' > 4 || s[pos+1]-'0' > 9 || s[pos+2]-'0' > 9 || s[pos+3] != ' ' {
		return i, pos
	}
	e.Status, e.Has = int(s[pos]-'0')*100+int(s[pos+1]-'0')*10+int(s[pos+2]-'0'), e.Has|HasStatus
	pos, i = pos+4, i+2
	// The size: at most 18 digits, or "-", and the literal after it
	// (which starts with neither: the first place a search finds it).
	lit := &items[i+1]
	sep := lit.lit
	b, q := digitsAt(s, pos, 18)
	switch {
	case q > pos && hasWord(s, q, sep, lit.litW, lit.litM):
		e.Bytes, e.Has = b, e.Has|HasBytes
	case q == pos && hasAt(s, pos, "-") && hasWord(s, pos+1, sep, lit.litW, lit.litM):
		q++
	default:
		return i, pos
	}
	pos, i = q+len(sep), i+2
	if !p.clfRefUA {
		return i, pos
	}
	// The referer and the user agent, each closed by its first quote when
	// the literal after it follows (and, for the user agent, what
	// closeFits wants after that).
	j = strings.IndexByte(s[pos:], '"')
	if j < 0 {
		return i, pos
	}
	if k = pos + j; k > pos && s[k-1] == '\\' || len(s)-k < 3 || s[k:k+3] != `" "` {
		return i, pos
	}
	if v := st.unescape(s[pos:k]); !absent(v) {
		e.Referer, e.Has = v, e.Has|HasReferer
	}
	pos, i = k+3, i+2
	it = &items[i]
	if j = strings.IndexByte(s[pos:], '"'); j < 0 {
		return i, pos
	}
	k = pos + j
	var at bool // hasWord written out: with word.LE in it, it is not inlined
	if it.sepM != 0 && len(s)-k >= 8 {
		at = word.LE(s, k)&it.sepM == it.sepW
	} else {
		at = hasAt(s, k, it.sep)
	}
	if k > pos && s[k-1] == '\\' || !at || !closeFits(s[k+len(it.sep):], it) {
		return i, pos
	}
	if v := st.unescape(s[pos:k]); !absent(v) {
		e.UserAgent, e.Has = v, e.Has|HasUserAgent
	}
	return i + 2, k + len(it.sep)
}

// digitsAt reads the decimal digits at s[pos:], at most max of them (8
// to 18), and returns their value and where they end. Where 8 bytes
// follow pos, their digits are found and read at once (a size's few
// digits, one at a time, were a loop of a dozen instructions a digit).
func digitsAt(s string, pos, max int) (v int64, end int) {
	q := pos
	if len(s)-pos >= 8 {
		w := word.LE(s, pos) // s[pos] in the low byte
		// The high bit of each byte that is no digit: 0x80 or more, under
		// '0', or over '9' (no carry between bytes: each is under 0x80
		// once its high bit is cleared).
		const hi, low7 = 0x8080808080808080, 0x7f7f7f7f7f7f7f7f
		a := w & low7
		no := (^(a + 0x5050505050505050) | (a + 0x4646464646464646) | w) & hi
		n := bits.TrailingZeros64(no) / 8 // the digits before the first other byte, 0 to 8
		// The n digits as the last of eight (leading zeros), then summed
		// in pairs, fours and eights.
		d := (w - 0x3030303030303030) << (8 * (8 - n)) // n = 0: all shifted out
		d = (d & 0x0f0f0f0f0f0f0f0f) * (10<<8 + 1) >> 8
		d = (d & 0x00ff00ff00ff00ff) * (100<<16 + 1) >> 16
		d = (d & 0x0000ffff0000ffff) * (10000<<32 + 1) >> 32
		v, q = int64(d), pos+n
		if n < 8 {
			return v, q
		}
	}
	for lim := min(len(s), pos+max); q < lim && s[q]-'0' <= 9; q++ {
		v = v*10 + int64(s[q]-'0')
	}
	return v, q
}

// clfRefUA reports whether the items at next (clfPrefix's) are
// `"$http_referer" "$http_user_agent"`, as in combined, for readCLF.
func clfRefUA(items []item, next int) bool {
	if next == 0 || next+2 >= len(items) {
		return false
	}
	r, l, u := &items[next], &items[next+1], &items[next+2]
	return r.kind == kReferer && r.quoted && !r.nextNum && !r.closing && !r.cpu && !r.list &&
		l.kind == kLit && l.lit == `" "` && u.kind == kUA && u.quoted && !u.cpu && !u.list
}
