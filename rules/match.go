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
	field parser.FieldRef
	re    *regexp.Regexp
	lit   *literals // re as a set of literals, when it is one
	// statuses[s] says whether the expression matches status s, so that a
	// status is matched without formatting it.
	statuses *[1000]bool
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
		field := parser.Ref(f.key.Value)
		if !field.Own() {
			// Any named field of a format may be matched, but a near miss of
			// an Entry field is a typo that would silently match nothing.
			if hint := suggest(f.key.Value, parser.EntryFields()); hint != "" {
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
		c := cond{field: field, re: re, lit: compileLiterals(expr)}
		if f.key.Value == "status" {
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

// match reads c's field through the one accessor (parser.FieldRef); a
// status is looked up in c.statuses without formatting it.
func (c *cond) match(e *parser.Entry) bool {
	if c.statuses != nil {
		if e.Has&parser.HasStatus == 0 {
			return false
		}
		if e.Status >= 0 && e.Status < len(c.statuses) {
			return c.statuses[e.Status]
		}
	}
	v, ok := c.field.Get(e)
	if !ok {
		return false
	}
	if c.lit != nil {
		return c.lit.match(v)
	}
	return c.re.MatchString(v)
}
