package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func readKeys(t *testing.T, db *DB) []KeyRow {
	t.Helper()
	var out []KeyRow
	if err := db.Keys(func(r *KeyRow) error {
		c := *r
		c.Data = append([]byte(nil), r.Data...)
		out = append(out, c)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestKeysTableMigrates: the rows of the keys table of a database of
// schema version 3 become the first key run at the first writer's open,
// once: every field read back as it was, the table gone, and the run
// overwritten and deleted from by later checkpoints like any other.
func TestKeysTableMigrates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "logjail.db")
	// A database of version 3 as a version-3 writer made it (this
	// build's writer prepares statements naming key_runs).
	old := raw(t, path)
	old.SetMaxOpenConns(1)
	for _, q := range append([]string{strings.Join(writerPragmas, "; ")}, append(migrations[:3:3], "PRAGMA user_version = 3")...) {
		if _, err := old.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t0 := at("2026-11-22T10:00:00Z")
	var want []KeyRow
	for i := range 3000 { // several parts
		r := KeyRow{Rule: "flood", Key: fmt.Sprintf("203.0.113.%d/%d", i%256, i), Data: make([]byte, 150),
			LastSeen: t0.Add(time.Duration(i) * time.Millisecond), Requests: int64(i), Blocked: int64(i % 3), CPU: float64(i) / 7}
		r.Data[0] = byte(i)
		switch i % 50 {
		case 0:
			r.Phase, r.Until = PhaseBan, t0.Add(time.Hour)
		case 1:
			r.Phase = PhaseBan // no until
		case 2:
			r.LastSeen = time.Time{} // never seen: a static ban
		}
		if _, err := old.Exec(`INSERT INTO keys (rule, key, last_seen_ms, requests, blocked, cpu, phase, until_ms, data)
			VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)`, r.Rule, r.Key, ms(r.LastSeen), r.Requests, r.Blocked, r.CPU, r.Phase, ms(r.Until), r.Data); err != nil {
			t.Fatal(err)
		}
		want = append(want, r)
	}
	old.Close()
	slicesSortRows(want)

	db := mustOpen(t, path, Options{})
	if diff := cmp.Diff(want, readKeys(t, db)); diff != "" {
		t.Fatalf("keys after the migration (-want +got):\n%s", diff)
	}
	var n int
	if err := db.w.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = 'keys'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("the keys table is still there (%d, %v)", n, err)
	}
	var parts int
	if err := db.w.QueryRow(`SELECT count(*) FROM key_runs WHERE id >> 20 = 1`).Scan(&parts); err != nil || parts < 2 {
		t.Errorf("the first run has %d parts (%v), want several", parts, err)
	}
	// A later state replaces the migrated one, a tombstone deletes one.
	upd := want[10]
	upd.Requests, upd.Data = 99999, []byte{7}
	if err := db.Checkpoint(&Checkpoint{Time: t0, Keys: []KeyRow{upd, {Rule: want[11].Rule, Key: want[11].Key}}}); err != nil {
		t.Fatal(err)
	}
	want[10] = upd
	want = append(want[:11], want[12:]...)
	db.Close()
	db = mustOpen(t, path, Options{}) // opened again: nothing migrates twice
	if diff := cmp.Diff(want, readKeys(t, db)); diff != "" {
		t.Errorf("keys after a checkpoint and a second open (-want +got):\n%s", diff)
	}
}

func slicesSortRows(rows []KeyRow) {
	order := sortOrder(rows)
	sorted := make([]KeyRow, len(order))
	for j, i := range order {
		sorted[j] = rows[i]
	}
	copy(rows, sorted)
}

// TestPruneAfterMerges: Prune finds the idle states in runs merged into a
// new base (their parts' prune_ms made by the merge), leaves a state whose
// old entry a later run replaced, and reads nothing when no part may hold
// an idle state.
func TestPruneAfterMerges(t *testing.T) {
	db := mustOpen(t, filepath.Join(t.TempDir(), "logjail.db"), Options{})
	now := at("2026-11-22T12:00:00Z")
	old := now.Add(-time.Hour)
	row := func(key string, seen time.Time) KeyRow {
		return KeyRow{Rule: "flood", Key: key, Data: []byte{1, 2, 3}, LastSeen: seen, Requests: 1}
	}
	var first []KeyRow
	for i := range 300 {
		first = append(first, row(fmt.Sprintf("idle-%03d", i), old), row(fmt.Sprintf("back-%03d", i), old))
	}
	if err := db.Checkpoint(&Checkpoint{Time: old, Keys: first}); err != nil {
		t.Fatal(err)
	}
	// The back-* keys come back, in several checkpoints: merges.
	for c := range 6 {
		var rows []KeyRow
		for i := range 300 {
			rows = append(rows, row(fmt.Sprintf("back-%03d", i), now.Add(-time.Duration(c)*time.Second)))
		}
		if err := db.Checkpoint(&Checkpoint{Time: now, Keys: rows}); err != nil {
			t.Fatal(err)
		}
	}
	var bases int
	if err := db.w.QueryRow(`SELECT count(DISTINCT id >> 20) FROM key_runs WHERE tier = 2`).Scan(&bases); err != nil || bases != 1 {
		t.Fatalf("%d runs are a base (%v), want 1 (the checkpoints merged)", bases, err)
	}
	st, err := db.Prune(now, PruneOptions{KeysBefore: now.Add(-20 * time.Minute)})
	if err != nil || st.Keys != 300 {
		t.Fatalf("pruned %d states (%v), want the 300 idle ones", st.Keys, err)
	}
	left := readKeys(t, db)
	if len(left) != 300 || left[0].Key != "back-000" || left[299].Key != "back-299" {
		t.Errorf("%d states left (%v … %v), want the 300 that came back", len(left), left[0].Key, left[len(left)-1].Key)
	}
	// Nothing idle left: nothing read, nothing pruned.
	if st, err := db.Prune(now, PruneOptions{KeysBefore: now.Add(-20 * time.Minute)}); err != nil || st.Keys != 0 {
		t.Errorf("a second prune: %+v, %v", st, err)
	}
}

// TestAppendEntrySame: appendEntry, which encodes the body straight into
// the part, writes the bytes the encoding it replaced wrote (the body
// made apart by appendBody, then the entry by appendRaw), entry after
// entry of one part (the names prefix-compressed against the one before),
// for rows of every shape: tombstones, never seen, no until, negative
// and large counts, data of lengths across varint sizes.
func TestAppendEntrySame(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 9))
	t0 := at("2026-11-22T10:00:00Z")
	var got, want, prev, name []byte
	for i := range 5000 {
		k := KeyRow{Rule: []string{"flood", "f", "a-much-longer-rule-name"}[r.IntN(3)],
			Key:      fmt.Sprintf("2001:db8:%x::%x", r.IntN(4), r.IntN(1<<16)),
			LastSeen: t0.Add(time.Duration(r.Int64N(1<<50) - 1<<49)), Requests: r.Int64N(1<<40) - 1<<20,
			Blocked: int64(r.IntN(300)), CPU: r.Float64() * 1000, Data: make([]byte, []int{0, 1, 127, 128, 200, 16383, 16384, 70000}[r.IntN(8)])}
		for j := range k.Data {
			k.Data[j] = byte(i + j)
		}
		switch r.IntN(6) {
		case 0:
			k.Data = nil // a tombstone
		case 1:
			k.LastSeen = time.Time{}
		case 2:
			k.Phase, k.Until = PhaseBan, t0.Add(time.Duration(r.IntN(1e6))*time.Second)
		case 3:
			k.Phase = PhaseThrottle // no until
		case 4:
			k.Requests, k.Blocked = math.MaxInt64, math.MinInt64
		}
		if i%97 == 0 {
			got, want, prev = got[:0], want[:0], prev[:0] // a new part
		}
		body := appendBody(nil, &k)
		if n := bodyLen(&k); n != len(body) {
			t.Fatalf("row %d %+v: bodyLen %d, want %d", i, k, n, len(body))
		}
		wantName := binary.AppendUvarint(nil, uint64(len(k.Rule)))
		wantName = append(append(wantName, k.Rule...), k.Key...)
		want = appendRaw(want, prev, wantName, body)
		got, name = appendEntry(got, prev, name, &k)
		if !bytes.Equal(got, want) {
			t.Fatalf("row %d %+v: the part is\n%x\nwant\n%x", i, k, got, want)
		}
		if !bytes.Equal(name, wantName) {
			t.Fatalf("row %d: name %q, want %q", i, name, wantName)
		}
		prev = append(prev[:0], name...)
	}
}

// TestCompareEntries: compareEntries orders decoded entries (and a
// merge's copies of them) as (rule, key), rule first, whatever the
// lengths of the rules and keys: its comparison of rule and key as one
// string, for rules of one length, included.
func TestCompareEntries(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 1))
	rulesOf := []string{"a", "b", "ab", "ba", "flood", "floods", "flooe", ""}
	keys := []string{"", "1", "10", "1.2", "2001:db8::1", "2001:db8::", "203.0.113.7", "flood"}
	decoded := func(rule, key string) entry {
		var c cursor
		c.blob, _ = appendEntry(nil, nil, nil, &KeyRow{Rule: rule, Key: key, Data: []byte{1}})
		if err := c.decode(); err != nil {
			t.Fatal(err)
		}
		e := c.e
		e.name = bytes.Clone(e.name)
		k := len(e.name) - len(rule) - len(key)
		e.rule, e.key = e.name[k:k+len(rule)], e.name[k+len(rule):]
		return e
	}
	for range 20000 {
		ra, rb := rulesOf[r.IntN(len(rulesOf))], rulesOf[r.IntN(len(rulesOf))]
		ka, kb := keys[r.IntN(len(keys))], keys[r.IntN(len(keys))]
		if r.IntN(2) == 0 {
			ka += keys[r.IntN(len(keys))]
		}
		want := strings.Compare(ra, rb)
		if want == 0 {
			want = strings.Compare(ka, kb)
		}
		a, b := decoded(ra, ka), decoded(rb, kb)
		if got := compareEntries(&a, &b); got != want {
			t.Fatalf("(%q, %q) against (%q, %q): %d, want %d", ra, ka, rb, kb, got, want)
		}
		plain := entry{rule: []byte(rb), key: []byte(kb)} // no name
		if got := compareEntries(&a, &plain); got != want {
			t.Fatalf("(%q, %q) against a nameless (%q, %q): %d, want %d", ra, ka, rb, kb, got, want)
		}
	}
}

// TestCommonPrefix: commonPrefix, 8 bytes at a time, gives the length a
// byte at a time gives, wherever the first difference falls.
func TestCommonPrefix(t *testing.T) {
	base := []byte("\x05flood2001:db8:1:2:3:4:5:6/128")
	for n := range len(base) + 1 {
		for d := range n + 1 {
			a, b := bytes.Clone(base[:n]), bytes.Clone(base)
			want := n
			if d < n {
				b[d]++
				want = d
			}
			if got := commonPrefix(a, b); got != want {
				t.Fatalf("%q, %q: %d, want %d", a, b, got, want)
			}
			if got := commonPrefix(b, a); got != want {
				t.Fatalf("%q, %q: %d, want %d", b, a, got, want)
			}
		}
	}
}

// TestMergerNewestWins: the merger (a tree of losers over the runs'
// cursors) gives each (rule, key) of any number of runs once, in (rule,
// key) order, with the entry of the newest run that holds it (a
// tombstone included), for 1 to 40 runs of random keys, many in several
// runs, some runs empty, several parts a run.
func TestMergerNewestWins(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	for _, nruns := range []int{1, 2, 3, 5, 8, 13, 24, 40} {
		parts := map[int64][]byte{}
		var runs []runInfo
		type got struct {
			rule, key string
			body      []byte
		}
		want := map[[2]string][]byte{}
		for run := int64(1); run <= int64(nruns); run++ {
			var rows []KeyRow
			for range r.IntN(400) {
				k := KeyRow{Rule: []string{"flood", "slow", "fl"}[r.IntN(3)], Key: fmt.Sprintf("2001:db8::%x", r.IntN(500)),
					Requests: run, Data: make([]byte, 1+r.IntN(300))}
				if r.IntN(8) == 0 {
					k.Data = nil
				}
				rows = append(rows, k)
			}
			rw := &runWriter{run: run, insert: func(id, _, _ int64, _ any, data, _, _ []byte) error {
				parts[id] = bytes.Clone(data)
				return nil
			}}
			for _, i := range sortOrder(rows) {
				if err := rw.add(&rows[i]); err != nil {
					t.Fatal(err)
				}
				want[[2]string{rows[i].Rule, rows[i].Key}] = appendBody(nil, &rows[i])
			}
			if err := rw.flush(); err != nil {
				t.Fatal(err)
			}
			runs = append(runs, runInfo{run: run, parts: rw.part})
		}
		m, err := newMerger(runs, func(id int64) ([]byte, error) { return parts[id], nil })
		if err != nil {
			t.Fatal(err)
		}
		var out []got
		if err := m.each(func(e *entry) error {
			out = append(out, got{string(e.rule), string(e.key), bytes.Clone(e.body)})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(out) != len(want) {
			t.Errorf("%d runs: %d entries merged, want %d", nruns, len(out), len(want))
		}
		for i, g := range out {
			if i > 0 && !(out[i-1].rule < g.rule || out[i-1].rule == g.rule && out[i-1].key < g.key) {
				t.Fatalf("%d runs: entry %d (%s, %s) after (%s, %s)", nruns, i, g.rule, g.key, out[i-1].rule, out[i-1].key)
			}
			if w := want[[2]string{g.rule, g.key}]; !bytes.Equal(g.body, w) {
				t.Fatalf("%d runs: (%s, %s): body %x, want the newest run's %x", nruns, g.rule, g.key, g.body, w)
			}
		}
	}
}

// sortOrder is sortRows' order of rows, without buffers.
func sortOrder(rows []KeyRow) []int32 {
	order, _ := sortRows(rows, nil, nil)
	return order
}

// TestSortRowsAsModel holds sortRows (its rules' ranks and 8 bytes of
// each key past the shared prefix, the text only on a tie) to the plain
// model it replaced: the rows' indexes sorted stably by (rule, key), the
// last of each run of equal names kept. 5,000 random sets of up to 300
// rows, with states named twice, keys that are prefixes of others, keys
// with zero bytes and bytes above 0x7f, shared prefixes of every length,
// and the buffers used again from one set to the next.
func TestSortRowsAsModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	model := func(rows []KeyRow) []int32 {
		order := make([]int32, len(rows))
		for i := range order {
			order[i] = int32(i)
		}
		cmp := func(a, b int32) int {
			if c := strings.Compare(rows[a].Rule, rows[b].Rule); c != 0 {
				return c
			}
			return strings.Compare(rows[a].Key, rows[b].Key)
		}
		slices.SortStableFunc(order, cmp)
		var out []int32
		for j, i := range order {
			if j+1 < len(order) && cmp(i, order[j+1]) == 0 {
				continue
			}
			out = append(out, i)
		}
		return out
	}
	rules := []string{"flood", "flood2", "a", "scan", "floo"}
	alphabet := []byte{'0', '1', '9', 'a', 'f', ':', '.', 0, 0xff, 0x80}
	var order []int32
	var keys []sortKey
	for set := range 5000 {
		prefix := strings.Repeat("2001:db8:8000:", 2)
		prefix = prefix[:rng.IntN(len(prefix)+1)*rng.IntN(2)]
		var rows []KeyRow
		for range rng.IntN(300) {
			if len(rows) > 0 && rng.IntN(5) == 0 { // a state named again
				r := rows[rng.IntN(len(rows))]
				r.Requests = int64(len(rows))
				rows = append(rows, r)
				continue
			}
			key := []byte(prefix)
			for range rng.IntN(14) + 1 {
				key = append(key, alphabet[rng.IntN(len(alphabet))])
			}
			if rng.IntN(4) == 0 {
				key = key[:max(1, rng.IntN(len(key)+1))] // a prefix of others, or of the shared prefix
			}
			rows = append(rows, KeyRow{Rule: rules[rng.IntN(1+set%len(rules))], Key: string(key), Requests: int64(len(rows))})
		}
		want := model(rows)
		order, keys = sortRows(rows, order, keys)
		if !slices.Equal(order, want) && (len(order) > 0 || len(want) > 0) {
			t.Fatalf("set %d: sortRows %v, model %v", set, order, want)
		}
	}
}
