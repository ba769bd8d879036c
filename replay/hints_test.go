package replay

import (
	"encoding/json"
	"fmt"
	"testing"
)

// floodScanners is the configuration the hints, recycling and workers
// tests replay under: a flood rule and a 4xx scanners rule on one
// combined-format source.
const floodScanners = `
sources: [{name: web, paths: [/var/log/access.log], format: combined, timezone: UTC}]
rules:
  - name: flood
    limits: ["20 per 10s"]
    ban: {for: 20s}
  - name: scanners
    match: {status: '^4'}
    limits: ["10 per 60s"]
    ban: {for: 1m}
`

// TestHintsChangeNothing replays a log of 60,000 clients (past the size at
// which the detector's table takes hints, detector.Detector.Prefetching)
// and 20 attackers, some flooding 404s, some loading static files in bursts
// (risky bans), with the merger's hints (the recent ring filled after each
// charge, the key table prefetched three entries ahead) and without them
// (the ring filled before the charge, no prefetch): the same report, every
// decision, explanation and risky ban included.
func TestHintsChangeNothing(t *testing.T) {
	const clients, lines = 60_000, 150_000
	ls := make([]string, 0, lines)
	for i := range lines {
		sec := float64(i) / 1000
		if i%10 == 0 {
			a := i / 10 % 20
			ip := fmt.Sprintf("2001:db8:ffff:%d::1", a+1)
			if a%2 == 0 {
				ls = append(ls, line(ip, sec, 404))
			} else {
				ls = append(ls, req(ip, sec, "/static/app.js", 200, browserUA))
			}
			continue
		}
		c := uint32(i*2654435761) % clients
		ls = append(ls, line(fmt.Sprintf("2001:db8:%x:%x::1", c>>8, c&0xff), sec, 200))
	}
	log := writeLog(t, ls)
	cfg := parseConfig(t, floodScanners)
	hinted := replayOne(t, cfg, log, Options{})
	plain := replayOne(t, cfg, log, Options{plain: true})
	if hinted.Detector.Keys < 50_000 || len(hinted.Decisions) < 20 || len(hinted.Risky) == 0 {
		t.Fatalf("%d keys, %d decisions, %d risky bans: the test does not reach the hints' paths", hinted.Detector.Keys, len(hinted.Decisions), len(hinted.Risky))
	}
	a, err := json.Marshal(hinted)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(plain)
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) {
		for i := range min(len(hinted.Decisions), len(plain.Decisions)) {
			if x, y := fmt.Sprint(hinted.Decisions[i]), fmt.Sprint(plain.Decisions[i]); x != y {
				t.Fatalf("decision %d with hints: %s; without: %s", i, x, y)
			}
		}
		t.Fatalf("the reports differ with hints and without (%d and %d decisions, %d and %d risky bans)",
			len(hinted.Decisions), len(plain.Decisions), len(hinted.Risky), len(plain.Risky))
	}
}
