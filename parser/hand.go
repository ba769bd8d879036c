package parser

import (
	"errors"
	"strings"
)

// ErrDirective is what the *Error of a directive or comment line is (Field
// "directive"): a W3C log's `#Version:`, `#Fields:`, `#Software:`, `#Date:`
// or `#Remark:` line (presets iis and cloudfront). It is no entry, and no
// malformed line either: a caller that counts rejected lines skips it
// (errors.Is(err, parser.ErrDirective)).
var ErrDirective = errors.New("a directive line, not a request")

// Is makes errors.Is(err, ErrDirective) true for a directive line's *Error.
func (e *Error) Is(target error) bool {
	return target == ErrDirective && e.Field == "directive"
}

// handFormat is a preset whose lines are read by a function of its own
// rather than by a list of items: HAProxy's httplog (an optional syslog
// header, timers, optional capture blocks), the ALB's space-separated
// fields with an absolute URL, the W3C formats whose columns a `#Fields:`
// line names, Envoy's two defaults in an optional CRI wrapper. Each fills
// Entry and lineState through Parser.set, as the item scanner does, so that
// what is absent, bad or a forwarding chain is decided in one place.
type handFormat struct {
	read    func(p *Parser, s string, lineNo int, e *Entry, st *lineState) bool
	fields  []item // what its lines can carry, for Carries
	nFields int    // named fields a line may carry, to size Entry.Fields
	w3c     *w3cFormat
	envoy   *envoyFormat
}

// handPreset returns the hand-read preset name, if it is one.
func handPreset(name string, p *Parser) (*handFormat, bool) {
	switch name {
	case "haproxy":
		return haproxyPreset(), true
	case "alb":
		return albPreset(), true
	case "iis", "cloudfront":
		return w3cPreset(name), true
	case "envoy":
		return envoyPreset(p), true
	}
	return nil, false
}

// put stores the value v of a field of kind k named name, as the item
// scanner stores a field it reads.
func (p *Parser) put(k kind, name, v string, e *Entry, st *lineState) {
	it := item{kind: k, name: name}
	p.set(&it, v, e, st)
}

// putDuration stores a duration written in units of scale seconds.
func (p *Parser) putDuration(v string, scale float64, e *Entry, st *lineState) {
	it := item{kind: kDuration, name: "duration", scale: scale}
	p.set(&it, v, e, st)
}

// failLine makes the line an *Error on field, saying why.
func (st *lineState) failLine(field, why string) bool {
	if st.failField == "" {
		st.failField, st.fail = field, why
	}
	return false
}

// tokens walks a line of blank-separated values, some of them quoted.
type tokens struct {
	s string
	i int
}

// done reports whether the line is used up.
func (t *tokens) done() bool { return t.i >= len(t.s) }

// word returns the next value up to a blank, and moves past the blank.
func (t *tokens) word() (string, bool) {
	if t.i >= len(t.s) {
		return "", false
	}
	rest := t.s[t.i:]
	j := strings.IndexByte(rest, ' ')
	if j < 0 {
		t.i = len(t.s)
		return rest, true
	}
	t.i += j + 1
	return rest[:j], true
}

// quoted returns the next value: a quoted string without its quotes (a
// backslash escapes a quote inside it), or a bare word.
func (t *tokens) quoted() (string, bool) {
	if t.i >= len(t.s) {
		return "", false
	}
	if t.s[t.i] != '"' {
		return t.word()
	}
	start := t.i + 1
	for k := start; k < len(t.s); k++ {
		switch t.s[k] {
		case '\\':
			k++
		case '"':
			if k+1 == len(t.s) || t.s[k+1] == ' ' {
				t.i = k + 2
				return t.s[start:k], true
			}
		}
	}
	// No closing quote: the rest of the line (a line cut at a length limit).
	t.i = len(t.s)
	return t.s[start:], true
}

// splitAbsolute splits an absolute request target ("https://host:443/p?q")
// into its host (without the port) and the rest ("/p?q"); a target that is
// not absolute is returned whole as rest.
func splitAbsolute(target string) (host, rest string) {
	j := strings.Index(target, "://")
	if j <= 0 || j > 10 {
		return "", target
	}
	hp := target[j+3:]
	rest = "/"
	if k := strings.IndexAny(hp, "/?"); k >= 0 {
		hp, rest = hp[:k], hp[k:]
		if rest[0] == '?' {
			rest = "/" + rest
		}
	}
	host, _ = splitHostPort(hp)
	return host, rest
}
