package replay

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestRecycledChunksChangeNothing replays logs with the readers' buffers
// used again (source.LineReader.RecycleChunks, here 600-byte buffers, so
// that they go round thousands of times) and with every chunk in new
// memory (Options.noRecycle): the same JSON report, byte for byte. The
// combined log has user agents of every length (some longer than a
// buffer), risky bursts (their user agents kept), outliers and a real jump
// (entries the guard holds past their blocks), a flood of 404s and
// rejected lines; the IIS log changes its #Fields: mid-file (the parser
// keeps a directive's text).
func TestRecycledChunksChangeNothing(t *testing.T) {
	rnd := rand.New(rand.NewPCG(23, 4))
	var ls []string
	sec := 0.0
	for i := range 30_000 {
		sec = float64(i) / 150
		ua := fmt.Sprintf("%s r%d", browserUA, rnd.IntN(40))
		if rnd.IntN(50) == 0 {
			ua = strings.Repeat("Z", 200+rnd.IntN(2000))
		}
		switch {
		case i%5000 == 4999:
			ls = append(ls, req("203.0.113.77", sec+3600, "/far-ahead.css", 200, ua)) // an outlier: held
		case i%7777 == 0:
			ls = append(ls, "not a log line "+strings.Repeat("x", rnd.IntN(900)))
		case i >= 8_000 && i < 8_080:
			ls = append(ls, req("198.51.100.250", sec, fmt.Sprintf("/static/%d.woff2", i), 200, ua)) // a risky burst
		case i%6 == 0:
			ls = append(ls, req(fmt.Sprintf("198.51.100.%d", 100+i%20), sec, "/wp-login.php", 404, "curl/8.5.0"))
		default:
			ls = append(ls, req(fmt.Sprintf("2001:db8:%x::1", rnd.IntN(3000)), sec, fmt.Sprintf("/p/%d", rnd.IntN(100)), 200, ua))
		}
	}
	for i := range 300 { // a real jump: held, then released by the next
		ls = append(ls, req(fmt.Sprintf("198.51.100.%d", 200+i%10), sec+3*3600+float64(i)/10, "/img/a.png", 200, browserUA))
	}
	combined := parseConfig(t, floodScanners)

	// Three #Fields: in turn, none again (a #Fields: that repeats an
	// earlier one is read by the columns of the wrong one at times, with
	// or without recycled buffers: a parser matter, reported).
	iis := []string{"#Software: Microsoft Internet Information Services 10.0", "#Fields: date time c-ip cs-method cs-uri-stem sc-status time-taken"}
	layouts := []string{"#Fields: date time cs-method cs-uri-stem sc-status sc-bytes c-ip time-taken", "#Fields: date time cs-uri-stem c-ip sc-status"}
	for i := range 3000 {
		at := t0.Add(time.Duration(i/10) * time.Second).Format("15:04:05")
		switch {
		case i < 1000:
			iis = append(iis, fmt.Sprintf("2026-11-02 %s 198.51.100.%d GET /a 200 15", at, i%10+1))
		case i < 2000:
			iis = append(iis, fmt.Sprintf("2026-11-02 %s GET /b 200 512 203.0.113.9 %d", at, 7+i%3)) // a flood
		default:
			iis = append(iis, fmt.Sprintf("2026-11-02 %s /c 192.0.2.%d 200", at, i%4))
		}
		if i == 999 || i == 1999 {
			iis = append(iis, layouts[i/1000])
		}
	}
	w3c := parseConfig(t, `
sources: [{name: iis, paths: [/var/log/iis/u_ex.log], format: iis}]
rules:
  - name: flood
    limits: ["50 per 10s"]
    ban: {for: 1m}
`)
	for _, run := range []struct {
		name  string
		lines []string
	}{{"combined", ls}, {"iis", iis}} {
		t.Run(run.name, func(t *testing.T) {
			cfg := combined
			if run.name == "iis" {
				cfg = w3c
			}
			log := writeLog(t, run.lines)
			plain := replayOne(t, cfg, log, Options{AgentKind: agentKind, noRecycle: true})
			recycled := replayOne(t, cfg, log, Options{AgentKind: agentKind, chunkSize: 600})
			a, err := json.Marshal(plain)
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(recycled)
			if err != nil {
				t.Fatal(err)
			}
			if string(a) != string(b) {
				t.Fatalf("reports differ:\nnew memory %s\nrecycled   %s", a, b)
			}
			if len(plain.Decisions) == 0 {
				t.Fatal("no decision: the test checks little")
			}
		})
	}
}
