package replay

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"
	"unsafe"

	"github.com/logjail/logjail/internal/word"
	"github.com/logjail/logjail/parser"
)

// The ring of recent requests as it was before its seqs were cut to 32 bits
// and its records to 40 bytes (int64 sequence numbers, 48-byte records,
// 40-byte heads): the model TestRecentAsOld compares the ring with.

// rec is one entry in the ring, without a pointer.
type oldRec struct {
	hi, lo uint64 // the client address, 16 bytes (IPv4 as IPv4-mapped)
	t      int64  // unix ns
	first  int64  // unix ns of the client's first request of its visit
	prev   int64  // 1 + the sequence number of the previous record of the bucket, 0 for none
	seen   uint32 // the client's requests in its visit, this one included
	flags  uint8
}

// recent is the ring of the last recentLines entries.
type oldRecent struct {
	recs  []oldRec
	heads []oldHead // per bucket: its newest record
	n     int64     // records added: the next sequence number
}

// head is a bucket's newest record: its sequence number (plus one; 0 for
// none) and a copy of its client and visit, so that an entry of the
// client that came last to its bucket (most entries) reads one place in
// memory, not two.
type oldHead struct {
	seq    int64
	hi, lo uint64
	first  int64
	seen   uint32
}

func newOldRecent() *oldRecent {
	return &oldRecent{recs: make([]oldRec, recentLines), heads: make([]oldHead, recentBucket)}
}

// valid reports whether the record of sequence number seq is still in the
// ring.
func (r *oldRecent) valid(seq int64) bool { return seq >= 0 && seq < r.n && seq >= r.n-recentLines }

// addFlags is add with e's recFlags found ahead.
func (r *oldRecent) addFlags(e *parser.Entry, flags uint8) {
	hi, lo := word.Addr(e.IP)
	b := recentHash(hi, lo)
	t := e.Time.UnixNano()
	first, seen := t, uint32(1)
	h := &r.heads[b]
	p := h.seq
	if p != 0 && h.hi == hi && h.lo == lo && r.valid(p-1) {
		p = 0 // the bucket's newest record is this client's: no walk
		first, seen = min(h.first, t), h.seen+1
		if seen == 0 {
			seen--
		}
	}
	for steps := 0; p != 0 && steps < recentWalk && r.valid(p-1); steps++ {
		q := &r.recs[(p-1)&(recentLines-1)]
		if q.hi == hi && q.lo == lo {
			first, seen = min(q.first, t), q.seen+1
			if seen == 0 {
				seen-- // saturate
			}
			break
		}
		p = q.prev
	}
	r.recs[r.n&(recentLines-1)] = oldRec{hi: hi, lo: lo, t: t, first: first, prev: h.seq, seen: seen, flags: flags}
	r.n++
	*h = oldHead{seq: r.n, hi: hi, lo: lo, first: first, seen: seen}
}

// latest returns the newest record of a, or nil.
func (r *oldRecent) latest(a netip.Addr) *oldRec {
	hi, lo := word.Addr(a)
	p := r.heads[recentHash(hi, lo)].seq
	for steps := 0; p != 0 && steps < recentWalk && r.valid(p-1); steps++ {
		q := &r.recs[(p-1)&(recentLines-1)]
		if q.hi == hi && q.lo == lo {
			return q
		}
		p = q.prev
	}
	return nil
}

// burst reads the last requests of a up to log time t: those within
// burstWindow before t, at most burstRequests, newest first.
func (r *oldRecent) burst(a netip.Addr, t time.Time) burstStats {
	var st burstStats
	hi, lo := word.Addr(a)
	end := t.UnixNano()
	from := end - int64(burstWindow)
	p := r.heads[recentHash(hi, lo)].seq
	var newest, oldest int64
	// Walk the bucket's chain back, skipping other clients' records (as
	// many as burstRequests*4 at most).
	for others := 0; p != 0 && r.valid(p-1) && st.n < burstRequests && others < burstRequests*4; {
		q := &r.recs[(p-1)&(recentLines-1)]
		p = q.prev
		if q.hi != hi || q.lo != lo {
			others++
			continue
		}
		if q.t > end {
			continue
		}
		if q.t <= from {
			break
		}
		if st.n == 0 {
			newest = q.t
		}
		oldest = q.t
		st.n++
		if q.flags&recOK != 0 {
			st.ok++
		}
		if q.flags&recStatic != 0 {
			st.static++
		}
	}
	st.span = time.Duration(newest - oldest)
	return st
}

// TestRecentAsOld adds the same random entries to the ring and to the old
// one (oldRecent), the ring's count of records started at places where its
// 32-bit seqs wrap or renew runs, and checks after each entry the client's
// visit (first, seen) and, every few entries, latest and burst for
// clients old and new.
func TestRecentAsOld(t *testing.T) {
	starts := []int64{0, renewEvery - 3*recentLines, 1<<32 - 2*recentLines - 7, 3<<31 - recentLines/2, 1<<33 + 5}
	lines := 6 * recentLines
	if testing.Short() {
		lines = 2 * recentLines
	}
	for _, n0 := range starts {
		rng := rand.New(rand.NewPCG(uint64(n0), 23))
		r, o := newRecent(), newOldRecent()
		if n0 != 0 { // as if it had run from 0: as renew leaves them, no seq in the ring
			r.n = n0
			for i := range r.heads {
				r.heads[i].seq = uint32(n0 - recentLines)
			}
		}
		addr := func() netip.Addr {
			switch k := rng.IntN(10); {
			case k < 4: // a few busy clients
				return netip.AddrFrom4([4]byte{10, 0, 0, byte(rng.IntN(20))})
			case k < 7: // thousands
				return netip.AddrFrom4([4]byte{10, 1, byte(rng.IntN(16)), byte(rng.IntN(256))})
			case k < 9: // many, most seen once
				return netip.AddrFrom4([4]byte{10, 2 + byte(rng.IntN(8)), byte(rng.IntN(256)), byte(rng.IntN(256))})
			default:
				if rng.IntN(8) == 0 {
					return netip.IPv6Unspecified() // the address of a zeroed record
				}
				var b [16]byte
				b[0], b[1], b[15] = 0x20, 0x01, byte(rng.IntN(64))
				b[8] = byte(rng.IntN(64))
				return netip.AddrFrom16(b)
			}
		}
		now := time.Unix(1700000000, 0)
		var seen []netip.Addr
		for k := range lines {
			now = now.Add(time.Duration(rng.IntN(300)) * time.Millisecond)
			at := now
			if rng.IntN(50) == 0 { // out of order
				at = now.Add(-time.Duration(rng.IntN(20)) * time.Second)
			}
			e := &parser.Entry{IP: addr(), Time: at}
			flags := uint8(rng.IntN(4))
			r.addFlags(e, flags)
			o.addFlags(e, flags)
			hi, lo := word.Addr(e.IP)
			h, oh := r.heads[recentHash(hi, lo)], o.heads[recentHash(hi, lo)]
			if h.first != oh.first || h.seen != oh.seen {
				t.Fatalf("start %d, entry %d (%v): visit (%d, %d), the old ring's (%d, %d)", n0, k, e.IP, h.first, h.seen, oh.first, oh.seen)
			}
			if len(seen) < 4096 {
				seen = append(seen, e.IP)
			} else {
				seen[rng.IntN(len(seen))] = e.IP
			}
			if k%97 == 0 {
				for _, a := range []netip.Addr{seen[rng.IntN(len(seen))], addr()} {
					rc, orc := r.latest(a), o.latest(a)
					if (rc == nil) != (orc == nil) || rc != nil && (rc.t != orc.t || rc.first != orc.first || rc.seen != orc.seen) {
						t.Fatalf("start %d, entry %d: latest(%v) = %+v, the old ring's %+v", n0, k, a, rc, orc)
					}
					if st, ost := r.burst(a, at), o.burst(a, at); st != ost {
						t.Fatalf("start %d, entry %d: burst(%v) = %+v, the old ring's %+v", n0, k, a, st, ost)
					}
				}
			}
		}
	}
}

// TestRecentSizes: the records are 40 bytes and the heads 32.
func TestRecentSizes(t *testing.T) {
	if s := unsafe.Sizeof(rec{}); s != 40 {
		t.Errorf("a record is %d bytes, not 40", s)
	}
	if s := unsafe.Sizeof(head{}); s != 32 {
		t.Errorf("a head is %d bytes, not 32", s)
	}
}

// TestRenew: once renew has run (at a multiple of renewEvery), a seq kept
// that was out of the ring then (whatever it was before) stays out until
// the next renewal, and so do all of them once the ring has turned.
func TestRenew(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 31))
	r := newRecent()
	r.n = 3*renewEvery - 1
	for i := range r.heads {
		r.heads[i].seq = rng.Uint32()
	}
	for i := range r.recs {
		r.recs[i].prev = rng.Uint32()
	}
	e := &parser.Entry{IP: netip.MustParseAddr("192.0.2.1"), Time: time.Unix(1700000000, 0)}
	r.addFlags(e, 0) // the 3*renewEvery-th record: renew runs
	var in []bool
	out := 0
	for i := range r.heads {
		_, ok := r.at(r.heads[i].seq)
		in = append(in, ok)
		if !ok {
			out++
		}
	}
	for i := range r.recs {
		_, ok := r.at(r.recs[i].prev)
		in = append(in, ok)
	}
	if out < len(r.heads)*9/10 {
		t.Fatalf("%d of %d heads out of the ring after renew", out, len(r.heads))
	}
	for _, n := range []int64{r.n, r.n + 1000, r.n + recentLines, r.n + renewEvery/2, r.n + renewEvery - 1} {
		r.n = n
		for i := range in {
			var s uint32
			if i < len(r.heads) {
				s = r.heads[i].seq
			} else {
				s = r.recs[i-len(r.heads)].prev
			}
			if _, ok := r.at(s); ok && (!in[i] || n >= 3*renewEvery+recentLines) {
				t.Fatalf("n %d: seq %d (%d) in the ring again", n, i, s)
			}
		}
	}
}
