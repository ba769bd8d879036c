package rules

import (
	"regexp"
	"testing"
)

var literalExprs = []string{
	`^(GET|POST)$`, `^GET$`, `\.(css|js|mjs|map|png|jpe?g|gif|webp|avif|svg|ico|woff2?|ttf|eot)$`,
	`^/(search|export)`, `wp-login`, `^(400|403|404|444)$`, `^4(03|04)$`, `^40[0-9]$`, `^$`, ``,
	`(?:a|b)c?`, `^/admin/?$`, `é+`, `(?i)bot`, `bot.*`, `^/a$|^/b$`, `(?m)^x$`, `\bfoo`, `[^a]`, `^\.env$`,
}

var literalInputs = []string{
	"", "GET", "POST", "GETX", "xGET", "/static/app.js", "/static/app.json", "/a.jpeg", "/a.jpg", "/a.jpgg",
	"/search?q=1", "/export", "/x/search", "/wp-login.php", "400", "404", "4044", "403", "/admin", "/admin/", "/admin//",
	"é", "ée", "Googlebot", "c", "ac", "bc", "/a", "/b", "x", "foo", ".env", "a.env", "\xff", "/a.js\xff",
}

func TestLiteralsAgreeWithRegexp(t *testing.T) {
	for _, expr := range literalExprs {
		re := regexp.MustCompile(expr)
		l := compileLiterals(expr)
		if l == nil {
			continue
		}
		for _, in := range literalInputs {
			if got, want := l.match(in), re.MatchString(in); got != want {
				t.Errorf("%q on %q: literals %v, regexp %v", expr, in, got, want)
			}
		}
	}
	for _, expr := range []string{`^(GET|POST)$`, `\.(css|js|mjs|map|png|jpe?g|gif|webp|avif|svg|ico|woff2?|ttf|eot)$`, `^/(search|export)`, `^(400|403|404|444)$`} {
		if compileLiterals(expr) == nil {
			t.Errorf("%q: no literal form", expr)
		}
	}
	for _, expr := range []string{`(?i)bot`, `bot.*`, `(?m)^x$`, `\bfoo`, `[^a]`} {
		if compileLiterals(expr) != nil {
			t.Errorf("%q: a literal form", expr)
		}
	}
}

func FuzzLiterals(f *testing.F) {
	for _, e := range literalExprs {
		for _, in := range literalInputs {
			f.Add(e, in)
		}
	}
	f.Fuzz(func(t *testing.T, expr, in string) {
		re, err := regexp.Compile(expr)
		if err != nil {
			return
		}
		l := compileLiterals(expr)
		if l == nil {
			return
		}
		if got, want := l.match(in), re.MatchString(in); got != want {
			t.Errorf("%q on %q: literals %v, regexp %v", expr, in, got, want)
		}
	})
}
