package replay

// # The HTML report
//
// WriteHTML writes one self-contained page (`logjail replay --html FILE`):
// its style, its script and its data are inline, and it refers to nothing
// outside itself (no link, no image, no font, no network), so it opens
// offline from a file and can be mailed. The page is rendered from the same
// Report as --output json: the report's JSON is in the page as data (the
// script element "report", JSON with <, >, &, U+2028 and U+2029 escaped, so
// that no log text can end the element or start a comment), beside the
// charts' own data (the script element "charts", charts.go). The script
// reads both with JSON.parse and draws SVG charts with
// createElementNS and textContent only: log text never goes through
// innerHTML. Without JavaScript, the tables (rendered by html/template)
// still show every number.
//
// The page shows, per rule: each limit's chart of the busiest keys' window
// values at their charges against the limit's line (the rule's top list by
// requests, or by CPU for a rule that weighs only CPU or duration, at most
// Options.Top keys), the requests before each ban, and the keys closest to
// the limits that the rule did not ban; then a timeline of every ban, and
// the decision table with reasons (sortable by any column).
//
// Decisions left silent elsewhere:
//   - Series are collected only with Options.Charts (the replay pays
//     nothing otherwise): each rule keeps the series of its 64 heaviest
//     keys by a space-saving count (charts.go), so a key with more than a
//     64th of the rule's requests is always among them; a key that entered
//     the 64 late has its series from then on. A series holds at most 500
//     points: past that, neighbouring points merge into the severer value
//     of each limit, so that the peak the JSON report gives survives.
//     Requests blocked while a key is banned are no charge and no point.
//   - A near miss is a key the rule tracked and did not ban (throttled
//     ones included), ranked by its peak's ratio to the nearest limit (1
//     at the limit; for last N, the window over the shortest span); the
//     ten closest per rule. A limit with a zero threshold ("0 per 1d")
//     bans at the first charge and gives no near miss.
//   - The page's tables are bounded, the JSON in the page never is: the
//     decision table lists the first 10,000 decisions, each rule's ban
//     table its first 1,000 bans (a note says how many more); the charts
//     draw every ban.

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"html/template"
	"io"
	"time"

	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/parser"
)

//go:embed html/report.tmpl
var htmlTemplate string

//go:embed html/report.js
var htmlScript string

//go:embed html/report.css
var htmlStyle string

// The page's bounds on its tables (the JSON in it is whole).
const (
	htmlDecisions = 10000
	htmlBans      = 1000
)

// htmlPage is what the template renders.
type htmlPage struct {
	Report        *Report
	ReportJSON    template.JS // escaped for a script element (scriptJSON)
	ChartsJSON    template.JS
	CSS           template.CSS
	JS            template.JS
	Rules         []htmlRule
	Decisions     []Decision
	MoreDecisions int
}

// htmlRule is one rule's part of the page.
type htmlRule struct {
	Name                    string
	LogOnly                 bool
	Keys, Throttled, Banned int
	Bans                    int // ban decisions, static ones included
	Median                  *int64
	Limits                  []limitJSON
	BanRows                 []Decision
	MoreBans                int
	Near                    []nearJSON
}

// WriteHTML writes the report as one self-contained HTML page with charts
// (see "The HTML report" in html.go). The series it draws over time are
// those the replay kept with Options.Charts; without them the page has
// the tables, the timeline and the requests before each ban.
func (r *Report) WriteHTML(w io.Writer) error {
	tmpl, err := template.New("report").Funcs(template.FuncMap{
		"stamp":     func(t time.Time) string { return t.Format(time.RFC3339) },
		"printable": parser.Printable,
	}).Parse(htmlTemplate)
	if err != nil {
		return err
	}
	rj, err := scriptJSON(r)
	if err != nil {
		return err
	}
	cj := r.charts.json(r)
	cjs, err := scriptJSON(cj)
	if err != nil {
		return err
	}
	page := htmlPage{Report: r, ReportJSON: template.JS(rj), ChartsJSON: template.JS(cjs),
		CSS: template.CSS(htmlStyle), JS: template.JS(htmlScript)}
	page.Decisions = r.Decisions[:min(len(r.Decisions), htmlDecisions)]
	page.MoreDecisions = len(r.Decisions) - len(page.Decisions)
	near := map[string]ruleChartJSON{}
	for _, rc := range cj.Rules {
		near[rc.Rule] = rc
	}
	for _, rr := range r.Rules {
		hr := htmlRule{Name: rr.Name, LogOnly: rr.LogOnly, Keys: len(rr.Keys), Throttled: rr.Throttled, Banned: rr.Banned,
			Median: rr.MedianRequests, Limits: near[rr.Name].Limits, Near: near[rr.Name].Near}
		for _, d := range r.Decisions {
			if d.Rule != rr.Name || d.Kind != string(detector.Ban) {
				continue
			}
			hr.Bans++
			if len(hr.BanRows) < htmlBans {
				hr.BanRows = append(hr.BanRows, d)
			} else {
				hr.MoreBans++
			}
		}
		page.Rules = append(page.Rules, hr)
	}
	var b bytes.Buffer
	if err := tmpl.Execute(&b, &page); err != nil {
		return err
	}
	_, err = w.Write(b.Bytes())
	return err
}

// scriptJSON is v's JSON for a script element: encoding/json escapes <, >
// and & (so no "</script" or "<!--" can appear), and U+2028 and U+2029.
func scriptJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return bytes.TrimSpace(b), nil
}
