package rules

import (
	"errors"
	"regexp"
	"regexp/syntax"
	"strconv"

	"gopkg.in/yaml.v3"

	"github.com/logjail/logjail/parser"
)

// matcher is a rule's compiled `match`: every condition matches (AND) and the
// `not` block, if any, does not.
type matcher struct {
	conds []cond
	not   *matcher
}

// cond is one field's regular expression.
type cond struct {
	name string
	id   fieldID
	re   *regexp.Regexp
	lit  *literals // re as a set of literals, when it is one
	// statuses[s] says whether the expression matches status s, so that a
	// status is matched without formatting it.
	statuses *[1000]bool
}

// fieldID names the Entry fields read directly; other names go through
// Entry.Get.
type fieldID int

const (
	fieldOther fieldID = iota
	fieldMethod
	fieldPath
	fieldQuery
	fieldProtocol
	fieldStatus
	fieldReferer
	fieldUserAgent
	fieldUser
	fieldHost
)

// entryFields are the names of the fields every Entry may carry (Entry.Get).
var entryFields = []string{"ip", "time", "method", "path", "query", "protocol", "status", "bytes", "referer", "user_agent", "user", "host", "duration", "cpu"}

func fieldIDOf(name string) fieldID {
	switch name {
	case "method":
		return fieldMethod
	case "path":
		return fieldPath
	case "query":
		return fieldQuery
	case "protocol":
		return fieldProtocol
	case "status":
		return fieldStatus
	case "referer":
		return fieldReferer
	case "user_agent":
		return fieldUserAgent
	case "user":
		return fieldUser
	case "host":
		return fieldHost
	}
	return fieldOther
}

// matcher compiles a `match` mapping: field name -> regular expression, and
// an optional `not` mapping of the same form.
func (b *builder) matcher(n *yaml.Node, path string) *matcher {
	m := &matcher{}
	for _, f := range b.mapping(n, path) {
		if f.key.Value == "not" {
			m.not = b.matcher(f.val, f.path)
			continue
		}
		if f.key.Value == "" {
			b.errorf(f.key, f.path, "empty field name")
			continue
		}
		if fieldIDOf(f.key.Value) == fieldOther && !contains(entryFields, f.key.Value) {
			// Any named field of a format may be matched, but a near miss of
			// an Entry field is a typo that would silently match nothing.
			if hint := suggest(f.key.Value, entryFields); hint != "" {
				b.errorf(f.key, f.path, "unknown field %q%s", f.key.Value, hint)
				continue
			}
		}
		var expr string
		if !b.str(f.val, f.path, &expr) {
			continue
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			b.errorf(f.val, f.path, "%q: bad regular expression: %v", expr, unwrapRegexp(err))
			continue
		}
		c := cond{name: f.key.Value, id: fieldIDOf(f.key.Value), re: re, lit: compileLiterals(expr)}
		if c.id == fieldStatus {
			c.statuses = new([1000]bool)
			for s := range c.statuses {
				c.statuses[s] = re.MatchString(strconv.Itoa(s))
			}
		}
		m.conds = append(m.conds, c)
	}
	if len(m.conds) == 0 && m.not == nil {
		return nil
	}
	return m
}

// unwrapRegexp drops the "error parsing regexp: " prefix.
func unwrapRegexp(err error) string {
	var se *syntax.Error
	if errors.As(err, &se) {
		return string(se.Code) + ": `" + se.Expr + "`"
	}
	return err.Error()
}

// match reports whether e matches m. A field the entry does not carry matches
// no expression.
func (m *matcher) match(e *parser.Entry) bool {
	for i := range m.conds {
		if !m.conds[i].match(e) {
			return false
		}
	}
	return m.not == nil || !m.not.match(e)
}

func (c *cond) match(e *parser.Entry) bool {
	var v string
	switch c.id {
	case fieldStatus:
		if e.Has&parser.HasStatus == 0 {
			return false
		}
		if e.Status >= 0 && e.Status < len(c.statuses) {
			return c.statuses[e.Status]
		}
		return c.re.MatchString(strconv.Itoa(e.Status))
	case fieldMethod:
		if e.Has&parser.HasMethod == 0 {
			return false
		}
		v = e.Method
	case fieldPath:
		if e.Has&parser.HasPath == 0 {
			return false
		}
		v = e.Path
	case fieldQuery:
		if e.Has&parser.HasQuery == 0 {
			return false
		}
		v = e.Query
	case fieldProtocol:
		if e.Has&parser.HasProtocol == 0 {
			return false
		}
		v = e.Protocol
	case fieldReferer:
		if e.Has&parser.HasReferer == 0 {
			return false
		}
		v = e.Referer
	case fieldUserAgent:
		if e.Has&parser.HasUserAgent == 0 {
			return false
		}
		v = e.UserAgent
	case fieldUser:
		if e.Has&parser.HasUser == 0 {
			return false
		}
		v = e.User
	case fieldHost:
		if e.Has&parser.HasHost == 0 {
			return false
		}
		v = e.Host
	default:
		var ok bool
		if v, ok = e.Get(c.name); !ok {
			return false
		}
	}
	if c.lit != nil {
		return c.lit.match(v)
	}
	return c.re.MatchString(v)
}
