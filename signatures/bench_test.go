package signatures

import (
	"fmt"
	"testing"

	"github.com/logjail/logjail/parser"
)

// BenchmarkSet matches genlog-like requests (pages, static files, API
// calls, searches; one probe in 64) against the families of the default
// `probes` rule.
func BenchmarkSet(b *testing.B) {
	var fams []*Family
	for _, name := range []string{"secrets", "vcs", "exploits", "traversal", "shells"} {
		f, err := Load(name)
		if err != nil {
			b.Fatal(err)
		}
		fams = append(fams, f)
	}
	set, err := Compile(fams...)
	if err != nil {
		b.Fatal(err)
	}
	p := combined(b)
	var entries []parser.Entry
	targets := []string{
		"/static/css/app.3f2a1b9c.css", "/static/js/vendor.2df89c15.js", "/images/products/50239.webp",
		"/products/82441-utpara", "/blog/how-we-ship-faster/", "/category/shoes/?page=2", "/",
		"/api/v1/items?page=3&limit=20", "/search?q=blue+running+shoes", "/api/v1/cart", "/favicon.ico",
		"/images/blog/spring-sale.jpg", "/account/", "/login", "/cart", "/static/fonts/inter-var.woff2",
	}
	for i := range 64 {
		line := cleanLine(targets[i%len(targets)])
		if i == 63 {
			line = cleanLine("/.env")
		}
		e, err := p.ParseString(line, i+1)
		if err != nil {
			b.Fatal(err)
		}
		entries = append(entries, e)
	}
	n := 0
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if set.Match(&entries[i&63]) {
			n++
		}
		i++
	}
	if n == 0 {
		b.Fatal(fmt.Sprint("no match among ", i))
	}
}
