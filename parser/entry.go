package parser

import (
	"net/netip"
	"slices"
	"strconv"
	"time"
)

// Has is a set of bits saying which optional fields of an Entry a line carried.
// A field whose bit is clear is absent (null in JSON), not zero.
type Has uint16

// Presence bits of the optional Entry fields.
const (
	HasMethod Has = 1 << iota
	HasPath
	HasQuery
	HasProtocol
	HasStatus
	HasBytes
	HasReferer
	HasUserAgent
	HasUser
	HasHost
	HasDuration
	HasCPU
)

// Field is a named field of a format that has no place of its own in Entry,
// e.g. "upstream_http_x_cpu_time", "in_x_forwarded_for", "request.headers.foo".
type Field struct {
	Name  string
	Value string
}

// Entry is what one access-log line becomes. IP and Time are always set on an
// Entry returned without error; every other field is present only when its Has
// bit is set.
type Entry struct {
	IP        netip.Addr // client address, after trusted-proxy handling; never zoned, never 4in6
	Time      time.Time  // in the line's own zone (or the source's timezone when the line has none)
	Method    string
	Path      string // without the query
	Query     string // without the '?'
	Protocol  string
	Status    int
	Bytes     int64
	Referer   string
	UserAgent string
	User      string
	Host      string
	Duration  float64 // seconds
	CPU       float64 // seconds
	Has       Has
	Fields    []Field // other named fields, in format order
}

// Get returns any field by its DESIGN.md name (ip, time, method, path, query,
// protocol, status, bytes, referer, user_agent, user, host, duration, cpu) or
// the name of one of its other Fields. ok is false when the line does not
// carry it. It is Ref(name).Get(e).
func (e *Entry) Get(name string) (string, bool) {
	return Ref(name).Get(e)
}

// entryFields are the DESIGN.md names of Entry's own fields, in the order of
// the fieldID constants from fieldIP on. Read only.
var entryFields = [...]string{"ip", "time", "method", "path", "query", "protocol", "status", "bytes", "referer", "user_agent", "user", "host", "duration", "cpu"}

// EntryFields returns the DESIGN.md names of Entry's own fields (those Get
// reads from a place of their own, not from Fields), a fresh slice.
func EntryFields() []string {
	return slices.Clone(entryFields[:])
}

// fieldID says which of Entry's own fields a FieldRef reads; fieldNamed is one
// of Fields.
type fieldID uint8

const (
	fieldNamed fieldID = iota
	fieldIP
	fieldTime
	fieldMethod
	fieldPath
	fieldQuery
	fieldProtocol
	fieldStatus
	fieldBytes
	fieldReferer
	fieldUserAgent
	fieldUser
	fieldHost
	fieldDuration
	fieldCPU
)

// FieldRef is a field name resolved once (Ref), so that reading it from many
// entries compares no names: the one accessor behind Entry.Get and rules'
// `match`. The zero value reads the named field "" (never present).
type FieldRef struct {
	id   fieldID
	name string
}

// Ref resolves name as Get reads it.
func Ref(name string) FieldRef {
	for i, n := range entryFields {
		if n == name {
			return FieldRef{id: fieldIP + fieldID(i), name: name}
		}
	}
	return FieldRef{name: name}
}

// Name returns the name r was resolved from.
func (r FieldRef) Name() string { return r.name }

// Own reports whether r names one of Entry's own fields (EntryFields), not
// one of its other Fields.
func (r FieldRef) Own() bool { return r.id != fieldNamed }

// hasBit is the presence bit of each of Entry's own fields (none for ip and
// time, which are present when set). Read only.
var hasBit = [...]Has{fieldMethod: HasMethod, fieldPath: HasPath, fieldQuery: HasQuery,
	fieldProtocol: HasProtocol, fieldStatus: HasStatus, fieldBytes: HasBytes, fieldReferer: HasReferer,
	fieldUserAgent: HasUserAgent, fieldUser: HasUser, fieldHost: HasHost, fieldDuration: HasDuration, fieldCPU: HasCPU}

// Get returns the field r names from e; ok is false when e does not carry it.
func (r FieldRef) Get(e *Entry) (string, bool) {
	if bit := hasBit[r.id]; bit != 0 && e.Has&bit == 0 {
		return "", false
	}
	switch r.id {
	case fieldIP:
		if !e.IP.IsValid() {
			return "", false
		}
		return e.IP.String(), true
	case fieldTime:
		if e.Time.IsZero() {
			return "", false
		}
		return e.Time.Format(time.RFC3339Nano), true
	case fieldMethod:
		return e.Method, true
	case fieldPath:
		return e.Path, true
	case fieldQuery:
		return e.Query, true
	case fieldProtocol:
		return e.Protocol, true
	case fieldStatus:
		return strconv.Itoa(e.Status), true
	case fieldBytes:
		return strconv.FormatInt(e.Bytes, 10), true
	case fieldReferer:
		return e.Referer, true
	case fieldUserAgent:
		return e.UserAgent, true
	case fieldUser:
		return e.User, true
	case fieldHost:
		return e.Host, true
	case fieldDuration:
		return strconv.FormatFloat(e.Duration, 'f', -1, 64), true
	case fieldCPU:
		return strconv.FormatFloat(e.CPU, 'f', -1, 64), true
	}
	for _, f := range e.Fields {
		if f.Name == r.name {
			return f.Value, true
		}
	}
	return "", false
}
