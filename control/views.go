package control

import (
	"cmp"
	"errors"
	"iter"
	"math"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/logjail/logjail/checkpoint"
	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/limits"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/state"
)

// ListQuery selects the bans of a list. Zero fields select everything.
type ListQuery struct {
	Rule    string
	Key     string // an address, CIDR or key (Target.Matches)
	Kind    string // "throttle" or "ban"
	Expired bool   // the ended bans (from the history) instead of the active ones
	Sort    string // "until" (default: the soonest end first), "since" (newest first) or "rule" (rule, key)
}

// Validate checks the query's values.
func (q ListQuery) Validate() error {
	if q.Kind != "" && q.Kind != state.PhaseBan && q.Kind != state.PhaseThrottle {
		return errf(ErrBadRequest, "--kind %q: want throttle or ban", q.Kind)
	}
	switch q.Sort {
	case "", "until", "since", "rule":
	default:
		return errf(ErrBadRequest, "--sort %q: want until, since or rule", q.Sort)
	}
	if q.Key != "" {
		if _, err := ParseTarget(q.Key); err != nil {
			return err
		}
	}
	return nil
}

// List reads the bans q selects from db at now: the active ones (a reader
// of the database sees what the daemon checkpointed, within 10 ms of a
// decision), or with q.Expired those that ended, from the history.
func List(db state.Ledger, cfg *rules.Config, q ListQuery, now time.Time) (*BanList, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	var t Target
	if q.Key != "" {
		t, _ = ParseTarget(q.Key)
	}
	keep := func(rule, key, kind string, addrs []netip.Addr) bool {
		if q.Rule != "" && rule != q.Rule || q.Kind != "" && kind != q.Kind {
			return false
		}
		return q.Key == "" || t.Matches(cfg, key, addrs)
	}
	l := &BanList{Version: SchemaVersion, Now: now, Expired: q.Expired, Bans: []Ban{}}
	if q.Expired {
		bans, err := ended(db, now)
		if err != nil {
			return nil, err
		}
		for _, b := range bans {
			var addrs []netip.Addr
			for _, a := range b.Addresses {
				if x, err := netip.ParseAddr(a); err == nil {
					addrs = append(addrs, x)
				}
			}
			if keep(b.Rule, b.Key, b.Kind, addrs) {
				l.Bans = append(l.Bans, b)
			}
		}
	} else {
		n, err := db.CountActiveBans()
		if err != nil {
			return nil, err
		}
		l.Bans = make([]Ban, 0, n)
		slab := newBanSlab(n)
		ordered := true // by (rule, key), strictly: as EachActiveBan promises
		err = db.EachActiveBan(func(b *state.Ban) error {
			if !keep(b.Rule, b.Key, b.Kind, b.Addresses) {
				return nil
			}
			if k := len(l.Bans); k > 0 && ordered {
				p := &l.Bans[k-1]
				c := strings.Compare(p.Rule, b.Rule)
				ordered = c < 0 || c == 0 && p.Key < b.Key
			}
			l.Bans = append(l.Bans, slab.banOf(b, now))
			return nil
		})
		if err != nil {
			return nil, err
		}
		if ordered {
			sortRuleKeyOrdered(l.Bans, q.Sort)
			return l, nil
		}
	}
	sortBans(l.Bans, q.Sort)
	return l, nil
}

// banSlab holds what the Until and LeftSeconds of a list's bans point to,
// two arrays for the list instead of two allocations a ban.
type banSlab struct {
	until []time.Time
	left  []int64
}

// newBanSlab makes room for n bans' times; more may be added (an append
// beyond n starts new arrays, leaving the earlier pointers valid).
func newBanSlab(n int) *banSlab {
	return &banSlab{until: make([]time.Time, 0, n), left: make([]int64, 0, n)}
}

// banOf is BanOf(b, now), its Until and LeftSeconds in s.
// TestBanSlab holds the two to the same values.
func (s *banSlab) banOf(b *state.Ban, now time.Time) Ban {
	v := banFields(b)
	if !b.Until.IsZero() {
		s.until = append(s.until, b.Until)
		s.left = append(s.left, leftSeconds(b.Until, now))
		v.Until, v.LeftSeconds = &s.until[len(s.until)-1], &s.left[len(s.left)-1]
	}
	return v
}

// sortBans sorts by until (the soonest end first; none last), since
// (newest first) or rule, then rule and key. It sorts indexes, then moves
// each ban once: a ban is some 200 bytes, and there may be 100,000.
func sortBans(bs []Ban, by string) {
	until := func(b *Ban) int64 {
		if b.Until == nil {
			return math.MaxInt64
		}
		return b.Until.UnixNano()
	}
	ruleKey := func(a, b *Ban) int {
		if c := strings.Compare(a.Rule, b.Rule); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	}
	idx := make([]int32, len(bs))
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(i, j int32) int {
		a, b := &bs[i], &bs[j]
		switch by {
		case "since":
			if c := b.Since.Compare(a.Since); c != 0 {
				return c
			}
		case "rule":
		default:
			if c := cmp.Compare(until(a), until(b)); c != 0 {
				return c
			}
		}
		return ruleKey(a, b)
	})
	permute(bs, idx)
}

// sortRuleKeyOrdered is sortBans for bans already in (rule, key) order,
// strictly (no two alike), as EachActiveBan reads them: a ban's index then
// stands for its rule and key, so the order is that of one integer a ban,
// ties kept in the order they came in. It sorts those integers with a
// stable radix sort, in arrays of their own, instead of comparing times
// and strings in bans scattered over 20 MB: a tenth of the time for
// 100,000 bans. The order is sortBans's (TestSortBans); since times a
// UnixNano cannot hold, or that carry a monotonic reading (Compare would
// use it), are left to sortBans.
func sortRuleKeyOrdered(bs []Ban, by string) {
	ks := make([]uint64, len(bs))
	switch by {
	case "rule":
		return
	case "since": // newest first
		for i := range bs {
			t := bs[i].Since
			if sec := t.Unix(); sec <= math.MinInt64/int64(time.Second)+1 || sec >= math.MaxInt64/int64(time.Second)-1 || t != t.Round(0) {
				sortBans(bs, by)
				return
			}
			ks[i] = ^orderedUint(t.UnixNano())
		}
	default: // until, the soonest end first, none last
		for i := range bs {
			ks[i] = orderedUint(math.MaxInt64)
			if u := bs[i].Until; u != nil {
				ks[i] = orderedUint(u.UnixNano())
			}
		}
	}
	permute(bs, radixOrder(ks))
}

// orderedUint maps an int64 to a uint64 of the same order.
func orderedUint(n int64) uint64 { return uint64(n) ^ 1<<63 }

// radixOrder returns the indexes of ks in the order of their values,
// stably (equal values keep their order): a least significant digit radix
// sort a byte a pass, skipping the bytes all values share. It overwrites ks.
func radixOrder(ks []uint64) []int32 {
	n := len(ks)
	idx := make([]int32, n)
	for i := range idx {
		idx[i] = int32(i)
	}
	if n < 2 {
		return idx
	}
	tk, ti := make([]uint64, n), make([]int32, n)
	for shift := 0; shift < 64; shift += 8 {
		var at [256]int
		for _, k := range ks {
			at[byte(k>>shift)]++
		}
		if at[byte(ks[0]>>shift)] == n {
			continue // one value of this byte: the order stays
		}
		sum := 0
		for d, c := range at {
			at[d] = sum
			sum += c
		}
		for i, k := range ks {
			d := byte(k >> shift)
			tk[at[d]], ti[at[d]] = k, idx[i]
			at[d]++
		}
		ks, tk = tk, ks
		idx, ti = ti, idx
	}
	return idx
}

// permute puts bs[idx[i]] at i, moving each ban once, in place. It
// overwrites idx.
func permute(bs []Ban, idx []int32) {
	for start := range idx {
		if idx[start] < 0 {
			continue
		}
		tmp := bs[start]
		j := start
		for {
			k := int(idx[j])
			idx[j] = -1
			if k == start {
				bs[j] = tmp
				break
			}
			bs[j] = bs[k]
			j = k
		}
	}
}

// ended pairs the history's bans with their ends: every throttle or ban
// that is no longer active at now, with when and why it ended.
func ended(db state.Ledger, now time.Time) ([]Ban, error) {
	var out []Ban
	err := db.View(func(s state.Reader) error {
		active, err := s.ActiveBans()
		if err != nil {
			return err
		}
		isActive := map[state.BanKey]bool{}
		for _, b := range active {
			isActive[state.BanKey{Rule: b.Rule, Key: b.Key}] = true
		}
		es, err := s.History(state.HistoryQuery{})
		if err != nil {
			return err
		}
		open := map[state.BanKey]int{}      // index in out
		for i := len(es) - 1; i >= 0; i-- { // oldest first
			e := &es[i]
			k := state.BanKey{Rule: e.Rule, Key: e.Key}
			j, isOpen := open[k]
			switch e.Kind {
			case state.KindBan, state.KindThrottle:
				if isOpen && out[j].Kind == e.Kind && e.Kind == state.KindThrottle {
					// A throttle's delay grew: the same throttle.
					setUntil(&out[j], e.Until, now)
					out[j].Violations = e.Violations
					continue
				}
				if isOpen {
					closeBan(&out[j], e.Time, "replaced by a "+e.Kind, now)
				}
				b := Ban{Rule: e.Rule, Key: e.Key, Kind: e.Kind, Since: e.Time, Violations: e.Violations,
					Addresses: addrStrings(e.Addresses), Reason: e.Reason, Origin: e.Origin, Who: e.Who, LogOnly: e.LogOnly, Node: e.Node}
				setUntil(&b, e.Until, now)
				open[k] = len(out)
				out = append(out, b)
			case state.KindUnban:
				if isOpen {
					why := e.Reason
					if e.Who != "" {
						why += " (" + e.Who + ")"
					}
					closeBan(&out[j], e.Time, why, now)
					delete(open, k)
				}
			}
		}
		for k, j := range open {
			b := &out[j]
			if isActive[k] || b.Until == nil || b.Until.After(now) {
				b.Ended = nil // still active (or the store says so): not listed
				continue
			}
			closeBan(b, *b.Until, "ended", now)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	kept := out[:0]
	for _, b := range out {
		if b.Ended != nil {
			kept = append(kept, b)
		}
	}
	return kept, nil
}

func closeBan(b *Ban, at time.Time, why string, now time.Time) {
	if b.Until != nil && b.Until.Before(at) {
		at = *b.Until // a throttle ends silently at its until
		why = "ended"
	}
	t := at
	b.Ended, b.EndReason = &t, why
	left := int64(0)
	b.LeftSeconds = &left
}

// Search is what a history or a list of an address stands for: the keys
// containing it, as Target.Matches finds them among the keys that have a
// history. For a CIDR or a key, the key itself.
func Search(cfg *rules.Config, t Target) []string {
	if !t.IsAddr {
		return []string{t.Key}
	}
	keys := cfg.KeysContaining(t.Prefix.Addr())
	if !slices.Contains(keys, t.Key) {
		keys = append([]string{t.Key}, keys...)
	}
	return keys
}

// ReadHistory reads the history of what s names (an address: of every
// key containing it, the bans of CIDRs containing it included), oldest
// first.
func ReadHistory(db state.Ledger, cfg *rules.Config, s string) (*History, error) {
	t, err := ParseTarget(s)
	if err != nil {
		return nil, err
	}
	h := &History{Version: SchemaVersion, Query: s, Keys: Search(cfg, t), Events: []Event{}}
	keys := slices.Clone(h.Keys)
	if t.Prefix.IsValid() {
		// Keys not derived from the configuration: an operator's CIDR,
		// a user seen from the address.
		err := db.View(func(sn state.Reader) error {
			es, err := sn.History(state.HistoryQuery{})
			if err != nil {
				return err
			}
			for i := range es {
				if !slices.Contains(keys, es[i].Key) && t.Matches(cfg, es[i].Key, es[i].Addresses) {
					keys = append(keys, es[i].Key)
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	var es []state.Event
	for _, k := range keys {
		ks, err := db.History(state.HistoryQuery{Key: k})
		if err != nil {
			return nil, err
		}
		es = append(es, ks...)
	}
	// Oldest first; History gives each key newest first, in the order
	// written within a millisecond.
	slices.Reverse(es)
	slices.SortStableFunc(es, func(a, b state.Event) int { return a.Time.Compare(b.Time) })
	for i := range es {
		h.Events = append(h.Events, eventOf(&es[i]))
	}
	for _, k := range keys[len(h.Keys):] {
		h.Keys = append(h.Keys, k)
	}
	return h, nil
}

// TopAt is the document of top on det, whether the daemon's live
// detector or one restored from the last checkpoint: its windows read at
// the latest of logTime (the daemon's newest line, the checkpoint's time),
// det's own clock (detector.Detector.Newest) and now (the wall clock: a
// quiet log's windows drain as the daemon's do). Live is the caller's to
// set.
func TopAt(det *detector.Detector, logTime, now time.Time, q TopRequest) (*Top, error) {
	t := now
	for _, lt := range []time.Time{logTime, det.Newest()} {
		if lt.After(t) {
			t = lt
		}
	}
	keys, err := TopOf(det, t, q)
	if err != nil {
		return nil, err
	}
	if keys == nil {
		keys = []TopKey{}
	}
	return &Top{Version: SchemaVersion, Time: t, Keys: keys}, nil
}

// TopOf reads det's windows at log time t and returns the n keys closest
// to their limits (of the limits q.By selects), the closest first.
func TopOf(det *detector.Detector, t time.Time, q TopRequest) ([]TopKey, error) {
	if q.By != "" && q.By != "requests" && q.By != "cpu" {
		return nil, errf(ErrBadRequest, "--by %q: want requests or cpu", q.By)
	}
	n := q.N
	if n <= 0 {
		n = 20
	}
	var out []TopKey
	det.Current(t, func(k *detector.KeyNow) {
		if q.Rule != "" && k.Rule.Name != q.Rule {
			return
		}
		tk := TopKey{Rule: k.Rule.Name, Key: k.Key, Phase: string(k.Phase), Requests: k.Requests, CPU: k.CPU, LastSeen: k.LastSeen}
		if !k.Until.IsZero() {
			u := k.Until
			tk.Until = &u
		}
		selected := false
		for _, l := range k.Limits {
			share := l.Limit.Kind.Traits().Weighs != limits.Requests // weighs cost: cpu or duration
			r := min(l.Ratio, 1e6)
			tl := TopLimit{Limit: l.Limit.Text, Ratio: r}
			if !math.IsInf(l.Value, 0) {
				v := l.Value
				tl.Value = &v
			}
			tk.Limits = append(tk.Limits, tl)
			if q.By == "" || (q.By == "cpu") == share {
				selected = true
				tk.Ratio = max(tk.Ratio, r)
			}
		}
		if selected && (tk.Ratio > 0 || tk.Phase != "") {
			out = append(out, tk)
		}
	})
	slices.SortFunc(out, func(a, b TopKey) int {
		return cmp.Or(cmp.Compare(b.Ratio, a.Ratio), cmp.Compare(a.Rule, b.Rule), cmp.Compare(a.Key, b.Key))
	})
	if len(out) > n {
		out = out[:n]
	}
	return out, nil
}

// RestoreDetector restores a detector from db's last checkpoint (read
// only), for top and status when no daemon runs; it returns the
// checkpoint's log time. Without keys, only the detector-wide state
// (counters, breaker) is read.
func RestoreDetector(db state.RestoreSource, cfg *rules.Config, det *detector.Detector, keys bool) (time.Time, error) {
	global, at, err := db.Global()
	if err != nil || global == nil {
		return at, err
	}
	var readErr error
	states := iter.Seq[*detector.KeyState](func(func(*detector.KeyState) bool) {})
	if keys {
		states = checkpoint.KeyStates(db, &readErr)
	}
	if _, err := det.Restore(cfg, global, states); err != nil {
		return at, err
	}
	return at, readErr
}

// DetectorStatus fills what a status reads from the detector, whether the
// daemon's live one or one restored from the last checkpoint (keys and
// all): the circuit breaker (its trips from db's history), the tracked
// keys, the evictions and the estimated heap. Its error is the history's
// read; the rest is filled all the same.
func DetectorStatus(st *Status, det *detector.Detector, cfg *rules.Config, db state.BanReader) error {
	ds := det.Stats()
	st.TrackedKeys, st.Evictions = ds.Keys, ds.Evictions
	mem := det.Memory()
	st.TrackedKeyBytes, st.BytesPerKey = mem.Bytes, mem.PerState()
	var err error
	st.Breaker, err = BreakerOf(det.Breaker(), cfg, db)
	return err
}

// StatusOf fills what a status reads from the database and the files:
// the database, the sources' positions and the active bans by rule. A
// read that fails is its error; the rest is filled all the same (the
// sources and rules from the configuration).
func StatusOf(st *Status, db state.Reader, cfg *rules.Config, dbPath string) error {
	st.Config = cfg.File
	st.Database.Path = dbPath
	st.Database.Bytes = fileSize(dbPath) + max(0, fileSize(dbPath+"-wal"))
	// What the configuration says comes first, so that a database that
	// cannot be read still leaves the sources and rules in the status.
	bySource := map[string]*Source{}
	st.Sources = []Source{}
	for _, s := range cfg.Sources {
		st.Sources = append(st.Sources, Source{Name: s.Name, Files: []SourceFile{}})
	}
	for i := range st.Sources {
		bySource[st.Sources[i].Name] = &st.Sources[i]
	}
	st.Rules = []RuleStatus{}
	idx := map[string]int{}
	for _, r := range cfg.Rules {
		idx[r.Name] = len(st.Rules)
		st.Rules = append(st.Rules, RuleStatus{Name: r.Name, LogOnly: r.LogOnly})
	}
	if st.Actions == nil {
		st.Actions = []ActionState{}
	}
	var errs []error
	if _, at, err := db.Global(); err != nil {
		errs = append(errs, err)
	} else if !at.IsZero() {
		st.Database.Checkpoint = &at
	}
	ps, err := db.Positions()
	if err != nil {
		errs = append(errs, err)
	}
	for _, p := range ps {
		src := cfg.SourceFor(p.Path)
		if src == nil {
			continue
		}
		f := SourceFile{Path: p.Path, Offset: p.Offset, Line: p.Line, Size: -1}
		if fi, err := os.Stat(p.Path); err == nil {
			f.Size = fi.Size()
			if f.Size >= p.Offset {
				f.LagBytes = f.Size - p.Offset
			}
		}
		s := bySource[src.Name]
		s.Files = append(s.Files, f)
	}
	counts, err := db.BanCounts()
	if err != nil {
		errs = append(errs, err)
	}
	for _, c := range counts {
		i, ok := idx[c.Rule]
		if !ok {
			i = len(st.Rules)
			idx[c.Rule] = i
			st.Rules = append(st.Rules, RuleStatus{Name: c.Rule})
		}
		if c.Kind == state.PhaseThrottle {
			st.Rules[i].Throttles += c.N
		} else {
			st.Rules[i].Bans += c.N
		}
	}
	if _, ok := db.(state.Bouncers); ok {
		if l, err := ListBouncers(db); err != nil {
			errs = append(errs, err)
		} else {
			st.Bouncers = l.Bouncers
		}
	}
	return errors.Join(errs...)
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return -1
	}
	return fi.Size()
}
