package control

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"
	"unicode/utf8"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/logjail/logjail/state"
)

// sortBansBefore is sortBans as it was before the list of 100,000 bans was
// made fast (issue 23): the order both sorts must keep.
func sortBansBefore(bs []Ban, by string) {
	until := func(b *Ban) int64 {
		if b.Until == nil {
			return math.MaxInt64
		}
		return b.Until.UnixNano()
	}
	idx := make([]int32, len(bs))
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(i, j int32) int {
		a, b := &bs[i], &bs[j]
		switch by {
		case "since":
			return cmp.Or(b.Since.Compare(a.Since), cmp.Compare(a.Rule, b.Rule), cmp.Compare(a.Key, b.Key))
		case "rule":
			return cmp.Or(cmp.Compare(a.Rule, b.Rule), cmp.Compare(a.Key, b.Key))
		}
		return cmp.Or(cmp.Compare(until(a), until(b)), cmp.Compare(a.Rule, b.Rule), cmp.Compare(a.Key, b.Key))
	})
	sorted := make([]Ban, len(bs))
	for i, j := range idx {
		sorted[i] = bs[j]
	}
	copy(bs, sorted)
}

// randomBans makes n bans of a few rules with distinct keys, in (rule,
// key) order as the store reads them, and times that tie often: since and
// until from a few seconds, some until lifted, some before the epoch,
// some far out.
func randomBans(r *rand.Rand, n int) []Ban {
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	times := []time.Time{t0, t0.Add(time.Millisecond), t0.Add(time.Second), t0.Add(-time.Hour),
		time.UnixMilli(-1).UTC(), time.UnixMilli(0).UTC(), time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1700, 1, 1, 0, 0, 0, 0, time.UTC), t0.In(time.FixedZone("x", 3600))}
	bs := make([]Ban, n)
	for i := range bs {
		b := &bs[i]
		b.Rule = []string{"a", "flood", "flood2", "ua"}[r.IntN(4)]
		b.Key = fmt.Sprintf("k%06d", i)
		b.Since = times[r.IntN(len(times))]
		if r.IntN(5) > 0 {
			u := times[r.IntN(len(times))]
			b.Until = &u
		}
	}
	slices.SortFunc(bs, func(a, b Ban) int { return cmp.Or(cmp.Compare(a.Rule, b.Rule), cmp.Compare(a.Key, b.Key)) })
	return bs
}

// TestSortBans: the sort of bans in (rule, key) order (a radix sort of
// one integer a ban) and the general one (a comparison of the bans) give
// the order of the sort before them, for each --sort, on bans whose times
// tie often; so does the general one on bans in no order with duplicate
// (rule, key) (list --expired).
func TestSortBans(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 3, 17, 1000, 5000} {
		for _, by := range []string{"", "until", "since", "rule"} {
			t.Run(fmt.Sprintf("n=%d,sort=%q", n, by), func(t *testing.T) {
				in := randomBans(r, n)
				want := slices.Clone(in)
				sortBansBefore(want, by)
				got := slices.Clone(in)
				sortRuleKeyOrdered(got, by)
				if diff := gocmp.Diff(want, got); diff != "" {
					t.Errorf("sortRuleKeyOrdered (-before +now):\n%s", diff)
				}
				// In no order, (rule, key) repeated: sortBans alone.
				r.Shuffle(len(in), func(i, j int) { in[i], in[j] = in[j], in[i] })
				if n > 2 {
					in[0].Rule, in[0].Key = in[1].Rule, in[1].Key
				}
				want = slices.Clone(in)
				sortBansBefore(want, by)
				got = slices.Clone(in)
				sortBans(got, by)
				if diff := gocmp.Diff(want, got); diff != "" {
					t.Errorf("sortBans (-before +now):\n%s", diff)
				}
			})
		}
	}
	t.Run("since with a monotonic reading", func(t *testing.T) {
		in := randomBans(r, 100)
		in[50].Since = time.Now()
		want := slices.Clone(in)
		sortBansBefore(want, "since")
		sortRuleKeyOrdered(in, "since")
		if diff := gocmp.Diff(want, in); diff != "" {
			t.Errorf("sortRuleKeyOrdered (-before +now):\n%s", diff)
		}
	})
}

// TestRadixOrder: radixOrder is a stable sort by value.
func TestRadixOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 2, 100, 10000} {
		ks := make([]uint64, n)
		for i := range ks {
			switch r.IntN(3) {
			case 0:
				ks[i] = r.Uint64()
			case 1:
				ks[i] = uint64(r.IntN(10)) << (8 * r.IntN(8))
			default:
				ks[i] = math.MaxUint64 - uint64(r.IntN(3))
			}
		}
		want := make([]int32, n)
		for i := range want {
			want[i] = int32(i)
		}
		slices.SortStableFunc(want, func(a, b int32) int { return cmp.Compare(ks[a], ks[b]) })
		if got := radixOrder(slices.Clone(ks)); !slices.Equal(got, want) {
			t.Errorf("n=%d: radixOrder is not the stable order", n)
		}
	}
}

// TestBanSlab: a list's bans are BanOf's, their until and time left held
// in the slab's arrays, also past its capacity.
func TestBanSlab(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 500_000_000, time.UTC)
	bans := []state.Ban{
		{Rule: "flood", Key: "203.0.113.7", Kind: state.PhaseBan, Since: now.Add(-time.Minute), Until: now.Add(90 * time.Minute),
			Reason: "rate", Violations: 2, Origin: state.OriginDetector, Node: "web2"},
		{Rule: "deny", Key: "198.51.100.0/24", Kind: state.PhaseBan, Since: now, Origin: state.OriginDeny, Reason: "deny list"},
		{Rule: "ua", Key: "ua:curl", Kind: state.PhaseThrottle, Since: now, Until: now.Add(-time.Second), LogOnly: true,
			Addresses: []netip.Addr{netip.MustParseAddr("203.0.113.7"), netip.MustParseAddr("2001:db8::1")}},
		{Rule: "operator", Key: "user:bob", Kind: state.PhaseBan, Since: now, Until: now.Add(1500 * time.Millisecond), Who: "uid 0 (root)",
			Origin: state.OriginOperator},
	}
	s := newBanSlab(2)
	var got []Ban
	for i := range bans {
		got = append(got, s.banOf(&bans[i], now))
	}
	for i := range bans {
		if diff := gocmp.Diff(BanOf(&bans[i], now), got[i]); diff != "" {
			t.Errorf("ban %d (-BanOf +banOf):\n%s", i, diff)
		}
	}
}

// TestAppendJSONString: a string is quoted as encoding/json quotes it:
// each byte alone and between others, and random runes and bytes.
func TestAppendJSONString(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	var ss []string
	for c := range 256 {
		ss = append(ss, string(rune(c)), string([]byte{byte(c)}), "a"+string([]byte{byte(c)})+"b")
	}
	runes := []rune{'a', '"', '\\', '<', '>', '&', '\u2028', '\u2029', 'é', '\u009b', '\U0001f600', utf8.RuneError, 0x7f, 0}
	for range 5000 {
		var b []byte
		for range r.IntN(20) {
			if r.IntN(4) == 0 {
				b = append(b, byte(r.IntN(256)))
			} else {
				b = utf8.AppendRune(b, runes[r.IntN(len(runes))])
			}
		}
		ss = append(ss, string(b))
	}
	for _, s := range ss {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSONString(nil, s); string(got) != string(want) {
			t.Fatalf("appendJSONString(%q) = %s, want %s", s, got, want)
		}
	}
}

// TestAppendJSONTime: a time is written as its MarshalJSON writes it: UTC
// times of every year from 1000 to 9999 and every precision, and others
// (other zones, a zero offset under another name, years beyond).
func TestAppendJSONTime(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	zones := []*time.Location{time.UTC, time.FixedZone("zero", 0), time.FixedZone("x", -(3*3600 + 30*60))}
	lo, hi := time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	times := []time.Time{time.Date(999, 12, 31, 23, 59, 59, 999999999, time.UTC), time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 1, time.UTC), time.UnixMilli(0), time.Now()}
	for range 20000 {
		ns := []int64{0, r.Int64N(1000) * 1e6, r.Int64N(1e9), r.Int64N(1e3) * 1e3, 100, 1e8}[r.IntN(6)]
		times = append(times, time.Unix(lo+r.Int64N(hi-lo), ns))
	}
	for _, tm := range times {
		for _, loc := range zones {
			tl := tm.In(loc)
			want, err := tl.MarshalJSON()
			if err != nil {
				want = fmt.Appendf(nil, "%q", tl.Format(time.RFC3339Nano)) // beyond MarshalJSON's years: AppendFormat's text
			}
			if got := appendJSONTime(nil, tl); string(got) != string(want) {
				t.Fatalf("appendJSONTime(%v) = %s, want %s", tl, got, want)
			}
		}
	}
}
