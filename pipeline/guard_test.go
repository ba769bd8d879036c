package pipeline

import (
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/rules"
)

// TestGuard: per file, a line far ahead of the line before it and the line
// after it is an outlier; a real gap is followed; nothing is reordered.
func TestGuard(t *testing.T) {
	cfg := &rules.Config{Skew: 5 * time.Second, Future: time.Minute}
	t0 := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	y2099 := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC).Sub(t0)
	s := time.Second
	tests := []struct {
		name     string
		in       []time.Duration // times of the file's lines, from t0
		want     []time.Duration // times passed on, in order
		outliers int64
		release  bool // Release at the end (the end of the file)
	}{
		{"in order", []time.Duration{0, 1 * s, 2 * s, 2 * s, 3 * s}, []time.Duration{0, 1 * s, 2 * s, 2 * s, 3 * s}, 0, true},
		{"2099 in the middle", []time.Duration{0, 1 * s, y2099, 2 * s, 3 * s}, []time.Duration{0, 1 * s, 2 * s, 3 * s}, 1, true},
		{"+60s in the middle", []time.Duration{0, 1 * s, 61 * s, 2 * s, 3 * s}, []time.Duration{0, 1 * s, 2 * s, 3 * s}, 1, true},
		{"+59s is no outlier", []time.Duration{0, 1 * s, 60 * s, 2 * s}, []time.Duration{0, 1 * s, 60 * s, 2 * s}, 0, true},
		{"a real gap of 3h", []time.Duration{0, 1 * s, 3 * time.Hour, 3*time.Hour + s}, []time.Duration{0, 1 * s, 3 * time.Hour, 3*time.Hour + s}, 0, true},
		{"a real gap, next within skew", []time.Duration{0, 3 * time.Hour, 3*time.Hour - 5*s}, []time.Duration{0, 3 * time.Hour, 3*time.Hour - 5*s}, 0, true},
		{"2099 at the head", []time.Duration{y2099, 0, 1 * s}, []time.Duration{0, 1 * s}, 1, true},
		{"first line out of order by less than future", []time.Duration{30 * s, 0, 1 * s}, []time.Duration{30 * s, 0, 1 * s}, 0, true},
		{"two outliers", []time.Duration{0, y2099, 1 * s, 2 * time.Hour, 2 * s}, []time.Duration{0, 1 * s, 2 * s}, 2, true},
		{"held at the end, released", []time.Duration{0, 1 * s, time.Hour}, []time.Duration{0, 1 * s, time.Hour}, 0, true},
		{"held at the end, not released", []time.Duration{0, 1 * s, time.Hour}, []time.Duration{0, 1 * s}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewGuard(cfg)
			var out []parser.Entry
			for i, d := range tt.in {
				e := parser.Entry{Time: t0.Add(d), Path: "/" + string(rune('a'+i))}
				out = g.Next(&e, out)
			}
			if tt.release {
				out = g.Release(out)
			}
			var got []time.Duration
			for _, e := range out {
				got = append(got, e.Time.Sub(t0))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("passed on (-want +got):\n%s", diff)
			}
			if n, _ := g.Outliers(); n != tt.outliers {
				t.Errorf("outliers = %d, want %d", n, tt.outliers)
			}
		})
	}
}

// BenchmarkGuardStep: the cost the guard adds to every line in order.
func BenchmarkGuardStep(b *testing.B) {
	g := NewGuard(&rules.Config{Skew: 5 * time.Second, Future: time.Minute})
	t0 := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	es := make([]parser.Entry, 1024)
	for i := range es {
		es[i].Time = t0.Add(time.Duration(i) * time.Millisecond)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, ok := g.Step(&es[i&1023]); !ok && i > 0 && i&1023 != 0 {
			b.Fatal("held a line in order")
		}
		i++
		if i&1023 == 0 {
			g = NewGuard(&rules.Config{Skew: 5 * time.Second, Future: time.Minute})
		}
	}
}

// TestHeldEntryOwnsStrings gives the guard an entry whose every string
// (each string field of parser.Entry, found by reflection, and its Fields)
// is a view of a buffer, as replay's recycled chunks are; the guard holds
// it, the buffer is written over, and the entry it passes on still reads
// the strings it was given.
func TestHeldEntryOwnsStrings(t *testing.T) {
	buf := []byte(strings.Repeat("abcdefghij", 40))
	view := func(i int) string { return unsafe.String(&buf[i*10], 10) }
	t0 := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	e := parser.Entry{Time: t0, Fields: []parser.Field{{Name: view(30), Value: view(31)}}}
	v := reflect.ValueOf(&e).Elem()
	n := 0
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.String {
			f.SetString(view(n))
			n++
		}
	}
	if n < 8 {
		t.Fatalf("%d string fields: the test misreads parser.Entry", n)
	}
	want := e
	want.Fields = slices.Clone(e.Fields)
	for i := range v.NumField() {
		if f := reflect.ValueOf(&want).Elem().Field(i); f.Kind() == reflect.String {
			f.SetString(strings.Clone(f.String()))
		}
	}
	want.Fields[0] = parser.Field{Name: strings.Clone(e.Fields[0].Name), Value: strings.Clone(e.Fields[0].Value)}

	g := NewGuard(&rules.Config{Skew: 5 * time.Second, Future: time.Minute})
	if _, charge := g.Step(&e); charge {
		t.Fatal("a file's first line was not held")
	}
	for i := range buf {
		buf[i] = 'X' // the chunk read into again
	}
	next := parser.Entry{Time: t0.Add(time.Second)}
	released, _ := g.Step(&next)
	if released == nil {
		t.Fatal("the held line was not passed on")
	}
	if diff := cmp.Diff(want, *released, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) }), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("held entry (-want +got):\n%s", diff)
	}
}

// TestSubAtLeastAsSub holds subAtLeast to t.Sub(u) >= d on random pairs of
// times: near each other (a log's lines), far apart (up to past 2^33 s and
// Sub's saturation), at time's extremes, in several zones, with and
// without monotonic readings; durations from 0 to the largest.
func TestSubAtLeastAsSub(t *testing.T) {
	rnd := rand.New(rand.NewPCG(30, 8))
	zones := []*time.Location{time.UTC, time.FixedZone("x", 5*3600+1800), time.FixedZone("y", -11*3600)}
	now := time.Now() // a monotonic reading
	base := []time.Time{
		{}, time.Unix(0, 0), time.Unix(1<<33, 0), time.Unix(-1<<33, 0), time.Unix(1<<62, 999999999),
		time.Unix(-1<<62, 0), time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(2026, 11, 26, 15, 0, 0, 0, time.UTC), now, now.Round(0),
	}
	durs := []time.Duration{0, 1, time.Second, time.Second - 1, time.Minute, time.Hour, 24 * time.Hour, 1<<63 - 1, 1 << 62}
	pick := func() time.Time {
		b := base[rnd.IntN(len(base))]
		switch rnd.IntN(6) {
		case 0:
			return b
		case 1:
			return b.Add(time.Duration(rnd.Int64N(int64(time.Hour))) - time.Hour/2)
		case 2:
			return b.Add(time.Duration(rnd.Int64()))
		case 3:
			return b.Add(time.Duration(rnd.Int64N(3e9)) - 1e9).In(zones[rnd.IntN(len(zones))])
		case 4:
			return time.Unix(rnd.Int64N(1<<35)-1<<34, rnd.Int64N(1e9))
		}
		return b.AddDate(rnd.IntN(600)-300, 0, 0)
	}
	hits, cases := 0, 0
	for range 400000 {
		a, b := pick(), pick()
		if rnd.IntN(3) == 0 {
			b = a.Add(-time.Duration(rnd.Int64N(int64(3 * time.Second)))) // a line ahead of the newest by about the future
		}
		d := durs[rnd.IntN(len(durs))]
		if rnd.IntN(2) == 0 {
			d = time.Duration(rnd.Int64N(int64(3 * time.Second)))
		}
		want := a.Sub(b) >= d
		if got := subAtLeast(a, b, d); got != want {
			t.Fatalf("subAtLeast(%v, %v, %v) = %v, want %v (Sub %v)", a, b, d, got, want, a.Sub(b))
		}
		cases++
		if want {
			hits++
		}
	}
	if hits == 0 || hits == cases {
		t.Fatalf("%d of %d true: the test does not tell", hits, cases)
	}
}
