package signatures

import (
	"regexp/syntax"
	"slices"
	"strings"
	"unicode/utf8"
)

// maxSet bounds the literal sets built while extracting.
const maxSet = 32

// Required returns a set of literals, in lower case, one of which every
// match of expr contains (ignoring ASCII case), each at least MinLiteral
// bytes long; nil when the syntax tree yields none (a leading `.*`
// everywhere, an alternation with a branch without literal).
//
// The walk: a literal, a small character class, an alternation or
// concatenation of such is its own finite set of strings ("exact");
// a concatenation yields the cross product of each run of exact parts,
// or the required set of a part that is not exact, whichever is best (the
// longest shortest member, then the fewest members); an alternation yields
// the union of its branches' sets; x+ and x{n,} with n ≥ 1 yield x's.
func Required(expr string) []string {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil
	}
	set := required(re.Simplify())
	if score(set) < MinLiteral {
		return nil
	}
	return minimize(set)
}

// score is the length of the set's shortest member (0 for none).
func score(set []string) int {
	if len(set) == 0 {
		return 0
	}
	m := len(set[0])
	for _, s := range set[1:] {
		m = min(m, len(s))
	}
	return m
}

func better(a, b []string) bool {
	sa, sb := score(a), score(b)
	return sa > sb || sa == sb && sa > 0 && len(a) < len(b)
}

func required(re *syntax.Regexp) []string {
	if set, ok := exact(re); ok && score(set) > 0 {
		return set
	}
	switch re.Op {
	case syntax.OpCapture:
		return required(re.Sub[0])
	case syntax.OpPlus:
		return required(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return required(re.Sub[0])
		}
	case syntax.OpAlternate:
		var out []string
		for _, s := range re.Sub {
			sub := required(s)
			if score(sub) == 0 {
				return nil
			}
			out = append(out, sub...)
		}
		return out
	case syntax.OpConcat:
		var best, run []string
		open := false
		closeRun := func() {
			if open && better(run, best) {
				best = run
			}
			run, open = nil, false
		}
		for _, s := range re.Sub {
			if set, ok := exact(s); ok {
				if !open {
					run, open = set, true
					continue
				}
				if next, ok := cross(run, set); ok {
					run = next
					continue
				}
				closeRun()
				run, open = set, true
				continue
			}
			if open {
				// The run goes on into the start of s.
				if next, ok := cross(run, prefixes(s)); ok {
					run = next
				}
			}
			closeRun()
			if sub := required(s); better(sub, best) {
				best = sub
			}
		}
		closeRun()
		return best
	}
	return nil
}

// prefixes returns a set of strings one of which every match of re
// starts with ({""} when nothing better is known).
func prefixes(re *syntax.Regexp) []string {
	if set, ok := exact(re); ok {
		return set
	}
	none := []string{""}
	switch re.Op {
	case syntax.OpCapture, syntax.OpPlus:
		return prefixes(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return prefixes(re.Sub[0])
		}
	case syntax.OpAlternate:
		var out []string
		for _, s := range re.Sub {
			out = append(out, prefixes(s)...)
			if len(out) > maxSet {
				return none
			}
		}
		return dedupe(out)
	case syntax.OpConcat:
		out := none
		for _, s := range re.Sub {
			set, ok := exact(s)
			if !ok {
				set = prefixes(s)
			}
			next, fits := cross(out, set)
			if !fits {
				return out
			}
			out = next
			if !ok {
				return out
			}
		}
		return out
	}
	return none
}

// minimize drops the members of set that contain another member: finding
// the shorter one is enough.
func minimize(set []string) []string {
	slices.SortFunc(set, func(a, b string) int { return len(a) - len(b) })
	var out []string
	for _, s := range set {
		if !slices.ContainsFunc(out, func(k string) bool { return strings.Contains(s, k) }) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

func cross(a, b []string) ([]string, bool) {
	if len(a)*len(b) > maxSet {
		return nil, false
	}
	out := make([]string, 0, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			out = append(out, x+y)
		}
	}
	return dedupe(out), true
}

func dedupe(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

// exact returns the finite language of re in lower case, zero-width
// assertions read as the empty string, when it has at most maxSet members.
func exact(re *syntax.Regexp) ([]string, bool) {
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return []string{""}, true
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if r == utf8.RuneError {
				return nil, false
			}
		}
		return []string{lower(string(re.Rune))}, true
	case syntax.OpCharClass:
		var out []string
		for i := 0; i+1 < len(re.Rune); i += 2 {
			lo, hi := re.Rune[i], re.Rune[i+1]
			if hi-lo >= maxSet || lo <= utf8.RuneError && utf8.RuneError <= hi {
				return nil, false
			}
			for r := lo; r <= hi; r++ {
				out = append(out, lower(string(r)))
			}
			if len(out) > 2*maxSet {
				return nil, false
			}
		}
		out = dedupe(out)
		return out, len(out) > 0 && len(out) <= maxSet
	case syntax.OpCapture:
		return exact(re.Sub[0])
	case syntax.OpQuest:
		sub, ok := exact(re.Sub[0])
		if !ok || len(sub)+1 > maxSet {
			return nil, false
		}
		return dedupe(append([]string{""}, sub...)), true
	case syntax.OpAlternate:
		var out []string
		for _, s := range re.Sub {
			sub, ok := exact(s)
			if !ok || len(out)+len(sub) > maxSet {
				return nil, false
			}
			out = append(out, sub...)
		}
		return dedupe(out), true
	case syntax.OpConcat:
		out := []string{""}
		for _, s := range re.Sub {
			sub, ok := exact(s)
			if !ok {
				return nil, false
			}
			if out, ok = cross(out, sub); !ok {
				return nil, false
			}
		}
		return out, true
	}
	return nil, false
}
