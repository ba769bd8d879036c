package replay

import (
	"math/bits"
	"net/netip"
	"time"
	"unsafe"

	"github.com/logjail/logjail/internal/prefetch"
	"github.com/logjail/logjail/internal/word"
	"github.com/logjail/logjail/parser"
)

// The recent requests: what the report says about a ban beyond the
// detector's own state (how long the client had been around, how many
// requests it had sent, whether it looked like a browser loading a page)
// comes from a fixed ring of the last recentLines entries, whatever the
// number of keys: no map per client (a million keys cost the replay no
// more than before), about 6.5 MB in all (2.5 MB of records, 4 MB of
// bucket heads).
//
// Each record is chained to the previous record of its bucket (a hash of
// the client address), and carries its client's visit so far: the time
// of the client's first request and the requests it has sent since. A
// visit starts at a client's first request, or at its first request
// after a gap of more than recentLines lines of the log (its previous
// record has left the ring). For most logs a client's visit is its whole
// history in them: 65,536 lines are days of a small site's log.
const (
	recentBits   = 16
	recentLines  = 1 << recentBits       // records in the ring
	recentBucket = 1 << (recentBits + 1) // chain heads
	// recentWalk bounds the walk, at each entry, to the client's previous
	// record through the other clients of its bucket: past it (a client
	// sharing its bucket with a busy one, about 1 in 131,072), its visit
	// starts again.
	recentWalk = 64
)

// Burst reading: the client's requests of the last burstWindow before the
// ban, at most burstRequests of them, and at least burstMin to judge. A
// ban of a rate rule is a risky burst when at least burstOK of them were
// answered 2xx or 304 and at least burstStatic of them were static files:
// a browser loading a heavy page (a document, then its style sheets,
// scripts, images and fonts, mostly 200 and 304). A flood of 200s on
// pages (a scraper, a load test) is not flagged, nor a flood of 404s.
const (
	burstWindow   = 10 * time.Second
	burstRequests = 200
	burstMin      = 5
	burstOK       = 0.8
	burstStatic   = 0.5
)

// Status bits of a record.
const (
	recOK     uint8 = 1 << iota // answered 2xx or 304
	recStatic                   // a static file (by the path's extension)
)

// rec is one entry in the ring, without a pointer: 40 bytes (its flags
// are kept apart, in recent.flags, so that it is not 48).
type rec struct {
	hi, lo uint64 // the client address, 16 bytes (IPv4 as IPv4-mapped)
	t      int64  // unix ns
	first  int64  // unix ns of the client's first request of its visit
	prev   uint32 // the previous record of the bucket: its seq (see recent.at)
	seen   uint32 // the client's requests in its visit, this one included
}

// recent is the ring of the last recentLines entries.
//
// A record's sequence number p is 1 + the number of records added before
// it. Heads and records keep only its low 32 bits (a seq): recent.at finds
// p back from n, as the p at most 2^32-1 below n with those bits, and
// tells whether that record is still in the ring. That is exact as long as
// no seq kept is 2^32 or more behind n, which renew sees to: every
// renewEvery records it sets each seq that is no longer in the ring to one
// that stays out of it until the next renewal. So a head is 32 bytes (one
// cache line holds two, and none straddles two) and the ring 2.5 MB.
type recent struct {
	recs  []rec
	flags []uint8 // recs[i]'s status bits (recOK, recStatic)
	heads []head  // per bucket: its newest record
	n     int64   // records added
}

// head is a bucket's newest record: its seq and a copy of its client and
// visit, so that an entry of the client that came last to its bucket (most
// entries) reads one place in memory, not two.
type head struct {
	hi, lo uint64
	first  int64
	seq    uint32
	seen   uint32
}

// renewEvery is how often (in records added) renew runs: with the ring's
// length, well under 2^32 (the span a seq tells apart).
const renewEvery = 1 << 31

func newRecent() *recent {
	return &recent{recs: make([]rec, recentLines), flags: make([]uint8, recentLines), heads: make([]head, recentBucket)}
}

func recentHash(hi, lo uint64) uint64 {
	h := (hi ^ bits.RotateLeft64(lo, 29)) * 0x9e3779b97f4a7c15
	return h >> (64 - recentBits - 1)
}

// at returns the ring index of the record of seq s, and whether that record
// is still in the ring (false for a seq of no record).
func (r *recent) at(s uint32) (int, bool) {
	d := uint32(r.n) - s // how far p is behind n
	p := r.n - int64(d)
	return int((p - 1) & (recentLines - 1)), d < recentLines && p >= 1
}

// renew sets every seq kept that is out of the ring to one that stays out
// of it for the next renewEvery records (see recent).
func (r *recent) renew() {
	out := uint32(r.n - recentLines) // d = recentLines now, less than 2^32 for long
	for i := range r.heads {
		if _, ok := r.at(r.heads[i].seq); !ok {
			r.heads[i].seq = out
		}
	}
	for i := range r.recs {
		if _, ok := r.at(r.recs[i].prev); !ok {
			r.recs[i].prev = out
		}
	}
}

// prefetch starts loading what add(e) will read and write: e's bucket head
// (a random place in its 4 MB, a cache miss for most entries) and the ring's
// next record. The merger calls it before charging e and adds e after, so
// the charge hides the miss.
func (r *recent) prefetch(e *parser.Entry) {
	r.prefetchBucket(uint32(recentHash(word.Addr(e.IP))))
	r.prefetchNext()
}

// ringAhead is how many entries ahead of the one it charges the merger
// asks for an entry's bucket head (prefetchBucket): a head is a cache miss
// for most entries, longer than one entry's charge.
const ringAhead = 4

// prefetchBucket starts loading the head of bucket b (recentHash).
func (r *recent) prefetchBucket(b uint32) {
	prefetch.Line(unsafe.Pointer(&r.heads[b&(recentBucket-1)]))
}

// prefetchNext starts loading the ring's next record.
func (r *recent) prefetchNext() {
	prefetch.Line(unsafe.Pointer(&r.recs[r.n&(recentLines-1)]))
}

// add records e, the next entry of the merged log.
func (r *recent) add(e *parser.Entry) { r.addFlags(e, recFlags(e)) }

// recFlags is what a record says of e's answer and path (recOK,
// recStatic). It reads e's path, so replay's parse workers find it for
// the entries they parse (block.ring), beside the line they have just
// read.
func recFlags(e *parser.Entry) uint8 {
	var flags uint8
	if e.Has&parser.HasStatus != 0 && (e.Status >= 200 && e.Status < 300 || e.Status == 304) {
		flags |= recOK
	}
	if e.Has&parser.HasPath != 0 && isStatic(e.Path) {
		flags |= recStatic
	}
	return flags
}

// addFlags is add with e's recFlags found ahead.
func (r *recent) addFlags(e *parser.Entry, flags uint8) {
	hi, lo := word.Addr(e.IP)
	r.addAt(e, hi, lo, flags, recentHash(hi, lo))
}

// addAt is addFlags with e's address as words (word.Addr: hi, lo) and
// its bucket (their recentHash) found ahead too: the worker that parsed e
// finds them (block.ring), so that the merger, the replay's serial part,
// neither reads e's address nor hashes it. (Read there through As16's
// copy, the words had been 60% of addAt's samples: a 16-byte load of two
// 8-byte stores, which the CPU cannot forward; word.Addr reads them
// without it now.)
func (r *recent) addAt(e *parser.Entry, hi, lo uint64, flags uint8, b uint64) {
	b &= recentBucket - 1
	t := e.Time.UnixNano()
	first, seen := t, uint32(1)
	h := &r.heads[b]
	i, ok := r.at(h.seq)
	if ok && h.hi == hi && h.lo == lo {
		ok = false // the bucket's newest record is this client's: no walk
		first, seen = min(h.first, t), h.seen+1
		if seen == 0 {
			seen--
		}
	}
	for steps := 0; ok && steps < recentWalk; steps++ {
		q := &r.recs[i]
		if q.hi == hi && q.lo == lo {
			first, seen = min(q.first, t), q.seen+1
			if seen == 0 {
				seen-- // saturate
			}
			break
		}
		i, ok = r.at(q.prev)
	}
	// Every field set in place (a record, a head), as the composite
	// literals would, without a copy of each built aside.
	j := r.n & (recentLines - 1)
	q := &r.recs[j]
	q.hi, q.lo, q.t, q.first, q.prev, q.seen = hi, lo, t, first, h.seq, seen
	r.flags[j] = flags
	r.n++
	h.hi, h.lo, h.first, h.seq, h.seen = hi, lo, first, uint32(r.n), seen
	if r.n%renewEvery == 0 {
		r.renew()
	}
}

// latest returns the newest record of a, or nil.
func (r *recent) latest(a netip.Addr) *rec {
	hi, lo := word.Addr(a)
	i, ok := r.at(r.heads[recentHash(hi, lo)].seq)
	for steps := 0; ok && steps < recentWalk; steps++ {
		q := &r.recs[i]
		if q.hi == hi && q.lo == lo {
			return q
		}
		i, ok = r.at(q.prev)
	}
	return nil
}

// burstStats is what a client's last requests before a ban were.
type burstStats struct {
	n      int           // requests counted
	ok     int           // answered 2xx or 304
	static int           // static files
	span   time.Duration // from the first counted to the last
}

// burst reads the last requests of a up to log time t: those within
// burstWindow before t, at most burstRequests, newest first.
func (r *recent) burst(a netip.Addr, t time.Time) burstStats {
	var st burstStats
	hi, lo := word.Addr(a)
	end := t.UnixNano()
	from := end - int64(burstWindow)
	i, ok := r.at(r.heads[recentHash(hi, lo)].seq)
	var newest, oldest int64
	// Walk the bucket's chain back, skipping other clients' records (as
	// many as burstRequests*4 at most).
	for others := 0; ok && st.n < burstRequests && others < burstRequests*4; {
		q, f := &r.recs[i], r.flags[i]
		i, ok = r.at(q.prev)
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
		if f&recOK != 0 {
			st.ok++
		}
		if f&recStatic != 0 {
			st.static++
		}
	}
	st.span = time.Duration(newest - oldest)
	return st
}

// isStatic reports whether path names a static file, by its extension:
// style sheets, scripts, images, fonts, media, source maps. A browser
// loading a page asks for these in bursts. The extension is what follows
// the path's last '.', when no '/' follows that and it is at most 5 bytes:
// so only the path's last 6 bytes are read, from the end (the merger calls
// this for every entry; TestIsStaticAsScan checks it against the scan of
// the whole path it replaces).
//
// A path of 8 bytes or more is read as one word (the workers call it for
// every line, and the byte loop and the switch on the extension's text
// mispredicted): the last '.' and '/' of its last 6 bytes are found at once
// (zeroBytes), the extension lowered and packed with its length
// (extKey), and looked up in a table of 64 keys (staticKeys) by a hash
// that puts each of the extensions in a slot of its own.
func isStatic(path string) bool {
	n := len(path)
	if n < 8 {
		return isStaticShort(path)
	}
	w := word.LE(path, n-8)          // the path's last byte is the word's top byte
	const last6 = 0x8080808080800000 // the top bits of bytes 2 to 7
	dots := zeroBytes(w^0x2e2e2e2e2e2e2e2e) & last6
	slashes := zeroBytes(w^0x2f2f2f2f2f2f2f2f) & last6
	if dots == 0 || bits.Len64(slashes) > bits.Len64(dots) {
		return false // no '.' in the last 6 bytes, or a '/' after the last
	}
	dot := (bits.Len64(dots) - 1) / 8 // the last '.', a byte of w
	if dot == 7 {
		return false // no extension after it
	}
	k, ok := extKey(w>>(8*(dot+1)), 7-dot)
	return ok && staticKeys[k*staticMul>>58] == k
}

// isStaticShort is isStatic byte by byte, for a path of fewer than 8 bytes.
func isStaticShort(path string) bool {
	n := len(path)
	for i := n - 1; i >= 0 && i >= n-6; i-- {
		switch path[i] {
		case '/':
			return false
		case '.':
			return staticExt(path[i+1:])
		}
	}
	return false
}

// zeroBytes has the top bit of each byte of x that is 0 set, and no other
// bit (exact: no borrow runs from one byte into the next).
func zeroBytes(x uint64) uint64 {
	const low7 = 0x7f7f7f7f7f7f7f7f
	return ^((x&low7 + low7) | x | low7)
}

// extKey packs an extension of n bytes (0 to 5, the low bytes of x, the
// rest of x ignored) lowered as staticExt lowers it, and n: the key of
// staticKeys. Not ok for a byte of 0x80 or more (no extension of the list
// has one).
func extKey(x uint64, n int) (uint64, bool) {
	x &= 1<<(8*n) - 1
	if x&0x8080808080 != 0 {
		return 0, false
	}
	// A byte of 'A' to 'Z' (each under 0x80, so no carry between bytes)
	// gets 0x20 added.
	upper := (x + 0x3f3f3f3f3f) &^ (x + 0x2525252525) & 0x8080808080
	return x | upper>>2 | uint64(n)<<40, true
}

// staticMul hashes an extKey to one of staticKeys' 64 slots; each of
// staticExt's extensions has a slot of its own (TestStaticKeys).
const staticMul = 0x67dba858989009

// staticKeys holds the extKey of each of staticExt's extensions in its
// slot (staticMul), and 0 (no key: its length bits are 0) elsewhere. Read
// only.
var staticKeys = func() (t [64]uint64) {
	for _, ext := range staticExts {
		var x uint64
		for i := len(ext) - 1; i >= 0; i-- {
			x = x<<8 | uint64(ext[i])
		}
		k, _ := extKey(x, len(ext))
		t[k*staticMul>>58] = k
	}
	return t
}()

// staticExts are the extensions of static files (staticExt's).
var staticExts = [...]string{"css", "js", "mjs", "map", "png", "jpg", "jpeg", "gif", "webp", "avif", "svg", "ico", "bmp",
	"woff", "woff2", "ttf", "otf", "eot", "mp4", "webm", "mp3", "ogg", "wav"}

// staticExt reports whether ext (at most 5 bytes, any case) is the
// extension of a static file.
func staticExt(ext string) bool {
	var buf [5]byte
	for i := 0; i < len(ext); i++ {
		c := ext[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	switch string(buf[:len(ext)]) {
	case "css", "js", "mjs", "map", "png", "jpg", "jpeg", "gif", "webp", "avif", "svg", "ico", "bmp",
		"woff", "woff2", "ttf", "otf", "eot", "mp4", "webm", "mp3", "ogg", "wav":
		return true
	}
	return false
}
