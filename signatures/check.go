package signatures

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/logjail/logjail/parser"
)

// Check runs every pattern's test lines through the combined parser and
// the matcher: each `match` line must parse and be matched by the pattern
// alone (a literal of it found, its expression matching); each `clean`
// target (a "/path?query", made into a browser's combined line) or line
// must not be. Every failure is returned, as an errors.Join of *Error
// naming the pattern's file, line and key.
func Check(f *Family) error {
	p, err := parser.New(parser.Options{Format: "combined", Location: time.UTC})
	if err != nil {
		return err
	}
	var errs []error
	fail := func(pat *Pattern, key string, i int, format string, args ...any) {
		errs = append(errs, &Error{File: pat.File, Line: pat.Line, Path: fmt.Sprintf("%s.%s[%d]", pat.Name, key, i), Msg: fmt.Sprintf(format, args...)})
	}
	for _, pat := range f.Patterns {
		one, err := Compile(&Family{Name: f.Name, Patterns: []*Pattern{pat}})
		if err != nil {
			return err
		}
		for i, line := range pat.Match {
			e, err := p.ParseString(line, 1)
			switch {
			case err != nil:
				fail(pat, "match", i, "not a combined log line: %v", err)
			case one.First(&e) != pat && pat.MatchEntry(&e):
				fail(pat, "match", i, "the expression matches but no literal of %q is in the line", pat.Literals)
			case one.First(&e) != pat:
				fail(pat, "match", i, "does not match %q", line)
			}
		}
		for i, c := range pat.Clean {
			line := c
			if strings.HasPrefix(c, "/") {
				line = BrowserLine(c)
			}
			e, err := p.ParseString(line, 1)
			switch {
			case err != nil:
				fail(pat, "clean", i, "not a combined log line: %v", err)
			case one.Match(&e):
				fail(pat, "clean", i, "matches %q, which it must not", c)
			}
		}
	}
	return errors.Join(errs...)
}

// BrowserLine is a combined log line of a browser's GET of target
// ("/path?query"), as Check makes of a `clean` target.
func BrowserLine(target string) string {
	return `203.0.113.9 - - [25/Nov/2026:10:00:00 +0000] "GET ` + target + ` HTTP/1.1" 200 5120 "https://www.example.com/" "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"`
}
