package detector

import (
	"hash/maphash"
	"unsafe"

	"github.com/logjail/logjail/internal/pool"
)

// keyTable interns the detector's keys: each distinct key tracked has an id
// (a reference into recs), its text once in a byte pool, and the first of
// its states (one per rule, chained by state.sib). The index is an
// open-addressing table of ids with linear probing, at most three quarters
// full; the hash is not kept (a resize hashes the keys again). Nothing here
// holds a pointer per key, so a million keys cost the collector nothing to
// scan and about 40 bytes each (their text, a 16-byte record and 4 to 8
// bytes of index), 16 more for a key that is not an address once one of
// its states saw an address (claimAddr).
type keyTable struct {
	seed  maphash.Seed
	slots []uint32 // ids, 0 for an empty slot; a power of two long
	recs  pool.Pool[keyRec]
	text  pool.Pool[byte]
	addrs pool.Pool[addrKey] // the first address seen on a key (keyTable.claimAddr)
	long  map[uint32]string  // text of keys too long for a pool run, by id
	n     int                // keys
}

// keyRec is one key: where its text is, its first state and the address
// its states with flagOne saw.
type keyRec struct {
	ref  uint32 // its text in text (0: in long)
	n    uint32 // its length
	head int32  // its first state
	addr uint32 // its address in addrs, 0 if none
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
		return t.addrs.Get(r.addr, 1)[0]
	}
	return addrKey{}
}

const (
	keyMinSlots = 1 << 10
	keyMaxRun   = pool.Page - 8 // longer keys are kept in long
)

func newKeyTable() keyTable {
	return keyTable{seed: maphash.MakeSeed(), slots: make([]uint32, keyMinSlots)}
}

// hash returns the hash of key the table uses.
func (t *keyTable) hash(key string) uint32 { return uint32(maphash.String(t.seed, key)) }

// hashOf returns the hash of id's text (the same as hash's).
func (t *keyTable) hashOf(id uint32) uint32 { return uint32(maphash.Bytes(t.seed, t.bytesOf(id))) }

func (t *keyTable) rec(id uint32) *keyRec { return &t.recs.Get(id, 1)[0] }

// bytesOf returns id's text, valid until id is removed.
func (t *keyTable) bytesOf(id uint32) []byte {
	r := t.rec(id)
	if r.ref == 0 {
		s := t.long[id]
		return unsafe.Slice(unsafe.StringData(s), len(s))
	}
	return t.text.Get(r.ref, uint16(r.n))
}

// view returns id's text without a copy: valid until id is removed, and
// only to be read (KeyPeak.Key).
func (t *keyTable) view(id uint32) string {
	b := t.bytesOf(id)
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// textOf returns a copy of id's text.
func (t *keyTable) textOf(id uint32) string { return string(t.bytesOf(id)) }

// equal reports whether id's text is key.
func (t *keyTable) equal(id uint32, key string) bool { return string(t.bytesOf(id)) == key }

// find returns the id of key (hash h), or 0.
func (t *keyTable) find(key string, h uint32) uint32 {
	mask := uint32(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		id := t.slots[i]
		if id == 0 {
			return 0
		}
		if r := t.rec(id); int(r.n) == len(key) && t.equal(id, key) {
			return id
		}
	}
}

// insert adds key (hash h, not in the table) with its first state head and
// returns its id.
func (t *keyTable) insert(key string, h uint32, head int32) uint32 {
	if (t.n+1)*4 > len(t.slots)*3 {
		t.resize(len(t.slots) * 2)
	}
	id := t.recs.Alloc(1)
	r := t.rec(id)
	*r = keyRec{n: uint32(len(key)), head: head}
	if len(key) > keyMaxRun {
		if t.long == nil {
			t.long = map[uint32]string{}
		}
		t.long[id] = string([]byte(key))
	} else if len(key) > 0 {
		r.ref = t.text.Alloc(uint16(len(key)))
		copy(t.text.Get(r.ref, uint16(len(key))), key)
	}
	t.place(id, h)
	t.n++
	return id
}

// place puts id in the first empty slot from its home.
func (t *keyTable) place(id, h uint32) {
	mask := uint32(len(t.slots) - 1)
	i := h & mask
	for t.slots[i] != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = id
}

func (t *keyTable) resize(n int) {
	old := t.slots
	t.slots = make([]uint32, n)
	for _, id := range old {
		if id != 0 {
			t.place(id, t.hashOf(id))
		}
	}
}

// remove takes id out of the table and frees its text and record.
func (t *keyTable) remove(id uint32) {
	r := t.rec(id)
	mask := uint32(len(t.slots) - 1)
	i := t.hashOf(id) & mask
	for t.slots[i] != id {
		i = (i + 1) & mask
	}
	// Backward shift: move up every entry after i whose home is not in
	// (i, j], so that no probe sequence crosses an empty slot.
	for j := (i + 1) & mask; ; j = (j + 1) & mask {
		e := t.slots[j]
		if e == 0 {
			break
		}
		k := t.hashOf(e) & mask
		if (j > i && (k <= i || k > j)) || (j < i && k <= i && k > j) {
			t.slots[i] = e
			i = j
		}
	}
	t.slots[i] = 0
	if r.ref != 0 {
		t.text.Release(r.ref, uint16(r.n))
	} else if r.n > 0 {
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
