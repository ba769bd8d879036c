package store

import (
	"context"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// The key journal (doc.go, "Key journal"; issue 23): a checkpoint of many
// changed key states appends them to key_journal in a compact encoding,
// a few rows of about journalBlob bytes, instead of one upsert each into
// keys (about 5 µs a state, its three indexes included: at 50,000 lines/s
// over 200k keys, two cores' worth of a checkpoint every 5 s). The
// journal is folded into keys (each key's newest state upserted once, the
// journal emptied) by Prune (the cleaner's pass), by a checkpoint that
// would take it past foldRows states, and by Close. Keys reads the keys
// table and the journal as one.
const (
	// journalMin is the fewest key states a checkpoint journals while the
	// journal is empty; below it, and with nothing journaled, they are
	// upserted into keys as before: a quiet daemon's checkpoints leave
	// keys current.
	journalMin = 2048
	// journalBlob is about the most bytes one journal row holds.
	journalBlob = 1 << 20
	// foldRows bounds the journal: a checkpoint that would take it past
	// this many key states folds it first (about 110 bytes a state:
	// 450 MB at most). At 50,000 lines/s over 200k keys (470k states a
	// checkpoint every 5 s) that is a fold every 40 s, about the
	// cleaner's pace; at 2M it was every 20 s.
	foldRows = 4 << 20
)

// The flags of a journaled state.
const (
	jDelete   = 1 << iota // the state is deleted (KeyRow.Data nil)
	jRule                 // a new rule name follows (else the previous one's)
	jLastSeen             // LastSeen is set
	jUntil                // Until is set
)

// encodeJournal appends keys, in order (keyOrder), to blobs of about
// journalBlob bytes, calling emit with each blob and its count of states.
func encodeJournal(keys []KeyRow, order []int32, emit func(blob []byte, n int) error) error {
	b := make([]byte, 0, min(journalBlob+64<<10, 128*len(order)))
	n := 0
	rule := ""
	for j, i := range order {
		k := &keys[i]
		if k.Rule == "" || k.Key == "" {
			return fmt.Errorf("keys[%d]: empty rule or key (%q, %q)", i, k.Rule, k.Key)
		}
		var f byte
		if k.Data == nil {
			f |= jDelete
		}
		if n == 0 || k.Rule != rule {
			f |= jRule
		}
		if !k.LastSeen.IsZero() {
			f |= jLastSeen
		}
		if !k.Until.IsZero() {
			f |= jUntil
		}
		b = append(b, f)
		if f&jRule != 0 {
			b = binary.AppendUvarint(b, uint64(len(k.Rule)))
			b = append(b, k.Rule...)
			rule = k.Rule
		}
		b = binary.AppendUvarint(b, uint64(len(k.Key)))
		b = append(b, k.Key...)
		if f&jDelete == 0 {
			if f&jLastSeen != 0 {
				b = binary.AppendVarint(b, k.LastSeen.UnixMilli())
			}
			b = binary.AppendVarint(b, k.Requests)
			b = binary.AppendVarint(b, k.Blocked)
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(k.CPU))
			b = binary.AppendUvarint(b, uint64(len(k.Phase)))
			b = append(b, k.Phase...)
			if f&jUntil != 0 {
				b = binary.AppendVarint(b, k.Until.UnixMilli())
			}
			b = binary.AppendUvarint(b, uint64(len(k.Data)))
			b = append(b, k.Data...)
		}
		n++
		if len(b) >= journalBlob || j == len(order)-1 {
			if err := emit(b, n); err != nil {
				return err
			}
			b, n = b[:0], 0
		}
	}
	return nil
}

// errJournal is the error of a journal row that does not decode.
var errJournal = errors.New("corrupt key journal row")

// decodeJournal calls fn with each state of one journal row, in order. A
// deleted state has a nil Data. The strings are new; Data points into
// blob.
func decodeJournal(blob []byte, fn func(*KeyRow) error) error {
	return scanJournal(blob, func(f byte, rule, key []byte, body *jdec) error {
		r := KeyRow{Rule: string(rule), Key: string(key)}
		body.state(f, &r)
		if body.err != nil {
			return body.err
		}
		return fn(&r)
	})
}

// scanJournal calls fn with the flags, rule and key of each state of one
// journal row, in order, and the decoder at its body: fn reads it
// (state) or not; scanJournal skips what fn left.
func scanJournal(blob []byte, fn func(f byte, rule, key []byte, body *jdec) error) error {
	d := jdec{b: blob}
	var rule []byte
	for len(d.b) > 0 && d.err == nil {
		f := d.byte()
		if f&jRule != 0 {
			rule = d.bytes()
		}
		key := d.bytes()
		if d.err != nil {
			break
		}
		if len(rule) == 0 {
			return fmt.Errorf("%w: a state without a rule", errJournal)
		}
		body := jdec{b: d.b}
		if err := fn(f, rule, key, &body); err != nil {
			return err
		}
		var skip KeyRow
		(&d).state(f, &skip) // past the body, whether fn read it or not
	}
	return d.err
}

// state reads the body of a state with flags f into r (a deleted state
// has none: r.Data stays nil).
func (d *jdec) state(f byte, r *KeyRow) {
	if f&jDelete != 0 {
		return
	}
	if f&jLastSeen != 0 {
		r.LastSeen = time.UnixMilli(d.varint()).UTC()
	}
	r.Requests, r.Blocked = d.varint(), d.varint()
	r.CPU = math.Float64frombits(d.uint64())
	r.Phase = phase(d.bytes())
	if f&jUntil != 0 {
		r.Until = time.UnixMilli(d.varint()).UTC()
	}
	r.Data = d.bytes()
	if r.Data == nil && d.err == nil {
		r.Data = []byte{}
	}
}

// phase is the phase p names, without an allocation for the usual ones.
func phase(p []byte) string {
	switch string(p) {
	case "":
		return ""
	case PhaseThrottle:
		return PhaseThrottle
	case PhaseBan:
		return PhaseBan
	}
	return string(p)
}

// jdec reads a journal row; the first error sticks.
type jdec struct {
	b   []byte
	err error
}

func (d *jdec) fail() {
	if d.err == nil {
		d.err = fmt.Errorf("%w: cut short", errJournal)
	}
	d.b = nil
}

func (d *jdec) byte() byte {
	if len(d.b) < 1 {
		d.fail()
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *jdec) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *jdec) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *jdec) uint64() uint64 {
	if len(d.b) < 8 {
		d.fail()
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *jdec) bytes() []byte {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// journalRows are the newest journaled state of each (rule, key), in
// (rule, key) order.
type journalRows []KeyRow

func compareRows(a, b *KeyRow) int {
	if c := strings.Compare(a.Rule, b.Rule); c != 0 {
		return c
	}
	return strings.Compare(a.Key, b.Key)
}

// newest reads the journal's rows, newest first (blobs, in descending
// seq), into the newest state of each (rule, key), in (rule, key) order.
// Only the winning states are decoded, their Data copied: a busy journal
// holds each key several times (decoding them all, a string each, was
// two thirds of a fold).
func newest(next func() ([]byte, error)) (journalRows, error) {
	type place struct{ i, blob int }
	var out []KeyRow
	at := map[string]place{}
	var name []byte // rule NUL key
	var chunk []byte
	rule := ""
	for blob := 0; ; blob++ {
		b, err := next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		err = scanJournal(b, func(f byte, r, key []byte, body *jdec) error {
			name = append(append(append(name[:0], r...), 0), key...)
			p, seen := at[string(name)]
			if seen && p.blob < blob {
				return nil // a newer row has it
			}
			if !seen {
				if string(r) != rule {
					rule = string(r)
				}
				p = place{i: len(out), blob: blob}
				at[string(name)] = p
				out = append(out, KeyRow{Rule: rule, Key: string(key)})
			}
			// Of one row, the later state wins (a checkpoint that names a
			// key twice).
			row := &out[p.i]
			*row = KeyRow{Rule: row.Rule, Key: row.Key}
			body.state(f, row)
			if body.err != nil {
				return body.err
			}
			if row.Data != nil {
				if chunk == nil || cap(chunk)-len(chunk) < len(row.Data) {
					chunk = make([]byte, 0, max(256<<10, len(row.Data)))
				}
				n := len(chunk)
				chunk = append(chunk, row.Data...)
				row.Data = chunk[n:len(chunk):len(chunk)]
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.SortFunc(out, func(a, b KeyRow) int { return compareRows(&a, &b) })
	return out, nil
}

const journalQuery = `SELECT data FROM key_journal ORDER BY seq DESC`

// readJournal reads the journal through a reader's snapshot.
func (s *Snapshot) readJournal() (journalRows, error) {
	rows, err := s.q.QueryContext(context.Background(), journalQuery)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	j, err := newest(func() ([]byte, error) {
		if !rows.Next() {
			if err := rows.Err(); err != nil {
				return nil, err
			}
			return nil, io.EOF
		}
		var b []byte
		err := rows.Scan(&b)
		return b, err
	})
	if err != nil {
		return nil, err
	}
	return j, rows.Close()
}

// journal appends keys to the journal, folding it first when they would
// take it past foldRows; db.pending is the journal's count of states
// once the transaction commits.
func (db *DB) journal(w *conn, keys []KeyRow, order []int32) error {
	if db.pending+int64(len(keys)) > foldRows {
		if err := db.fold(w); err != nil {
			return err
		}
	}
	return encodeJournal(keys, order, func(blob []byte, n int) error {
		if err := w.execArgs(sInsertJournal, int64(n), blob); err != nil {
			return fmt.Errorf("key journal: %w", err)
		}
		db.pending += int64(n)
		return nil
	})
}

// fold upserts the journal's newest state of each key into keys and
// empties it, in the caller's transaction.
func (db *DB) fold(w *conn) error {
	if db.pending == 0 {
		return nil
	}
	rows, err := w.c.Query(journalQuery, nil)
	if err != nil {
		return fmt.Errorf("key journal: %w", err)
	}
	dest := make([]driver.Value, 1)
	j, err := newest(func() ([]byte, error) {
		if err := rows.Next(dest); err != nil {
			return nil, err // io.EOF at the end
		}
		b, _ := dest[0].([]byte)
		return b, nil
	})
	rows.Close()
	if err != nil {
		return fmt.Errorf("key journal: %w", err)
	}
	order := make([]int32, len(j)) // not db.order: a checkpoint's may be in use
	for i := range j {
		order[i] = int32(i)
	}
	if err := db.upsertKeys(w, j, order); err != nil {
		return err
	}
	if err := w.execArgs(sClearJournal); err != nil {
		return fmt.Errorf("key journal: %w", err)
	}
	db.pending = 0
	return nil
}

// tx runs fn in w's transaction with db.pending counting the journal's
// states as fn changes them; db.journaled takes its count if it commits.
func (db *DB) tx(w *conn, fn func() error) error {
	db.pending = db.journaled
	err := w.tx(fn)
	if err == nil {
		db.journaled = db.pending
	}
	return err
}

// foldAtClose folds the journal before a writer closes, so that the keys
// table is whole for whoever reads it next (sqlite3, an older logjail).
// Failing (a full disk) loses nothing: the journal stays, and Keys reads
// it; so the error is not Close's.
func (db *DB) foldAtClose() {
	if db.w == nil || db.journaled == 0 || db.wc.c == nil {
		return
	}
	_ = db.withConn(func(w *conn) error { return db.tx(w, func() error { return db.fold(w) }) })
}

// mergeJournal calls fn with the rows of keys (read by next, in (rule,
// key) order) and of j, in (rule, key) order: j's state of a key replaces
// the table's, and a deleted one removes it.
func mergeJournal(j journalRows, next func() (*KeyRow, error), fn func(*KeyRow) error) error {
	emit := func(r *KeyRow) error {
		if r.Data == nil {
			return nil
		}
		return fn(r)
	}
	i := 0
	for {
		t, err := next()
		if err != nil {
			return err
		}
		if t == nil {
			break
		}
		for i < len(j) && compareRows(&j[i], t) < 0 {
			if err := emit(&j[i]); err != nil {
				return err
			}
			i++
		}
		if i < len(j) && compareRows(&j[i], t) == 0 {
			if err := emit(&j[i]); err != nil {
				return err
			}
			i++
			continue
		}
		if err := fn(t); err != nil {
			return err
		}
	}
	for ; i < len(j); i++ {
		if err := emit(&j[i]); err != nil {
			return err
		}
	}
	return nil
}
