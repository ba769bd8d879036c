package endpoint

import (
	"encoding/binary"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/logjail/logjail/actions"
	"github.com/logjail/logjail/internal/word"
	"github.com/logjail/logjail/rules"
)

// banTable is one immutable set of blocked prefixes with their entries,
// held without a pointer per prefix (issue 23: the collector marks every
// pointer of the live heap on every cycle, and the ban set is a large part
// of that heap): each entry is a fixed-size rec in one slice, found through
// a map of fixed-size prefix keys (whose buckets hold no pointer, so the
// collector does not scan them), and its strings (rule, key, reason) are
// spans of one arena string. A lookup reads an entry's strings as
// substrings of the arena: no allocation.
type banTable struct {
	recs  []rec
	index map[pkey]int32 // recs' positions by prefix
	arena string
	dead  int // bytes of the arena no rec reads (keys replaced or removed)
	// lens are the prefix lengths present per family, longest first: a
	// lookup probes one masked key per length.
	lens4, lens6 []uint8
}

// pkey is a masked prefix as a fixed-size value: its address's 128 bits
// (an IPv4 address in its 16-byte form, told apart by v4) and its length.
type pkey struct {
	hi, lo uint64
	bits   uint8
	v4     bool
}

// span is a string of a table's arena.
type span struct{ off, n uint32 }

// rec is one entry, pointer-free. gone marks a prefix lifted in an
// overlay (banView) over a base that still holds it.
type rec struct {
	k         pkey
	kind      uint8 // kinds' index
	gone      bool
	hasUntil  bool
	nsec      int32
	sec       int64
	delay     time.Duration
	rule, key span
	reason    span
}

// keyOf is the key of a masked prefix.
func keyOf(p netip.Prefix) pkey {
	hi, lo, v4 := addrKey(p.Addr())
	return pkey{hi: hi, lo: lo, bits: uint8(p.Bits()), v4: v4}
}

// masked is the key of the prefix of length n (of its family) containing
// the address hi:lo.
func masked(hi, lo uint64, v4 bool, n uint8) pkey {
	m := int(n)
	if v4 {
		m += 96
	}
	hi, lo = rules.Mask128(hi, lo, m)
	return pkey{hi: hi, lo: lo, bits: n, v4: v4}
}

// prefix is k as a netip.Prefix.
func (k pkey) prefix() netip.Prefix {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], k.hi)
	binary.BigEndian.PutUint64(b[8:], k.lo)
	a := netip.AddrFrom16(b)
	if k.v4 {
		a = a.Unmap()
	}
	return netip.PrefixFrom(a, int(k.bits))
}

// entry is r as an actions.Entry; its strings are t's arena's.
func (t *banTable) entry(r *rec) actions.Entry {
	e := actions.Entry{Prefix: r.k.prefix(), Kind: kindOf(r.kind), Delay: r.delay,
		Rule: t.str(r.rule), Key: t.str(r.key), Reason: t.str(r.reason)}
	if r.hasUntil {
		e.Until = time.Unix(r.sec, int64(r.nsec))
	}
	return e
}

func (t *banTable) str(s span) string { return t.arena[s.off : s.off+s.n] }

// get returns the rec of k.
func (t *banTable) get(k pkey) (*rec, bool) {
	if t == nil {
		return nil, false
	}
	i, ok := t.index[k]
	if !ok {
		return nil, false
	}
	return &t.recs[i], true
}

// tableBuilder makes a banTable: a new one, or a changed copy of one
// (fromTable).
type tableBuilder struct {
	t     *banTable
	arena strings.Builder
	strs  map[string]span // the rules' and reasons' strings, each once (keys are each their own)
	// tombs: a prefix lifted stays as a rec marked gone (an overlay);
	// else it is removed.
	tombs bool
}

func newBuilder(n int, tombs bool) *tableBuilder {
	return &tableBuilder{t: &banTable{recs: make([]rec, 0, n), index: make(map[pkey]int32, n)}, strs: map[string]span{}, tombs: tombs}
}

// fromTable starts a builder of a base with a copy of t (its recs, index
// and arena as they are), to change by n more entries: the strings of what
// t holds are not copied one by one. An arena that holds more text of
// replaced and removed entries than of live ones is made anew.
func fromTable(t *banTable, n int) *tableBuilder {
	if t.dead > len(t.arena)/2 {
		b := newBuilder(len(t.recs)+n, false)
		for i := range t.recs {
			e := t.entry(&t.recs[i])
			b.add(&e, false)
		}
		return b
	}
	b := &tableBuilder{t: &banTable{recs: slices.Grow(slices.Clone(t.recs), n), index: maps.Clone(t.index), dead: t.dead},
		strs: map[string]span{}}
	b.arena.Grow(len(t.arena) + 64*n)
	b.arena.WriteString(t.arena)
	return b
}

func (b *tableBuilder) span(s string, once bool) span {
	if once {
		if sp, ok := b.strs[s]; ok {
			return sp
		}
	}
	sp := span{uint32(b.arena.Len()), uint32(len(s))}
	b.arena.WriteString(s)
	if once {
		b.strs[s] = sp
	}
	return sp
}

// add adds e, or lifts its prefix (gone); a prefix added twice keeps the
// last.
func (b *tableBuilder) add(e *actions.Entry, gone bool) {
	k := keyOf(e.Prefix.Masked())
	i, had := b.t.index[k]
	if had {
		b.t.dead += int(b.t.recs[i].key.n)
	}
	if gone && !b.tombs {
		if had {
			b.remove(i)
		}
		return
	}
	r := rec{k: k, gone: gone}
	if !gone {
		r.kind = kindIndex(e.Kind)
		r.delay = e.Delay
		r.rule, r.key, r.reason = b.span(e.Rule, true), b.span(e.Key, false), b.span(e.Reason, true)
		if !e.Until.IsZero() {
			r.hasUntil, r.sec, r.nsec = true, e.Until.Unix(), int32(e.Until.Nanosecond())
		}
	}
	if had {
		b.t.recs[i] = r
		return
	}
	b.t.index[k] = int32(len(b.t.recs))
	b.t.recs = append(b.t.recs, r)
}

// remove takes rec i out: the last rec takes its place.
func (b *tableBuilder) remove(i int32) {
	t := b.t
	delete(t.index, t.recs[i].k)
	last := int32(len(t.recs) - 1)
	if i != last {
		t.recs[i] = t.recs[last]
		t.index[t.recs[i].k] = i
	}
	t.recs = t.recs[:last]
}

// kindIndex is k as a rec holds it; kindOf reads it back. An entry's Kind
// is a ban or a throttle (actions.Entry).
func kindIndex(k actions.Kind) uint8 {
	if k == actions.KindThrottle {
		return 1
	}
	return 0
}

func kindOf(i uint8) actions.Kind {
	if i == 1 {
		return actions.KindThrottle
	}
	return actions.KindBan
}

// done returns the table.
func (b *tableBuilder) done() *banTable {
	t := b.t
	t.arena = b.arena.String()
	var seen4, seen6 [129]bool
	for i := range t.recs {
		k := t.recs[i].k
		if k.v4 {
			seen4[k.bits] = true
		} else {
			seen6[k.bits] = true
		}
	}
	t.lens4, t.lens6 = lengths(seen4[:]), lengths(seen6[:])
	return t
}

// lengths are the lengths marked in seen, longest first.
func lengths(seen []bool) []uint8 {
	var out []uint8
	for n := len(seen) - 1; n >= 0; n-- {
		if seen[n] {
			out = append(out, uint8(n))
		}
	}
	return out
}

// mergeLengths is the union of two lists of lengths, longest first.
func mergeLengths(a, b []uint8) []uint8 {
	out := slices.Concat(a, b)
	slices.SortFunc(out, func(x, y uint8) int { return int(y) - int(x) })
	return slices.Compact(out)
}

// addrKey is a's 128 bits (As16's, word.Addr), for masked.
func addrKey(a netip.Addr) (hi, lo uint64, v4 bool) {
	hi, lo = word.Addr(a)
	return hi, lo, a.Is4()
}
