package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/logjail/logjail/rules"
)

// multiConfig has bans on several rules and limits of three kinds.
const multiConfig = `
sources: [{name: web, paths: [/var/log/access.log], format: combined, timezone: UTC}]
rules:
  - name: flood
    limits: ["5 per 10s", "last 4 within 1s"]
    ban: {for: 1m}
  - name: burst
    match: {status: '^404$'}
    limits: ["2/s burst 5"]
    ban: {for: 1m}
  - name: agents
    key: user_agent
    limits: ["60 per 5m"]
    ban: {for: 1m}
`

// multiLog: the ramp (client K makes K requests in a second), clients
// making 404s, and a steady client that stays below every limit.
func multiLog() []string {
	ls := rampLog()
	for k := 1; k <= 4; k++ {
		for i := 0; i < 3*k; i++ {
			ls = append(ls, line(fmt.Sprintf("198.51.100.%d", k), 300+float64(k)*5+float64(i)/10, 404))
		}
	}
	for i := 0; i < 20; i++ {
		ls = append(ls, line("198.51.100.200", 400+float64(i)*3, 200))
	}
	sortByTime(ls)
	return ls
}

// pageJSON returns the JSON of the page's script element id, and fails t
// unless it is there, once, and ends at its own closing tag.
func pageJSON(t *testing.T, page, id string) []byte {
	t.Helper()
	open := `<script type="application/json" id="` + id + `">`
	if n := strings.Count(page, open); n != 1 {
		t.Fatalf("%d script elements %q, want 1", n, id)
	}
	rest := page[strings.Index(page, open)+len(open):]
	end := strings.Index(rest, "</script>")
	if end < 0 {
		t.Fatalf("script %q is not closed", id)
	}
	return []byte(rest[:end])
}

// sameJSON fails t unless a and b are the same JSON value.
func sameJSON(t *testing.T, what string, a, b []byte) {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if d := cmp.Diff(va, vb); d != "" {
		t.Errorf("%s (-want +got):\n%s", what, d)
	}
}

func htmlOf(t *testing.T, rep *Report) (page string, js []byte) {
	t.Helper()
	var h, j bytes.Buffer
	if err := rep.WriteHTML(&h); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteJSON(&j); err != nil {
		t.Fatal(err)
	}
	return h.String(), j.Bytes()
}

// TestHTMLPage: the page holds the JSON report unchanged, refers to nothing
// outside itself, and its server-rendered tables (what a reader without
// JavaScript sees) give the report's numbers.
func TestHTMLPage(t *testing.T) {
	cfg := parseConfig(t, multiConfig)
	rep := replayOne(t, cfg, writeLog(t, multiLog()), Options{Charts: true})
	page, js := htmlOf(t, rep)

	sameJSON(t, "the page's report vs --output json", js, pageJSON(t, page, "report"))
	if n := strings.Count(page, "<script"); n != 3 {
		t.Errorf("%d script elements, want 3 (the report, the charts, the code)", n)
	}
	// Nothing in this log has "//": the page has none, so it names no
	// resource of any scheme, nor a protocol-relative one.
	if strings.Contains(page, "//") {
		i := strings.Index(page, "//")
		t.Errorf("the page has // at %q", page[max(0, i-40):min(len(page), i+40)])
	}
	for _, re := range []string{`(?i)\s(src|href|action|poster|srcset|xlink:href)\s*=`, `(?i)url\(`, `(?i)@import`, `(?i)<(link|img|iframe|object|embed|base)\b`} {
		if m := regexp.MustCompile(re).FindString(page); m != "" {
			t.Errorf("the page refers to a resource: %q", m)
		}
	}

	// The rules table.
	var want Report
	if err := json.Unmarshal(js, &want); err != nil {
		t.Fatal(err)
	}
	banned := 0
	for _, rr := range want.Rules {
		bans := 0
		for _, d := range want.Decisions {
			if d.Rule == rr.Name && d.Kind == "ban" {
				bans++
			}
		}
		row := regexp.MustCompile(`<tr class="rule" data-rule="` + regexp.QuoteMeta(rr.Name) + `">.*?</tr>`).FindString(page)
		for class, n := range map[string]int{"keys": len(rr.Keys), "throttled": rr.Throttled, "banned": rr.Banned, "bans": bans} {
			if !strings.Contains(row, fmt.Sprintf(`<td class="n %s">%d</td>`, class, n)) {
				t.Errorf("rule %s: want %s %d in its row %q", rr.Name, class, n, row)
			}
		}
		if rr.Banned > 0 {
			banned++
		}
	}
	if banned < 3 {
		t.Fatalf("%d rules banned, want the 3 of the config", banned)
	}
	// The decision table: a row per decision, in order.
	rows := regexp.MustCompile(`<tr class="decision" data-kind="([a-z]+)"><td class="n">(\d+)</td><td>([^<]*)</td><td class="k">([^<]*)</td><td class="k">([^<]*)</td>`).FindAllStringSubmatch(page, -1)
	if len(rows) != len(want.Decisions) {
		t.Fatalf("%d decision rows, want %d", len(rows), len(want.Decisions))
	}
	for i, d := range want.Decisions {
		got := rows[i][1:]
		exp := []string{d.Kind, strconv.Itoa(i), d.Time.Format(time.RFC3339), d.Rule, d.Key}
		if d := cmp.Diff(exp, got); d != "" {
			t.Errorf("decision row %d (-want +got):\n%s", i, d)
		}
	}
}

// chartData reads the page's charts.
func chartData(t *testing.T, page string) chartsJSONIn {
	t.Helper()
	var c chartsJSONIn
	if err := json.Unmarshal(pageJSON(t, page, "charts"), &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// chartsJSONIn is chartsJSON as read back.
type chartsJSONIn struct {
	Collected bool `json:"collected"`
	Rules     []struct {
		Rule   string      `json:"rule"`
		Limits []limitJSON `json:"limits"`
		By     string      `json:"by"`
		Series []struct {
			Key    string       `json:"key"`
			Points [][]*float64 `json:"points"`
		} `json:"series"`
		Near []nearJSON `json:"near"`
	} `json:"rules"`
}

// TestHTMLSeriesPeaks: each busiest key's series, however it was sampled,
// reaches the very peak the JSON report gives for it, never more; a key
// charged thousands of times keeps at most chartPoints points, in time
// order; the near misses are the keys not banned, closest first.
func TestHTMLSeriesPeaks(t *testing.T) {
	ls := multiLog()
	// A steady client below "5 per 10s" for 3000 requests (one every 4
	// s), but for one second of 3 requests in the middle.
	for i := 0; i < 3000; i++ {
		ls = append(ls, line("203.0.113.77", 600+float64(i)*4, 200))
		if i == 1500 {
			for j := 1; j <= 2; j++ {
				ls = append(ls, line("203.0.113.77", 600+float64(i)*4, 200))
			}
		}
	}
	sortByTime(ls)
	cfg := parseConfig(t, multiConfig)
	rep := replayOne(t, cfg, writeLog(t, ls), Options{Charts: true})
	page, js := htmlOf(t, rep)
	var want Report
	if err := json.Unmarshal(js, &want); err != nil {
		t.Fatal(err)
	}
	c := chartData(t, page)
	if !c.Collected || len(c.Rules) != len(cfg.Rules) {
		t.Fatalf("charts: collected %v, %d rules, want %d", c.Collected, len(c.Rules), len(cfg.Rules))
	}
	sawLong := false
	for _, rc := range c.Rules {
		var top *TopList
		for i := range want.Top {
			if want.Top[i].Rule == rc.Rule && want.Top[i].By == rc.By {
				top = &want.Top[i]
			}
		}
		if top == nil || len(rc.Series) != len(top.Keys) {
			t.Fatalf("rule %s: %d series, want one per key of its top list %+v", rc.Rule, len(rc.Series), top)
		}
		for si, s := range rc.Series {
			tk := top.Keys[si]
			if s.Key != tk.Key {
				t.Errorf("rule %s series %d: key %s, want %s", rc.Rule, si, s.Key, tk.Key)
			}
			if len(s.Points) > chartPoints {
				t.Errorf("rule %s key %s: %d points, want at most %d", rc.Rule, s.Key, len(s.Points), chartPoints)
			}
			if len(s.Points) >= chartPoints/2 {
				sawLong = true
			}
			for li, lim := range rc.Limits {
				var got *float64
				for pi, p := range s.Points {
					if pi > 0 && *p[0] < *s.Points[pi-1][0] {
						t.Fatalf("rule %s key %s: point %d goes back in time", rc.Rule, s.Key, pi)
					}
					if v := p[li+1]; v != nil && (got == nil || (lim.Lower && *v < *got) || (!lim.Lower && *v > *got)) {
						got = v
					}
				}
				if peak := tk.Peaks[li].Value; (peak == nil) != (got == nil) || (peak != nil && *peak != *got) {
					t.Errorf("rule %s key %s limit %s: series peak %v, the report's %v", rc.Rule, s.Key, lim.Limit, deref(got), deref(peak))
				}
			}
		}
		// Near misses: not banned, closest first, each ratio its peak's.
		for i, n := range rc.Near {
			if rep.banned(rc.Rule, n.Key) {
				t.Errorf("rule %s: near miss %s was banned", rc.Rule, n.Key)
			}
			if i > 0 && n.Ratio > rc.Near[i-1].Ratio {
				t.Errorf("rule %s: near misses not closest first: %+v", rc.Rule, rc.Near)
			}
		}
	}
	if !sawLong {
		t.Error("no series was long enough to be sampled down")
	}
	// The steady client, flood's busiest key: not banned, a near miss whose
	// ratio is its closest peak's (the report's) to its limit.
	var top TopKey
	for _, tl := range want.Top {
		if tl.Rule == "flood" && tl.By == "requests" {
			top = tl.Keys[0]
		}
	}
	if top.Key != "203.0.113.77" || top.Peaks[0].Value == nil || top.Peaks[1].Value == nil {
		t.Fatalf("flood's busiest key: %+v, want 203.0.113.77 with two peaks", top)
	}
	ratio := round(max(*top.Peaks[0].Value/5, 1 / *top.Peaks[1].Value), 4)
	for _, rc := range c.Rules {
		if rc.Rule != "flood" {
			continue
		}
		found := false
		for _, n := range rc.Near {
			if n.Key == top.Key {
				found = true
				if n.Ratio != ratio || n.Requests != top.Requests {
					t.Errorf("near miss %s: ratio %v after %d requests, want %v after %d", n.Key, n.Ratio, n.Requests, ratio, top.Requests)
				}
			}
		}
		if !found {
			t.Errorf("flood's near misses %+v lack %s", rc.Near, top.Key)
		}
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

// hostile is log text that would end a script element, open a comment,
// or end a JavaScript string if written as it is.
const hostile = `</script><script>document.title='pwned'</script><!-- ` + "\u2028\u2029" + ` </SCRIPT >-->`

// hostileLog has a client with the hostile user agent banned by the
// agents rule, whose key is the user agent.
func hostileLog() []string {
	t := t0
	var ls []string
	for i := 0; i < 70; i++ {
		ls = append(ls, fmt.Sprintf(`198.51.100.9 - - [%s] "GET /%s HTTP/1.1" 404 10 "-" "%s"`,
			t.Add(time.Duration(i)*time.Second).Format("02/Jan/2006:15:04:05 -0700"), strings.ReplaceAll(hostile, " ", "%20"), hostile))
	}
	return ls
}

// TestHTMLHostileLogText: log text cannot leave the data it is in: the
// page still has its three script elements, each JSON one parses to the
// report, and the text shows only escaped in the tables.
func TestHTMLHostileLogText(t *testing.T) {
	cfg := parseConfig(t, multiConfig)
	rep := replayOne(t, cfg, writeLog(t, hostileLog()), Options{Charts: true})
	if !slices.ContainsFunc(rep.Decisions, func(d Decision) bool { return d.Rule == "agents" && strings.Contains(d.Key, "</script>") }) {
		t.Fatalf("want a ban of the hostile user agent, got %+v", rep.Decisions)
	}
	page, js := htmlOf(t, rep)
	sameJSON(t, "the page's report vs --output json", js, pageJSON(t, page, "report"))
	chartData(t, page)
	if n := strings.Count(strings.ToLower(page), "<script"); n != 3 {
		t.Errorf("%d script elements, want 3", n)
	}
	if n := strings.Count(strings.ToLower(page), "</script"); n != 3 {
		t.Errorf("%d script ends, want 3", n)
	}
	for _, bad := range []string{"<!--", "document.title='pwned'</script>"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page holds %q raw", bad)
		}
	}
	// U+2028 and U+2029 end a line of JavaScript: none in the scripts.
	for _, id := range []string{"report", "charts"} {
		if js := pageJSON(t, page, id); bytes.ContainsAny(js, "\u2028\u2029") {
			t.Errorf("the script %q holds U+2028 or U+2029 raw", id)
		}
	}
	if !strings.Contains(page, `<td class="k">ua:&lt;/script&gt;&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;&lt;!--`) {
		t.Error("the decision table does not show the key escaped")
	}
}

// TestHTMLWithoutCharts: a replay without Options.Charts keeps no series,
// and its page says so and still has every table.
func TestHTMLWithoutCharts(t *testing.T) {
	cfg := parseConfig(t, multiConfig)
	rep := replayOne(t, cfg, writeLog(t, multiLog()), Options{})
	if rep.charts != nil {
		t.Fatal("charts kept without Options.Charts")
	}
	page, js := htmlOf(t, rep)
	sameJSON(t, "report", js, pageJSON(t, page, "report"))
	if c := chartData(t, page); c.Collected || len(c.Rules) != 0 {
		t.Errorf("charts %+v, want none collected", c)
	}
	if n := strings.Count(page, `<tr class="decision"`); n != len(rep.Decisions) {
		t.Errorf("%d decision rows, want %d", n, len(rep.Decisions))
	}
}

// BenchmarkReplayCharts is BenchmarkReplay's db=none with Options.Charts,
// as `replay --html` runs: the price of the series over a plain replay.
func BenchmarkReplayCharts(b *testing.B) {
	const lines = 200000
	log, _ := genlog(b, lines, 7)
	cfg, err := rules.Load("../testdata/genlog.yaml", rules.Options{})
	if err != nil {
		b.Fatal(err)
	}
	fi, err := os.Stat(log)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(fi.Size())
	b.ReportAllocs()
	for b.Loop() {
		rep, err := Run(context.Background(), cfg, []Input{{Name: log, Source: cfg.Sources[0]}}, Options{Charts: true})
		if err != nil {
			b.Fatal(err)
		}
		if err := rep.WriteHTML(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
	perLine := float64(b.Elapsed().Nanoseconds()) / float64(b.N) / lines
	b.ReportMetric(perLine, "ns/line")
	b.ReportMetric(1e9/perLine, "lines/s")
}
