package signatures

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/logjail/logjail/parser"
)

// FuzzSet checks the matcher against the plain way: an entry matches the
// Set of every built-in family exactly when some pattern's expression
// matches it, for the patterns whose literals were extracted (a declared
// literal may leave out a form of the expression: a miss of such a
// pattern alone is not a failure). Seeded with the families' own lines.
func FuzzSet(f *testing.F) {
	var fams []*Family
	for _, name := range Builtin() {
		fam, err := Load(name)
		if err != nil {
			f.Fatal(err)
		}
		fams = append(fams, fam)
	}
	set, err := Compile(fams...)
	if err != nil {
		f.Fatal(err)
	}
	p := combined(f)
	for _, fam := range fams {
		for _, pat := range fam.Patterns {
			for _, line := range pat.Match {
				if e, err := p.ParseString(line, 1); err == nil {
					f.Add(e.Method, e.Path, e.Query, e.UserAgent, e.Referer)
				}
			}
		}
	}
	f.Add("GET", "/static/js/vendor.2df89c15.js", "", "Mozilla/5.0 (X11; Linux x86_64)", "https://www.example.com/")
	f.Fuzz(func(t *testing.T, method, path, query, ua, referer string) {
		e := parser.Entry{IP: netip.MustParseAddr("203.0.113.9"), Method: method, Path: path, Query: query, UserAgent: ua, Referer: referer,
			Has: parser.HasMethod | parser.HasPath | parser.HasUserAgent | parser.HasReferer}
		if method == "" {
			e.Has &^= parser.HasMethod
		}
		if query != "" || strings.HasPrefix(path, "?") {
			e.Has |= parser.HasQuery
		}
		got := set.First(&e)
		var want, declared *Pattern
		for _, pat := range set.Patterns() {
			if pat.MatchEntry(&e) {
				if !pat.Declared {
					want = pat
					break
				}
				declared = pat
			}
		}
		switch {
		case got != nil && !got.MatchEntry(&e):
			t.Fatalf("First gives %s/%s, whose expression does not match %+v", got.Family, got.Name, e)
		case got == nil && want != nil:
			t.Fatalf("First misses %s/%s (literals %q) on %+v", want.Family, want.Name, want.Literals, e)
		case got == nil && declared != nil:
			// a declared literal left this form out
		}
	})
}
