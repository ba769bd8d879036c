package store

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// blobSize is the size of a key's state blob in the benchmarks and the
// size test: a key with a window or two and a little ladder.
const blobSize = 200

// benchKeys makes n key rows of rule "flood" with distinct address keys
// and blobs of blobSize bytes, last seen at t.
func benchKeys(n int, t time.Time) []KeyRow {
	rows := make([]KeyRow, n)
	blobs := make([]byte, n*blobSize)
	for i := range blobs {
		blobs[i] = byte(i * 7)
	}
	for i := range rows {
		rows[i] = KeyRow{
			Rule: "flood", Key: keyName(i), Data: blobs[i*blobSize : (i+1)*blobSize : (i+1)*blobSize],
			LastSeen: t, Requests: requests(i),
		}
		rows[i].CPU = float64(rows[i].Requests) / 100
	}
	return rows
}

// requests is a heavy-tailed count of requests for the i-th key: 2% of the
// keys have 100 or more (1 + 2000/k for k = 1…1000), as on a web server
// where most clients are light and a few are busy. CPU is 10ms a request.
func requests(i int) int64 { return 1 + 2000/int64(1+i%1000) }

// keyName is the i-th address key: 10.0.0.0 onwards.
func keyName(i int) string {
	return netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}).String()
}

// touch changes the rows as a checkpoint of the next interval would.
func touch(rows []KeyRow, t time.Time) {
	for i := range rows {
		r := &rows[i]
		r.LastSeen = t
		r.Requests++
		r.CPU += 0.01
		r.Data[0]++
	}
}

// BenchmarkCheckpoint measures one checkpoint of `changed` keys that are
// already in the database (each with a blob of 200 bytes, plus a few
// events and bans), and one of 10k changed keys in a database that tracks
// 1M. ns/key is the time per changed key.
func BenchmarkCheckpoint(b *testing.B) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("changed=%s", count(n)), func(b *testing.B) {
			db := mustOpen(b, filepath.Join(b.TempDir(), "logjail.db"), Options{})
			rows := benchKeys(n, t0)
			if err := db.Checkpoint(&Checkpoint{Time: t0, Keys: rows}); err != nil {
				b.Fatal(err)
			}
			t := t0
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				t = t.Add(5 * time.Second)
				touch(rows, t)
				if err := db.Checkpoint(benchCheckpoint(t, rows)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/key")
		})
	}

	b.Run("tracked=1M,changed=1%", func(b *testing.B) {
		const tracked, changed = 1_000_000, 10_000
		db := mustOpen(b, filepath.Join(b.TempDir(), "logjail.db"), Options{})
		all := benchKeys(tracked, t0)
		for i := 0; i < tracked; i += 100_000 {
			if err := db.Checkpoint(&Checkpoint{Time: t0, Keys: all[i : i+100_000]}); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := db.TruncateWAL(); err != nil {
			b.Fatal(err)
		}
		r := rand.New(rand.NewPCG(1, 2))
		rows := make([]KeyRow, changed)
		t := t0
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			b.StopTimer()
			t = t.Add(5 * time.Second)
			for i, j := range r.Perm(tracked)[:changed] { // scattered over the whole key space
				rows[i] = all[j]
			}
			touch(rows, t)
			b.StartTimer()
			if err := db.Checkpoint(benchCheckpoint(t, rows)); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/changed, "ns/key")
	})
}

// BenchmarkCheckpointLive is the live daemon's steady state (docs/performance.md,
// row 2): 400k tracked states, each changed again every 25 checkpoints of
// 16k (the daemon's checkpointRows), round robin, merges included: run it
// with -benchtime=100x or more, so that it crosses several merges into a
// new base. ns/key is per changed state.
func BenchmarkCheckpointLive(b *testing.B) {
	const tracked, changed = 400_000, 16_384
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	db := mustOpen(b, filepath.Join(b.TempDir(), "logjail.db"), Options{})
	all := benchKeys(tracked, t0)
	for i := 0; i < tracked; i += changed {
		if err := db.Checkpoint(&Checkpoint{Time: t0, Keys: all[i:min(i+changed, tracked)]}); err != nil {
			b.Fatal(err)
		}
	}
	checkpointRounds(b, all, changed, t0, func(t time.Time, rows []KeyRow) {
		if err := db.Checkpoint(benchCheckpoint(t, rows)); err != nil {
			b.Fatal(err)
		}
	})
}

// benchCheckpoint is a checkpoint of rows with what goes with them: a
// global blob, a few decisions and a position.
func benchCheckpoint(t time.Time, rows []KeyRow) *Checkpoint {
	c := &Checkpoint{Time: t, Global: make([]byte, 4096), Keys: rows,
		Positions: []Position{{Path: "/var/log/nginx/access.log", Offset: t.Unix(), Line: t.Unix() / 100}}}
	for i := range 10 {
		k := rows[(i*7919)%len(rows)]
		c.Events = append(c.Events, Event{Time: t, Rule: k.Rule, Key: k.Key, Kind: KindBan, Until: t.Add(time.Minute),
			Reason: "rate 21 per 1s > 20 (rule flood)", Origin: OriginDetector})
		c.SetBans = append(c.SetBans, Ban{Rule: k.Rule, Key: k.Key, Kind: PhaseBan, Since: t, Until: t.Add(time.Minute),
			Reason: "rate 21 per 1s > 20 (rule flood)", Origin: OriginDetector})
	}
	return c
}

func count(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// BenchmarkPruneScan is a cleaner pass's Prune over 1M states of which
// none is idle ("none idle": no part may hold one, nothing is read), and
// of which one is old but banned (held: only the part that holds it is
// read; the full merge that Prune was before read every state).
func BenchmarkPruneScan(b *testing.B) {
	const tracked = 1_000_000
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for _, held := range []bool{false, true} {
		name := "none idle"
		if held {
			name = "one held"
		}
		b.Run(name, func(b *testing.B) {
			db := mustOpen(b, filepath.Join(b.TempDir(), "logjail.db"), Options{})
			all := benchKeys(tracked, t0)
			if held {
				all[tracked/2].LastSeen = t0.Add(-time.Hour)
				all[tracked/2].Phase, all[tracked/2].Until = PhaseBan, t0.Add(time.Hour)
			}
			for i := 0; i < tracked; i += 100_000 {
				if err := db.Checkpoint(&Checkpoint{Time: t0, Keys: all[i : i+100_000]}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				st, err := db.Prune(t0, PruneOptions{KeysBefore: t0.Add(-time.Minute)})
				if err != nil || st.Keys != 0 {
					b.Fatal(st, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/tracked, "ns/key")
		})
	}
}

// BenchmarkPruneTrickle is a cleaner pass's Prune over 1M states (a
// base, and three newer runs of 16k states seen again) in which 100
// states went idle since the last pass, scattered over the keys: the
// passes of a daemon whose keys go quiet a few at a time. Each pass
// moves KeysBefore on by 100 of the states' last-seen times.
func BenchmarkPruneTrickle(b *testing.B) {
	const tracked, trickle = 1_000_000, 100
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	base := t0.Add(-time.Hour)
	db := mustOpen(b, filepath.Join(b.TempDir(), "logjail.db"), Options{})
	all := benchKeys(tracked, t0)
	for i := range all {
		// A permutation of the keys' order: the i-th key goes idle at
		// the (i*7919 mod 1M)-th millisecond after base.
		all[i].LastSeen = base.Add(time.Duration(i*7919%tracked) * time.Millisecond)
	}
	for i := 0; i < tracked; i += 100_000 {
		if err := db.Checkpoint(&Checkpoint{Time: t0, Keys: all[i : i+100_000]}); err != nil {
			b.Fatal(err)
		}
	}
	for r := range 3 {
		var again []KeyRow
		for j := range 16_384 {
			k := all[(j*61+r*20_011)%tracked]
			k.LastSeen = t0
			again = append(again, k)
		}
		if err := db.Checkpoint(&Checkpoint{Time: t0, Keys: again}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	var pruned int64
	pass := 0
	for b.Loop() {
		pass++
		st, err := db.Prune(t0, PruneOptions{KeysBefore: base.Add(time.Duration(pass*trickle) * time.Millisecond)})
		if err != nil || st.Keys == 0 {
			b.Fatal(st, err)
		}
		pruned += st.Keys
	}
	b.ReportMetric(float64(pruned)/float64(b.N), "pruned/op")
}

// BenchmarkCheckpointDuringMerge gives the most CPU (user and system, of
// the process) and wall time one checkpoint call takes while 1M states
// are merged into a new base: a base of 1M states, three runs of 300k
// changed, then checkpoints of 16k changed states scattered over the
// keys, of which the 7th starts the merge where a new base is made once
// the rest holds as many bytes as the base (1.9M entries read), the
// 69th where it holds twice as many (baseRatio 2, 3M entries read). Run
// it with -benchtime=200x, so that the merge ends within the run.
// max-cpu-ms is the most CPU a call took, ns/key the mean per changed
// state.
func BenchmarkCheckpointDuringMerge(b *testing.B) {
	const tracked, changed = 1_000_000, 16_384
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	db := mustOpen(b, filepath.Join(b.TempDir(), "logjail.db"), Options{})
	all := benchKeys(tracked, t0)
	if err := db.Checkpoint(&Checkpoint{Time: t0, Keys: all}); err != nil {
		b.Fatal(err)
	}
	for i := range 3 {
		rows := all[i*300_000 : (i+1)*300_000]
		touch(rows, t0.Add(time.Second))
		if err := db.Checkpoint(&Checkpoint{Time: t0, Keys: rows}); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := db.TruncateWAL(); err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	rows := make([]KeyRow, changed)
	t := t0
	var maxCPU, maxWall time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		t = t.Add(300 * time.Millisecond)
		for i, j := range r.Perm(tracked)[:changed] {
			rows[i] = all[j]
		}
		touch(rows, t)
		b.StartTimer()
		cpu0, wall0 := processCPU(b), time.Now()
		if err := db.Checkpoint(benchCheckpoint(t, rows)); err != nil {
			b.Fatal(err)
		}
		maxCPU, maxWall = max(maxCPU, processCPU(b)-cpu0), max(maxWall, time.Since(wall0))
	}
	_, bases, err := db.KeyRuns()
	if err != nil || bases != 1 {
		b.Fatalf("%d bases at the end (%v): the merge into a new base did not end within the run", bases, err)
	}
	b.ReportMetric(float64(maxCPU.Microseconds())/1000, "max-cpu-ms")
	b.ReportMetric(float64(maxWall.Microseconds())/1000, "max-wall-ms")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/changed, "ns/key")
}

// processCPU is the process's CPU time so far, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkMerge is a merge of a base of 200k states and 24 runs of 16k
// changed states each (row 2's merge into a new base), the parts in
// memory: the merger's own cost, without SQLite. ns/entry is per entry
// read.
func BenchmarkMerge(b *testing.B) {
	const tracked, changed, runs = 200_000, 16_384, 24
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	all := make([]KeyRow, tracked)
	for i := range all {
		all[i] = KeyRow{Rule: "flood", Key: netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 14: byte(i >> 8), 15: byte(i), 13: byte(i >> 16)}).String(),
			Data: make([]byte, 40), LastSeen: t0, Requests: 3}
	}
	parts := map[int64][]byte{}
	var infos []runInfo
	entries := 0
	write := func(run int64, rows []KeyRow) {
		rw := &runWriter{run: run, insert: func(id, _, _ int64, _ any, data, _, _ []byte) error {
			parts[id] = bytes.Clone(data)
			return nil
		}}
		for _, i := range sortOrder(rows) {
			if err := rw.add(&rows[i]); err != nil {
				b.Fatal(err)
			}
		}
		if err := rw.flush(); err != nil {
			b.Fatal(err)
		}
		infos = append(infos, runInfo{run: run, parts: rw.part})
		entries += len(rows)
	}
	write(1, all)
	for run := range runs {
		rows := make([]KeyRow, changed)
		for i := range rows {
			rows[i] = all[(run*changed+i*7)%tracked]
		}
		write(int64(run+2), rows)
	}
	load := func(id int64) ([]byte, error) { return parts[id], nil }
	b.ReportAllocs()
	for b.Loop() {
		m, err := newMerger(infos, load)
		if err != nil {
			b.Fatal(err)
		}
		if err := m.each(func(*entry) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*entries), "ns/entry")
}

// BenchmarkCheckpointLiveCovers is BenchmarkCheckpointLive with the
// Mark and Cover a checkpoint.Writer gives such a stream (every key
// changed in turn): a cover once every state was written since the mark,
// a mark again at the first cover past an eighth more (store's doc, "Key
// runs"). The runs before a mark are dropped unread: no merge.
func BenchmarkCheckpointLiveCovers(b *testing.B) {
	const tracked, changed = 400_000, 16_384
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	db := mustOpen(b, filepath.Join(b.TempDir(), "logjail.db"), Options{})
	all := benchKeys(tracked, t0)
	cad := cadence{keys: tracked}
	write := func(t time.Time, rows []KeyRow, first bool) {
		c := benchCheckpoint(t, rows)
		cad.set(c, first, false)
		if err := db.Checkpoint(c); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < tracked; i += changed {
		write(t0, all[i:min(i+changed, tracked)], i == 0)
	}
	checkpointRounds(b, all, changed, t0, func(t time.Time, rows []KeyRow) { write(t, rows, false) })
	if b.N >= 60 && db.covered == 0 {
		b.Fatal("no cover dropped a run")
	}
}

// BenchmarkSortRows is a live checkpoint's sort of its rows: 16,384 states
// of IPv6 keys of one rule, in the random order a detector reports them
// (the order it charged them: random), or clients in turn (row 2's
// writer, issue 23: inturn).
func BenchmarkSortRows(b *testing.B) {
	const changed = 16_384
	for _, order := range []string{"random", "inturn"} {
		b.Run(order, func(b *testing.B) {
			rows := make([]KeyRow, changed)
			rng := rand.New(rand.NewPCG(5, 6))
			for i := range rows {
				n := rng.IntN(200_000)
				if order == "inturn" {
					n = 100_000 + i
				}
				rows[i] = KeyRow{Rule: "flood", Key: fmt.Sprintf("2001:db8:%x:%x::1", 0x8000+n/65536, n%65536)}
			}
			var order []int32
			var keys []sortKey
			b.ReportAllocs()
			for b.Loop() {
				order, keys = sortRows(rows, order, keys)
			}
		})
	}
}

// checkpointRounds times rounds of a live daemon's checkpoints: at each,
// the next changed states of all in turn, touched 300 ms of log time after
// the last, are written by write (its time only); it reports ns/key.
func checkpointRounds(b *testing.B, all []KeyRow, changed int, t0 time.Time, write func(time.Time, []KeyRow)) {
	next, t := 0, t0
	rows := make([]KeyRow, changed)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		t = t.Add(300 * time.Millisecond)
		for i := range rows {
			rows[i] = all[(next+i)%len(all)]
		}
		next += changed
		touch(rows, t)
		b.StartTimer()
		write(t, rows)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(changed), "ns/key")
}

// BenchmarkAddOrdered is a live checkpoint's encoding of its rows into a
// run (no SQLite: the parts are dropped), the rows as a collect lays them
// out (in one slice, their keys pieces of one string, their data in one
// buffer, in the order reported) for 16,384 IPv6 keys of row 2 (issue
// 23) with 48 bytes of data each, added in the order of their keys; the
// caches are flushed (64 MiB written) before each, as the rows come from
// the collect, on another core.
func BenchmarkAddOrdered(b *testing.B) {
	const changed = 16_384
	t := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(5, 6))
	rows := make([]KeyRow, changed)
	var text strings.Builder
	var data []byte
	for i := range rows {
		n := rng.IntN(200_000)
		start := text.Len()
		fmt.Fprintf(&text, "2001:db8:%x:%x::1", 0x8000+n/65536, n%65536)
		d := len(data)
		for j := range 48 {
			data = append(data, byte(i+j))
		}
		rows[i] = KeyRow{Rule: "flood", Key: text.String()[start:], Data: data[d:len(data):len(data)],
			LastSeen: t.Add(time.Duration(i) * time.Millisecond), Requests: int64(i % 50)}
	}
	order, _ := sortRows(rows, nil, nil)
	rw := &runWriter{insert: func(_, _, _ int64, _ any, _, _, _ []byte) error { return nil }}
	flush := make([]byte, 64<<20)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		for i := 0; i < len(flush); i += 64 {
			flush[i]++
		}
		b.StartTimer()
		if err := addOrdered(rw, rows, order); err != nil {
			b.Fatal(err)
		}
		if err := rw.flush(); err != nil {
			b.Fatal(err)
		}
	}
}
