package detector

import (
	"hash/maphash"
	"math/bits"
	"unsafe"

	"github.com/logjail/logjail/internal/pool"
	"github.com/logjail/logjail/internal/prefetch"
	"github.com/logjail/logjail/rules"
)

// keyTable interns the detector's keys: each distinct key tracked has an id
// (a reference into recs) and the first of its states (one per rule,
// chained by state.sib). An address or prefix key (rules.FixedKey) is kept
// as its 128 bits, family and length in its record, and its text is made
// only when asked for (textOf, view); any other key (user:NAME, ua:TEXT,
// ADDRESS|ua:TEXT, range:NAME) is kept as its 64-bit hash in its record and
// its text once in a byte pool, compared whole on a hash match, so that no
// collision merges two keys. The index is an open-addressing table of ids
// with linear probing, at most three quarters full. A slot holds its key's
// id and 5 bits of its key's hash (slotOf), so that a probe passes over
// the slots of other keys without reading their records: at a million
// keys each record read is a cache and TLB miss, and a lookup met another
// key's record first in about a third of the lookups (linear probing at
// half full makes 1.46 probes a hit, more for a miss). A lookup of a fixed
// key reads its slot and its record (16 bytes compared there): no text,
// no hash of a text. Nothing here holds a pointer per key, so a million
// keys cost the collector nothing to scan and about 40 bytes each (a
// 32-byte record and 4 to 8 bytes of index; a text key's text besides), 16
// more for a key that is not an address once one of its states saw an
// address (claimAddr).
type keyTable struct {
	seed   maphash.Seed
	k0, k1 uint64   // the seeds of a fixed key's hash
	slots  []uint32 // slotOf(id, hash), 0 for an empty slot; a power of two long
	recs   pool.Pool[keyRec]
	text   pool.Pool[byte]
	addrs  pool.Pool[addrKey] // the first address seen on a key (keyTable.claimAddr)
	long   map[uint32]string  // text of keys too long for a pool run, by id
	n      int                // keys
	buf    []byte             // the text of a fixed key (bytesOf), until the next
}

// keyRec is one key: the key itself (a fixed key's bits, or a text key's
// hash and where its text is), its first state and the address its states
// with flagOne saw.
type keyRec struct {
	hi, lo uint64 // a fixed key's Hi and Lo; a text key's hash, and its text's ref in text (0: in long)
	head   int32  // its first state
	addr   uint32 // its address in addrs, 0 if none
	tag    uint32 // a fixed key's fixedTag; 0 for a text key
	n      uint32 // a text key's length
}

// fixedTag is the tag of a fixed key's record: never 0.
func fixedTag(k rules.FixedKey) uint32 { return 1<<31 | uint32(k.Fam)<<8 | uint32(k.Bits) }

func (r *keyRec) fixed() rules.FixedKey {
	return rules.FixedKey{Hi: r.hi, Lo: r.lo, Bits: uint8(r.tag), Fam: uint8(r.tag >> 8)}
}

// akey is a key as the table looks it up: a fixed key (f not zero), else
// the text.
type akey struct {
	f    rules.FixedKey
	text string
}

// keyOf returns the key whose text is text: a fixed key when text is the
// canonical text of an address or prefix (rules.ParseFixedKey), so that a
// key given as text (an operator's, a checkpoint's, the fleet's) is the
// one the charges of its address made.
func keyOf(text string) akey {
	if f, ok := rules.ParseFixedKey(text); ok {
		return akey{f: f}
	}
	return akey{text: text}
}

// chargeKey returns the key of c: its fixed key, else its text's.
func chargeKey(c *rules.Charge) akey {
	if !c.Fixed.IsZero() {
		return akey{f: c.Fixed}
	}
	return keyOf(c.Key)
}

// addrKey is an address as addrSeen keeps it, without a time.
type addrKey struct{ hi, lo uint64 }

// claimAddr reports whether a is id's address, making it so if id has
// none: the address its states with flagOne saw (state.go, noteAddr).
func (t *keyTable) claimAddr(id uint32, a addrKey) bool {
	r := t.rec(id)
	if r.addr == 0 {
		r.addr = t.addrs.Alloc(1)
		t.addrs.Get(r.addr, 1)[0] = a
		return true
	}
	return t.addrs.Get(r.addr, 1)[0] == a
}

// addrOf returns id's address (zero if none).
func (t *keyTable) addrOf(id uint32) addrKey {
	if r := t.rec(id); r.addr != 0 {
		return *t.addrs.At(r.addr)
	}
	return addrKey{}
}

const (
	keyMinSlots = 1 << 10
	keyMaxRun   = pool.Page - 8 // longer keys are kept in long
)

func newKeyTable() keyTable {
	seed := maphash.MakeSeed()
	return keyTable{seed: seed, k0: maphash.String(seed, "k0"), k1: maphash.String(seed, "k1"), slots: make([]uint32, keyMinSlots)}
}

// hashK returns the hash of k.
func (t *keyTable) hashK(k akey) uint64 {
	if !k.f.IsZero() {
		return t.hashFixed(k.f)
	}
	return maphash.String(t.seed, k.text)
}

// hashFixed mixes a fixed key's bits with the table's seeds (two rounds of
// a 128-bit multiply folded), so that keys that differ in any bit spread.
func (t *keyTable) hashFixed(k rules.FixedKey) uint64 {
	h := mix(k.Hi^t.k0, k.Lo^t.k1)
	return mix(h^uint64(fixedTag(k)), 0x9e3779b97f4a7c15^t.k0)
}

func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// hashOf returns the hash of id's key (the same as hashK's).
func (t *keyTable) hashOf(id uint32) uint64 {
	r := t.rec(id)
	if r.tag != 0 {
		return t.hashFixed(r.fixed())
	}
	return r.hi
}

func (t *keyTable) rec(id uint32) *keyRec { return t.recs.At(id) }

// bytesOf returns id's text, valid until id is removed (a text key's) or
// until the next call (a fixed key's, made in t.buf).
func (t *keyTable) bytesOf(id uint32) []byte {
	r := t.rec(id)
	if r.tag != 0 {
		t.buf = r.fixed().AppendText(t.buf[:0])
		return t.buf
	}
	if r.lo == 0 {
		s := t.long[id]
		return unsafe.Slice(unsafe.StringData(s), len(s))
	}
	return t.text.Get(uint32(r.lo), uint16(r.n))
}

// view returns id's text without a copy: valid until id is removed (a
// fixed key's: until the next view), and only to be read (KeyPeak.Key).
func (t *keyTable) view(id uint32) string {
	b := t.bytesOf(id)
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// textOf returns a copy of id's text.
func (t *keyTable) textOf(id uint32) string {
	if r := t.rec(id); r.tag != 0 {
		return r.fixed().String()
	}
	return string(t.bytesOf(id))
}

// A slot is an id with, for an id below 1<<slotIDBits (a table that never
// held more than about 67 million keys at once), the flag slotTagged and 5
// bits of the key's hash (its top bits: the slot's index is made of the
// low ones); a larger id is held alone, and a probe reads its record.
const (
	slotTagged = 1 << 31
	slotIDBits = 26
	slotIDMask = 1<<slotIDBits - 1
)

// slotOf returns the slot of id, whose key's hash is h.
func slotOf(id uint32, h uint64) uint32 {
	if id <= slotIDMask {
		return slotTag(h) | id
	}
	if id >= slotTagged { // 2^31 records, 64 GiB of them: not reached
		panic("detector: key table out of ids")
	}
	return id
}

// slotTag is the flag and hash bits a slot of a key of hash h has.
func slotTag(h uint64) uint32 { return slotTagged | uint32(h>>59)<<slotIDBits }

// slotID returns the id slot s (not empty) holds.
func slotID(s uint32) uint32 {
	if s&slotTagged != 0 {
		return s & slotIDMask
	}
	return s
}

// slotMay reports whether slot s (not empty) may hold a key whose
// slotTag is tag: false only when its hash bits say it holds another.
func slotMay(s, tag uint32) bool { return s&^slotIDMask == tag || s&slotTagged == 0 }

// findK returns the id of k (hash h), or 0: a fixed key is compared in its
// record, a text key's hash there and then its text.
func (t *keyTable) findK(k akey, h uint64) uint32 {
	if !k.f.IsZero() {
		return t.findFixed(&k.f, h)
	}
	mask := uint32(len(t.slots) - 1)
	st := slotTag(h)
	for i := uint32(h) & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			return 0
		}
		if !slotMay(s, st) {
			continue
		}
		id := slotID(s)
		if r := t.rec(id); r.tag == 0 && r.hi == h && int(r.n) == len(k.text) && string(t.bytesOf(id)) == k.text {
			return id
		}
	}
}

// findFixed is findK of the fixed key f (not zero), compared in its
// record.
func (t *keyTable) findFixed(f *rules.FixedKey, h uint64) uint32 {
	mask := uint32(len(t.slots) - 1)
	tag, st := fixedTag(*f), slotTag(h)
	for i := uint32(h) & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			return 0
		}
		if !slotMay(s, st) {
			continue
		}
		id := slotID(s)
		if r := t.rec(id); r.hi == f.Hi && r.lo == f.Lo && r.tag == tag {
			return id
		}
	}
}

// insertK adds k (hash h, not in the table) with its first state head and
// returns its id.
func (t *keyTable) insertK(k akey, h uint64, head int32) uint32 {
	if (t.n+1)*4 > len(t.slots)*3 {
		t.resize(len(t.slots) * 2)
	}
	id := t.recs.Alloc(1)
	r := t.rec(id)
	switch key := k.text; {
	case !k.f.IsZero():
		*r = keyRec{hi: k.f.Hi, lo: k.f.Lo, tag: fixedTag(k.f), head: head}
	case len(key) > keyMaxRun:
		*r = keyRec{hi: h, n: uint32(len(key)), head: head}
		if t.long == nil {
			t.long = map[uint32]string{}
		}
		t.long[id] = string([]byte(key))
	default:
		*r = keyRec{hi: h, n: uint32(len(key)), head: head}
		if len(key) > 0 {
			ref := t.text.Alloc(uint16(len(key)))
			copy(t.text.Get(ref, uint16(len(key))), key)
			r.lo = uint64(ref)
		}
	}
	t.place(id, h)
	t.n++
	return id
}

// place puts id in the first empty slot from its home.
func (t *keyTable) place(id uint32, h uint64) {
	mask := uint32(len(t.slots) - 1)
	i := uint32(h) & mask
	for t.slots[i] != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = slotOf(id, h)
}

func (t *keyTable) resize(n int) {
	old := t.slots
	t.slots = make([]uint32, n)
	// A large index is new memory: written before place reads it, each of
	// its pages faults once, as a write (pool.Touch).
	pool.Touch(t.slots)
	for k, s := range old {
		// hashOf reads the key's record, a random read in a large
		// table: asked for resizeAhead slots before it is needed.
		if k+resizeAhead < len(old) {
			if next := old[k+resizeAhead]; next != 0 {
				prefetch.Line(unsafe.Pointer(t.rec(slotID(next))))
			}
		}
		if s != 0 {
			id := slotID(s)
			t.place(id, t.hashOf(id))
		}
	}
}

// resizeAhead is how many slots ahead of the one it places resize asks
// for a key's record.
const resizeAhead = 32

// remove takes id out of the table and frees its text and record.
func (t *keyTable) remove(id uint32) {
	r := t.rec(id)
	mask := uint32(len(t.slots) - 1)
	i := uint32(t.hashOf(id)) & mask
	for slotID(t.slots[i]) != id {
		i = (i + 1) & mask
	}
	// Backward shift: move up every entry after i whose home is not in
	// (i, j], so that no probe sequence crosses an empty slot.
	for j := (i + 1) & mask; ; j = (j + 1) & mask {
		e := t.slots[j]
		if e == 0 {
			break
		}
		k := uint32(t.hashOf(slotID(e))) & mask
		if (j > i && (k <= i || k > j)) || (j < i && k <= i && k > j) {
			t.slots[i] = e
			i = j
		}
	}
	t.slots[i] = 0
	switch {
	case r.tag != 0:
	case r.lo != 0:
		t.text.Release(uint32(r.lo), uint16(r.n))
	case r.n > 0:
		delete(t.long, id)
	}
	t.addrs.Release(r.addr, 1)
	t.recs.Release(id, 1)
	t.n--
	if len(t.slots) > keyMinSlots && t.n*8 < len(t.slots) {
		t.resize(len(t.slots) / 2)
	}
}

// memory estimates the bytes the table holds: its index, records and text
// pages (what is handed out of them, and the free parts of their pages).
func (t *keyTable) memory() int64 {
	n := int64(len(t.slots))*4 + t.recs.Capacity()*int64(unsafe.Sizeof(keyRec{})) + t.text.Capacity() +
		t.addrs.Capacity()*int64(unsafe.Sizeof(addrKey{}))
	for _, s := range t.long {
		n += int64(len(s)) + 16
	}
	return n
}
