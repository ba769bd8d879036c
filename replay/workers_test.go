package replay

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/logjail/logjail/goodbots"
	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/rules"
)

// TestWorkersFindAsMerger replays a log with crawlers (Googlebot from
// Google's published range, so verified and charged to range:googlebot
// under good_bots, and from an address of ours, a claim only), browsers
// loading static files in bursts, a flood of 404s, an outlier line and a
// real jump in time (entries the guard holds, whose claims and flags the
// merger finds itself), once with the user-agent claims and the recent
// ring's hints found by the parse workers (block.claims, block.ring) and
// once found by the merger (Options.plain): the same report, every
// decision, key, explanation and risky ban included.
func TestWorkersFindAsMerger(t *testing.T) {
	const googlebot = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
	var ls []string
	sec := 0.0
	for i := range 40_000 {
		sec = float64(i) / 200
		if i == 20_000 {
			// An outlier (an hour ahead, then back): held, not charged.
			ls = append(ls, req("203.0.113.77", sec+3600, "/x.css", 200, browserUA))
		}
		if i >= 10_000 && i < 10_060 {
			// A browser loading a heavy page: banned by flood, a risky burst.
			ls = append(ls, req("198.51.100.250", sec, fmt.Sprintf("/static/%d.woff2", i), 200, browserUA))
		}
		switch i % 8 {
		case 0:
			ls = append(ls, req(fmt.Sprintf("66.249.66.%d", 1+i/8%3), sec, fmt.Sprintf("/p/%d", i), 200, googlebot))
		case 1:
			ls = append(ls, req("203.0.113.50", sec, fmt.Sprintf("/p/%d", i), 200, googlebot))
		case 2:
			ls = append(ls, req(fmt.Sprintf("198.51.100.%d", i/8%40), sec, "/static/app.JS", 304, browserUA))
		case 3:
			ls = append(ls, req(fmt.Sprintf("198.51.100.%d", 100+i/8%20), sec, "/wp-login.php", 404, "curl/8.5.0"))
		default:
			ls = append(ls, req(fmt.Sprintf("2001:db8:%x::1", i%997), sec, "/index.html", 200, fmt.Sprintf("%s v%d", browserUA, i%50)))
		}
	}
	// A real jump: three hours later the log goes on (the first line after
	// the gap is held, then released by the next).
	for i := range 200 {
		ls = append(ls, req(fmt.Sprintf("198.51.100.%d", 200+i%10), sec+3*3600+float64(i)/10, "/img/a.png", 200, googlebot))
	}
	log := writeLog(t, ls)
	cfg := parseConfig(t, floodScanners+`good_bots: {limits: ["20 per 10s"], ban: {for: 1m}}`)
	kind := func(ua string) (string, string) {
		name, k := goodbots.Agent(ua)
		switch k {
		case goodbots.Crawler:
			return name, "crawler"
		case goodbots.Monitor:
			return name, "monitor"
		}
		return "", ""
	}
	workers := replayOne(t, cfg, log, Options{AgentKind: kind})
	merger := replayOne(t, cfg, log, Options{AgentKind: kind, plain: true})
	a, err := json.Marshal(workers)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(merger)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(a), "range:googlebot") || workers.Input.Outliers == 0 ||
		!strings.Contains(string(a), `"kind":"burst"`) || !strings.Contains(string(a), `"kind":"crawler"`) {
		t.Fatalf("%d outliers, report %.2000s: the test does not reach the paths it checks (range:googlebot, a burst, a crawler)", workers.Input.Outliers, a)
	}
	if string(a) != string(b) {
		for i := range min(len(workers.Decisions), len(merger.Decisions)) {
			if x, y := fmt.Sprint(workers.Decisions[i]), fmt.Sprint(merger.Decisions[i]); x != y {
				t.Fatalf("decision %d found by the workers: %s; by the merger: %s", i, x, y)
			}
		}
		t.Fatalf("the reports differ (%d and %d decisions, %d and %d risky bans)",
			len(workers.Decisions), len(merger.Decisions), len(workers.Risky), len(merger.Risky))
	}
}

// TestBlockFieldsKept parses blocks of genlog lines (whose upstream header
// is one of Entry.Fields) into the same block again and again, as the
// reader's pool reuses them: a first block of firstBlockLines lines, then
// full ones (from the fifth on, some lines without the field, "-", and
// some rejected). Every entry's Fields must be what ParseString makes of its
// line, and from the third parse on the block must keep its fields'
// buffer: a new one every second parse (room for the block's rest only,
// or a new slice after its last line) was most of a replay's page faults.
func TestBlockFieldsKept(t *testing.T) {
	cfg, err := rules.Load("../testdata/genlog.yaml", rules.Options{})
	if err != nil {
		t.Fatal(err)
	}
	src := cfg.Sources[0]
	p, err := parser.New(src.Parser)
	if err != nil {
		t.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(23, 7))
	line := func(odd bool) string {
		cpu := fmt.Sprintf("%.3f", rnd.Float64()/10)
		n := 20
		if !odd {
			n = 2 // every line with its field: the block's buffer full
		}
		switch rnd.IntN(20) % n {
		case 2:
			cpu = "-"
		case 3:
			return "not a log line" // rejected
		}
		return fmt.Sprintf(`192.0.2.%d - - [06/Jan/2025:00:00:%02d +0000] "GET /p/%d HTTP/1.1" 200 %d "-" "Mozilla/5.0" rt=0.0%d cpu=%s`,
			rnd.IntN(250), rnd.IntN(60), rnd.IntN(1000), rnd.IntN(50000), rnd.IntN(10), cpu)
	}
	var kc rules.KeyCache
	b := &block{parser: p, src: src}
	var kept *parser.Field
	withFields, rejects := 0, 0
	for round := range 8 {
		size := blockLines
		if round == 0 {
			size = firstBlockLines
		}
		// What newBlock and release leave of a used block.
		b.lines, b.entries, b.rejects, b.fields = b.lines[:0], b.entries[:0], b.rejects[:0], b.fields[:0]
		b.done = make(chan struct{})
		for range size {
			b.lines = append(b.lines, line(round >= 4))
		}
		b.parse(cfg, &kc)
		k := 0
		for _, l := range b.lines {
			want, err := p.ParseString(l, 1)
			if err != nil {
				continue
			}
			if got := b.entries[k].Fields; !slices.Equal(got, want.Fields) {
				t.Fatalf("round %d, entry %d: Fields %v, want %v (%s)", round, k, got, want.Fields, l)
			}
			withFields += min(1, len(want.Fields))
			k++
		}
		if k != len(b.entries) || k+len(b.rejects) != size {
			t.Fatalf("round %d: %d entries, %d rejects; want %d entries", round, len(b.entries), len(b.rejects), k)
		}
		rejects += len(b.rejects)
		if round >= 2 && &b.fields[:1][0] != kept {
			t.Errorf("round %d: the block's fields are a new buffer (cap %d)", round, cap(b.fields))
		}
		kept = &b.fields[:1][0]
	}
	if withFields == 0 || rejects == 0 {
		t.Fatalf("%d entries with Fields, %d rejects: the test does not reach the block's buffer", withFields, rejects)
	}
}
