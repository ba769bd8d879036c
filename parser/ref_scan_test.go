package parser

// The scanner of main at 3ee57b3 (scan.go, and parseAddr, isPort,
// parseDottedQuad and the CLF time reader), kept as the reference the
// compiled scanner is checked against (TestScanAsReference and the helpers'
// tests in scanref_test.go). Only renamed: ref<Name> is <name> as it was.

import (
	"net/netip"
	"strings"
	"time"
)

// unescape is the package's unescape, skipped for a line that has no
// backslash at all (scan looks once, for the whole line, instead of once a
// field).
func refStUnescape(st *lineState, v string) string {
	if st.noEscape {
		return v
	}
	return refUnescape(v)
}

// scan reads s with the format's items. It returns whether every item was read.
func refScan(p *Parser, s string, e *Entry, st *lineState) bool {
	st.noEscape = strings.IndexByte(s, '\\') < 0
	return refScanItems(p, p.items, s, e, st)
}

// scanItems reads s with items.
func refScanItems(p *Parser, items []item, s string, e *Entry, st *lineState) bool {
	pos := 0
	for i := 0; i < len(items); i++ {
		it := &items[i]
		if it.kind == kLit {
			if !strings.HasPrefix(s[pos:], it.lit) {
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
				refStop(st, items, i, pos)
				return false
			}
			pos += len(it.lit)
			continue
		}
		var end int
		switch {
		case it.kind == kTimeCLF && i+1 < len(items) && len(s)-pos > 26 && s[pos+26] == items[i+1].lit[0] && s[pos+20] == ' ':
			// The usual fixed-width "02/Jan/2006:15:04:05 -0700".
			end = pos + 26
		case i+1 >= len(items):
			if it.toEOL {
				end = len(s)
			} else {
				end = pos
				for end < len(s) && s[end] != ' ' {
					end++
				}
			}
		case it.quoted:
			end = refFindClose(s, pos, items[i+1].lit, it)
		default:
			end = refFindSep(s, pos, items[i+1].lit, it.list)
			if sep := items[i+1].lit; len(sep) > 1 && sep[0] == ' ' && (sep[1] == '[' || sep[1] == '"') &&
				pos > 0 && s[pos-1] == ' ' && strings.HasPrefix(s[pos:], sep[1:]) {
				// The field and its blank are missing ("1.2.3.4 - [time]"):
				// read it as empty and go on from the bracket or quote.
				refSet(p, it, "", e, st)
				pos--
				continue
			}
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
				refSet(p, it, s[pos:end], e, st)
			}
			refStop(st, items, i+1, pos)
			return false
		}
		refSet(p, it, s[pos:end], e, st)
		pos = end
	}
	return true
}

func refStop(st *lineState, items []item, i, pos int) {
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
// right after a ',' belongs to the list.
func refFindSep(s string, pos int, sep string, list bool) int {
	from := pos
	for {
		var j int
		if len(sep) == 1 {
			j = strings.IndexByte(s[from:], sep[0])
		} else {
			j = strings.Index(s[from:], sep)
		}
		if j < 0 {
			return -1
		}
		k := from + j
		if list && k > pos && s[k-1] == ',' {
			from = k + 1
			continue
		}
		return k
	}
}

// findClose finds the closing quote of a quoted field: an unescaped '"' that
// starts the next literal. Old Apache versions wrote quotes inside values
// unescaped, so among the candidates it prefers one after which the line goes
// on as the format says (a number for status, the end of the line or a blank
// after the last field); failing that, the first candidate.
func refFindClose(s string, pos int, next string, it *item) int {
	first := -1
	for i := pos; i < len(s); {
		j := strings.IndexByte(s[i:], '"')
		if j < 0 {
			break
		}
		k := i + j
		i = k + 1
		if refEscaped(s, pos, k) || !strings.HasPrefix(s[k:], next) {
			continue
		}
		if first < 0 {
			first = k
		}
		rest := s[k+len(next):]
		switch {
		case it.nextNum:
			if rest != "" && (rest[0]-'0' <= 9 || rest[0] == '-') {
				return k
			}
		case it.closing:
			if rest == "" || rest[0] == ' ' || rest[0] == '\t' {
				return k
			}
		default:
			return k
		}
	}
	return first
}

// escaped reports whether the byte at k is preceded by an odd number of backslashes.
func refEscaped(s string, from, k int) bool {
	n := 0
	for k-1-n >= from && s[k-1-n] == '\\' {
		n++
	}
	return n%2 == 1
}

// unescape decodes the escapes nginx and Apache write in values: \xNN, \",
// \\, \n, \r, \t. It allocates only when there is something to decode.
func refUnescape(s string) string {
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
				h, ok1 := refUnhex(s[i+2])
				l, ok2 := refUnhex(s[i+3])
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

func refUnhex(c byte) (byte, bool) {
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
func refAbsent(v string) bool { return v == "" || v == "-" }

// set stores one field's value.
func refSet(p *Parser, it *item, v string, e *Entry, st *lineState) {
	if it.cpu {
		if f, ok := refSumFloats(v); ok && f >= 0 {
			e.CPU, e.Has = f, e.Has|HasCPU
		}
	}
	switch it.kind {
	case kIP:
		if strings.IndexByte(v, ',') >= 0 {
			// A list in an address field is a forwarding chain: the last
			// entry is the peer, the others are believed as X-Forwarded-For.
			head, last := splitLast(v)
			refSetConn(p, last, it.strength, st)
			if head != "" && !st.hasXFF {
				st.xff, st.hasXFF = head, true
			}
			return
		}
		refSetConn(p, v, it.strength, st)
	case kXFF:
		if v = trimSpace(v); !refAbsent(v) {
			st.xff, st.hasXFF = v, true
		}
	case kXFFAdd:
		head, last := splitLast(v)
		refSetConn(p, last, it.strength, st)
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
			t, ok = refClf(&p.tr, v)
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
		refSetRequest(v, e, st)
	case kMethod:
		if v = refStUnescape(st, v); !refAbsent(v) {
			e.Method, e.Has = v, e.Has|HasMethod
		}
	case kURI:
		refSetURI(refStUnescape(st, v), e)
	case kPath:
		if v = refStUnescape(st, v); !refAbsent(v) {
			e.Path, e.Has = v, e.Has|HasPath
		}
	case kQuery:
		v = refStUnescape(st, v)
		if len(v) > 0 && v[0] == '?' {
			v = v[1:]
		}
		if v != "" && v != "-" {
			e.Query, e.Has = v, e.Has|HasQuery
		}
	case kProtocol:
		if v = refStUnescape(st, v); !refAbsent(v) {
			e.Protocol, e.Has = v, e.Has|HasProtocol
		}
	case kStatus:
		if n, ok := refAtoi(trimSpace(v)); ok && n >= 100 && n <= 599 {
			e.Status, e.Has = int(n), e.Has|HasStatus
		} else if !refAbsent(v) {
			st.bad = true
		}
	case kBytes:
		if n, ok := refAtoi(trimSpace(v)); ok {
			e.Bytes, e.Has = n, e.Has|HasBytes
		} else if !refAbsent(v) {
			st.bad = true
		}
	case kReferer:
		if v = refStUnescape(st, v); !refAbsent(v) {
			e.Referer, e.Has = v, e.Has|HasReferer
		}
	case kUA:
		if v = refStUnescape(st, v); !refAbsent(v) {
			e.UserAgent, e.Has = v, e.Has|HasUserAgent
		}
	case kUser:
		if v = refStUnescape(st, trimSpace(v)); !refAbsent(v) {
			e.User, e.Has = v, e.Has|HasUser
		}
	case kHost:
		if e.Has&HasHost != 0 {
			refAddField(p, it.name, v, e, st)
			return
		}
		if v = refStUnescape(st, v); !refAbsent(v) {
			e.Host, e.Has = v, e.Has|HasHost
		}
	case kDuration:
		if f, ok := refSumFloats(v); ok && f >= 0 && (!it.intOnly || refIsDigits(v)) {
			e.Duration, e.Has = f*it.scale, e.Has|HasDuration
		} else if !refAbsent(v) {
			st.bad = true
		}
	case kDurMS:
		v = strings.TrimSuffix(trimSpace(v), "ms")
		if n, ok := refAtoi(v); ok {
			e.Duration, e.Has = float64(n)/1000, e.Has|HasDuration
		} else if !refAbsent(v) {
			st.bad = true
		}
	case kCPUPct:
		v = strings.TrimSuffix(trimSpace(v), "%")
		if f, ok := refParseFloat(v); ok && f >= 0 {
			st.cpuPct, st.hasCPUPct = f, true
		}
	case kField:
		refAddField(p, it.name, v, e, st)
	case kSkip:
		if it.hostPre && v != "-" && v != "" && refAddrLike(v) {
			// "www.example.com 203.0.113.5 - - [...]" read as combined: the
			// ident is the client, the first field the virtual host.
			st.second = v
		}
	case kHostPort:
		host, port := refSplitHostPort(v)
		if host = refStUnescape(st, host); !refAbsent(host) {
			e.Host, e.Has = host, e.Has|HasHost
		}
		if port != "" {
			refAddField(p, it.port, port, e, st)
		}
	}
}

// addrLike reports whether an ident (Apache's %l, "-" unless identd answers
// with a user name) is an address instead, as in a host-first line read as
// common or combined: an IP address, anything with a '.' or a ':' (a host
// name, a malformed IPv6 address, "unix:"), or "localhost".
func refAddrLike(v string) bool {
	return strings.IndexByte(v, '.') >= 0 || strings.IndexByte(v, ':') >= 0 || v == "localhost"
}

// splitHostPort splits the "host:port" of a host-first format (Apache's
// %v:%p, nginx's $host:$server_port); the port is optional. "[v6]:port" and
// "[v6]" lose their brackets. An unbracketed value with several colons is an
// IPv6 host: its last ":digits" is read as a port only when what is before it
// is itself an IPv6 address ("2001:db8::1:443" is host 2001:db8::1, port
// 443; "2001:db8::1" stays whole).
func refSplitHostPort(v string) (host, port string) {
	if v != "" && v[0] == '[' {
		if j := strings.IndexByte(v, ']'); j > 0 {
			if rest := v[j+1:]; rest == "" || refIsPort(rest) {
				return v[1:j], strings.TrimPrefix(rest, ":")
			}
		}
		return v, ""
	}
	c := strings.LastIndexByte(v, ':')
	if c <= 0 || !refIsPort(v[c:]) {
		return v, ""
	}
	if strings.IndexByte(v[:c], ':') >= 0 {
		if a, err := netip.ParseAddr(v[:c]); err != nil || !a.Is6() {
			return v, ""
		}
	}
	return v[:c], v[c+1:]
}

func refAddField(p *Parser, name, v string, e *Entry, st *lineState) {
	v = refStUnescape(st, v)
	if refAbsent(v) {
		return
	}
	if e.Fields == nil {
		e.Fields = make([]Field, 0, p.nFields)
	}
	e.Fields = append(e.Fields, Field{Name: name, Value: v})
}

func refSetConn(p *Parser, v string, level int8, st *lineState) {
	if st.hasIPRaw && level <= st.connLevel {
		return
	}
	a, ok := refParseAddr(v)
	if !ok {
		st.bad = true
		if !st.hasIPRaw {
			st.ipRaw, st.hasIPRaw = v, true
		}
		return
	}
	st.conn, st.connLevel, st.hasIPRaw = a, level, true
	st.ipRaw = ""
}

// setRequest splits "METHOD target PROTOCOL". A request line that is not one
// (a TLS handshake, garbage, "-") leaves method, path and protocol absent and
// is kept as the field "request", as logged.
func refSetRequest(raw string, e *Entry, st *lineState) {
	if refAbsent(raw) {
		return
	}
	v := refStUnescape(st, raw)
	sp := strings.IndexByte(v, ' ')
	if sp <= 0 || !refIsMethod(v[:sp]) {
		e.Fields = append(e.Fields, Field{Name: "request", Value: raw})
		return
	}
	rest := strings.TrimLeft(v[sp+1:], " ")
	proto := ""
	if l := strings.LastIndexByte(rest, ' '); l >= 0 && strings.HasPrefix(rest[l+1:], "HTTP/") {
		proto, rest = rest[l+1:], strings.TrimRight(rest[:l], " ")
	}
	if rest == "" {
		e.Fields = append(e.Fields, Field{Name: "request", Value: raw})
		return
	}
	e.Method, e.Has = v[:sp], e.Has|HasMethod
	if proto != "" {
		e.Protocol, e.Has = proto, e.Has|HasProtocol
	}
	refSetURI(rest, e)
}

func refIsMethod(m string) bool {
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

func refSetURI(v string, e *Entry) {
	if refAbsent(v) {
		return
	}
	if q := strings.IndexByte(v, '?'); q >= 0 {
		e.Query, e.Has = v[q+1:], e.Has|HasQuery
		v = v[:q]
	}
	e.Path, e.Has = v, e.Has|HasPath
}

// atoi reads a non-negative decimal integer of at most 18 digits.
func refAtoi(s string) (int64, bool) {
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

// parseFloat reads a non-negative decimal number ("0.123", "12", ".5").
func refParseFloat(s string) (float64, bool) {
	s = trimSpace(s)
	if s == "" {
		return 0, false
	}
	var ip, fp, scale float64 = 0, 0, 1
	i, any := 0, false
	for ; i < len(s) && s[i]-'0' <= 9; i++ {
		ip = ip*10 + float64(s[i]-'0')
		any = true
	}
	if i < len(s) && s[i] == '.' {
		i++
		for ; i < len(s) && s[i]-'0' <= 9; i++ {
			fp = fp*10 + float64(s[i]-'0')
			scale *= 10
			any = true
		}
	}
	if i != len(s) || !any || i > 40 {
		return 0, false
	}
	return ip + fp/scale, true
}

// sumFloats reads a number or a list of them ("0.010, 0.020 : 0.005", as
// nginx writes upstream times) and returns their sum. "-" entries count 0;
// a value with no number at all is not ok.
func refSumFloats(s string) (float64, bool) {
	sum, n := 0.0, 0
	for s != "" {
		j := refIndexListSep(s)
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
		f, ok := refParseFloat(part)
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
func refIndexListSep(s string) int {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == ',' || c == ':' {
			return i
		}
	}
	return -1
}

func refIsDigits(s string) bool {
	s = trimSpace(s)
	for i := 0; i < len(s); i++ {
		if s[i]-'0' > 9 {
			return false
		}
	}
	return s != ""
}

// parseAddr reads a client address as logs write it: IPv4, IPv6 with or
// without brackets, "[v6]:port", "v4:port", with a zone (dropped). IPv4-mapped
// IPv6 addresses are unmapped.
func refParseAddr(s string) (netip.Addr, bool) {
	if a, ok := refParseDottedQuad(s); ok {
		return a, true
	}
	s = trimSpace(s)
	if s == "" || s == "-" {
		return netip.Addr{}, false
	}
	if s[0] == '[' {
		j := strings.IndexByte(s, ']')
		if j < 0 {
			return netip.Addr{}, false
		}
		if rest := s[j+1:]; rest != "" && !refIsPort(rest) {
			return netip.Addr{}, false
		}
		s = s[1:j]
	} else if c := strings.IndexByte(s, ':'); c >= 0 && strings.IndexByte(s[c+1:], ':') < 0 {
		// one colon: "v4:port"
		if !refIsPort(s[c:]) {
			return netip.Addr{}, false
		}
		s = s[:c]
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.WithZone("").Unmap(), true
}

func refIsPort(s string) bool {
	if len(s) < 2 || s[0] != ':' || len(s) > 6 {
		return false
	}
	for i := 1; i < len(s); i++ {
		if s[i]-'0' > 9 {
			return false
		}
	}
	return true
}

// parseDottedQuad reads the common case, a plain IPv4 address ("203.0.113.7"),
// without netip.ParseAddr's generality. Anything else (blanks, a port, a
// leading zero, IPv6) reports false and takes the general path, which
// decides exactly as netip does.
func refParseDottedQuad(s string) (netip.Addr, bool) {
	var b [4]byte
	i := 0
	for k := 0; k < 4; k++ {
		if k > 0 {
			if i >= len(s) || s[i] != '.' {
				return netip.Addr{}, false
			}
			i++
		}
		start, v := i, 0
		for i < len(s) && i-start < 3 && s[i]-'0' <= 9 {
			v = v*10 + int(s[i]-'0')
			i++
		}
		if i == start || v > 255 || (i-start > 1 && s[start] == '0') {
			return netip.Addr{}, false
		}
		b[k] = byte(v)
	}
	if i != len(s) {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4(b), true
}

// clf reads "02/Jan/2006:15:04:05 -0700", with an optional fraction after the
// seconds and an optional zone (zone-less times are read in r.loc). Leading and
// trailing blanks are ignored.
func refClf(r *timeReader, s string) (time.Time, bool) {
	s = trimSpace(s)
	if len(s) < 20 || s[2] != '/' || s[6] != '/' || s[11] != ':' || s[14] != ':' || s[17] != ':' {
		return time.Time{}, false
	}
	d, ok1 := digits(s, 0, 2)
	mo := monthIndex(s[3:6])
	y, ok2 := digits(s, 7, 4)
	h, ok3 := digits(s, 12, 2)
	mi, ok4 := digits(s, 15, 2)
	sec, ok5 := digits(s, 18, 2)
	if !(ok1 && ok2 && ok3 && ok4 && ok5) || mo == 0 {
		return time.Time{}, false
	}
	return r.afterSeconds(s, 20, y, mo, d, h, mi, sec)
}

// refParseTo is parseTo as it was for the line formats (p.items), on the
// reference scanner.
func refParseTo(p *Parser, line string, lineNo int, fields []Field, e *Entry) (bool, error) {
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
	var st lineState
	full := refScan(p, line, e, &st)
	if st.second != "" {
		*e = Entry{}
		return false, &Error{Line: lineNo, Field: "ip", Reason: hostFirstReason(line, st.second)}
	}
	conn, xff := st.conn, st.xff
	if !conn.IsValid() && st.hasXFF && !st.hasIPRaw {
		head, last := splitLast(st.xff)
		if a, ok := refParseAddr(last); ok {
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
	return full && !st.bad, nil
}
