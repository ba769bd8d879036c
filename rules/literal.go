package rules

import (
	"regexp/syntax"
	"strings"
	"unicode/utf8"
)

// maxLiterals bounds the set a regular expression may expand to for the
// literal fast path.
const maxLiterals = 64

// literals is a regular expression whose language is a small finite set of
// strings, matched without the regexp engine: `^(GET|POST)$` is two
// equality tests, `\.(css|js)$` two suffix tests, `^/admin` a prefix test,
// `wp-login` a substring test. It matches exactly what the expression does.
type literals struct {
	set        []string
	begin, end bool // anchored at the start (^), at the end ($)
}

// compileLiterals returns the literal form of expr, or nil when it has none.
func compileLiterals(expr string) *literals {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil
	}
	re = re.Simplify()
	l := &literals{}
	if re.Op == syntax.OpConcat && len(re.Sub) > 0 {
		subs := re.Sub
		if subs[0].Op == syntax.OpBeginText {
			l.begin, subs = true, subs[1:]
		}
		if len(subs) > 0 && subs[len(subs)-1].Op == syntax.OpEndText {
			l.end, subs = true, subs[:len(subs)-1]
		}
		re = &syntax.Regexp{Op: syntax.OpConcat, Sub: subs}
	}
	set, ok := expand(re)
	if !ok {
		return nil
	}
	l.set = set
	return l
}

// expand returns the finite language of re, if it is one of at most
// maxLiterals strings built from case-sensitive literals.
func expand(re *syntax.Regexp) ([]string, bool) {
	switch re.Op {
	case syntax.OpEmptyMatch:
		return []string{""}, true
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return nil, false
		}
		for _, r := range re.Rune {
			if r == utf8.RuneError {
				return nil, false
			}
		}
		return []string{string(re.Rune)}, true
	case syntax.OpCharClass:
		var out []string
		for i := 0; i+1 < len(re.Rune); i += 2 {
			lo, hi := re.Rune[i], re.Rune[i+1]
			if int(hi-lo) >= maxLiterals || lo <= utf8.RuneError && utf8.RuneError <= hi {
				return nil, false
			}
			for r := lo; r <= hi; r++ {
				out = append(out, string(r))
			}
			if len(out) > maxLiterals {
				return nil, false
			}
		}
		return out, len(out) > 0
	case syntax.OpCapture:
		return expand(re.Sub[0])
	case syntax.OpQuest:
		sub, ok := expand(re.Sub[0])
		if !ok || len(sub)+1 > maxLiterals {
			return nil, false
		}
		return append([]string{""}, sub...), true
	case syntax.OpAlternate:
		var out []string
		for _, s := range re.Sub {
			sub, ok := expand(s)
			if !ok || len(out)+len(sub) > maxLiterals {
				return nil, false
			}
			out = append(out, sub...)
		}
		return out, true
	case syntax.OpConcat:
		out := []string{""}
		for _, s := range re.Sub {
			sub, ok := expand(s)
			if !ok || len(out)*len(sub) > maxLiterals {
				return nil, false
			}
			next := make([]string, 0, len(out)*len(sub))
			for _, a := range out {
				for _, b := range sub {
					next = append(next, a+b)
				}
			}
			out = next
		}
		return out, true
	}
	return nil, false
}

// match reports whether the expression matches v.
func (l *literals) match(v string) bool {
	for _, s := range l.set {
		var ok bool
		switch {
		case l.begin && l.end:
			ok = v == s
		case l.begin:
			ok = strings.HasPrefix(v, s)
		case l.end:
			ok = strings.HasSuffix(v, s)
		default:
			ok = strings.Contains(v, s)
		}
		if ok {
			return true
		}
	}
	return false
}
