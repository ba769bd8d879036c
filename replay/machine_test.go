package replay

import (
	"fmt"
	"strings"
	"testing"
)

// TestOfMachineAsWritten: an "of machine" limit (2 cores) reads as
// written in the report (its peaks a share of the machine) and in --sweep
// (its values the percentages as written), and bans where it should: 11
// CPU seconds within 10s are 55% of 2 cores.
func TestOfMachineAsWritten(t *testing.T) {
	cfg := parseConfig(t, `
sources: [{name: web, paths: [/var/log/access.log], format: nginx_timing, cpu_fallback: duration, timezone: UTC}]
rules:
  - name: heavy
    limits: ["50% cpu over 10s of machine"]
    ban: {for: 1m}
`)
	var lines []string
	for i := range 11 {
		lines = append(lines, line("203.0.113.7", float64(i)/5, 200)+" 1.000")
	}
	sw, err := ParseSweep("heavy[0]=25..100:4")
	if err != nil {
		t.Fatal(err)
	}
	rep := replayOne(t, cfg, writeLog(t, lines), Options{Sweeps: []Sweep{sw}})
	if rep.Detector.Bans != 1 {
		t.Errorf("bans = %d, want 1 (11 CPU s > 10 in 10s)", rep.Detector.Bans)
	}
	var rr *RuleReport
	for i := range rep.Rules {
		if rep.Rules[i].Name == "heavy" {
			rr = &rep.Rules[i]
		}
	}
	if rr == nil || len(rr.Limits) != 1 || rr.Limits[0].Limit != "50% cpu over 10s of machine" || fmt.Sprintf("%.3f", rr.Limits[0].Max) != "0.550" {
		t.Errorf("limit report: %+v, want the limit as written, its max 0.55", rr)
	}
	var text strings.Builder
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "55.0% vs 50% cpu over 10s of machine") || !strings.Contains(text.String(), "sweep heavy[0] (50% cpu over 10s of machine)") {
		t.Errorf("report:\n%s", text.String())
	}
	var got []string
	for _, v := range rep.Sweeps[0].Values {
		got = append(got, fmt.Sprintf("%g%%:%d", v.N, v.Banned))
	}
	// Up to 55% is over, from 75% not.
	if strings.Join(got, " ") != "25%:1 50%:1 75%:0 100%:0" {
		t.Errorf("sweep = %v", got)
	}
}
