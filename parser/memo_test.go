package parser

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// TestTimeMemoAsPlain parses 200,000 lines with one TimeMemo shared by
// four parsers (the genlog's log_format, combined twice, common, which
// has no CLF prefix), in random order, and each line again with
// ParseStringTo: the same Entry (reflect.DeepEqual: the time's instant,
// zone and *Location, which the parsers' zone caches each make their
// own), error and Fields. The times come from a few texts, in runs (the
// memo's hits), with other zones, and edits: digits, impossible dates
// (31 Feb, hour 25), a blank for a digit, an unknown month, and texts one
// byte off the last. It fails with the memo keyed without its parser or
// with a byte of the text left out.
func TestTimeMemoAsPlain(t *testing.T) {
	var ps []*Parser
	for _, o := range []Options{
		{LogFormat: `$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" rt=$request_time cpu=$upstream_http_x_cpu_time`,
			CPUField: "upstream_http_x_cpu_time", Location: time.UTC},
		{Format: "combined"},
		{Format: "combined", Location: time.FixedZone("X", 3600)},
		{Format: "common"},
	} {
		p, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	r := rand.New(rand.NewPCG(23, 26))
	zones := []string{"+0000", "+0100", "-0500", "+0530", "+1745", "-0000"} // each a Location its parser keeps (zoneCache)
	texts := make([]string, 6)
	texts[0] = "06/Jan/2025:00:00:00 +0000"
	newText := func() string {
		if r.IntN(3) == 0 {
			// The memo's text but one byte: a digit, another month.
			s := []byte(texts[0])
			switch k := r.IntN(len(s)); s[k] {
			case 'J', 'F', 'M', 'A', 'S', 'O', 'N', 'D':
				copy(s[3:], time.Month(1 + r.IntN(12)).String()[:3])
			default:
				s[k] = byte('0' + r.IntN(10))
			}
			return string(s)
		}
		tm := time.Date(2025, time.Month(1+r.IntN(12)), 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60), 0, time.UTC)
		s := []byte(tm.Format("02/Jan/2006:15:04:05 ") + zones[r.IntN(len(zones))])
		switch r.IntN(12) {
		case 0:
			s[r.IntN(len(s))] = byte('0' + r.IntN(10))
		case 1:
			copy(s, "31/Feb")
		case 2:
			copy(s[12:], "25")
		case 3:
			s[r.IntN(len(s))] = ' '
		case 4:
			copy(s[3:], "Foo")
		}
		return string(s)
	}
	for i := range texts[1:] {
		texts[1+i] = newText()
	}
	var memo TimeMemo
	var buf []Field
	repeats, last, lastP := 0, "", -1
	for n := range 200_000 {
		if r.IntN(40) == 0 {
			texts[r.IntN(len(texts))] = newText()
		}
		pi := r.IntN(len(ps))
		if r.IntN(4) != 0 {
			pi = max(lastP, 0) // runs of one parser
		}
		tt := texts[0]
		if r.IntN(5) == 0 {
			tt = texts[r.IntN(len(texts))]
		}
		line := fmt.Sprintf(`192.0.2.%d - - [%s] "GET /p/%d HTTP/1.1" %d %d "-" "agent %d" rt=0.0%d cpu=0.00%d`,
			r.IntN(256), tt, r.IntN(100), 200+r.IntN(300), r.IntN(9000), r.IntN(3), r.IntN(10), r.IntN(10))
		if pi == 1 || pi == 2 {
			line = line[:len(line)-len(" rt=0.00 cpu=0.000")]
		}
		if tt == last && pi == lastP {
			repeats++
		}
		last, lastP = tt, pi
		p := ps[pi]
		var got, want Entry
		buf = buf[:0]
		_, gerr := p.ParseStringMemo(line, n, buf, &got, &memo)
		_, werr := p.ParseStringTo(line, n, nil, &want)
		// A zone the parser keeps (within 18 hours) is the same *Location.
		_, off := want.Time.Zone()
		kept := off >= -maxZoneMinutes*60 && off <= maxZoneMinutes*60
		if fmt.Sprint(gerr) != fmt.Sprint(werr) || !reflect.DeepEqual(got, want) || kept && got.Time.Location() != want.Time.Location() {
			t.Fatalf("parser %d, line %q:\nmemo  %+v, %v\nplain %+v, %v", pi, line, got, gerr, want, werr)
		}
	}
	if repeats < 50_000 {
		t.Fatalf("only %d lines with the time and parser of the line before", repeats)
	}
}
