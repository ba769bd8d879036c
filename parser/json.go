package parser

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonTarget says where a JSON value goes; prio orders fallbacks (0 first).
type jsonTarget struct {
	item
	prio int8
}

// jsonFormat reads JSON lines by dotted paths.
type jsonFormat struct {
	paths    map[string]jsonTarget
	prefixes map[string]bool // every proper prefix of a wanted path
}

type jsonPath struct {
	path  string
	scale float64 // for duration: seconds per unit (0 means 1)
}

// jsonEntryKind maps an Entry field name (as in DESIGN.md) to the kind of its value.
func jsonEntryKind(name string) (kind, bool) {
	switch name {
	case "ip":
		return kIP, true
	case "x_forwarded_for":
		return kXFF, true
	case "time":
		return kTimeISO, true
	case "method":
		return kMethod, true
	case "path":
		return kURI, true
	case "query":
		return kQuery, true
	case "protocol":
		return kProtocol, true
	case "status":
		return kStatus, true
	case "bytes":
		return kBytes, true
	case "referer":
		return kReferer, true
	case "user_agent":
		return kUA, true
	case "user":
		return kUser, true
	case "host":
		return kHost, true
	case "duration":
		return kDuration, true
	case "cpu":
		return kDuration, true // read as seconds, stored as CPU (see cpu flag)
	}
	return kField, false
}

// compileJSON builds a JSON format from names mapped to paths, each with its
// fallbacks in order.
func compileJSON(m map[string][]jsonPath, cpuField string) (*jsonFormat, error) {
	jf := &jsonFormat{paths: map[string]jsonTarget{}, prefixes: map[string]bool{}}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	hasIP, hasTime := false, false
	for _, name := range names {
		k, _ := jsonEntryKind(name)
		for prio, jp := range m[name] {
			if jp.path == "" || strings.HasPrefix(jp.path, ".") || strings.HasSuffix(jp.path, ".") || strings.Contains(jp.path, "..") {
				return nil, fmt.Errorf("json field %s: %q: not a dotted path", name, jp.path)
			}
			if other, dup := jf.paths[jp.path]; dup {
				return nil, fmt.Errorf("json field %s: path %q already read as %s", name, jp.path, other.name)
			}
			t := jsonTarget{item: field(k, name), prio: int8(prio)}
			t.scale = 1
			if jp.scale != 0 {
				t.scale = jp.scale
			}
			t.strength = int8(100 - prio)
			t.cpu = name == "cpu" || (cpuField != "" && name == cpuField)
			if name == "cpu" {
				t.kind = kSkip
			}
			jf.paths[jp.path] = t
			for p := jp.path; ; {
				j := strings.LastIndexByte(p, '.')
				if j < 0 {
					break
				}
				p = p[:j]
				jf.prefixes[p] = true
			}
		}
		switch k {
		case kIP, kXFF:
			hasIP = true
		case kTimeISO:
			hasTime = true
		}
	}
	if !hasIP {
		return nil, fmt.Errorf("json fields: no \"ip\" (or \"x_forwarded_for\") mapping")
	}
	if !hasTime {
		return nil, fmt.Errorf("json fields: no \"time\" mapping")
	}
	return jf, nil
}

// jsonState is the walk's scratch space.
type jsonState struct {
	p    *Parser
	jf   *jsonFormat
	e    *Entry
	st   *lineState
	prio [32]int8 // per kind: 0 unset, else prio+1 of the value kept
	path []byte
}

const maxJSONDepth = 64

// scanJSON reads one JSON object with the format jf. It returns whether
// the object was well formed.
func (p *Parser) scanJSON(jf *jsonFormat, s string, e *Entry, st *lineState) bool {
	w := jsonState{p: p, jf: jf, e: e, st: st}
	var buf [128]byte
	w.path = buf[:0]
	i := skipWS(s, 0)
	if i >= len(s) || s[i] != '{' {
		st.stopped, st.stopAt, st.stopWant = true, "json", "{"
		return false
	}
	end, ok := w.value(s, i, 0)
	if !ok {
		st.stopped, st.stopAt, st.stopPos = true, "json", end
	}
	return ok
}

func skipWS(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// value reads the JSON value at s[i:] (whose path is w.path) and returns the index after it.
func (w *jsonState) value(s string, i, depth int) (int, bool) {
	if depth > maxJSONDepth {
		return i, false
	}
	i = skipWS(s, i)
	if i >= len(s) {
		return i, false
	}
	switch s[i] {
	case '{':
		if depth > 0 && !w.jf.prefixes[string(w.path)] {
			return skipValue(s, i, depth)
		}
		base := len(w.path)
		i = skipWS(s, i+1)
		if i < len(s) && s[i] == '}' {
			return i + 1, true
		}
		for {
			i = skipWS(s, i)
			if i >= len(s) || s[i] != '"' {
				return i, false
			}
			end, esc, ok := stringEnd(s, i)
			if !ok {
				return i, false
			}
			key := s[i+1 : end]
			if esc {
				key = jsonUnquote(key)
			}
			w.path = w.path[:base]
			if base > 0 {
				w.path = append(w.path, '.')
			}
			w.path = append(w.path, key...)
			i = skipWS(s, end+1)
			if i >= len(s) || s[i] != ':' {
				return i, false
			}
			if i, ok = w.value(s, i+1, depth+1); !ok {
				return i, false
			}
			w.path = w.path[:base]
			i = skipWS(s, i)
			if i < len(s) && s[i] == ',' {
				i++
				continue
			}
			if i < len(s) && s[i] == '}' {
				return i + 1, true
			}
			return i, false
		}
	case '[':
		t, want := w.jf.paths[string(w.path)]
		j := skipWS(s, i+1)
		if want && j < len(s) && s[j] != ']' && s[j] != '{' && s[j] != '[' {
			// A header logged as a list (Caddy): the first value counts.
			end, ok := w.scalar(s, j, &t, true)
			if !ok {
				return end, false
			}
		}
		return skipValue(s, i, depth)
	case '"':
		end, esc, ok := stringEnd(s, i)
		if !ok {
			return i, false
		}
		if t, want := w.jf.paths[string(w.path)]; want {
			v := s[i+1 : end]
			if esc {
				v = jsonUnquote(v)
			}
			w.assign(&t, v, false)
		}
		return end + 1, true
	default:
		j := i
		for j < len(s) && !strings.ContainsRune(",}] \t\r\n", rune(s[j])) {
			j++
		}
		if j == i {
			return i, false
		}
		tok := s[i:j]
		if t, want := w.jf.paths[string(w.path)]; want && tok != "null" {
			w.assign(&t, tok, true)
		}
		return j, true
	}
}

// scalar assigns the string or number at s[i:] to t.
func (w *jsonState) scalar(s string, i int, t *jsonTarget, _ bool) (int, bool) {
	if s[i] == '"' {
		end, esc, ok := stringEnd(s, i)
		if !ok {
			return i, false
		}
		v := s[i+1 : end]
		if esc {
			v = jsonUnquote(v)
		}
		w.assign(t, v, false)
		return end + 1, true
	}
	j := i
	for j < len(s) && !strings.ContainsRune(",}] \t\r\n", rune(s[j])) {
		j++
	}
	if tok := s[i:j]; tok != "null" && tok != "" {
		w.assign(t, tok, true)
	}
	return j, true
}

func (w *jsonState) assign(t *jsonTarget, v string, number bool) {
	k := t.kind
	if k != kField && k != kIP {
		if cur := w.prio[k]; cur != 0 && cur <= t.prio+1 {
			return
		}
		w.prio[k] = t.prio + 1
	}
	it := t.item
	if k == kTimeISO {
		if number {
			it.kind = kTimeEpoch
		} else if _, ok := w.p.tr.iso(v); !ok {
			it.kind = kTimeCLF
		}
		w.st.hasTime = false // this value outranks any time kept before
	}
	if k == kHost {
		w.e.Has &^= HasHost
	}
	if k == kQuery && strings.HasPrefix(v, "?") {
		v = v[1:]
	}
	if it.cpu && it.kind == kSkip {
		if f, ok := sumFloats(v); ok && f >= 0 {
			w.e.CPU, w.e.Has = f*t.scale, w.e.Has|HasCPU
		}
		return
	}
	if number && (k == kStatus || k == kBytes) {
		// JSON numbers may be written 200.0 or 2e2; take the integer part of plain decimals.
		if d := strings.IndexByte(v, '.'); d > 0 {
			v = v[:d]
		}
	}
	w.p.set(&it, v, w.e, w.st)
}

// stringEnd returns the index of the quote closing the string opened at s[i].
func stringEnd(s string, i int) (end int, esc bool, ok bool) {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			esc = true
			j++
		case '"':
			return j, esc, true
		}
	}
	return 0, false, false
}

// skipValue skips the value at s[i:], which starts with '{' or '['.
func skipValue(s string, i, depth int) (int, bool) {
	level := 0
	for j := i; j < len(s); j++ {
		switch s[j] {
		case '"':
			end, _, ok := stringEnd(s, j)
			if !ok {
				return j, false
			}
			j = end
		case '{', '[':
			level++
			if depth+level > maxJSONDepth {
				return j, false
			}
		case '}', ']':
			level--
			if level == 0 {
				return j + 1, true
			}
		}
	}
	return len(s), false
}

// jsonUnquote decodes the escapes of a JSON string body.
func jsonUnquote(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b = append(b, c)
			continue
		}
		i++
		switch s[i] {
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, n := hex4(s, i+1)
			if n == 0 {
				b = append(b, '\\', 'u')
				continue
			}
			i += 4
			if utf16.IsSurrogate(r) {
				if r2, n2 := hex4(s, i+3); n2 != 0 && i+2 < len(s) && s[i+1] == '\\' && s[i+2] == 'u' {
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						r = d
						i += 6
					}
				}
			}
			b = utf8.AppendRune(b, r)
		default:
			b = append(b, s[i])
		}
	}
	return string(b)
}

func hex4(s string, i int) (rune, int) {
	if i+4 > len(s) {
		return 0, 0
	}
	var r rune
	for k := i; k < i+4; k++ {
		v, ok := unhex(s[k])
		if !ok {
			return 0, 0
		}
		r = r<<4 | rune(v)
	}
	return r, 4
}
