package daemon

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/logjail/logjail/follow"
	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/source"
)

// TestParseMemoAsParseString parses 2,000 random batches (1 to 300 lines)
// as the daemon's parsing goroutine does (parsed.parse, one TimeMemo kept
// from batch to batch, the batches' memory put back and taken again) and
// each line again with ParseString, the path before the memo: the same
// entries (reflect.DeepEqual: time, zone, fields), the same index of each
// in its batch, the same count of rejected lines and the same first error.
// The lines' times come in runs from a few texts, with others, zones and
// texts one byte off; some lines are malformed, empty, or truncated
// (follow's Truncated: rejected as too long); two formats, one with the
// genlog's rt= and cpu= tail.
func TestParseMemoAsParseString(t *testing.T) {
	genlog, err := parser.New(parser.Options{
		LogFormat: `$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" rt=$request_time cpu=$upstream_http_x_cpu_time`,
		CPUField:  "upstream_http_x_cpu_time", Location: time.UTC})
	if err != nil {
		t.Fatal(err)
	}
	combined, err := parser.New(parser.Options{Format: "combined", Location: time.FixedZone("X", 3600)})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(23, 8))
	zones := []string{"+0000", "+0100", "-0500", "+0530"}
	newText := func() string {
		tm := time.Date(2026, time.Month(1+r.IntN(12)), 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60), 0, time.UTC)
		return tm.Format("02/Jan/2006:15:04:05 ") + zones[r.IntN(len(zones))]
	}
	texts := []string{newText(), newText(), newText()}
	src := &rules.Source{Name: "web", Type: rules.SourceFile}
	s := newSpares(4, false)
	var memo parser.TimeMemo
	hits, entries := 0, 0
	for range 2000 {
		pr, tail := genlog, true
		if r.IntN(3) == 0 {
			pr, tail = combined, false
		}
		lines := make([]follow.Line, 1+r.IntN(300))
		for i := range lines {
			if r.IntN(30) == 0 {
				texts[r.IntN(len(texts))] = newText()
			}
			tt := texts[0]
			switch r.IntN(8) {
			case 0:
				tt = texts[r.IntN(len(texts))]
			case 1: // one byte off the memo's text
				b := []byte(texts[0])
				b[r.IntN(len(b))] = byte('0' + r.IntN(10))
				tt = string(b)
			}
			text := fmt.Sprintf(`198.51.100.%d - - [%s] "GET /p/%d HTTP/1.1" %d %d "-" "agent %d"`,
				r.IntN(256), tt, r.IntN(100), 200+r.IntN(300), r.IntN(9000), r.IntN(3))
			if tail {
				text += fmt.Sprintf(" rt=0.0%d cpu=0.00%d", r.IntN(10), r.IntN(10))
			}
			switch r.IntN(40) {
			case 0:
				text = text[:r.IntN(len(text))]
			case 1:
				text = ""
			}
			if tt == texts[0] {
				hits++
			}
			lines[i] = follow.Line{Line: int64(i + 1), Text: text, Truncated: r.IntN(50) == 0}
		}
		p := s.get()
		p.src, p.parser, p.batch, p.memo = src, pr, follow.Batch{Lines: lines}, &memo
		p.parse()

		var want []parser.Entry
		var idx []int32
		var rejected int
		var firstErr error
		for i, l := range lines {
			e, err := pr.ParseString(l.Text, int(l.Line))
			if err == nil && l.Truncated {
				err = source.TooLong(int(l.Line))
			}
			if err != nil {
				if !errors.Is(err, parser.ErrDirective) {
					if rejected == 0 {
						firstErr = err
					}
					rejected++
				}
				continue
			}
			want, idx = append(want, e), append(idx, int32(i))
		}
		if len(p.entries) != len(want) || !reflect.DeepEqual(p.lines, idx) || p.rejected != rejected || fmt.Sprint(p.firstErr) != fmt.Sprint(firstErr) {
			t.Fatalf("batch of %d lines: %d entries, %d rejected (%v), want %d, %d (%v)",
				len(lines), len(p.entries), p.rejected, p.firstErr, len(want), rejected, firstErr)
		}
		for i := range want {
			if !reflect.DeepEqual(p.entries[i], want[i]) {
				t.Fatalf("line %d:\nmemo        %+v\nParseString %+v", p.lines[i]+1, p.entries[i], want[i])
			}
		}
		entries += len(want)
		p.src = nil // the lines are the test's: not recycled
		s.put(p)
	}
	if entries < 200_000 || hits < entries/2 {
		t.Fatalf("%d entries, %d lines with the memo's time", entries, hits)
	}
}
