package replay

import (
	"fmt"
	"testing"
	"time"
)

// TestW3CFieldsInForce replays an IIS log longer than a block whose
// #Fields: is not IIS's default and changes mid-file (an IIS restart with
// other logged fields): the blocks are parsed on several workers in any
// order, yet every line is read with the columns in force at its place, and
// the directive lines are neither entries nor rejected lines.
func TestW3CFieldsInForce(t *testing.T) {
	cfg := parseConfig(t, `
sources: [{name: iis, paths: [/var/log/iis/u_ex.log], format: iis}]
rules:
  - name: flood
    limits: ["50 per 10s"]
    ban: {for: 1m}
`)
	ls := []string{"#Software: Microsoft Internet Information Services 10.0", "#Version: 1.0", "#Date: 2026-11-02 10:00:00",
		"#Fields: date time c-ip cs-method cs-uri-stem sc-status time-taken"}
	for i := 0; i < 1500; i++ { // 198.51.100.K, one request a second each
		ls = append(ls, fmt.Sprintf("2026-11-02 %s 198.51.100.%d GET /a 200 15", t0.Add(time.Duration(i/10)*time.Second).Format("15:04:05"), i%10+1))
	}
	ls = append(ls, "#Software: Microsoft Internet Information Services 10.0", "#Fields: date time cs-method cs-uri-stem sc-status sc-bytes c-ip time-taken")
	for i := 0; i < 1500; i++ { // then 203.0.113.9 floods: 10 a second
		ls = append(ls, fmt.Sprintf("2026-11-02 %s GET /b 200 512 203.0.113.9 7", t0.Add(time.Duration(150+i/10)*time.Second).Format("15:04:05")))
	}
	rep := replayOne(t, cfg, writeLog(t, ls), Options{RejectSamples: 3})
	// The six directive lines are read, not rejected (parsed counts every
	// line not rejected).
	if rep.Input.Lines != 3006 || rep.Input.Parsed != 3006 || rep.Input.Rejected != 0 {
		t.Fatalf("lines %d, parsed %d, rejected %d (%+v); want 3006, 3006, 0", rep.Input.Lines, rep.Input.Parsed, rep.Input.Rejected, rep.Input.Samples)
	}
	if rep.Rules[0].Banned != 1 {
		t.Errorf("banned %d keys, want 1 (203.0.113.9)", rep.Rules[0].Banned)
	}
}
