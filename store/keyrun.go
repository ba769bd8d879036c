package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
	"time"
	"unsafe"
)

// Key states are kept in runs (the table key_runs; doc.go, "Key runs"): a
// run is the states one checkpoint changed, or several runs merged,
// sorted by (rule, key), encoded compactly and cut into parts of about
// partBytes, one row a part. A later run's entry of a (rule, key) replaces
// an earlier run's; a tombstone deletes it. Reading the states (Keys,
// TopKeys, Prune) merges the runs, streaming: one part of each run in
// memory at a time.

const (
	// runShift: a part's row id is run<<runShift | part.
	runShift = 20
	// partBytes: a part is cut once its entries reach this many bytes.
	partBytes = 64 << 10
	// maxRuns: past this many runs, the runs after the base are merged
	// into one, which bounds what a reader merges (maxRuns parts, 4 MiB,
	// in memory).
	maxRuns = 64
	// baseRatio: once the runs after the base (the oldest run) hold
	// baseRatio times its bytes, every run is merged into a new base,
	// without the tombstones and the states they replace: the runs hold
	// at most about 1+baseRatio times the live states, and where most
	// states change between merges a state is written about
	// 1+1/baseRatio times and read 1+1/baseRatio times by merges
	// (doc.go, "Key runs").
	baseRatio = 2
)

// Tiers of a run (key_runs.tier): what made it.
const (
	tierCheckpoint = 0 // one checkpoint's changed states (or a Prune's tombstones)
	tierMerged     = 1 // the runs after the base, merged
	tierBase       = 2 // every run merged: no tombstone
)

// Bits of an entry's flags byte.
const (
	entTomb     = 1 << iota // deleted: nothing follows
	entLastSeen             // a last-seen time follows
	entUntil                // an until follows
)

// errCorruptRun wraps the errors about a part that cannot be read.
var errCorruptRun = errors.New("corrupt key run")

// appendEntry encodes r after prev's name (the previous entry of the part,
// nil at its start) and returns b and r's name, in name (reused); body is
// a scratch buffer.
//
// An entry: uvarint bytes shared with the previous entry's name, uvarint
// length and bytes of the rest of the name (the name: uvarint length of
// the rule, the rule, the key), uvarint length and bytes of the body. The
// body: a flags byte (entTomb, entLastSeen, entUntil); unless a
// tombstone, varint last seen (ms), varint requests, varint blocked, 8
// bytes of CPU (IEEE 754, little endian), uvarint length and bytes of the
// phase, varint until (ms), uvarint length and bytes of the data. A merge
// copies the body as it is.
//
// The body is encoded straight into b, after its length (bodyLen): no
// scratch copy of the state's data, which is most of the entry (issue 23;
// TestAppendEntrySame: the bytes of appendRaw of appendBody).
func appendEntry(b, prev, name []byte, r *KeyRow) ([]byte, []byte) {
	name = binary.AppendUvarint(name[:0], uint64(len(r.Rule)))
	name = append(append(name, r.Rule...), r.Key...)
	b = appendHead(b, prev, name, bodyLen(r))
	return appendBody(b, r), name
}

// bodyLen is the length of r's body, as appendBody writes it.
func bodyLen(r *KeyRow) int {
	if r.Data == nil {
		return 1
	}
	n := 1 + varintLen(r.Requests) + varintLen(r.Blocked) + 8 +
		uvarintLen(uint64(len(r.Phase))) + len(r.Phase) + uvarintLen(uint64(len(r.Data))) + len(r.Data)
	if !r.LastSeen.IsZero() {
		n += varintLen(r.LastSeen.UnixMilli())
	}
	if !r.Until.IsZero() {
		n += varintLen(r.Until.UnixMilli())
	}
	return n
}

// uvarintLen is the length of v as binary.AppendUvarint writes it.
func uvarintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

// varintLen is the length of v as binary.AppendVarint writes it (zigzag).
func varintLen(v int64) int { return uvarintLen(uint64(v<<1) ^ uint64(v>>63)) }

// appendRaw appends the entry of name and body after prev's name.
func appendRaw(b, prev, name, body []byte) []byte {
	return append(appendHead(b, prev, name, len(body)), body...)
}

// appendHead appends what comes before an entry's body: its name after
// prev's (the bytes shared with it, the rest) and the body's length.
func appendHead(b, prev, name []byte, bodyLen int) []byte {
	shared := commonPrefix(prev, name)
	b = binary.AppendUvarint(b, uint64(shared))
	b = binary.AppendUvarint(b, uint64(len(name)-shared))
	b = append(b, name[shared:]...)
	return binary.AppendUvarint(b, uint64(bodyLen))
}

func appendBody(b []byte, r *KeyRow) []byte {
	if r.Data == nil {
		return append(b, entTomb)
	}
	var fl byte
	if !r.LastSeen.IsZero() {
		fl |= entLastSeen
	}
	if !r.Until.IsZero() {
		fl |= entUntil
	}
	b = append(b, fl)
	if fl&entLastSeen != 0 {
		b = binary.AppendVarint(b, r.LastSeen.UnixMilli())
	}
	b = binary.AppendVarint(b, r.Requests)
	b = binary.AppendVarint(b, r.Blocked)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(r.CPU))
	b = binary.AppendUvarint(b, uint64(len(r.Phase)))
	b = append(b, r.Phase...)
	if fl&entUntil != 0 {
		b = binary.AppendVarint(b, r.Until.UnixMilli())
	}
	b = binary.AppendUvarint(b, uint64(len(r.Data)))
	return append(b, r.Data...)
}

// commonPrefix is the length of the longest common prefix of a and b,
// compared 8 bytes at a time: the names of a part's neighbouring entries
// share most of their bytes (an IPv6 key's first 20 or so).
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for ; i+8 <= n; i += 8 {
		if x := binary.LittleEndian.Uint64(a[i:]) ^ binary.LittleEndian.Uint64(b[i:]); x != 0 {
			return i + bits.TrailingZeros64(x)/8
		}
	}
	for ; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// entry is one entry: its name decoded, its body raw until parse. Its
// slices point into the cursor's name and part, valid until the cursor
// moves.
type entry struct {
	name      []byte // the whole name: uvarint length of the rule, rule, key
	rule, key []byte
	tomb      bool
	body      []byte
	// Set by parse:
	lastSeen int64 // ms; 0 with !hasSeen
	hasSeen  bool
	requests int64
	blocked  int64
	cpu      float64
	phase    []byte
	until    int64 // ms; 0 with !hasUntil
	hasUntil bool
	data     []byte
}

// compareEntries orders entries by (rule, key). Of entries with names
// (decoded ones: the rule and the key end the name) and rules of one
// length, it compares rule and key as one string, which orders them alike
// (TestCompareEntries).
func compareEntries(a, b *entry) int {
	if len(a.rule) == len(b.rule) && a.name != nil && b.name != nil {
		return bytes.Compare(a.name[len(a.name)-len(a.rule)-len(a.key):], b.name[len(b.name)-len(b.rule)-len(b.key):])
	}
	if c := bytes.Compare(a.rule, b.rule); c != 0 {
		return c
	}
	return bytes.Compare(a.key, b.key)
}

// row fills r from e; rules holds the rule names made so far (a rule's
// name is one string for all its rows). r.Data points into e's part.
func (e *entry) row(r *KeyRow, rules *[]string) {
	r.Rule = ruleName(rules, e.rule)
	r.Key = string(e.key)
	r.LastSeen, r.Until = time.Time{}, time.Time{}
	if e.hasSeen {
		r.LastSeen = time.UnixMilli(e.lastSeen).UTC()
	}
	if e.hasUntil {
		r.Until = time.UnixMilli(e.until).UTC()
	}
	r.Requests, r.Blocked, r.CPU = e.requests, e.blocked, e.cpu
	r.Phase = phaseName(e.phase)
	r.Data = e.data
	if r.Data == nil {
		r.Data = []byte{}
	}
}

func ruleName(rules *[]string, b []byte) string {
	for _, s := range *rules {
		if s == string(b) {
			return s
		}
	}
	s := string(b)
	*rules = append(*rules, s)
	return s
}

func phaseName(b []byte) string {
	switch string(b) {
	case PhaseAllowed:
		return PhaseAllowed
	case PhaseThrottle:
		return PhaseThrottle
	case PhaseBan:
		return PhaseBan
	}
	return string(b)
}

// runInfo is one run as key_runs lists it.
type runInfo struct {
	run   int64
	tier  int64
	parts int64
	bytes int64
}

// runsQuery lists the runs, oldest first, but those key_hidden hides (a
// merge's output while it is written, the runs a merge replaced while
// they are deleted: merge.go).
// (sum(size), not sum(length(data)): length reads a blob's overflow
// pages.)
const runsQuery = `SELECT id >> 20, max(tier), count(*), sum(size) FROM key_runs
	WHERE id >> 20 NOT IN (SELECT run FROM key_hidden) GROUP BY 1 ORDER BY 1`

// partQuery reads one part.
const partQuery = `SELECT data FROM key_runs WHERE id = ?1`

// cursor walks the entries of one run, a part at a time.
type cursor struct {
	run   runInfo
	part  int64 // the next part to load
	load  func(id int64) ([]byte, error)
	blob  []byte // the rest of the current part
	name  []byte
	e     entry
	valid bool
	// loaded, when set, counts the bytes of the parts loaded (a stepped
	// merge's budget).
	loaded *int64
}

// next moves to the next entry; c.valid is false past the last.
func (c *cursor) next() error {
	for len(c.blob) == 0 {
		if c.part >= c.run.parts {
			c.valid = false
			return nil
		}
		id := c.run.run<<runShift | c.part
		b, err := c.load(id)
		if err != nil {
			return fmt.Errorf("key run %d part %d: %w", c.run.run, c.part, err)
		}
		c.part++
		c.blob, c.name = b, c.name[:0]
		if c.loaded != nil {
			*c.loaded += int64(len(b))
		}
	}
	if err := c.decode(); err != nil {
		return fmt.Errorf("key run %d part %d: %w: %w", c.run.run, c.part-1, errCorruptRun, err)
	}
	c.valid = true
	return nil
}

// decode reads the entry at the start of c.blob: its name, and its body
// raw.
func (c *cursor) decode() error {
	b := c.blob
	shared, n := binary.Uvarint(b)
	if n <= 0 || shared > uint64(len(c.name)) {
		return fmt.Errorf("name: bad shared length")
	}
	b = b[n:]
	rest, n := binary.Uvarint(b)
	if n <= 0 || rest > uint64(len(b)-n) {
		return fmt.Errorf("name: truncated")
	}
	c.name = append(c.name[:shared], b[n:n+int(rest)]...)
	b = b[n+int(rest):]
	lr, k := binary.Uvarint(c.name)
	if k <= 0 || lr > uint64(len(c.name)-k) {
		return fmt.Errorf("bad name %q", c.name)
	}
	bl, n := binary.Uvarint(b)
	if n <= 0 || bl == 0 || bl > uint64(len(b)-n) {
		return fmt.Errorf("name %q: body truncated", c.name)
	}
	body := b[n : n+int(bl) : n+int(bl)]
	c.e = entry{name: c.name, rule: c.name[k : k+int(lr)], key: c.name[k+int(lr):], body: body, tomb: body[0]&entTomb != 0}
	c.blob = b[n+int(bl):]
	return nil
}

// parse decodes e's body.
func (e *entry) parse() error {
	b := e.body
	uv := func(what string) (uint64, error) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, fmt.Errorf("%s: truncated", what)
		}
		b = b[n:]
		return v, nil
	}
	sv := func(what string) (int64, error) {
		v, n := binary.Varint(b)
		if n <= 0 {
			return 0, fmt.Errorf("%s: truncated", what)
		}
		b = b[n:]
		return v, nil
	}
	take := func(what string, n uint64) ([]byte, error) {
		if n > uint64(len(b)) {
			return nil, fmt.Errorf("%s: %d bytes past the end", what, n-uint64(len(b)))
		}
		s := b[:n:n]
		b = b[n:]
		return s, nil
	}
	fail := func(err error) error {
		return fmt.Errorf("%w: rule %q key %q: %w", errCorruptRun, e.rule, e.key, err)
	}
	fl := b[0]
	b = b[1:]
	if fl&^(entTomb|entLastSeen|entUntil) != 0 || fl&entTomb != 0 && (fl != entTomb || len(b) != 0) {
		return fail(fmt.Errorf("flags %#x", fl))
	}
	if e.tomb {
		return nil
	}
	var err error
	if fl&entLastSeen != 0 {
		if e.lastSeen, err = sv("last seen"); err != nil {
			return fail(err)
		}
		e.hasSeen = true
	}
	if e.requests, err = sv("requests"); err != nil {
		return fail(err)
	}
	if e.blocked, err = sv("blocked"); err != nil {
		return fail(err)
	}
	cpu, err := take("cpu", 8)
	if err != nil {
		return fail(err)
	}
	e.cpu = math.Float64frombits(binary.LittleEndian.Uint64(cpu))
	n, err := uv("phase")
	if err != nil {
		return fail(err)
	}
	if e.phase, err = take("phase", n); err != nil {
		return fail(err)
	}
	if fl&entUntil != 0 {
		if e.until, err = sv("until"); err != nil {
			return fail(err)
		}
		e.hasUntil = true
	}
	if n, err = uv("data"); err != nil {
		return fail(err)
	}
	if e.data, err = take("data", n); err != nil {
		return fail(err)
	}
	if len(b) != 0 {
		return fail(errors.New("trailing bytes"))
	}
	return nil
}

// merger merges runs, newest wins: each (rule, key) once, in order, as
// its newest entry says (a tombstone included).
type merger struct {
	cs []*cursor
	// tree is a tree of losers over cs: tree[0] the least (rule, key),
	// the newest run first among equals, a cursor past its end last;
	// tree[n], n ≥ 1, the loser at node n, whose children are nodes 2n
	// and 2n+1, cursor i the leaf len(cs)+i. Moving the least cursor on
	// compares one entry a level (log₂ of the runs), where a heap
	// compared two (issue 23: a merge of two dozen runs spent a fifth of
	// its time comparing names).
	tree   []int
	win    cursor // until's copy of the entry it passes
	loaded int64  // bytes of the parts loaded, by cursors made to count them
}

// beats reports whether cursor a comes before cursor b.
func (m *merger) beats(a, b int) bool {
	ca, cb := m.cs[a], m.cs[b]
	switch {
	case !cb.valid:
		return ca.valid
	case !ca.valid:
		return false
	}
	if c := compareEntries(&ca.e, &cb.e); c != 0 {
		return c < 0
	}
	return ca.run.run > cb.run.run
}

// build makes the tree of the cursors.
func (m *merger) build() {
	k := len(m.cs)
	m.tree = make([]int, k)
	if k == 0 {
		return
	}
	win := make([]int, 2*k) // the winner at each node; leaves at k…2k-1
	for i := range k {
		win[k+i] = i
	}
	for n := k - 1; n >= 1; n-- {
		a, b := win[2*n], win[2*n+1]
		if m.beats(b, a) {
			a, b = b, a
		}
		win[n], m.tree[n] = a, b
	}
	if k == 1 {
		m.tree[0] = 0
	} else {
		m.tree[0] = win[1]
	}
}

// replay puts the least cursor, just moved on, back in its place.
func (m *merger) replay() {
	k := len(m.cs)
	cur := m.tree[0]
	for n := (k + cur) / 2; n >= 1; n /= 2 {
		if m.beats(m.tree[n], cur) {
			m.tree[n], cur = cur, m.tree[n]
		}
	}
	m.tree[0] = cur
}

// top is the cursor at the least (rule, key), nil past every run's end.
func (m *merger) top() *cursor {
	if len(m.cs) == 0 {
		return nil
	}
	if c := m.cs[m.tree[0]]; c.valid {
		return c
	}
	return nil
}

// newMerger opens a cursor on each run in runs, reading parts with load.
func newMerger(runs []runInfo, load func(id int64) ([]byte, error)) (*merger, error) {
	return newCountingMerger(runs, load, false)
}

// newCountingMerger is newMerger; with count, m.loaded counts the bytes
// of the parts loaded.
func newCountingMerger(runs []runInfo, load func(id int64) ([]byte, error), count bool) (*merger, error) {
	m := &merger{}
	for _, r := range runs {
		c := &cursor{run: r, load: load}
		if count {
			c.loaded = &m.loaded
		}
		if err := c.next(); err != nil {
			return nil, err
		}
		if c.valid {
			m.cs = append(m.cs, c)
		}
	}
	m.build()
	return m, nil
}

// each calls fn with every (rule, key)'s newest entry, in (rule, key)
// order. The entry is valid only during fn.
func (m *merger) each(fn func(e *entry) error) error {
	_, err := m.until(-1, fn)
	return err
}

// until calls fn as each does, from where the last call stopped, until
// the parts loaded (m.loaded, counted by cursors that count) reach limit
// (limit < 0: none): done reports that every entry was passed.
func (m *merger) until(limit int64, fn func(e *entry) error) (done bool, err error) {
	win := &m.win // the winning entry, copied out of its cursor
	for m.top() != nil {
		if limit >= 0 && m.loaded >= limit {
			return false, nil
		}
		top := m.top()
		win.name = append(win.name[:0], top.name...)
		win.e = top.e
		// Repoint the name, rule and key at the copy of the name: the
		// cursor's name is overwritten by its next entry. The rest points
		// into the cursor's part, which stays valid: load returns new
		// memory for each part.
		k := len(top.name) - len(top.e.rule) - len(top.e.key)
		win.e.name = win.name
		win.e.rule = win.name[k : k+len(top.e.rule)]
		win.e.key = win.name[k+len(top.e.rule):]
		// Advance every cursor at this (rule, key).
		for c := m.top(); c != nil && compareEntries(&c.e, &win.e) == 0; c = m.top() {
			if err := c.next(); err != nil {
				return false, err
			}
			m.replay()
		}
		if err := fn(&win.e); err != nil {
			return false, err
		}
	}
	return true, nil
}

// runWriter writes one run, cutting it into parts.
type runWriter struct {
	run  int64
	tier int64
	// insert writes a part: data's size is len(data); pruneMS nil or
	// int64; rule and key are its first entry's (key_parts).
	insert func(id, tier, n int64, pruneMS any, data, rule, key []byte) error
	part   int64
	n      int64 // entries in buf
	bytes  int64 // bytes of the parts written
	buf    []byte
	prev   []byte // the name of buf's last entry
	name   []byte
	first  []byte // the name of buf's first entry
	// The least prunable time of buf's entries (prunable).
	pruneMS  int64
	hasPrune bool
}

func (w *runWriter) add(r *KeyRow) error {
	w.buf, w.name = appendEntry(w.buf, w.prev, w.name, r)
	if r.Data != nil {
		w.prunable(!r.LastSeen.IsZero(), r.LastSeen.UnixMilli(), r.Phase != "" && r.Until.IsZero())
	}
	w.note()
	return w.added()
}

// addEntry writes e as it is (a merge's output): its body is copied.
func (w *runWriter) addEntry(e *entry) error {
	if err := w.put(e); err != nil {
		return err
	}
	return w.added()
}

// put appends e to buf as addEntry does, without cutting a part. Of the
// body it reads only what prunable needs (prunableOf); the name is copied
// as it is when e has it whole.
func (w *runWriter) put(e *entry) error {
	if !e.tomb {
		seen, ms, forever, err := prunableOf(e.body)
		if err != nil {
			return fmt.Errorf("%w: rule %q key %q: %w", errCorruptRun, e.rule, e.key, err)
		}
		w.prunable(seen, ms, forever)
	}
	if e.name != nil {
		w.name = append(w.name[:0], e.name...)
	} else {
		w.name = binary.AppendUvarint(w.name[:0], uint64(len(e.rule)))
		w.name = append(append(w.name, e.rule...), e.key...)
	}
	w.buf = appendRaw(w.buf, w.prev, w.name, e.body)
	w.note()
	return nil
}

// prunableOf reads from the body of an entry that is no tombstone what
// prunable needs (its last-seen time, if any, and whether it is
// throttled or banned without end), skipping the rest: what parse would
// give for hasSeen, lastSeen and len(phase) != 0 && !hasUntil
// (TestPrunableOf).
func prunableOf(b []byte) (seen bool, ms int64, forever bool, err error) {
	fl := b[0]
	b = b[1:]
	if fl&entLastSeen != 0 {
		v, n := binary.Varint(b)
		if n <= 0 {
			return false, 0, false, errors.New("last seen: truncated")
		}
		seen, ms, b = true, v, b[n:]
	}
	for range 2 { // requests, blocked
		_, n := binary.Varint(b)
		if n <= 0 {
			return false, 0, false, errors.New("counts: truncated")
		}
		b = b[n:]
	}
	if len(b) < 8 {
		return false, 0, false, errors.New("cpu: truncated")
	}
	pl, n := binary.Uvarint(b[8:])
	if n <= 0 {
		return false, 0, false, errors.New("phase: truncated")
	}
	return seen, ms, pl != 0 && fl&entUntil == 0, nil
}

// prunable notes the time before which a Prune could delete the entry
// (its last seen; any time if never seen), unless held for good (a
// throttle or ban without end): the part's prune_ms is the least.
func (w *runWriter) prunable(seen bool, ms int64, forever bool) {
	switch {
	case forever:
		return
	case !seen:
		ms = math.MinInt64
	}
	if !w.hasPrune || ms < w.pruneMS {
		w.pruneMS, w.hasPrune = ms, true
	}
}

// note counts the entry just appended, whose name is w.name.
func (w *runWriter) note() {
	if w.n == 0 {
		w.first = append(w.first[:0], w.name...)
	}
	w.prev, w.name = w.name, w.prev
	w.n++
}

func (w *runWriter) added() error {
	if len(w.buf) >= partBytes {
		return w.flush()
	}
	return nil
}

// splitName returns the rule and key of an entry's name.
func splitName(name []byte) (rule, key []byte) {
	lr, k := binary.Uvarint(name)
	return name[k : k+int(lr)], name[k+int(lr):]
}

func (w *runWriter) flush() error {
	if w.n == 0 {
		return nil
	}
	if w.part >= 1<<runShift {
		return fmt.Errorf("key run %d: more than %d parts", w.run, 1<<runShift)
	}
	var prune any
	if w.hasPrune {
		prune = w.pruneMS
	}
	rule, key := splitName(w.first)
	if err := w.insert(w.run<<runShift|w.part, w.tier, w.n, prune, w.buf, rule, key); err != nil {
		return fmt.Errorf("key run %d part %d: %w", w.run, w.part, err)
	}
	w.part++
	w.bytes += int64(len(w.buf))
	w.empty()
	return nil
}

// empty starts a new part in buf: no entry, no previous name to share a
// prefix with, no prunable time.
func (w *runWriter) empty() {
	w.n, w.buf, w.prev, w.hasPrune = 0, w.buf[:0], w.prev[:0], false
}

// compactPlan says which runs to merge after a run was added to runs
// (oldest first): from runs[from] to the end; from < 0: none. Merging
// from 0 makes a new base. The base it weighs is the oldest run, or the
// oldest runs up to coverEnd (the last covering checkpoint's run, cover.go),
// at most maxRuns/2 of them.
func compactPlan(runs []runInfo, coverEnd int64) (from int) {
	if len(runs) < 2 {
		return -1
	}
	base, g := runs[0].bytes, 1
	for g < len(runs) && g < maxRuns/2 && runs[g].run <= coverEnd {
		base += runs[g].bytes
		g++
	}
	var rest int64
	for _, r := range runs[g:] {
		rest += r.bytes
	}
	switch {
	case rest >= baseRatio*base && g < len(runs):
		return 0
	case len(runs) > maxRuns:
		return g
	}
	return -1
}

// sortRows returns the indexes of rows in (rule, key) order, each (rule,
// key) once, its last mention; it reuses order, and keys for the sort's
// scratch (returned for the next call).
//
// The sort is stable: ties (one state twice) keep the order of rows, so
// that the last mention is last. It sorts small records (sortKey) by the
// rule's rank among the rows' rules and 8 bytes of the key past the
// prefix every key shares (a live checkpoint's keys are addresses of one
// network, or "ua:…"), big endian: a radix sort, least significant byte
// first, which skips the bytes all keys have alike. The records equal in
// both are then sorted by the keys' text. Sorting the rows' indexes by
// their strings (slices.SortStableFunc, until issue 23's part LIVE round
// 6) took 4.1 ms of CPU for a live checkpoint's 16,384 IPv6 keys in the
// random order a detector reports a site's clients, this 0.43 ms
// (BenchmarkSortRows); for keys that come nearly in order (row 2's
// writer, clients in turn) 0.35 and 0.40 ms. TestSortRowsAsModel holds
// it to that stable sort. It reads each row once, in the order they were
// collected (each row a cache miss, written by the collect on another
// core), and counts the records' bytes as it makes them: 19% fewer
// instructions than two passes over the rows and one a radix pass, and
// half the misses of a 512 KiB cache (cachegrind; issue 23, part CK,
// round 7).
func sortRows(rows []KeyRow, order []int32, keys []sortKey) ([]int32, []sortKey) {
	n := len(rows)
	order = order[:0]
	if n == 0 {
		return order, keys[:0]
	}
	if cap(keys) < 2*n {
		keys = make([]sortKey, 2*n)
	}
	keys, tmp := keys[:n], keys[n:2*n]
	// One pass over the rows (each more than a cache line, read in the
	// order collected, written by the collect on another core: each read
	// a cache miss) makes the records: the rule's rank in the order the
	// rules came (a checkpoint's rows have a few), and 8 bytes of the key
	// past the prefix every key so far shares. Where a key shares less
	// of it, the records made before took their bytes past a longer
	// prefix: their keys began with the first key's bytes up to it, so
	// the pass over the records after (below) makes their bytes again
	// without reading their rows. segs are the records' stretches of one
	// prefix length, from their first record.
	type seg struct{ from, shared int }
	var names []string
	var segs []seg
	first, shared := rows[0].Key, len(rows[0].Key)
	segs = append(segs, seg{0, shared})
	for i := range rows {
		r := &rows[i]
		rank := 0
		for rank < len(names) && names[rank] != r.Rule {
			rank++
		}
		if rank == len(names) {
			names = append(names, r.Rule)
		}
		k := r.Key
		if !strings.HasPrefix(k, first[:shared]) {
			j := 0
			for j < min(shared, len(k)) && k[j] == first[j] {
				j++
			}
			shared = j
			segs = append(segs, seg{i, shared})
		}
		var b [8]byte
		copy(b[:], k[shared:])
		keys[i] = sortKey{pre: binary.BigEndian.Uint64(b[:]), rank: int32(rank), i: int32(i)}
	}
	// The pass over the records: the bytes past the shortest prefix, the
	// rules' ranks in their order, and how many records have each value
	// of each byte of pre (the radix passes then read the records only
	// to move them).
	var rank []int32
	if len(names) > 1 {
		sorted := slices.Sorted(slices.Values(names))
		rank = make([]int32, len(names))
		for j, name := range names {
			rank[j] = int32(slices.Index(sorted, name))
		}
	}
	var count [8][256]int32
	for g, sg := range segs {
		end := n
		if g+1 < len(segs) {
			end = segs[g+1].from
		}
		// A key of this stretch is first[shared:sg.shared] then the 8
		// bytes its record holds: 8 bytes past shared are d of the first
		// key's, then the record's first 8-d.
		d := sg.shared - shared
		var head uint64
		if d > 0 {
			var b [8]byte
			copy(b[:], first[shared:sg.shared])
			head = binary.BigEndian.Uint64(b[:])
		}
		for j := sg.from; j < end; j++ {
			k := &keys[j]
			switch {
			case d >= 8:
				k.pre = head
			case d > 0:
				k.pre = head | k.pre>>(8*d)
			}
			if rank != nil {
				k.rank = rank[k.rank]
			}
			p := k.pre
			count[0][byte(p)]++
			count[1][byte(p>>8)]++
			count[2][byte(p>>16)]++
			count[3][byte(p>>24)]++
			count[4][byte(p>>32)]++
			count[5][byte(p>>40)]++
			count[6][byte(p>>48)]++
			count[7][byte(p>>56)]++
		}
	}
	// Radix passes: each byte of pre from the last, then the rank; a pass
	// is stable, so the rows' order stays among equal records. A byte
	// every record has alike is skipped.
	for d := range count {
		if int(count[d][byte(keys[0].pre>>(8*d))]) != n {
			radixPass(keys, tmp, &count[d], uint(8*d), false)
			keys, tmp = tmp, keys
		}
	}
	for shift := uint(0); len(names) > 1<<shift; shift += 8 {
		var c [256]int32
		for j := range keys {
			c[byte(uint32(keys[j].rank)>>shift)]++
		}
		if int(c[byte(uint32(keys[0].rank)>>shift)]) != n {
			radixPass(keys, tmp, &c, shift, true)
			keys, tmp = tmp, keys
		}
	}
	// (rank, pre) orders as (rule, key) where it differs (8 bytes padded
	// with zeros compare as the strings do up to their first difference);
	// the runs of equal ones are sorted by the keys' text.
	same := func(a, b *sortKey) bool { return a.rank == b.rank && a.pre == b.pre }
	for j := 0; j < n; {
		e := j + 1
		for e < n && same(&keys[j], &keys[e]) {
			e++
		}
		if e-j > 1 {
			slices.SortStableFunc(keys[j:e], func(a, b sortKey) int { return strings.Compare(rows[a.i].Key, rows[b.i].Key) })
		}
		j = e
	}
	// The last mention of each (rule, key) wins.
	for j := range keys {
		if j+1 < n && same(&keys[j], &keys[j+1]) && rows[keys[j].i].Key == rows[keys[j+1].i].Key {
			continue
		}
		order = append(order, keys[j].i)
	}
	if cap(tmp) > cap(keys) { // give back the pair from its start
		keys = tmp
	}
	return order, keys[:0]
}

// radixPass sorts keys into tmp by one byte, stably: the byte of pre, or
// with rank of the rank, shift bits up; count is how many keys have each
// value of it.
func radixPass(keys, tmp []sortKey, count *[256]int32, shift uint, rank bool) {
	var at [256]int32
	sum := int32(0)
	for d, c := range count {
		at[d] = sum
		sum += c
	}
	if rank {
		for j := range keys {
			d := byte(uint32(keys[j].rank) >> shift)
			tmp[at[d]] = keys[j]
			at[d]++
		}
		return
	}
	for j := range keys {
		d := byte(keys[j].pre >> shift)
		tmp[at[d]] = keys[j]
		at[d]++
	}
}

// sortKey is what sortRows sorts a row by: 16 bytes.
type sortKey struct {
	pre     uint64 // 8 bytes of the key past the shared prefix
	rank, i int32  // the rule's rank, the row's index
}

// unsafeString is b as a string, without a copy: only while b is not
// changed, and never kept.
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
