package main

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
	_ "time/tzdata" // the zones TestAppendClock formats in

	"github.com/google/go-cmp/cmp"
	"github.com/logjail/logjail/control"
)

// The list's text as it was written before it was made fast (issue 23):
// a string a field, each through Format, fmtLeft's builder and the table's
// row; and since issue 20, the NODE column last when a ban has a node.
// printList must write the same bytes.

func fmtTimeBefore(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

func fmtTimePtrBefore(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return fmtTimeBefore(*t)
}

func fmtLeftBefore(d time.Duration) string {
	d = d.Round(time.Second)
	if d <= 0 {
		return "0s"
	}
	units := []struct {
		n   time.Duration
		sfx string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}}
	var b strings.Builder
	shown := 0
	for _, u := range units {
		if shown == 2 {
			break
		}
		if q := d / u.n; q > 0 || shown > 0 {
			if q > 0 {
				b.WriteString(strconv.FormatInt(int64(q), 10) + u.sfx)
			}
			d -= q * u.n
			shown++
		}
	}
	return b.String()
}

func printListBefore(w io.Writer, l *control.BanList, terminal bool) error {
	header := []string{"KEY", "RULE", "KIND", "SINCE", "UNTIL", "LEFT", "VIOLATIONS", "ADDRESSES", "REASON"}
	if l.Expired {
		header = []string{"KEY", "RULE", "KIND", "SINCE", "UNTIL", "ENDED", "VIOLATIONS", "ADDRESSES", "REASON", "END"}
	}
	nodes := false
	for _, b := range l.Bans {
		nodes = nodes || b.Node != ""
	}
	if nodes {
		header = append(header, "NODE")
	}
	out := w
	var tw *tabwriter.Writer
	if terminal {
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		out = tw
	}
	row := func(fields ...string) {
		for i, f := range fields {
			if i > 0 {
				io.WriteString(out, "\t")
			}
			io.WriteString(out, clean(f))
		}
		io.WriteString(out, "\n")
	}
	if terminal {
		row(header...)
	}
	for i := range l.Bans {
		b := &l.Bans[i]
		until, left := "until lifted", "-"
		if b.Until != nil {
			until = fmtTimeBefore(*b.Until)
			left = fmtLeftBefore(time.Duration(*b.LeftSeconds) * time.Second)
		}
		reason := b.Reason
		if b.Who != "" {
			reason += " (by " + b.Who + ")"
		}
		if b.LogOnly {
			reason += " [log only]"
		}
		addrs := strings.Join(b.Addresses, ",")
		fields := []string{b.Key, b.Rule, b.Kind, fmtTimeBefore(b.Since), until, left, strconv.Itoa(b.Violations), addrs, reason}
		if l.Expired {
			fields = []string{b.Key, b.Rule, b.Kind, fmtTimeBefore(b.Since), until, fmtTimePtrBefore(b.Ended), strconv.Itoa(b.Violations), addrs, reason, b.EndReason}
		}
		if nodes {
			fields = append(fields, b.Node)
		}
		row(fields...)
	}
	if tw != nil {
		return tw.Flush()
	}
	return nil
}

// TestPrintList: printList writes what it wrote before, byte for byte, on
// a terminal and for scripts, active and ended, for bans of every shape:
// until lifted, an operator's, log only, addresses, a key and a reason a
// client wrote (control characters, a tab, invalid UTF-8), times before
// the year 1000 and after 9999, durations of every size; and the same
// bans in a fleet, some with a node (one a client could not write, but
// cleaned all the same) and some without.
func TestPrintList(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	at := func(t time.Time) *time.Time { return &t }
	secs := func(n int64) *int64 { return &n }
	bans := []control.Ban{
		{Key: "203.0.113.7", Rule: "flood", Kind: "ban", Since: now.Add(-time.Hour), Until: at(now.Add(time.Hour)), LeftSeconds: secs(3600),
			Violations: 1, Reason: "rate 6 per 10s > 5 (rule flood)", Origin: "detector", Addresses: []string{}},
		{Key: "198.51.100.0/24", Rule: "deny", Kind: "ban", Since: now, Reason: "deny list", Origin: "deny", Addresses: []string{}},
		{Key: "user:bob", Rule: "operator", Kind: "ban", Since: now, Until: at(now.Add(90 * time.Minute)), LeftSeconds: secs(5340),
			Addresses: []string{"203.0.113.7", "2001:db8::1"}, Origin: "operator", Who: "uid 0 (root)"},
		{Key: "ua:x\x1b[31m\tred\n\xff\u009b", Rule: "ua", Kind: "throttle", Since: now, Until: at(now.Add(3 * 24 * time.Hour)),
			LeftSeconds: secs(3*86400 + 4*3600 + 5*60), Violations: 12, Reason: "tab\there é", LogOnly: true, Who: "a\nb",
			Addresses: []string{"203.0.113.9"}},
		{Key: "k", Rule: "r", Kind: "ban", Since: time.Date(999, 1, 2, 3, 4, 5, 0, time.UTC), Until: at(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)),
			LeftSeconds: secs(0), Ended: at(now), EndReason: "lifted by an operator (uid 0 (root))"},
		{Key: "", Rule: "", Kind: "", Since: time.Time{}, Until: at(now.In(time.FixedZone("x", -3*3600))), LeftSeconds: secs(59), EndReason: "ended"},
	}
	for _, d := range []int64{1, 61, 3599, 3601, 86399, 86401, 1 << 40} {
		u := now.Add(time.Duration(d) * time.Second)
		bans = append(bans, control.Ban{Key: "203.0.113.8", Rule: "flood", Kind: "ban", Since: now, Until: &u, LeftSeconds: secs(d), Ended: &u})
	}
	fleet := slices.Clone(bans)
	fleet[0].Node, fleet[2].Node, fleet[4].Node = "web1", "web2", "web\x1b\t3"
	for _, expired := range []bool{false, true} {
		for _, terminal := range []bool{false, true} {
			for _, inFleet := range []bool{false, true} {
				t.Run(fmt.Sprintf("expired=%v,terminal=%v,fleet=%v", expired, terminal, inFleet), func(t *testing.T) {
					l := &control.BanList{Now: now, Expired: expired, Bans: bans}
					if inFleet {
						l.Bans = fleet
					}
					var want, got bytes.Buffer
					if err := printListBefore(&want, l, terminal); err != nil {
						t.Fatal(err)
					}
					if err := printList(&got, l, terminal); err != nil {
						t.Fatal(err)
					}
					if diff := cmp.Diff(want.String(), got.String()); diff != "" {
						t.Errorf("printList (-before +now):\n%s", diff)
					}
				})
			}
		}
	}
}

// TestAppendClock: appendClock writes what Format does, in zones with
// daylight saving, half hours and odd offsets, across the years where it
// writes digits itself and beyond them.
func TestAppendClock(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var zones []*time.Location
	for _, name := range []string{"UTC", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe", "Pacific/Chatham", "Europe/Dublin"} {
		loc, err := time.LoadLocation(name)
		if err != nil {
			t.Fatal(err)
		}
		zones = append(zones, loc)
	}
	zones = append(zones, time.FixedZone("odd", -(9*3600+17*60+3)))
	lo, hi := time.Date(-50, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	times := []time.Time{time.Date(999, 12, 31, 23, 59, 59, 999999999, time.UTC), time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Now()}
	for range 20000 {
		sec := lo + r.Int64N(hi-lo)
		if r.IntN(2) == 0 {
			sec = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix() + r.Int64N(3*366*86400)
		}
		times = append(times, time.Unix(sec, r.Int64N(1e9)))
	}
	for _, tm := range times {
		for _, loc := range zones {
			lt := tm.In(loc)
			if got, want := string(appendClock(nil, lt)), lt.Format("2006-01-02 15:04:05"); got != want {
				t.Fatalf("appendClock(%v) = %q, want %q", lt, got, want)
			}
		}
		if got, want := fmtTime(tm), fmtTimeBefore(tm); got != want {
			t.Fatalf("fmtTime(%v) = %q, want %q", tm, got, want)
		}
	}
	if got := fmtTime(time.Time{}); got != "-" {
		t.Errorf("fmtTime of the zero time = %q, want -", got)
	}
}

// TestAppendLeft: fmtLeft writes what it did before, for durations of
// every size and rounding.
func TestAppendLeft(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	ds := []time.Duration{-time.Second, 0, 499 * time.Millisecond, 500 * time.Millisecond, time.Second, 1<<63 - 1, -1 << 63}
	for range 20000 {
		ds = append(ds, time.Duration(r.Int64N(int64(1)<<(10+r.IntN(45)))))
	}
	for _, d := range ds {
		if got, want := fmtLeft(d), fmtLeftBefore(d); got != want {
			t.Fatalf("fmtLeft(%v) = %q, want %q", d, got, want)
		}
	}
}
