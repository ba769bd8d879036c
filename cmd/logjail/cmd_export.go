package main

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/logjail/logjail/control"
	"github.com/spf13/cobra"
)

type exportOptions struct {
	cfg    configFlag
	format string
	rule   string
}

// exportFormats are export's -o formats, and import's besides auto.
var exportFormats = []string{"json", "csv", "plain", "crowdsec"}

// crowdsecOrigin is the origin of logjail's decisions in the crowdsec
// format, and crowdsecForever the duration of a ban with no end (the deny
// list): the longest an operator may give (control.ParseFor).
const (
	crowdsecOrigin  = "logjail"
	crowdsecForever = 100 * 365 * 24 * time.Hour
)

func newExportCmd(s streams) *cobra.Command {
	var o exportOptions
	cmd := &cobra.Command{
		Use:   "export [-o json|csv|plain|crowdsec] [--rule R]",
		Short: "Write the active bans as JSON, CSV, a plain list or CrowdSec decisions",
		Long: `export writes the active bans, as 'logjail list' reads them (from the
database, with or without a running daemon), to stdout; 'logjail import'
reads each format back. Throttles and log-only bans (which block nothing)
are left out; --rule keeps one rule's.

  -o json      the document of 'list --output json' (docs/control.md)
  -o csv       a header, then rule,key,kind,since,until,reason,origin; times
               in RFC 3339, UTC; until empty for a ban until lifted
  -o plain     one address or CIDR a line (a prefix key as its CIDR), each
               once; keys that are no address (user:, ua:, range:,
               ADDRESS|ua:) are left out, with a count on stderr
  -o crowdsec  what 'cscli decisions list -o json' writes: an array of
               alerts, one a ban, each with one decision:
                 decision.value     the address or CIDR
                 decision.scope     Ip (an address) or Range (a CIDR)
                 decision.type      ban
                 decision.duration  the time left, a Go duration (4h0m0s);
                                    876000h0m0s (100 years) for a ban
                                    until lifted
                 decision.until     the end, RFC 3339, UTC
                 decision.origin    logjail
                 decision.scenario  the rule (alert.scenario too)
                 alert.message      the reason
                 alert.source       scope, value, ip or range
                 alert.start_at, stop_at, created_at: since
               keys that are no address are left out, as for plain.
               ('cscli decisions import --format json' takes a flat array
               of decisions: jq '[.[].decisions[] | {value, scope, type,
               duration, reason: .scenario}]' makes one.)

` + operatorExits,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !oneOf(o.format, exportFormats) {
				return usageError(fmt.Errorf("--output %q: want json, csv, plain or crowdsec", o.format))
			}
			return runExport(&o, s, time.Now())
		},
	}
	o.cfg.addFlag(cmd)
	f := cmd.Flags()
	f.StringVarP(&o.format, "output", "o", "json", "json, csv, plain or crowdsec")
	f.StringVar(&o.rule, "rule", "", "only this rule's bans")
	return cmd
}

func oneOf(s string, set []string) bool {
	for _, x := range set {
		if s == x {
			return true
		}
	}
	return false
}

func runExport(o *exportOptions, s streams, now time.Time) error {
	q := control.ListQuery{Rule: o.rule, Kind: "ban", Sort: "rule"}
	if err := q.Validate(); err != nil {
		return apiError(err)
	}
	op, err := open(&o.cfg, s)
	if err != nil {
		return err
	}
	db, err := op.reader()
	if err != nil {
		return err
	}
	l := &control.BanList{Version: control.SchemaVersion, Now: now, Bans: []control.Ban{}}
	if db != nil {
		defer db.Close()
		if l, err = control.List(db, op.cfg, q, now); err != nil {
			return apiError(err)
		}
	}
	bans := l.Bans[:0]
	logOnly := 0
	for _, b := range l.Bans {
		if b.LogOnly {
			logOnly++
			continue
		}
		bans = append(bans, b)
	}
	l.Bans = bans
	if logOnly > 0 {
		fmt.Fprintf(s.err, "logjail: %s left out: log-only, they block nothing\n", plural(logOnly, "ban", "bans"))
	}
	w := bufio.NewWriterSize(s.out, 64<<10)
	var skipped int
	switch o.format {
	case "json":
		err = l.WriteJSON(w)
	case "csv":
		err = writeExportCSV(w, l.Bans)
	case "plain":
		skipped, err = writeExportPlain(w, l.Bans)
	case "crowdsec":
		skipped, err = writeExportCrowdSec(w, l.Bans)
	}
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if skipped > 0 {
		fmt.Fprintf(s.err, "logjail: %s left out: no address (user:, ua:, range: keys)\n", plural(skipped, "ban", "bans"))
	}
	return err
}

// exportCSVHeader is the header of export's CSV, which import knows by
// its key column.
var exportCSVHeader = []string{"rule", "key", "kind", "since", "until", "reason", "origin"}

func writeExportCSV(w io.Writer, bans []control.Ban) error {
	cw := csv.NewWriter(w)
	cw.Write(exportCSVHeader)
	for i := range bans {
		b := &bans[i]
		until := ""
		if b.Until != nil {
			until = b.Until.UTC().Format(time.RFC3339)
		}
		cw.Write([]string{b.Rule, b.Key, b.Kind, b.Since.UTC().Format(time.RFC3339), until, b.Reason, b.Origin})
	}
	cw.Flush()
	return cw.Error()
}

// exportAddress is the address or CIDR a ban's key stands for, in the
// scope CrowdSec gives it (Ip, Range); false for a key that is no address.
func exportAddress(key string) (value, scope string, ok bool) {
	t, isAddr := keyIsAddress(key)
	if !isAddr {
		return "", "", false
	}
	if t.IsAddr {
		return t.Key, "Ip", true
	}
	return t.Key, "Range", true
}

func writeExportPlain(w io.Writer, bans []control.Ban) (skipped int, err error) {
	seen := make(map[string]bool, len(bans))
	for i := range bans {
		v, _, ok := exportAddress(bans[i].Key)
		if !ok {
			skipped++
			continue
		}
		if seen[v] {
			continue
		}
		seen[v] = true
		if _, err := io.WriteString(w, v+"\n"); err != nil {
			return skipped, err
		}
	}
	return skipped, nil
}

// crowdsecDecision is a decision as CrowdSec's models.Decision writes it
// (the fields cscli and the bouncers read).
type crowdsecDecision struct {
	Duration  string `json:"duration"`
	ID        int64  `json:"id"`
	Origin    string `json:"origin"`
	Scenario  string `json:"scenario"`
	Scope     string `json:"scope"`
	Simulated bool   `json:"simulated"`
	Type      string `json:"type"`
	Until     string `json:"until,omitempty"`
	Value     string `json:"value"`
}

// crowdsecSource is an alert's source (models.Source).
type crowdsecSource struct {
	IP    string `json:"ip,omitempty"`
	Range string `json:"range,omitempty"`
	Scope string `json:"scope"`
	Value string `json:"value"`
}

// crowdsecAlert is an alert as `cscli decisions list -o json` writes it
// (models.Alert).
type crowdsecAlert struct {
	Capacity        int32              `json:"capacity"`
	CreatedAt       string             `json:"created_at"`
	Decisions       []crowdsecDecision `json:"decisions"`
	Events          []struct{}         `json:"events"`
	EventsCount     int32              `json:"events_count"`
	ID              int64              `json:"id"`
	Labels          []string           `json:"labels"`
	Leakspeed       string             `json:"leakspeed"`
	MachineID       string             `json:"machine_id"`
	Message         string             `json:"message"`
	Scenario        string             `json:"scenario"`
	ScenarioHash    string             `json:"scenario_hash"`
	ScenarioVersion string             `json:"scenario_version"`
	Simulated       bool               `json:"simulated"`
	Source          crowdsecSource     `json:"source"`
	StartAt         string             `json:"start_at"`
	StopAt          string             `json:"stop_at"`
}

func writeExportCrowdSec(w io.Writer, bans []control.Ban) (skipped int, err error) {
	alerts := make([]crowdsecAlert, 0, len(bans))
	for i := range bans {
		b := &bans[i]
		v, scope, ok := exportAddress(b.Key)
		if !ok {
			skipped++
			continue
		}
		id := int64(len(alerts) + 1)
		since := b.Since.UTC().Format(time.RFC3339)
		d := crowdsecDecision{ID: id, Origin: crowdsecOrigin, Scenario: b.Rule, Scope: scope, Type: "ban", Value: v,
			Duration: crowdsecForever.String()}
		if b.Until != nil {
			d.Until = b.Until.UTC().Format(time.RFC3339)
			d.Duration = (time.Duration(*b.LeftSeconds) * time.Second).String()
		}
		src := crowdsecSource{Scope: scope, Value: v}
		if scope == "Ip" {
			src.IP = v
		} else {
			src.Range = v
		}
		alerts = append(alerts, crowdsecAlert{ID: id, CreatedAt: since, Decisions: []crowdsecDecision{d}, Events: []struct{}{},
			MachineID: crowdsecOrigin, Message: b.Reason, Scenario: b.Rule, Source: src, StartAt: since, StopAt: since})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	enc.SetEscapeHTML(false)
	return skipped, enc.Encode(alerts)
}
