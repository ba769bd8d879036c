package stream

import (
	"bytes"
	"errors"
	"fmt"
)

// Message is one syslog datagram read (ParseMessage): its header's
// priority and names, and its text, the access-log line.
type Message struct {
	Priority int    // facility × 8 + severity, 0–191
	RFC5424  bool   // the header was RFC 5424's (VERSION 1), else RFC 3164's
	Hostname string // "" where the sender wrote none (3164) or "-" (5424)
	Tag      string // RFC 3164's TAG (without "[pid]" and ":"), RFC 5424's APP-NAME ("" for "-")
	Text     []byte // the message: a subslice of the datagram, without a trailing newline or BOM
}

// ErrMalformed is the error of a datagram that is no syslog message.
var ErrMalformed = errors.New("malformed syslog message")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// ParseMessage reads one syslog datagram: `<PRI>` then an RFC 5424 header
// (`1 TIMESTAMP HOSTNAME APP-NAME PROCID MSGID STRUCTURED-DATA [MSG]`) or
// an RFC 3164 one (`Mmm dd hh:mm:ss [HOSTNAME] TAG[PID]: MSG`, as nginx's
// `syslog:server=` and the C library's syslog(3) send it; nginx's
// `nohostname` leaves the host out). The header's time is not read: the
// access-log line carries its own. Text aliases b.
func ParseMessage(b []byte) (Message, error) {
	var m Message
	b = trimEnd(b)
	if len(b) < 3 || b[0] != '<' {
		return m, malformed("no <PRI>")
	}
	i := 1
	for i < len(b) && i <= 4 && b[i] >= '0' && b[i] <= '9' {
		m.Priority = m.Priority*10 + int(b[i]-'0')
		i++
	}
	if i == 1 || i > 4 || i >= len(b) || b[i] != '>' || (b[1] == '0' && i > 2) || m.Priority > 191 {
		return m, malformed("bad <PRI>")
	}
	b = b[i+1:]
	if len(b) >= 2 && b[0] == '1' && b[1] == ' ' {
		m.RFC5424 = true
		return m, parse5424(&m, b[2:])
	}
	return m, parse3164(&m, b)
}

// trimEnd drops the newline, carriage return and NUL bytes senders append.
func trimEnd(b []byte) []byte {
	for len(b) > 0 {
		switch b[len(b)-1] {
		case '\n', '\r', 0:
			b = b[:len(b)-1]
			continue
		}
		break
	}
	return b
}

// field cuts b at its first space: the field before it, and the rest
// after it (nil when there was no space).
func field(b []byte) (f, rest []byte, ok bool) {
	i := bytes.IndexByte(b, ' ')
	if i < 0 {
		return b, nil, false
	}
	return b[:i], b[i+1:], true
}

// nilValue is RFC 5424's NILVALUE, "-", as "".
func nilValue(f []byte) string {
	if len(f) == 1 && f[0] == '-' {
		return ""
	}
	return string(f)
}

func parse5424(m *Message, b []byte) error {
	var f [5][]byte // TIMESTAMP HOSTNAME APP-NAME PROCID MSGID
	for k := range f {
		var ok bool
		if f[k], b, ok = field(b); !ok || len(f[k]) == 0 {
			return malformed("RFC 5424 header: too few fields")
		}
	}
	// Field lengths of RFC 5424, section 6.
	for k, max := range [...]int{64, 255, 48, 128, 32} {
		if len(f[k]) > max || !printable(f[k]) {
			return malformed("RFC 5424 header: bad field %d", k+1)
		}
	}
	m.Hostname, m.Tag = nilValue(f[1]), nilValue(f[2])
	// STRUCTURED-DATA: "-" or one or more [SD-ID PARAM="value"...]
	// elements, values escaping '"', '\' and ']' with a backslash.
	switch {
	case len(b) == 0:
		return malformed("RFC 5424 header: no STRUCTURED-DATA")
	case b[0] == '-':
		b = b[1:]
	case b[0] == '[':
		for len(b) > 0 && b[0] == '[' {
			n, err := sdElement(b)
			if err != nil {
				return err
			}
			b = b[n:]
		}
	default:
		return malformed("RFC 5424 header: bad STRUCTURED-DATA")
	}
	if len(b) > 0 {
		if b[0] != ' ' {
			return malformed("RFC 5424 header: no space before MSG")
		}
		b = b[1:]
	}
	m.Text = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")) // MSG's optional BOM
	return nil
}

// sdElement returns the length of the SD-ELEMENT at the start of b.
func sdElement(b []byte) (int, error) {
	quoted := false
	for i := 1; i < len(b); i++ {
		switch c := b[i]; {
		case quoted && c == '\\':
			i++ // the escaped byte
		case c == '"':
			quoted = !quoted
		case !quoted && c == ']':
			return i + 1, nil
		}
	}
	return 0, malformed("RFC 5424 header: unterminated STRUCTURED-DATA")
}

// printable is RFC 5424's PRINTUSASCII: bytes 33–126.
func printable(b []byte) bool {
	for _, c := range b {
		if c < 33 || c > 126 {
			return false
		}
	}
	return true
}

// months starts RFC 3164's timestamps.
var months = [...]string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}

func parse3164(m *Message, b []byte) error {
	// "Mmm dd hh:mm:ss ": the day padded with a space to two characters.
	if len(b) < 16 || b[3] != ' ' || b[6] != ' ' || b[9] != ':' || b[12] != ':' || b[15] != ' ' {
		return malformed("RFC 3164 header: no timestamp")
	}
	known := false
	for _, mon := range months {
		if string(b[:3]) == mon {
			known = true
			break
		}
	}
	digit := func(c byte) bool { return c >= '0' && c <= '9' }
	if !known || !(b[4] == ' ' || digit(b[4])) || !digit(b[5]) || !digit(b[7]) || !digit(b[8]) ||
		!digit(b[10]) || !digit(b[11]) || !digit(b[13]) || !digit(b[14]) {
		return malformed("RFC 3164 header: bad timestamp")
	}
	b = b[16:]
	// HOSTNAME, unless the first word is already the tag (it ends with ':').
	first, rest, ok := field(b)
	if !ok {
		return malformed("RFC 3164 header: no tag")
	}
	if !isTag(first) {
		m.Hostname = string(first)
		if first, rest, ok = field(rest); !ok && !isTag(first) {
			return malformed("RFC 3164 header: no tag")
		}
	}
	if !isTag(first) {
		return malformed("RFC 3164 header: bad tag")
	}
	tag := first[:len(first)-1]
	if i := bytes.IndexByte(tag, '['); i >= 0 {
		tag = tag[:i]
	}
	m.Tag = string(tag)
	m.Text = rest
	return nil
}

// isTag says whether a word is RFC 3164's TAG: "name:" or "name[pid]:",
// the name of at most 32 printable characters.
func isTag(w []byte) bool {
	if len(w) < 2 || w[len(w)-1] != ':' {
		return false
	}
	name := w[:len(w)-1]
	if i := bytes.IndexByte(name, '['); i >= 0 {
		if name[len(name)-1] != ']' || i == 0 {
			return false
		}
		name = name[:i]
	}
	return len(name) > 0 && len(name) <= 32 && printable(name)
}
