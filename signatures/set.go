package signatures

import (
	"errors"
	"fmt"

	"github.com/logjail/logjail/parser"
)

// Set is the compiled union of some families: it says whether an entry
// matches any of their patterns. A *Set is immutable and safe for
// concurrent use; First and Match allocate nothing unless a literal is
// found and a `request` pattern must then see the request line (built as
// one string for its regular expression).
type Set struct {
	families []string
	patterns []*Pattern
	// req finds the literals of the patterns on path, query and request;
	// hdr those of the patterns on user_agent and referer (few, so that
	// the scan skips most of a user agent's bytes).
	req, hdr *automaton
	uses     [numFields]bool
	stream   bool // some pattern looks at path, query or request
}

// Compile builds the Set of the patterns of every family given.
func Compile(fams ...*Family) (*Set, error) {
	s := &Set{}
	var reqLits, hdrLits []lit
	for _, f := range fams {
		if f == nil {
			return nil, errors.New("signatures: nil family")
		}
		s.families = append(s.families, f.Name)
		for _, p := range f.Patterns {
			if p.re == nil || len(p.Literals) == 0 {
				return nil, fmt.Errorf("%s:%d: pattern %q: not compiled", p.File, p.Line, p.Name)
			}
			i := len(s.patterns)
			s.patterns = append(s.patterns, p)
			onReq := p.has(FieldPath) || p.has(FieldQuery) || p.has(FieldRequest)
			onHdr := p.has(FieldUserAgent) || p.has(FieldReferer)
			for _, l := range p.Literals {
				if onReq {
					reqLits = append(reqLits, lit{text: l, pattern: i})
				}
				if onHdr {
					hdrLits = append(hdrLits, lit{text: l, pattern: i})
				}
			}
			for _, fl := range p.Fields {
				s.uses[fl] = true
			}
		}
	}
	s.stream = s.uses[FieldPath] || s.uses[FieldQuery] || s.uses[FieldRequest]
	s.req = buildAutomaton(reqLits)
	s.hdr = buildAutomaton(hdrLits)
	return s, nil
}

// Families returns the names of the families in s, in order.
func (s *Set) Families() []string { return s.families }

// Patterns returns the patterns of s, in order.
func (s *Set) Patterns() []*Pattern { return s.patterns }

// Match reports whether e matches a pattern of s.
func (s *Set) Match(e *parser.Entry) bool { return s.First(e) != nil }

// tried remembers the patterns whose regular expression has run on an
// entry (the first 256 of a set; later ones may run twice).
type tried [4]uint64

func (t *tried) mark(i int32) bool {
	if i >= 256 {
		return true
	}
	w, b := i>>6, uint64(1)<<(i&63)
	if t[w]&b != 0 {
		return false
	}
	t[w] |= b
	return true
}

// First returns the first pattern of s, in the order its literals are
// found, that e matches; nil when none does.
//
// The literals are looked for in one pass over the request line (method,
// ' ', path, '?', query: a hit wholly inside the path counts for `path`
// patterns, inside the query for `query` patterns, anywhere for `request`
// patterns), then in the user agent and the referer when a pattern looks
// at them. A pattern's regular expression runs only when one of its
// literals is found, on the fields it names.
func (s *Set) First(e *parser.Entry) *Pattern {
	var t tried
	if s.stream {
		var st uint32
		var p *Pattern
		if e.Has&parser.HasPath != 0 {
			if e.Has&parser.HasMethod != 0 {
				if st, p = s.scan(s.req, e, st, e.Method, FieldRequest, true, &t); p != nil {
					return p
				}
				if st, p = s.scan(s.req, e, st, " ", FieldRequest, true, &t); p != nil {
					return p
				}
			}
			if st, p = s.scan(s.req, e, st, e.Path, FieldPath, true, &t); p != nil {
				return p
			}
			if e.Has&parser.HasQuery != 0 {
				if st, p = s.scan(s.req, e, st, "?", FieldRequest, true, &t); p != nil {
					return p
				}
				if _, p = s.scan(s.req, e, st, e.Query, FieldQuery, true, &t); p != nil {
					return p
				}
			}
		} else if s.uses[FieldRequest] {
			if raw, ok := e.Get("request"); ok {
				if _, p = s.scan(s.req, e, 0, raw, FieldRequest, true, &t); p != nil {
					return p
				}
			}
		}
	}
	if s.uses[FieldUserAgent] && e.Has&parser.HasUserAgent != 0 {
		if _, p := s.scan(s.hdr, e, 0, e.UserAgent, FieldUserAgent, false, &t); p != nil {
			return p
		}
	}
	if s.uses[FieldReferer] && e.Has&parser.HasReferer != 0 {
		if _, p := s.scan(s.hdr, e, 0, e.Referer, FieldReferer, false, &t); p != nil {
			return p
		}
	}
	return nil
}

// scan feeds text to the automaton from state st. field is what a hit
// wholly inside text is; inRequest says text is part of the request line,
// where a hit anywhere counts for `request` patterns.
func (s *Set) scan(a *automaton, e *parser.Entry, st uint32, text string, field Field, inRequest bool, t *tried) (uint32, *Pattern) {
	for i := 0; i < len(text); i++ {
		if st == 0 {
			// At the root, skip the bytes that start no literal.
			if a.few != "" {
				j := a.skipFew(text[i:])
				if j < 0 {
					break
				}
				i += j
			} else {
				for i < len(text) && !a.start[text[i]] {
					i++
				}
				if i == len(text) {
					break
				}
			}
		}
		st = a.next[st&^flagOut+uint32(a.class[text[i]])]
		if st&flagOut == 0 {
			continue
		}
		for _, h := range a.out[(st&^flagOut)/uint32(a.classes)] {
			p := s.patterns[h.pattern]
			inside := i+1-int(h.length) >= 0
			if !(inside && p.has(field) || inRequest && p.has(FieldRequest)) {
				continue
			}
			if t.mark(h.pattern) && p.MatchEntry(e) {
				return st, p
			}
		}
	}
	return st, nil
}

func (p *Pattern) has(f Field) bool {
	for _, g := range p.Fields {
		if g == f {
			return true
		}
	}
	return false
}

// MatchEntry runs p's regular expression on the fields of e it names (a
// field e does not carry matches nothing), without the literal search.
func (p *Pattern) MatchEntry(e *parser.Entry) bool {
	for _, f := range p.Fields {
		if v, ok := Value(e, f); ok && p.re.MatchString(v) {
			return true
		}
	}
	return false
}

// Value returns field f of e: the request is "METHOD PATH" or "METHOD
// PATH?QUERY" (a new string; without "METHOD " when the format logs no
// method), or the request as logged when the line's was no request a
// parser could split.
func Value(e *parser.Entry, f Field) (string, bool) {
	switch f {
	case FieldPath:
		return e.Path, e.Has&parser.HasPath != 0
	case FieldQuery:
		return e.Query, e.Has&parser.HasQuery != 0
	case FieldUserAgent:
		return e.UserAgent, e.Has&parser.HasUserAgent != 0
	case FieldReferer:
		return e.Referer, e.Has&parser.HasReferer != 0
	case FieldRequest:
		if e.Has&parser.HasPath == 0 {
			return e.Get("request")
		}
		v := e.Path
		if e.Has&parser.HasQuery != 0 {
			v += "?" + e.Query
		}
		if e.Has&parser.HasMethod != 0 {
			v = e.Method + " " + v
		}
		return v, true
	}
	return "", false
}
