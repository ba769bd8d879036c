package signatures

import (
	"strings"
	"testing"
	"time"

	"github.com/logjail/logjail/parser"
)

func combined(t testing.TB) *parser.Parser {
	t.Helper()
	p, err := parser.New(parser.Options{Format: "combined", Location: time.UTC})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func cleanLine(target string) string { return BrowserLine(target) }

func parse(t *testing.T, p *parser.Parser, line string) *parser.Entry {
	t.Helper()
	e, err := p.ParseString(line, 1)
	if err != nil {
		t.Fatalf("the combined parser refuses %q: %v", line, err)
	}
	return &e
}

// TestFamilies runs every pattern's test lines through the real parser
// (combined) and the matcher: each `match` line must be caught by the
// pattern alone (its literals found, its expression matching) and by its
// whole family; each `clean` target or line must not be caught by it.
func TestFamilies(t *testing.T) {
	p := combined(t)
	names := Builtin()
	if want := []string{"exploits", "panels", "secrets", "shells", "traversal", "vcs"}; strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("built-in families %v, want %v", names, want)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			f, err := Load(name)
			if err != nil {
				t.Fatal(err)
			}
			if f.Name != name {
				t.Fatalf("%s: family %q, want %q", f.File, f.Name, name)
			}
			if err := Check(f); err != nil {
				t.Error(err)
			}
			all, err := Compile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, pat := range f.Patterns {
				one, err := Compile(&Family{Name: name, Patterns: []*Pattern{pat}})
				if err != nil {
					t.Fatal(err)
				}
				for _, line := range pat.Match {
					e := parse(t, p, line)
					if got := one.First(e); got != pat {
						t.Errorf("%s:%d: %s: does not match %q (expression %v, literals %q)", f.File, pat.Line, pat.Name, line, pat.MatchEntry(e), pat.Literals)
					}
					if !all.Match(e) {
						t.Errorf("%s:%d: %s: family does not match %q", f.File, pat.Line, pat.Name, line)
					}
				}
				for _, c := range pat.Clean {
					line := c
					if strings.HasPrefix(c, "/") {
						line = cleanLine(c)
					}
					if one.Match(parse(t, p, line)) {
						t.Errorf("%s:%d: %s: matches the clean %q", f.File, pat.Line, pat.Name, c)
					}
				}
			}
		})
	}
}

// ordinary are requests of ordinary visitors of ordinary sites (genlog's
// and the sample logs' kinds), which no family may match.
var ordinary = []string{
	"/", "/index.php", "/index.php?page=about", "/robots.txt", "/favicon.ico", "/sitemap.xml", "/feed/",
	"/static/css/app.3f2a1b.css", "/static/js/vendor.2df89c15.js", "/images/products/50239.webp",
	"/products/82441-utpara", "/blog/how-we-ship/", "/category/shoes/?page=2", "/api/v1/items?page=3&limit=20",
	"/search?q=red+shoes", "/search?q=wget+tutorial", "/search?q=100%25+cotton", "/cart/add", "/login", "/account/",
	"/wp-content/uploads/2024/05/x.jpg", "/wp-content/themes/twentytwenty/style.css", "/wp-json/wp/v2/posts",
	"/.well-known/security.txt", "/.well-known/acme-challenge/Xy1", "/git/", "/.github/FUNDING.yml",
	"/environment/", "/actuator/health", "/cgi-bin/test.cgi", "/user/login", "/admin/", "/vendor/jquery/jquery.min.js",
	"/app;jsessionid=0A1B2C3D", "/docs/v1.2/intro", "/presentations/logstash-monitorama-2013/images/kibana-search.png",
	"/api/items/${itemId}", "/downloads/manual.zip", "/etc/", "/tmp/",
}

func TestOrdinaryRequests(t *testing.T) {
	p := combined(t)
	var fams []*Family
	for _, name := range Builtin() {
		f, err := Load(name)
		if err != nil {
			t.Fatal(err)
		}
		fams = append(fams, f)
	}
	set, err := Compile(fams...)
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range ordinary {
		if pat := set.First(parse(t, p, cleanLine(target))); pat != nil {
			t.Errorf("%s: matched by %s/%s (%s:%d)", target, pat.Family, pat.Name, pat.File, pat.Line)
		}
	}
}

func TestRequired(t *testing.T) {
	for expr, want := range map[string]string{
		`(?i)/\.env(\.[a-z]+)?$`:             "/.env",
		`(?i)/(phpmyadmin|pma|myadmin)(/|$)`: "/myadmin,/phpmyadmin,/pma",
		`(?i)eval-stdin\.php`:                "eval-stdin.php",
		`^/HNAP1(/|$)`:                       "/hnap1",
		`(?i)^[a-z]+ /shell\?`:               " /shell?",
		`.*`:                                 "",
		`ab`:                                 "",
		`(?i)(foo|.*)bar`:                    "bar",
		`(x+)?abc|def`:                       "abc,def",
		`a(bcd|efg)+h`:                       "abcd,aefg",
	} {
		if got := strings.Join(Required(expr), ","); got != want {
			t.Errorf("Required(%q) = %q, want %q", expr, got, want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for name, tc := range map[string]struct{ text, want string }{
		"unknown field": {"family: x\npatterns:\n  - name: a\n    fields: [paht]\n    pattern: 'abc'\n    match: ['l']\n    clean: [/]\n",
			`f.yaml:4: patterns[0].fields[0]: unknown field "paht"`},
		"no literal": {"family: x\npatterns:\n  - name: a\n    fields: [path]\n    pattern: 'a.b'\n    match: ['l']\n    clean: [/]\n",
			`f.yaml:5: patterns[0].pattern: "a.b": no required literal`},
		"bad regexp": {"family: x\npatterns:\n  - name: a\n    fields: [path]\n    pattern: 'a(b'\n    match: ['l']\n    clean: [/]\n",
			`f.yaml:5: patterns[0].pattern: "a(b": bad regular expression`},
		"no clean": {"family: x\npatterns:\n  - name: a\n    fields: [path]\n    pattern: 'abc'\n    match: ['l']\n",
			`f.yaml:3: patterns[0].clean: at least one real path`},
		"unknown key": {"family: x\npatterns:\n  - name: a\n    feilds: [path]\n",
			`f.yaml:4: patterns[0].feilds: unknown key`},
		"duplicate": {"family: x\npatterns:\n  - {name: a, fields: path, pattern: abc, match: l, clean: /}\n  - {name: a, fields: path, pattern: abd, match: l, clean: /}\n",
			`f.yaml:4: patterns[1].name: duplicate name "a" (first at line 3)`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse("f.yaml", []byte(tc.text))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := Load("nonesuch"); err == nil {
		t.Error("Load(nonesuch): no error")
	}
}

// TestCheck: a family whose test lines misbehave is reported with the
// file, the pattern's line and the key.
func TestCheck(t *testing.T) {
	text := "family: mine\npatterns:\n" +
		"  - name: a\n    fields: [path]\n    pattern: '/secret-[a-z]+'\n" +
		"    match: ['198.51.100.7 - - [25/Nov/2026:10:00:00 +0000] \"GET /public HTTP/1.1\" 404 1 \"-\" \"x\"']\n" +
		"    clean: [/secret-admin]\n"
	f, err := Parse("mine.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	err = Check(f)
	for _, want := range []string{`mine.yaml:3: a.match[0]: does not match`, `mine.yaml:3: a.clean[0]: matches "/secret-admin"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q", err, want)
		}
	}
}
