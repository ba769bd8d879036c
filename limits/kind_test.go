package limits

import (
	"encoding/binary"
	"math"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The helpers each kind's test uses: parse a limit with one kind, charge
// requests to one window, and write and read that window back.

// parse reads s with kind k, failing the test when k does not claim it or
// refuses it.
func parse(t *testing.T, k Kind, s string) Limit {
	t.Helper()
	f := strings.Fields(s)
	l, ok, err := k.Parse(f, 4)
	if !ok || err != nil {
		t.Fatalf("%T.Parse(%q) = ok %v, %v; want it read", k, s, ok, err)
	}
	l.Text = strings.Join(f, " ")
	return l
}

// grammar checks that k reads each of good (as want, N and Window), and
// refuses each of bad with the given error, and claims none of others.
func grammar(t *testing.T, k Kind, good map[string]Limit, bad map[string]string, others []string) {
	t.Helper()
	for s, want := range good {
		got, ok, err := k.Parse(strings.Fields(s), 4)
		if !ok || err != nil {
			t.Errorf("%q: ok %v, %v", s, ok, err)
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", s, diff)
		}
	}
	for s, want := range bad {
		_, ok, err := k.Parse(strings.Fields(s), 4)
		if !ok || err == nil || err.Error() != want {
			t.Errorf("%q: ok %v, error %v; want claimed, %q", s, ok, err, want)
		}
	}
	for _, s := range others {
		if _, ok, _ := k.Parse(strings.Fields(s), 4); ok {
			t.Errorf("%q: claimed, want it left to another kind", s)
		}
	}
}

// meter is one window of one limit, charged as the detector does.
type meter struct {
	c     Compiled
	w     Window
	rings Rings
}

func newMeter(t *testing.T, k Kind, s string) *meter {
	t.Helper()
	l := parse(t, k, s)
	return &meter{c: Compile(&l)}
}

// charge charges a request of cost at second sec and returns the value and
// the verdict.
func (m *meter) charge(sec float64, cost Cost) (float64, bool) {
	return m.c.Kind.Charge(&m.w, &m.rings, &m.c, int64(sec*1e9), cost)
}

// explain is the reason for value v.
func (m *meter) explain(v float64) string {
	var b strings.Builder
	m.c.Kind.Explain(&b, &m.c, v)
	return b.String()
}

// roundTrip writes m's window, reads it into a fresh window, and checks that
// both read the same at sec.
func (m *meter) roundTrip(t *testing.T, sec float64) {
	t.Helper()
	b := AppendWindow(nil, &m.w, &m.c, &m.rings)
	var w Window
	var rings Rings
	r := &reader{b: b}
	DecodeWindow(r, &w, &m.c, &rings)
	if r.err != "" || len(r.b) != 0 {
		t.Fatalf("decode: %q, %d bytes left", r.err, len(r.b))
	}
	ns := int64(sec * 1e9)
	if a, b := m.c.Kind.Query(&m.w, &m.rings, &m.c, ns), m.c.Kind.Query(&w, &rings, &m.c, ns); a != b {
		t.Errorf("query after a round trip: %+v, want %+v", b, a)
	}
	// Skipping it (a state of a changed rule) reads it all.
	r = &reader{b: b}
	DecodeWindow(r, nil, nil, nil)
	if r.err != "" || len(r.b) != 0 {
		t.Fatalf("skip: %q, %d bytes left", r.err, len(r.b))
	}
}

// reader reads what AppendWindow wrote.
type reader struct {
	b   []byte
	err string
}

func (r *reader) U8() byte {
	if len(r.b) == 0 {
		r.Fail("truncated")
		return 0
	}
	x := r.b[0]
	r.b = r.b[1:]
	return x
}

func (r *reader) Uvarint() uint64 {
	x, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.Fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return x
}

func (r *reader) Float() float64 { return math.Float64frombits(bits.ReverseBytes64(r.Uvarint())) }

func (r *reader) Count(limit int) int {
	n := r.Uvarint()
	if n > uint64(limit) {
		r.Fail("count out of range")
		return 0
	}
	return int(n)
}

func (r *reader) Fail(what string) {
	if r.err == "" {
		r.err = what
	}
}

func (r *reader) Failed() bool { return r.err != "" }

func TestParseDuration(t *testing.T) {
	for s, want := range map[string]time.Duration{"90s": 90 * time.Second, "2d": 48 * time.Hour, "1d12h": 36 * time.Hour} {
		if got, err := ParseDuration(s); err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", s, got, err, want)
		}
	}
	if _, err := ParseDuration("-1s"); err == nil {
		t.Error("-1s: no error")
	}
}

// TestCompiledChargeAsKind charges random requests (times out of order,
// late ones, gaps past the window, costs of both weights, zero and huge)
// to one window through Compiled.Charge and to another through the kind's
// own Charge: the same value and verdict at every request, and the same
// window after. It fails when Compile gives a kind the wrong op (a cpu
// share that weighs the duration, a rate that weighs the cost).
func TestCompiledChargeAsKind(t *testing.T) {
	for _, tc := range []struct {
		k Kind
		s string
	}{
		{Rate{}, "5 per 10s"},
		{Rate{}, "120 per 15s"},
		{Rate{}, "50 per 2h"},
		{Share{}, "30% cpu over 15s"},
		{Share{}, "10% duration over 1m"},
		{Share{}, "7% cpu over 1h of machine"},
		{Bucket{}, "10/s burst 20"},
		{LastN{}, "last 10 within 2s"},
	} {
		t.Run(tc.s, func(t *testing.T) {
			a, b := newMeter(t, tc.k, tc.s), newMeter(t, tc.k, tc.s)
			rnd := rand.New(rand.NewPCG(uint64(len(tc.s)), 7))
			ns := int64(1_700_000_000) * 1e9
			for i := range 20000 {
				switch r := rnd.IntN(100); {
				case r < 70:
					ns += rnd.Int64N(int64(400 * time.Millisecond))
				case r < 85:
					ns -= rnd.Int64N(int64(20 * time.Second)) // late
				case r < 95:
					ns += rnd.Int64N(int64(3 * time.Second))
				default:
					ns += rnd.Int64N(int64(3 * time.Hour)) // past the window
				}
				cost := Cost{CPU: rnd.ExpFloat64() * 0.05, Duration: rnd.ExpFloat64() * 0.3}
				if rnd.IntN(50) == 0 {
					cost = Cost{CPU: 1e9, Duration: -1}
				}
				v1, o1 := a.c.Kind.Charge(&a.w, &a.rings, &a.c, ns, cost)
				v2, o2 := b.c.Charge(&b.w, &b.rings, ns, cost)
				if math.Float64bits(v1) != math.Float64bits(v2) || o1 != o2 {
					t.Fatalf("request %d at %d, %+v: Compiled.Charge %v, %v; Kind.Charge %v, %v", i, ns, cost, v2, o2, v1, o1)
				}
			}
			ca, ea, aa, ta := a.w.Dump(&a.rings, a.c.layout)
			cb, eb, ab, tb := b.w.Dump(&b.rings, b.c.layout)
			if diff := cmp.Diff([]any{ca, ea, aa, ta}, []any{cb, eb, ab, tb}); diff != "" {
				t.Errorf("windows differ (-kind +compiled):\n%s", diff)
			}
		})
	}
}
