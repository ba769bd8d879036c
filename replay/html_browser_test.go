package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"html"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/logjail/logjail/internal/testenv"
	"github.com/logjail/logjail/rules"
)

var screenshot = flag.Bool("screenshot", false, "write docs/replay-report.png from TestHTMLInBrowser's page (review it!)")

// chromium runs Debian's chromium headless with args (a file:// page: no
// network), a profile of its own, and returns what it wrote on stdout. It
// runs in a process group of its own, killed by its id at cleanup, and
// must finish within two minutes.
func chromium(t *testing.T, args ...string) []byte {
	t.Helper()
	bin := testenv.Need(t, "chromium")[0]
	prof := t.TempDir()
	argv := append([]string{"--headless", "--disable-gpu", "--no-sandbox", "--user-data-dir=" + prof,
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-default-apps", "--disable-extensions", "--hide-scrollbars", "--mute-audio"}, args...)
	cmd := exec.Command(bin, argv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = append(os.Environ(), "HOME="+prof)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
		}
	case <-ctx.Done():
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		t.Fatalf("chromium %s did not finish within 2 minutes\n%s", strings.Join(args, " "), stderr.Bytes())
	}
	return out.Bytes()
}

// svgChart is one chart of the dumped DOM: its opening tag and content.
type svgChart struct {
	tag, body string
}

var (
	attrRe = regexp.MustCompile(`([a-zA-Z-]+)="([^"]*)"`)
	svgRe  = regexp.MustCompile(`(?s)<svg ([^>]*)>(.*?)</svg>`)
)

// attrs reads the attributes of a tag of the dumped DOM.
func attrs(tag string) map[string]string {
	m := map[string]string{}
	for _, a := range attrRe.FindAllStringSubmatch(tag, -1) {
		m[a[1]] = html.UnescapeString(a[2])
	}
	return m
}

// elements returns the attributes of every element name of class cls in s.
func elements(s, name, cls string) []map[string]string {
	var out []map[string]string
	for _, tag := range regexp.MustCompile(`<`+name+` [^>]*>`).FindAllString(s, -1) {
		if a := attrs(tag); a["class"] == cls {
			out = append(out, a)
		}
	}
	return out
}

// charts returns the charts of class cls (an SVG element's second class).
func chartsOf(dom, cls string) []svgChart {
	var out []svgChart
	for _, m := range svgRe.FindAllStringSubmatch(dom, -1) {
		if attrs(m[1])["class"] == "chart "+cls {
			out = append(out, svgChart{m[1], m[2]})
		}
	}
	return out
}

// exampleReplay replays the bundled nginx log with the embedded example
// configuration: bans on four rules.
func exampleReplay(t *testing.T) (*Report, *rules.Config) {
	t.Helper()
	cfg, err := rules.Parse("example.yaml", rules.Example(), rules.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rep := replayOne(t, cfg, "../testdata/logs/sample/bots.log.gz", Options{Charts: true})
	if rep.Input.Parsed == 0 || rep.Input.Rejected != 0 {
		t.Fatalf("bots.log.gz: %d parsed, %d rejected", rep.Input.Parsed, rep.Input.Rejected)
	}
	return rep, cfg
}

// TestHTMLInBrowser loads the page of a replay with bans on several rules
// in a real headless chromium, after its script ran, and checks that the
// charts are drawn with as many series, points, bans and bars as the data
// has, and that the numbers shown are the JSON report's.
func TestHTMLInBrowser(t *testing.T) {
	rep, _ := exampleReplay(t)
	page, js := htmlOf(t, rep)
	var want Report
	if err := json.Unmarshal(js, &want); err != nil {
		t.Fatal(err)
	}
	c := chartData(t, page)
	path := filepath.Join(t.TempDir(), "report.html")
	if err := os.WriteFile(path, []byte(page), 0o600); err != nil {
		t.Fatal(err)
	}
	dom := string(chromium(t, "--dump-dom", "file://"+path))
	if !strings.Contains(dom, `<body data-drawn="true">`) {
		t.Fatalf("the script did not finish: %.2000s", dom)
	}

	bans := map[string][]Decision{}
	rulesWithBans := 0
	for _, d := range want.Decisions {
		if d.Kind == "ban" {
			if len(bans[d.Rule]) == 0 {
				rulesWithBans++
			}
			bans[d.Rule] = append(bans[d.Rule], d)
		}
	}
	if rulesWithBans < 3 {
		t.Fatalf("bans on %d rules, want several", rulesWithBans)
	}

	// The timeline: a lane per rule with bans, a mark per ban.
	tl := chartsOf(dom, "timeline-chart")
	if len(tl) != 1 {
		t.Fatalf("%d timelines, want 1", len(tl))
	}
	marks := map[string]int{}
	for _, a := range elements(tl[0].body, "circle", "ban") {
		marks[a["data-rule"]]++
	}
	lanes := regexp.MustCompile(`<text [^>]*class="lane-label"[^>]*>([^<]*)</text>`).FindAllStringSubmatch(tl[0].body, -1)
	if len(lanes) != rulesWithBans {
		t.Errorf("%d lanes, want %d", len(lanes), rulesWithBans)
	}
	for _, l := range lanes {
		a := attrs(l[0])
		n := len(bans[a["data-rule"]])
		word := "bans"
		if n == 1 {
			word = "ban"
		}
		if want := fmt.Sprintf("%s: %d %s", a["data-rule"], n, word); html.UnescapeString(l[1]) != want {
			t.Errorf("lane label %q, want %q", l[1], want)
		}
		if marks[a["data-rule"]] != n {
			t.Errorf("rule %s: %d marks on the timeline, want %d bans", a["data-rule"], marks[a["data-rule"]], n)
		}
	}

	// Per rule: a chart per limit with a line per busiest key, each with
	// a point per value; the requests before each ban; the near misses.
	series := chartsOf(dom, "series-chart")
	before := chartsOf(dom, "before-chart")
	near := chartsOf(dom, "near-chart")
	drawnSeries := 0
	for _, rc := range c.Rules {
		var mine []svgChart
		for _, s := range series {
			if attrs(s.tag)["data-rule"] == rc.Rule {
				mine = append(mine, s)
			}
		}
		if len(mine) != len(rc.Limits) {
			t.Errorf("rule %s: %d series charts, want one per limit (%d)", rc.Rule, len(mine), len(rc.Limits))
			continue
		}
		for li, ch := range mine {
			if got := attrs(ch.tag)["data-limit"]; got != rc.Limits[li].Limit {
				t.Errorf("rule %s chart %d: limit %q, want %q", rc.Rule, li, got, rc.Limits[li].Limit)
			}
			lines := elements(ch.body, "polyline", "series")
			var wantLines []string
			for _, s := range rc.Series {
				n := 0
				for _, p := range s.Points {
					if p[li+1] != nil {
						n++
					}
				}
				if n > 0 {
					wantLines = append(wantLines, fmt.Sprintf("%s %d", s.Key, n))
				}
			}
			var gotLines []string
			for _, l := range lines {
				pairs := len(strings.Fields(l["points"]))
				if strconv.Itoa(pairs) != l["data-points"] {
					t.Errorf("rule %s key %s: %d points drawn, data-points %s", rc.Rule, l["data-key"], pairs, l["data-points"])
				}
				gotLines = append(gotLines, l["data-key"]+" "+l["data-points"])
			}
			if strings.Join(gotLines, "\n") != strings.Join(wantLines, "\n") {
				t.Errorf("rule %s limit %s: lines drawn\n%s\nwant\n%s", rc.Rule, rc.Limits[li].Limit, strings.Join(gotLines, "\n"), strings.Join(wantLines, "\n"))
			}
			if len(elements(ch.body, "line", "limit")) != 1 {
				t.Errorf("rule %s limit %s: no limit line", rc.Rule, rc.Limits[li].Limit)
			}
			drawnSeries += len(lines)
		}

		nAfter := 0
		for _, d := range bans[rc.Rule] {
			if d.After != nil {
				nAfter++
			}
		}
		got := 0
		for _, b := range before {
			if attrs(b.tag)["data-rule"] == rc.Rule {
				got += len(elements(b.body, "circle", "before"))
			}
		}
		if got != nAfter {
			t.Errorf("rule %s: %d requests-before marks, want %d bans", rc.Rule, got, nAfter)
		}

		var bars []string
		for _, n := range near {
			if attrs(n.tag)["data-rule"] == rc.Rule {
				for _, r := range elements(n.body, "rect", "near") {
					bars = append(bars, r["data-key"]+" "+r["data-ratio"])
				}
			}
		}
		var wantBars []string
		for _, n := range rc.Near {
			wantBars = append(wantBars, n.Key+" "+strconv.FormatFloat(n.Ratio, 'g', -1, 64))
		}
		if strings.Join(bars, "\n") != strings.Join(wantBars, "\n") {
			t.Errorf("rule %s: near-miss bars\n%s\nwant\n%s", rc.Rule, strings.Join(bars, "\n"), strings.Join(wantBars, "\n"))
		}
	}
	if drawnSeries < 10 {
		t.Errorf("%d series drawn in all, want the busiest keys of several rules", drawnSeries)
	}

	// The numbers: each rule's row, and the decision table, as in the JSON.
	for _, rr := range want.Rules {
		row := regexp.MustCompile(`<tr class="rule" data-rule="` + regexp.QuoteMeta(rr.Name) + `">.*?</tr>`).FindString(dom)
		for class, n := range map[string]int{"keys": len(rr.Keys), "throttled": rr.Throttled, "banned": rr.Banned, "bans": len(bans[rr.Name])} {
			if !strings.Contains(row, fmt.Sprintf(`<td class="n %s">%d</td>`, class, n)) {
				t.Errorf("rule %s: want %s %d in its row %q", rr.Name, class, n, row)
			}
		}
	}
	rows := regexp.MustCompile(`<tr class="decision" data-kind="([a-z]+)"><td class="n">(\d+)</td><td>([^<]*)</td><td class="k">([^<]*)</td><td class="k">([^<]*)</td><td>([a-z]+)</td>`).FindAllStringSubmatch(dom, -1)
	if len(rows) != len(want.Decisions) {
		t.Fatalf("%d decision rows, want %d", len(rows), len(want.Decisions))
	}
	for i, d := range want.Decisions {
		got := fmt.Sprint(rows[i][2], " ", rows[i][3], " ", rows[i][4], " ", html.UnescapeString(rows[i][5]), " ", rows[i][6])
		if exp := fmt.Sprint(i, " ", d.Time.Format(time.RFC3339), " ", d.Rule, " ", d.Key, " ", d.Kind); got != exp {
			t.Errorf("decision row %d: %q, want %q", i, got, exp)
		}
	}

	// The screenshot: a 1400×2000 PNG of the page (-screenshot: the
	// README's, docs/replay-report.png).
	shot := filepath.Join(t.TempDir(), "report.png")
	if *screenshot {
		shot, _ = filepath.Abs("../docs/replay-report.png")
	}
	chromium(t, "--window-size=1400,2000", "--screenshot="+shot, "file://"+path)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", shot, err)
	}
	if b := img.Bounds(); b.Dx() != 1400 || b.Dy() != 2000 {
		t.Errorf("screenshot %v, want 1400x2000", b)
	}
}

// TestHTMLHostileInBrowser: the page of a replay whose log text is made to
// break out of the page's data runs its own script, and only that.
func TestHTMLHostileInBrowser(t *testing.T) {
	cfg := parseConfig(t, multiConfig)
	rep := replayOne(t, cfg, writeLog(t, hostileLog()), Options{Charts: true})
	page, _ := htmlOf(t, rep)
	path := filepath.Join(t.TempDir(), "report.html")
	if err := os.WriteFile(path, []byte(page), 0o600); err != nil {
		t.Fatal(err)
	}
	dom := string(chromium(t, "--dump-dom", "file://"+path))
	if !strings.Contains(dom, `<body data-drawn="true">`) {
		t.Fatalf("the script did not finish: %.2000s", dom)
	}
	if !strings.Contains(dom, "<title>logjail replay report</title>") || strings.Contains(dom, "pwned</title>") {
		t.Error("the log text set the title: it ran as a script")
	}
	if n := strings.Count(dom, "<script"); n != 3 {
		t.Errorf("%d script elements after the script ran, want 3", n)
	}
	// The hostile key is drawn, as text.
	found := false
	for _, l := range elements(dom, "polyline", "series") {
		if l["data-key"] == "ua:"+hostile {
			found = true
		}
	}
	if !found {
		t.Error("no series of the hostile key drawn")
	}
}
