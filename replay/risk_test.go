package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/logjail/logjail/parser"
)

// req is one combined-format line: ip asks for path at t0+sec and is
// answered status; ua is its user agent.
func req(ip string, sec float64, path string, status int, ua string) string {
	t := t0.Add(time.Duration(sec * float64(time.Second)))
	return fmt.Sprintf(`%s - - [%s] "GET %s HTTP/1.1" %d 512 "-" "%s"`, ip, t.Format("02/Jan/2006:15:04:05 -0700"), path, status, ua)
}

const browserUA = "Mozilla/5.0 (X11; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0"

// agentKind stands in for goodbots.Agent in these tests: two agents it
// knows, by a word of their user agent.
func agentKind(ua string) (string, string) {
	switch {
	case strings.Contains(ua, "UptimeRobot"):
		return "UptimeRobot", "monitor"
	case strings.Contains(ua, "Googlebot"):
		return "Googlebot", "crawler"
	}
	return "", ""
}

// tightConfig bans a client at its 21st request within 5 s: tight enough
// to ban a browser loading a heavy page, as the admin was.
const tightConfig = `
sources: [{name: web, paths: [/var/log/access.log], format: combined, timezone: UTC}]
rules:
  - name: flood
    limits: ["20 per 5s"]
    ban: {for: 1m}
`

// riskyLog: four clients each send 40 requests in 4 s, ten a second, and
// each is banned at its 21st, 2 s after its first (the log's times are
// whole seconds):
//   - 203.0.113.10, a browser loading a heavy page: the page, then style
//     sheets, scripts, images and fonts, answered 200 or 304;
//   - 203.0.113.20, a flood of 404s at the same rate;
//   - 203.0.113.30, a flood of 200s on pages (a scraper): not static;
//   - 198.51.100.5, an uptime monitor hammering /health.
//
// 198.51.100.9 browses quietly meanwhile and is not banned.
func riskyLog() []string {
	statics := []string{"/static/app.css", "/static/app.js", "/static/vendor.js", "/img/logo.svg", "/img/hero.webp", "/fonts/inter.woff2", "/favicon.ico"}
	var ls []string
	for i := 0; i < 40; i++ {
		s := float64(i) * 0.1
		browser, bstatus := "/admin/", 200
		if i > 0 {
			browser = statics[i%len(statics)]
			if i%3 == 0 {
				bstatus = 304
			}
		}
		ls = append(ls,
			req("203.0.113.10", 10+s, browser, bstatus, browserUA),
			req("203.0.113.20", 20+s, fmt.Sprintf("/wp-content/plugins/p%d/readme.txt", i), 404, "Mozilla/5.0"),
			req("203.0.113.30", 30+s, fmt.Sprintf("/product?id=%d", i), 200, "python-requests/2.31.0"),
			req("198.51.100.5", 40+s, "/health", 200, "Mozilla/5.0+(compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)"),
		)
	}
	for i := 0; i < 10; i++ {
		ls = append(ls, req("198.51.100.9", float64(i)*5, "/blog/", 200, browserUA))
	}
	return sortLines(ls)
}

// sortLines orders lines by their time (the tests' lines are made per
// client), stably.
func sortLines(ls []string) []string {
	type tl struct {
		t time.Time
		l string
	}
	ts := make([]tl, len(ls))
	for i, l := range ls {
		a, b := strings.IndexByte(l, '['), strings.IndexByte(l, ']')
		t, err := time.Parse("02/Jan/2006:15:04:05 -0700", l[a+1:b])
		if err != nil {
			panic(err)
		}
		ts[i] = tl{t, l}
	}
	for i := 1; i < len(ts); i++ { // insertion sort: stable, and the lines are nearly sorted
		for j := i; j > 0 && ts[j].t.Before(ts[j-1].t); j-- {
			ts[j], ts[j-1] = ts[j-1], ts[j]
		}
	}
	out := make([]string, len(ts))
	for i := range ts {
		out[i] = ts[i].l
	}
	return out
}

// TestRiskyBans: of four clients banned at the same rate by a tight rate
// rule, the browser loading a heavy page (mostly static, 200 and 304) is
// flagged burst and the uptime monitor monitor; the flood of 404s and the
// scraper's flood of 200s on pages are not flagged. The text report lists
// the two first, in RISKY BANS right after the summary, with their rule.
func TestRiskyBans(t *testing.T) {
	cfg := parseConfig(t, tightConfig)
	rep := replayOne(t, cfg, writeLog(t, riskyLog()), Options{AgentKind: agentKind})
	kinds := map[string]string{}
	for _, d := range rep.Decisions {
		if d.Kind != "ban" {
			continue
		}
		if d.After == nil || d.After.Requests != 21 {
			t.Errorf("ban of %s after %+v, want after 21 requests", d.Key, d.After)
		}
		kinds[d.Key] = riskKinds(d.Risks)
	}
	want := map[string]string{"203.0.113.10": "burst", "203.0.113.20": "-", "203.0.113.30": "-", "198.51.100.5": "monitor"}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("risks of the bans (-want +got):\n%s", diff)
	}
	if len(rep.Risky) != 2 || rep.Risky[0].Key != "203.0.113.10" || rep.Risky[1].Key != "198.51.100.5" {
		t.Fatalf("risky bans %+v, want the browser's, then the monitor's", rep.Risky)
	}
	b := rep.Risky[0]
	if want := "100% 2xx/304, 96% static of its last 30 requests in 2s"; b.Risks[0].Detail != want || b.Rule != "flood" || b.UserAgent != browserUA {
		t.Errorf("burst %+v, want rule flood, detail %q, the browser's user agent", b, want)
	}
	if m := rep.Risky[1].Risks[0]; m.Detail != "UptimeRobot" {
		t.Errorf("monitor risk %+v, want UptimeRobot", m)
	}

	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	risky, rule := strings.Index(out, "RISKY BANS (2 bans"), strings.Index(out, "\nrule flood")
	if risky < 0 || rule < risky || strings.Index(out, "COSTLIEST KEYS") > risky {
		t.Fatalf("RISKY BANS is not between the summary and the rules:\n%s", out)
	}
	section := out[risky:rule]
	for _, want := range []string{
		"flood  203.0.113.10  2026-11-02T10:00:12Z  21 req / 2s  burst: 100% 2xx/304",
		"flood  198.51.100.5  2026-11-02T10:00:42Z  21 req / 2s  monitor: UptimeRobot",
	} {
		if !strings.Contains(section, want) {
			t.Errorf("RISKY BANS lacks %q:\n%s", want, section)
		}
	}
	if strings.Contains(section, "203.0.113.20") || strings.Contains(section, "203.0.113.30") {
		t.Errorf("RISKY BANS lists a flood:\n%s", section)
	}
	if !strings.Contains(out, "rule flood: 0 keys throttled, 4 keys banned, median 21 requests before a ban") {
		t.Errorf("no median in the rule's line:\n%s", out)
	}

	// Without AgentKind, the monitor is not recognised; the burst still is.
	rep = replayOne(t, cfg, writeLog(t, riskyLog()), Options{})
	if len(rep.Risky) != 1 || rep.Risky[0].Risks[0].Kind != "burst" {
		t.Errorf("risky bans without AgentKind %+v, want the burst alone", rep.Risky)
	}
}

// TestAfterExact: a client asks for a page (200), then probes: the probe
// rule charges its 404s only and bans it at its 7th, 3 s after its first
// request. Another client's requests in between count for nothing.
func TestAfterExact(t *testing.T) {
	cfg := parseConfig(t, `
sources: [{name: web, paths: [/var/log/access.log], format: combined, timezone: UTC}]
good_bots: {verify: off}
rules:
  - name: probe
    match: {status: '^404$'}
    limits: ["6 per 1m"]
    ban: {for: 1h}
`)
	ls := []string{req("203.0.113.7", 0, "/", 200, browserUA)}
	for i, s := range []float64{0.5, 1, 1.5, 2, 2.5, 2.75, 3, 4.5} {
		ls = append(ls, req("203.0.113.7", s, fmt.Sprintf("/.env.%d", i), 404, "curl/8.5.0"))
		ls = append(ls, req("198.51.100.8", s, "/blog/", 200, browserUA))
	}
	rep := replayOne(t, cfg, writeLog(t, sortLines(ls)), Options{})
	var bans []Decision
	for _, d := range rep.Decisions {
		if d.Kind == "ban" {
			bans = append(bans, d)
		}
	}
	if len(bans) != 1 {
		t.Fatalf("bans %+v, want one", bans)
	}
	want := &After{Requests: 7, Seen: 8, Seconds: 3}
	if diff := cmp.Diff(want, bans[0].After); diff != "" || !bans[0].Time.Equal(t0.Add(3*time.Second)) {
		t.Errorf("ban at %v after (-want +got):\n%s", bans[0].Time, diff)
	}
	if got := fmtAfter(bans[0].After); got != "7 req / 3s" {
		t.Errorf("AFTER %q, want 7 req / 3s", got)
	}
	rr := rep.Rules[0]
	if rr.MedianRequests == nil || *rr.MedianRequests != 7 || len(rr.Keys) != 1 || rr.Keys[0].Bans[0].After.Requests != 7 {
		t.Errorf("rule report %+v, want one key banned after 7 requests, median 7", rr)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "  203.0.113.7  2026-11-02T10:00:03Z  0          1     7 req / 3s  2026-11-02T10:00:03Z until 2026-11-02T11:00:03Z  -     rate 7 per 1m > 6 (rule probe)") {
		t.Errorf("the ban table lacks the key's AFTER:\n%s", text.String())
	}
	if !strings.Contains(text.String(), "RISKY BANS: none") {
		t.Errorf("no RISKY BANS: none:\n%s", text.String())
	}

	// The JSON report: the decision's after, the rule's median, no risky
	// ban.
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Decisions []struct {
			Kind  string `json:"kind"`
			After *After `json:"after"`
		} `json:"decisions"`
		Rules []struct {
			Median *int64 `json:"median_requests_before_ban"`
		} `json:"rules"`
		Risky []json.RawMessage `json:"risky"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Decisions) == 0 || !cmp.Equal(doc.Decisions[0].After, want) || !strings.Contains(js.String(), `"after": {
        "requests": 7,
        "seen": 8,
        "seconds": 3
      }`) {
		t.Errorf("JSON decisions %+v, want the ban after 7 requests, 8 seen, 3 s", doc.Decisions)
	}
	if len(doc.Rules) != 1 || doc.Rules[0].Median == nil || *doc.Rules[0].Median != 7 || doc.Risky == nil || len(doc.Risky) != 0 {
		t.Errorf("JSON rules %+v risky %v, want median 7 and an empty risky list", doc.Rules, doc.Risky)
	}
}

// TestRangeAndCrawlerBans: a ban of a whole range key is flagged range,
// and a ban of a request whose user agent is a known crawler crawler.
func TestRangeAndCrawlerBans(t *testing.T) {
	cfg := parseConfig(t, `
sources: [{name: web, paths: [/var/log/access.log], format: combined, timezone: UTC}]
ranges:
  crawler:
    cidrs: [198.51.100.64/26]
    group: true
    limits: ["10 per 10s"]
    ban: {for: 5m}
rules:
  - name: flood
    limits: ["10 per 10s"]
    ban: {for: 5m}
`)
	var ls []string
	for i := 0; i < 12; i++ {
		s := float64(i) * 0.5
		ls = append(ls, req(fmt.Sprintf("198.51.100.%d", 64+i), s, fmt.Sprintf("/p/%d", i), 200, "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"))
	}
	rep := replayOne(t, cfg, writeLog(t, ls), Options{AgentKind: agentKind})
	if len(rep.Risky) != 1 {
		t.Fatalf("risky bans %+v, want the range's", rep.Risky)
	}
	b := rep.Risky[0]
	want := []Risk{{Kind: "crawler", Detail: "Googlebot"}, {Kind: "range", Detail: "every address of range crawler"}}
	if diff := cmp.Diff(want, b.Risks); diff != "" || b.Key != "range:crawler" || b.Rule != "range:crawler" {
		t.Errorf("risky ban %+v (-want +got):\n%s", b, diff)
	}
	// Eleven addresses of the range, one request each, 0.5 s apart: the
	// range's visit is theirs summed, from the first.
	if want := (&After{Requests: 11, Seen: 11, Seconds: 5}); !cmp.Equal(want, b.After) {
		t.Errorf("after %+v, want %+v", b.After, want)
	}
}

// TestRecentVisit: the ring of recent requests is bounded (recentLines
// records whatever the number of clients); a client's visit counts its
// requests from its first, and starts again once its previous request
// has left the ring.
func TestRecentVisit(t *testing.T) {
	r := newRecent()
	e := func(ip string, sec int64) *parser.Entry {
		return &parser.Entry{IP: netip.MustParseAddr(ip), Time: t0.Add(time.Duration(sec) * time.Second), Status: 200, Has: parser.HasStatus}
	}
	a := "203.0.113.7"
	r.add(e(a, 0))
	r.add(e(a, 5))
	if rc := r.latest(netip.MustParseAddr(a)); rc == nil || rc.seen != 2 || rc.first != t0.UnixNano() {
		t.Fatalf("visit %+v, want 2 requests from t0", rc)
	}
	// recentLines other requests, from as many clients (2001:db8::/96):
	// the client's requests leave the ring; memory stays as it was.
	for i := range recentLines {
		var b [16]byte
		copy(b[:], netip.MustParseAddr("2001:db8::").AsSlice())
		b[12], b[13], b[14], b[15] = byte(i>>24), byte(i>>16), byte(i>>8), byte(i)
		r.add(&parser.Entry{IP: netip.AddrFrom16(b), Time: t0.Add(10 * time.Second)})
	}
	if len(r.recs) != recentLines || len(r.heads) != recentBucket {
		t.Errorf("ring of %d records, %d heads: it grew", len(r.recs), len(r.heads))
	}
	if rc := r.latest(netip.MustParseAddr(a)); rc != nil {
		t.Errorf("the client is still in the ring: %+v", rc)
	}
	r.add(e(a, 20))
	if rc := r.latest(netip.MustParseAddr(a)); rc == nil || rc.seen != 1 || rc.first != t0.Add(20*time.Second).UnixNano() {
		t.Errorf("visit %+v, want a new one from t0+20s", rc)
	}
}

func TestIsStatic(t *testing.T) {
	for path, want := range map[string]bool{
		"/static/app.3f2a.css": true, "/img/Logo.PNG": true, "/fonts/inter.woff2": true, "/favicon.ico": true,
		"/": false, "/index.php": false, "/api/v1/items": false, "/.env": false, "/v1.2/items": false, "/a.css/x": false,
	} {
		if got := isStatic(path); got != want {
			t.Errorf("isStatic(%q) = %v, want %v", path, got, want)
		}
	}
}

// isStaticScan is isStatic as it was before it read only the path's end:
// the last '.' and the last '/' of the whole path.
func isStaticScan(path string) bool {
	dot := strings.LastIndexByte(path, '.')
	if dot < 0 || dot < strings.LastIndexByte(path, '/') || len(path)-dot > 6 {
		return false
	}
	return staticExt(path[dot+1:])
}

// TestIsStaticAsScan checks isStatic, which reads only the path's last 6
// bytes, against the scan of the whole path: every extension of the list in
// mixed case, after dots and slashes, and random paths over the bytes that
// matter.
func TestIsStaticAsScan(t *testing.T) {
	// staticKeys: each extension in a slot of its own, found by its key.
	n := 0
	for _, k := range staticKeys {
		if k != 0 {
			n++
		}
	}
	if n != len(staticExts) {
		t.Fatalf("staticKeys holds %d keys, want the %d extensions: staticMul puts two in one slot", n, len(staticExts))
	}
	var paths []string
	for _, ext := range []string{"css", "JS", "mjs", "map", "Png", "jpg", "jpeg", "gif", "webp", "avif", "svg", "ico", "bmp",
		"woff", "WOFF2", "ttf", "otf", "eot", "mp4", "webm", "mp3", "ogg", "wav", "php", "html", "", "c", "cssx", "woff22"} {
		for _, pre := range []string{"", "/", "/a", "/a.b/c", "/x.css/", ".", "/a/.", "/v1.2/", "/static/js/app.85b71280", "/products/24443-qumonsel/", "/x\x12y\xc3z/abc"} {
			paths = append(paths, pre+"."+ext, pre+ext, pre+"."+ext+"/", pre+"."+ext+"?", pre+".."+ext)
		}
	}
	rnd := rand.New(rand.NewPCG(23, 7))
	const alphabet = "./aAcCsSjJgGpPfF2@[Zz\x12\xc3wWoOmM34"
	for range 400000 {
		b := make([]byte, rnd.IntN(20))
		for i := range b {
			b[i] = alphabet[rnd.IntN(len(alphabet))]
		}
		paths = append(paths, string(b))
	}
	for _, p := range paths {
		if got, want := isStatic(p), isStaticScan(p); got != want {
			t.Errorf("isStatic(%q) = %v, the whole scan says %v", p, got, want)
		}
	}
}

// probeConfig charges a client's 404s only.
const probeConfig = `
sources: [{name: web, paths: [/var/log/access.log], format: combined, timezone: UTC}]
rules:
  - name: probe
    match: {status: '^404$'}
    limits: ["6 per 1m"]
    ban: {for: 1h}
`

// TestExplanationsOrderFree: the same log split into two files, line by
// line, explains its bans as the whole file does, whatever the order of
// the files, though the lines of one second interleave differently (a ban
// is explained once the log has passed its second). In the probe log, the
// client's 200s (not charged) and 404s alternate within the second of its
// ban.
func TestExplanationsOrderFree(t *testing.T) {
	var probe []string
	for _, s := range []float64{0, 1, 1.5, 2} {
		probe = append(probe, req("203.0.113.7", s, "/.git/config", 404, "curl/8.5.0"))
	}
	for i := range 8 {
		status := 200
		if i%2 == 1 {
			status = 404
		}
		probe = append(probe, req("203.0.113.7", 3, fmt.Sprintf("/p%d", i), status, "curl/8.5.0"))
	}
	probe = append(probe, req("198.51.100.8", 9, "/", 200, browserUA))
	for _, tc := range []struct {
		name, config string
		log          []string
		bans         int
	}{
		{"risky", tightConfig, riskyLog(), 4},
		{"probe", probeConfig, probe, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := parseConfig(t, tc.config)
			var a, b []string
			for i, l := range tc.log {
				if i%2 == 0 {
					a = append(a, l)
				} else {
					b = append(b, l)
				}
			}
			explain := func(rep *Report) []string {
				var out []string
				for _, d := range rep.Decisions {
					if d.Kind == "ban" {
						out = append(out, fmt.Sprintf("%s %s %+v %v", d.Key, d.Time.Format(time.RFC3339), *d.After, d.Risks))
					}
				}
				slices.Sort(out)
				return out
			}
			whole := explain(replayOne(t, cfg, writeLog(t, tc.log), Options{AgentKind: agentKind}))
			if len(whole) != tc.bans {
				t.Fatalf("bans %v, want %d", whole, tc.bans)
			}
			dir := t.TempDir()
			fa, fb := dir+"/a.log", dir+"/b.log"
			for name, lines := range map[string][]string{fa: a, fb: b} {
				if err := os.WriteFile(name, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			for _, order := range [][]string{{fa, fb}, {fb, fa}} {
				var inputs []Input
				for _, n := range order {
					inputs = append(inputs, Input{Name: n, Source: cfg.Sources[0]})
				}
				rep, err := Run(context.Background(), cfg, inputs, Options{AgentKind: agentKind})
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(whole, explain(rep)); diff != "" {
					t.Errorf("files %v explain differently from the whole file (-want +got):\n%s", order, diff)
				}
			}
		})
	}
}
