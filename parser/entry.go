package parser

import (
	"net/netip"
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
