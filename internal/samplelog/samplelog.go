// Package samplelog writes the bundled PHP-FPM sample log
// (testdata/logs/sample/shop.fpm.log): six hours of a small PHP shop's
// traffic, in the `phpfpm` preset format (PHP-FPM's access.format with
// %d and %C, so that every line carries its CPU seconds), with three
// abusers whose behaviour is known:
//
//   - 203.0.113.50 asks for /export.php every 5 s or so for 20 minutes;
//     each export costs about 1.5 s of CPU, some 30% of a core. Its request
//     rate (12 a minute) is far under any flood limit: only a CPU-weighted
//     rule (`25% cpu over 1m`) catches it.
//   - 198.51.100.23 floods /search.php at 25 requests a second for a
//     minute: the rate rule catches it.
//   - 2001:db8:bad::7 scans for admin pages (404s), 4 a second.
//
// The rest are 60 ordinary clients (addresses of 198.51.100.0/24,
// 203.0.113.0/24 and 2001:db8::/32, documentation ranges) browsing in short
// visits with cheap pages. The time span, 2022-09-05 06:00 to 12:00 UTC,
// falls inside the other sample (bots.log.gz), so the two replay as one
// log.
//
// The output is deterministic (a fixed PCG seed, no clock, no map order):
// TestGolden regenerates it and compares it with the committed file
// (`go test ./internal/samplelog -update` rewrites it).
//
// Boundaries: It imports nothing of logjail's and reads no clock; it only
// writes the log it is asked for.
package samplelog

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"sort"
	"time"
)

// Start and End bound the sample's time.
var (
	Start = time.Date(2022, 9, 5, 6, 0, 0, 0, time.UTC)
	End   = Start.Add(6 * time.Hour)
)

// The known abusers.
const (
	CPUHog  = "203.0.113.50"
	Flooder = "198.51.100.23"
	Scanner = "2001:db8:bad::7"
)

// line is one request before it is written.
type line struct {
	t      time.Time
	ip     string
	method string
	path   string
	query  string
	status int
	script string
	ms     float64 // duration, milliseconds
	kb     int     // memory, KiB
	cpuPct float64 // CPU share of the duration, percent
}

// Write writes the sample log to w.
func Write(w io.Writer) error {
	r := rand.New(rand.NewPCG(17, 2022))
	var ls []line
	pages := []struct {
		path, query string
		ms          float64
	}{
		{"/index.php", "", 25}, {"/product.php", "id=", 40}, {"/category.php", "c=", 35},
		{"/cart.php", "", 30}, {"/search.php", "q=", 60}, {"/account.php", "", 45},
	}
	page := func(t time.Time, ip string) line {
		p := pages[r.IntN(len(pages))]
		q := p.query
		if q != "" {
			q += fmt.Sprint(1 + r.IntN(500))
		}
		ms := p.ms * (0.5 + r.Float64())
		return line{t: t, ip: ip, method: "GET", path: p.path, query: q, status: 200,
			script: "/var/www/shop" + p.path, ms: ms, kb: 2048 + 512*r.IntN(4), cpuPct: 40 + 50*r.Float64()}
	}

	// Ordinary clients: visits of 3 to 15 pages, 2 to 20 s apart.
	for i := range 60 {
		var ip string
		switch i % 3 {
		case 0:
			ip = fmt.Sprintf("198.51.100.%d", 100+i)
		case 1:
			ip = fmt.Sprintf("203.0.113.%d", 100+i)
		default:
			ip = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, byte(i), 14: byte(i), 15: 1}).String()
		}
		for range 2 + r.IntN(5) {
			t := Start.Add(time.Duration(r.Int64N(int64(End.Sub(Start) - 10*time.Minute))))
			for range 3 + r.IntN(13) {
				ls = append(ls, page(t, ip))
				t = t.Add(time.Duration(2000+r.IntN(18000)) * time.Millisecond)
			}
		}
	}
	// The CPU hog: an export every 4 to 6 s for 20 minutes, each ~1.5 s of CPU.
	t := Start.Add(90 * time.Minute)
	for range 240 {
		ls = append(ls, line{t: t, ip: CPUHog, method: "GET", path: "/export.php", query: "format=csv&all=1", status: 200,
			script: "/var/www/shop/export.php", ms: 1550 + 200*r.Float64(), kb: 65536, cpuPct: 92 + 6*r.Float64()})
		t = t.Add(time.Duration(4000+r.IntN(2000)) * time.Millisecond)
	}
	// The flooder: 25 searches a second for a minute.
	t = Start.Add(3 * time.Hour)
	for i := range 25 * 60 {
		ls = append(ls, line{t: t.Add(time.Duration(i) * 40 * time.Millisecond), ip: Flooder, method: "GET", path: "/search.php",
			query: fmt.Sprintf("q=%d", r.IntN(100000)), status: 200, script: "/var/www/shop/search.php", ms: 5 + 5*r.Float64(), kb: 2048, cpuPct: 60 + 30*r.Float64()})
	}
	// The scanner: 4 probes a second for 30 s, all 404.
	probes := []string{"/wp-login.php", "/admin.php", "/phpmyadmin/index.php", "/xmlrpc.php", "/.env.php", "/config.php"}
	t = Start.Add(4*time.Hour + 30*time.Minute)
	for i := range 4 * 30 {
		p := probes[i%len(probes)]
		ls = append(ls, line{t: t.Add(time.Duration(i) * 250 * time.Millisecond), ip: Scanner, method: "GET", path: p,
			status: 404, script: "-", ms: 1 + r.Float64(), kb: 512, cpuPct: 0})
	}

	sort.SliceStable(ls, func(i, j int) bool { return ls[i].t.Before(ls[j].t) })
	bw := bufio.NewWriter(w)
	for _, l := range ls {
		q := ""
		if l.query != "" {
			q = "?" + l.query
		}
		// %R - %u %t "%m %r%Q%q" %s %f %{mili}d %{kilo}M %C%%, as PHP-FPM
		// writes it (an empty %u, so two spaces before the time).
		fmt.Fprintf(bw, "%s -  %s \"%s %s%s\" %d %s %.3f %d %.2f%%\n", l.ip, l.t.Format("02/Jan/2006:15:04:05 -0700"),
			l.method, l.path, q, l.status, l.script, l.ms, l.kb, l.cpuPct)
	}
	return bw.Flush()
}
