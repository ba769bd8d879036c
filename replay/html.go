package replay

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
