package replay

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/limits"
	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/pipeline"
	"github.com/logjail/logjail/rules"
)

// Report is what a replay found, for a person tuning thresholds. Its JSON
// form (WriteJSON) is a stable, documented schema; the same input gives
// byte-identical output.
type Report struct {
	Input     InputReport     `json:"input"`
	Files     []FileReport    `json:"files"`
	Lists     pipeline.Counts `json:"lists"`
	Detector  detector.Stats  `json:"detector"`
	Decisions []Decision      `json:"decisions"`
	Rules     []RuleReport    `json:"rules"`
	Top       []TopList       `json:"top"`
	// Risky are the bans of clients that may be good (Risk), in the order
	// they were decided; each is also in Decisions and in its rule's keys.
	Risky  []RiskyBan    `json:"risky"`
	Sweeps []SweepResult `json:"sweeps,omitempty"`

	cfg       *rules.Config
	samples   int // rejected lines quoted at most
	recent    *recent
	pending   []pendingBan // bans to explain once the log passes their second
	pendingT  time.Time    // the earliest of their times
	agentKind func(ua string) (name, kind string)
	charts    *charts // for WriteHTML, only with Options.Charts
	byRule    map[string]*RuleReport
	keyIdx    map[string]map[string]int // rule -> key -> index in RuleReport.Keys
	first     time.Time
	last      time.Time
	firstS    stamp // first's, as observe compares it
	lastS     stamp // last's
	entries   int64
}

// stamp is a time as its Unix seconds and nanoseconds: ordered as
// time.Time.Before orders times, whatever their year (UnixNano would not
// be, past 2262), and compared without its calls (observe does it for
// every entry; TestStampAsTime).
type stamp struct {
	sec  int64
	nsec int32
}

func stampOf(t time.Time) stamp { return stamp{t.Unix(), int32(t.Nanosecond())} }

func (a stamp) before(b stamp) bool { return a.sec < b.sec || a.sec == b.sec && a.nsec < b.nsec }

// InputReport counts the input.
type InputReport struct {
	Lines    int64 `json:"lines"`
	Parsed   int64 `json:"parsed"`
	Rejected int64 `json:"rejected"`
	Skipped  int64 `json:"skipped"` // parsed but outside --from/--to
	// Outliers are lines far ahead of their neighbours in their file
	// (pipeline.Guard): parsed, not charged.
	Outliers int64            `json:"outliers"`
	First    *time.Time       `json:"first"`
	Last     *time.Time       `json:"last"`
	Reasons  map[string]int64 `json:"rejected_by_reason"`
	Samples  []RejectedLine   `json:"rejected_lines"`
}

// RejectedLine is one rejected line, quoted in the report.
type RejectedLine struct {
	File  string `json:"file"`
	Line  int    `json:"line"`
	Error string `json:"error"`
}

// FileReport is one input file.
type FileReport struct {
	Name     string `json:"name"`
	Source   string `json:"source"`
	Format   string `json:"format"`
	Lines    int64  `json:"lines"`
	Rejected int64  `json:"rejected"`
	Outliers int64  `json:"outliers"`
}

// Decision is a detector decision in the report's JSON form.
type Decision struct {
	Rule       string       `json:"rule"`
	Key        string       `json:"key"`
	Kind       string       `json:"kind"`
	Time       time.Time    `json:"time"`
	Until      *time.Time   `json:"until"`
	Delay      float64      `json:"delay"` // seconds, throttles only
	Violations int          `json:"violations"`
	Addresses  []netip.Addr `json:"addresses"`
	Reason     string       `json:"reason"`
	Origin     string       `json:"origin"`
	LogOnly    bool         `json:"log_only"`
	// For a rule's ban: after how many requests (After), and why the
	// client may have been a good one (Risks, none when it looks bad).
	After *After `json:"after,omitempty"`
	Risks []Risk `json:"risks,omitempty"`
}

// After says how far a client had gone when a rule banned it.
type After struct {
	// Requests are the requests the rule charged to the key, the banning
	// one included (requests seen while the key was banned before are not
	// charged; an evicted key counts again).
	Requests int64 `json:"requests"`
	// Seen are the client's requests in the log in its visit up to the
	// second of the ban (that whole second: its requests after the ban
	// within it too, so that the count does not depend on how lines of
	// one second from several files interleave), whatever rule charged
	// them, allowed and blocked ones too. The client is the address of
	// the banning request; for a key that is not one address (a prefix,
	// a range, a user, a user agent), the addresses seen on it
	// (Decision.Addresses), their visits summed.
	Seen int64 `json:"seen"`
	// Seconds is the time from the client's first request of its visit to
	// the ban. A visit starts at the client's first request in the log,
	// or at its first after more than 65,536 lines of the log without it.
	Seconds float64 `json:"seconds"`
}

// Risk is why a ban may have hit a client that is not an attacker.
type Risk struct {
	// Kind is burst (a rate rule banned a client whose last requests,
	// those of the 10 s before the ban and at most 200, were at least
	// 80% answered 2xx or 304 and at least 50% static files: a browser
	// loading a heavy page looks like this), monitor or crawler (the
	// banning request's user agent is a known uptime monitor or crawler:
	// Options.AgentKind; a claim, not a verification), or range (the key
	// is a whole named range, such as a crawler's published range).
	Kind   string `json:"kind"`
	Detail string `json:"detail"` // for a person: the shares, the agent's name, the range
}

// RiskyBan is a ban of a client that may be good, with the rule that made
// it: the rule to look at first.
type RiskyBan struct {
	Rule      string    `json:"rule"`
	Key       string    `json:"key"`
	Time      time.Time `json:"time"`
	After     *After    `json:"after"`
	UserAgent string    `json:"user_agent"` // of the banning request, at most 256 bytes
	Risks     []Risk    `json:"risks"`
}

// RuleReport sums up one rule.
type RuleReport struct {
	Name      string `json:"name"`
	LogOnly   bool   `json:"log_only"`
	Throttled int    `json:"throttled_keys"`
	Banned    int    `json:"banned_keys"`
	// MedianRequests is the median of After.Requests over the first ban
	// of each key the rule banned (the lower middle one of an even
	// count); null when it banned none.
	MedianRequests *int64        `json:"median_requests_before_ban"`
	Keys           []KeyReport   `json:"keys"`
	Limits         []LimitReport `json:"limits"`
}

// KeyReport is what one rule decided about one key.
type KeyReport struct {
	Key            string      `json:"key"`
	FirstViolation time.Time   `json:"first_violation"`
	FirstReason    string      `json:"first_reason"` // why the key first went over
	Throttles      int         `json:"throttles"`
	Bans           []BanRecord `json:"bans"`
}

// BanRecord is one ban of a key.
type BanRecord struct {
	Time   time.Time  `json:"time"`
	Until  *time.Time `json:"until"`
	Reason string     `json:"reason"`
	After  *After     `json:"after"` // null for a static ban
	Risks  []Risk     `json:"risks,omitempty"`
}

// LimitReport gives, over every key the rule tracked, percentiles of the
// peak value each key reached against one limit: where a threshold would cut.
// Every column runs towards the limit: p99 is the peak 99% of keys stay on
// the safe side of, and Max the most severe peak of all. For a rate, a
// share or a bucket a larger value is worse, so p99 is the 99th percentile
// of the peaks and Max the largest. For `last N within D`, where the peak
// is a key's shortest span of N requests and a key is over when its span
// is below D, a smaller span is worse: the ranking is reversed, p90 is the
// span 90% of keys stay above (the 10th percentile of spans), p99 the 1st
// percentile, and Max (JSON "max"; the text's header says MIN) the
// shortest span of all. So a p99 close to the limit means, for either kind,
// that a threshold there would catch about 1% of keys. Keys with fewer than
// N requests have no span and are not counted. A banned key's
// requests are not charged while it is banned, so its peak reads just over
// the limit it crossed: percentiles show where a threshold would cut, and
// --sweep what another threshold would do. Values are in the limit's terms
// as written: the share of an "of machine" limit is of all the cores (the
// detector's share of one core divided by rules.Config.Cores), so that
// "55% vs 50% cpu over 10s of machine" compares like with like.
type LimitReport struct {
	Limit string  `json:"limit"`
	Unit  string  `json:"unit"`
	Keys  int     `json:"keys"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

// TopList is one rule's busiest keys by one measure.
type TopList struct {
	Rule string   `json:"rule"`
	By   string   `json:"by"` // requests | cpu
	Keys []TopKey `json:"keys"`
}

// TopKey is one key of a top list with its peak window values.
type TopKey struct {
	Key      string      `json:"key"`
	Requests int64       `json:"requests"` // every request the rule saw, blocked ones included
	Blocked  int64       `json:"blocked"`  // requests while banned: counted, not charged
	CPU      float64     `json:"cpu_seconds"`
	Peaks    []LimitPeak `json:"peaks"`
}

// LimitPeak is the peak a key reached against one limit.
type LimitPeak struct {
	Limit string   `json:"limit"`
	Value *float64 `json:"value"` // null when the key never reached a value (fewer than N requests for last N)
}

func newReport(cfg *rules.Config, samples int, agentKind func(string) (string, string)) *Report {
	r := &Report{cfg: cfg, samples: samples, byRule: map[string]*RuleReport{}, keyIdx: map[string]map[string]int{},
		recent: newRecent(), agentKind: agentKind}
	r.Input.Reasons = map[string]int64{}
	r.Decisions = []Decision{}
	r.Risky = []RiskyBan{}
	for _, rule := range cfg.Rules {
		r.Rules = append(r.Rules, RuleReport{Name: rule.Name, LogOnly: rule.LogOnly, Keys: []KeyReport{}})
	}
	for i := range r.Rules {
		r.byRule[r.Rules[i].Name] = &r.Rules[i]
	}
	return r
}

func (r *Report) observe(e *parser.Entry) {
	st := stampOf(e.Time)
	if r.entries == 0 || st.before(r.firstS) {
		r.first, r.firstS = e.Time, st
	}
	if r.entries == 0 || r.lastS.before(st) {
		r.last, r.lastS = e.Time, st
	}
	r.entries++
	if len(r.pending) > 0 && e.Time.After(r.pendingT) {
		r.settle(e.Time)
	}
}

// record adds e to the ring of recent requests. The merger calls it after
// observe and decide of e (nothing reads the ring between: a ban is
// explained by settle, in observe of a later entry or in finish), so that
// the charge of e hides the ring's cache miss (recent.prefetch).
func (r *Report) record(e *parser.Entry) { r.recent.add(e) }

// decide records the decisions that charging e made; det is the detector
// that made them, asked for the requests a ban came after.
func (r *Report) decide(ds []detector.Decision, e *parser.Entry, det *detector.Detector) {
	for i := range ds {
		d := &ds[i]
		j := Decision{
			Rule: d.Rule, Key: d.Key, Kind: string(d.Kind), Time: d.Time, Until: optTime(d.Until),
			Delay: d.Delay.Seconds(), Violations: d.Violations, Addresses: append([]netip.Addr(nil), d.Addresses...),
			Reason: d.Reason, Origin: d.Origin, LogOnly: d.LogOnly,
		}
		var pb *pendingBan
		if rule := r.cfg.Rule(d.Rule); d.Kind == detector.Ban && d.Origin == "detector" && rule != nil {
			// A rule's ban is made by the charge of e, a request of the
			// banned key: the requests it came after now, the rest once
			// the log has passed its second (settle).
			j.After = &After{}
			if n, ok := det.Charged(rule, d.Key); ok {
				j.After.Requests = n
			}
			pb = &pendingBan{dec: len(r.Decisions), rule: rule, ip: e.IP}
			if e.Has&parser.HasUserAgent != 0 {
				pb.ua = strings.Clone(e.UserAgent[:min(len(e.UserAgent), maxUserAgent)])
			}
		}
		r.Decisions = append(r.Decisions, j)
		rr := r.byRule[d.Rule]
		if rr == nil {
			rr = &RuleReport{Name: d.Rule, Keys: []KeyReport{}}
			r.byRule[d.Rule] = rr // static bans: reported under their origin
		}
		if d.Kind == detector.Unban {
			continue
		}
		idx := r.keyIdx[d.Rule]
		if idx == nil {
			idx = map[string]int{}
			r.keyIdx[d.Rule] = idx
		}
		k, ok := idx[d.Key]
		if !ok {
			k = len(rr.Keys)
			idx[d.Key] = k
			rr.Keys = append(rr.Keys, KeyReport{Key: d.Key, FirstViolation: d.Time, FirstReason: d.Reason})
		}
		switch d.Kind {
		case detector.Throttle:
			rr.Keys[k].Throttles++
		case detector.Ban:
			rr.Keys[k].Bans = append(rr.Keys[k].Bans, BanRecord{Time: d.Time, Until: optTime(d.Until), Reason: d.Reason, After: j.After})
			if pb != nil {
				pb.rr, pb.key, pb.ban = rr, k, len(rr.Keys[k].Bans)-1
				if len(r.pending) == 0 || d.Time.Before(r.pendingT) {
					r.pendingT = d.Time
				}
				r.pending = append(r.pending, *pb)
			}
		}
	}
}

// pendingBan is a rule's ban waiting for the log to pass its second, to
// be explained (settle): where it is in the report, and its banning
// request's address and user agent.
type pendingBan struct {
	dec  int // in Report.Decisions
	rr   *RuleReport
	key  int // in rr.Keys
	ban  int // in the key's Bans
	rule *rules.Rule
	ip   netip.Addr
	ua   string
}

// maxUserAgent is how much of a banning request's user agent the report
// keeps (for the risky bans only).
const maxUserAgent = 256

// settle explains the pending bans of times before t, once every request
// of their second is in the ring of recent requests (a zero t: every
// pending ban, at the end of the log). So a ban's explanation does not
// depend on how the lines of one second from several files interleave.
func (r *Report) settle(t time.Time) {
	kept := r.pending[:0]
	for _, p := range r.pending {
		if bt := r.Decisions[p.dec].Time; !t.IsZero() && !t.After(bt) {
			if len(kept) == 0 || bt.Before(r.pendingT) {
				r.pendingT = bt
			}
			kept = append(kept, p)
			continue
		}
		r.explain(&p)
	}
	clear(r.pending[len(kept):])
	r.pending = kept
}

// explain completes a settled ban: the client's visit (After.Seen and
// Seconds) and the risks that it was a good one, in the decision, its
// rule's ban record and, if any, Report.Risky.
func (r *Report) explain(p *pendingBan) {
	j := &r.Decisions[p.dec]
	a := j.After
	// The client is the banning request's address, or for a key that is
	// not one address (a prefix, a range, a user, a user agent) the
	// addresses seen on it (Decision.Addresses): their visits summed,
	// from the earliest.
	first := int64(math.MaxInt64)
	visit := func(ip netip.Addr) {
		if rc := r.recent.latest(ip); rc != nil {
			a.Seen += int64(rc.seen)
			first = min(first, rc.first)
		}
	}
	if len(j.Addresses) == 0 {
		visit(p.ip)
	}
	for _, ip := range j.Addresses {
		visit(ip)
	}
	if first != math.MaxInt64 {
		a.Seconds = round(max(0, float64(j.Time.UnixNano()-first)/1e9), 3)
	}
	var risks []Risk
	if rateRule(p.rule) {
		if st := r.recent.burst(p.ip, j.Time); st.n >= burstMin && float64(st.ok) >= burstOK*float64(st.n) && float64(st.static) >= burstStatic*float64(st.n) {
			risks = append(risks, Risk{Kind: "burst", Detail: fmt.Sprintf("%d%% 2xx/304, %d%% static of its last %s in %s",
				st.ok*100/st.n, st.static*100/st.n, plural(st.n, "request"), span(st.span))})
		}
	}
	if r.agentKind != nil && p.ua != "" {
		if name, kind := r.agentKind(p.ua); kind == "monitor" || kind == "crawler" {
			risks = append(risks, Risk{Kind: kind, Detail: name})
		}
	}
	if name, ok := strings.CutPrefix(j.Key, "range:"); ok {
		risks = append(risks, Risk{Kind: "range", Detail: "every address of range " + name})
	}
	if len(risks) == 0 {
		return
	}
	j.Risks = risks
	p.rr.Keys[p.key].Bans[p.ban].Risks = risks
	r.Risky = append(r.Risky, RiskyBan{Rule: j.Rule, Key: j.Key, Time: j.Time, After: a, UserAgent: p.ua, Risks: risks})
}

// rateRule reports whether a rule counts requests (a rate, a token bucket,
// last N), as opposed to weighing their cost only.
func rateRule(rule *rules.Rule) bool {
	for _, l := range rule.Limits {
		if l.Kind.Traits().Weighs == limits.Requests {
			return true
		}
	}
	return false
}

// fmtAfter writes an After for a person: "12 req / 3s".
func fmtAfter(a *After) string {
	if a == nil {
		return "-"
	}
	return fmt.Sprintf("%d req / %s", a.Requests, span(time.Duration(a.Seconds*float64(time.Second))))
}

// riskKinds writes the kinds of risks, "-" for none.
func riskKinds(rs []Risk) string {
	if len(rs) == 0 {
		return "-"
	}
	ks := make([]string, len(rs))
	for i, rk := range rs {
		ks[i] = rk.Kind
	}
	return strings.Join(ks, ",")
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func (r *Report) addReader(rd *reader) {
	r.Input.Lines += rd.lines
	r.Input.Rejected += rd.nrej
	r.Input.Parsed += rd.lines - rd.nrej
	for k, v := range rd.reasons {
		r.Input.Reasons[k] += v
	}
	for _, s := range rd.rejected {
		if len(r.Input.Samples) < r.samples {
			r.Input.Samples = append(r.Input.Samples, s)
		}
	}
	outliers, _ := rd.guard.Outliers()
	r.Input.Outliers += outliers
	r.Files = append(r.Files, FileReport{Name: rd.in.Name, Source: rd.in.Source.Name, Format: rd.format, Lines: rd.lines, Rejected: rd.nrej, Outliers: outliers})
}

// finish gathers what only the detector knows: peaks and totals per key.
func (r *Report) finish(p *pipeline.Pipeline, top int) {
	r.settle(time.Time{})
	if r.entries > 0 {
		r.Input.First, r.Input.Last = &r.first, &r.last
	}
	r.Lists = p.Counts()
	r.Detector = p.Detector().Stats()
	// Per rule: each limit's percentiles of the finite peaks, and the top
	// keys by requests and by CPU, kept as the states are visited. The
	// percentiles are selected over a few walks of the states (pctSelect),
	// so that a million keys cost nothing here but those walks.
	type acc struct {
		sel []*pctSelect
		top [2][]keyPeak // by requests, by cpu: the best first
	}
	perRule := map[*rules.Rule]*acc{}
	var peak []float64
	peaks := func(kp *detector.KeyPeak) []float64 {
		peak = append(peak[:0], kp.Peak...)
		for li, l := range kp.Rule.Limits {
			if l.OfMachine && li < len(peak) && r.cfg.Cores > 0 {
				peak[li] /= float64(r.cfg.Cores) // a share of all the cores, as written
			}
		}
		return peak
	}
	feed := func(a *acc, peak []float64) {
		for li, sel := range a.sel {
			if li < len(peak) && !math.IsNaN(peak[li]) && !math.IsInf(peak[li], 0) {
				sel.add(peak[li])
			}
		}
	}
	p.Detector().Peaks(func(kp detector.KeyPeak) {
		a := perRule[kp.Rule]
		if a == nil {
			a = &acc{}
			for _, l := range kp.Rule.Limits {
				// A smaller span is the more severe: rank from the top.
				a.sel = append(a.sel, newPctSelect(l.Kind.Traits().Lower, 50, 90, 99))
			}
			perRule[kp.Rule] = a
		}
		peak := peaks(&kp)
		feed(a, peak)
		if r.charts != nil && !r.banned(kp.Rule.Name, kp.Key) {
			r.charts.offerNear(kp.Rule, kp.Key, kp.Requests+kp.Blocked, peak)
		}
		k := keyPeak{kp.Key, kp.Requests + kp.Blocked, kp.Blocked, kp.CPU, peak}
		for by := range a.top {
			a.top[by] = offerTop(a.top[by], k, by == 1, top)
		}
	})
	for {
		more := false
		for _, a := range perRule {
			for _, sel := range a.sel {
				more = sel.next() || more
			}
		}
		if !more {
			break
		}
		p.Detector().Peaks(func(kp detector.KeyPeak) { feed(perRule[kp.Rule], peaks(&kp)) })
	}
	for i := range r.Rules {
		rr := &r.Rules[i]
		rule := r.cfg.Rule(rr.Name)
		var firsts []int64
		for _, k := range rr.Keys {
			if k.Throttles > 0 {
				rr.Throttled++
			}
			if len(k.Bans) > 0 {
				rr.Banned++
				if a := k.Bans[0].After; a != nil {
					firsts = append(firsts, a.Requests)
				}
			}
		}
		if len(firsts) > 0 {
			slices.Sort(firsts)
			m := firsts[(len(firsts)-1)/2]
			rr.MedianRequests = &m
		}
		if rule == nil {
			continue
		}
		a := perRule[rule]
		if a == nil {
			a = &acc{}
		}
		for li, l := range rule.Limits {
			lr := LimitReport{Limit: l.Text, Unit: l.Kind.Traits().Unit}
			if li < len(a.sel) && a.sel[li].n > 0 {
				sel := a.sel[li]
				ps, most := sel.values()
				lr.Keys, lr.P50, lr.P90, lr.P99, lr.Max = sel.n, ps[0], ps[1], ps[2], most
			}
			rr.Limits = append(rr.Limits, lr)
		}
		for bi, by := range []string{"requests", "cpu"} {
			tl := TopList{Rule: rule.Name, By: by, Keys: []TopKey{}}
			for _, k := range a.top[bi] {
				if by == "cpu" && k.cpu == 0 {
					break
				}
				tk := TopKey{Key: k.key, Requests: k.requests, Blocked: k.blocked, CPU: round(k.cpu, 3), Peaks: []LimitPeak{}}
				for li, l := range rule.Limits {
					if li < len(k.peak) {
						lp := LimitPeak{Limit: l.Text}
						if v := k.peak[li]; !math.IsNaN(v) && !math.IsInf(v, 0) {
							v = round(v, 4)
							lp.Value = &v
						}
						tk.Peaks = append(tk.Peaks, lp)
					}
				}
				tl.Keys = append(tl.Keys, tk)
			}
			r.Top = append(r.Top, tl)
		}
	}
	// Static bans (deny list, banned ranges) are not rules of the config:
	// report them after the rules, in a stable order.
	var extra []string
	for name := range r.byRule {
		if r.cfg.Rule(name) == nil {
			extra = append(extra, name)
		}
	}
	sort.Strings(extra)
	for _, name := range extra {
		rr := r.byRule[name]
		for _, k := range rr.Keys {
			if len(k.Bans) > 0 {
				rr.Banned++
			}
		}
		r.Rules = append(r.Rules, *rr)
	}
}

// banned reports whether rule banned key in the replay.
func (r *Report) banned(rule, key string) bool {
	k, ok := r.keyIdx[rule][key]
	return ok && len(r.byRule[rule].Keys[k].Bans) > 0
}

// keyPeak is a key of a top list: its totals and peaks.
type keyPeak struct {
	key      string
	requests int64 // charged and blocked
	blocked  int64
	cpu      float64
	peak     []float64
}

// before reports whether a ranks before b in a top list: by requests (then
// key), or by cpu (then requests, then key).
func (a *keyPeak) before(b *keyPeak, byCPU bool) bool {
	if byCPU && a.cpu != b.cpu {
		return a.cpu > b.cpu
	}
	if a.requests != b.requests {
		return a.requests > b.requests
	}
	return a.key < b.key
}

// offerTop inserts k into top (at most n keys, the best first) if it ranks
// among them, copying its peaks.
func offerTop(top []keyPeak, k keyPeak, byCPU bool, n int) []keyPeak {
	if n <= 0 || (len(top) == n && !k.before(&top[n-1], byCPU)) {
		return top
	}
	i := sort.Search(len(top), func(i int) bool { return k.before(&top[i], byCPU) })
	k.peak = slices.Clone(k.peak)
	k.key = strings.Clone(k.key) // a view into the detector (KeyPeak.Key)
	if len(top) < n {
		top = append(top, keyPeak{})
	}
	copy(top[i+1:], top[i:len(top)-1])
	top[i] = k
	return top
}

func round(v float64, digits int) float64 {
	m := math.Pow(10, float64(digits))
	return math.Round(v*m) / m
}

// WriteJSON writes the report as one JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the report for a person, to be read top-down: a summary
// first (input, decisions by rule, the busiest and costliest keys), then
// each rule (its keys, percentiles, top keys), then sweeps. Text from the
// logs (keys, file names, the rejected lines' errors) is written through
// parser.Printable: a control character is shown as its escape, never sent
// raw to the terminal.
func (r *Report) WriteText(w io.Writer) error {
	r.writeSummary(w)
	r.writeRisky(w)
	for _, rr := range r.Rules {
		rule := r.cfg.Rule(rr.Name)
		mode := ""
		if rr.LogOnly {
			mode = " (log_only)"
		}
		median := ""
		if rr.MedianRequests != nil {
			median = fmt.Sprintf(", median %s before a ban", plural(int(*rr.MedianRequests), "request"))
		}
		fmt.Fprintf(w, "\nrule %s%s: %s throttled, %s banned%s\n", rr.Name, mode, plural(rr.Throttled, "key"), plural(rr.Banned, "key"), median)
		if len(rr.Keys) > 0 {
			tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
			fmt.Fprintln(tw, "  KEY\tFIRST OVER\tTHROTTLES\tBANS\tAFTER\tLAST BAN\tRISK\tREASON (of the last ban, as AFTER and RISK; else of the first throttle)")
			keys := append([]KeyReport(nil), rr.Keys...)
			sort.SliceStable(keys, func(a, b int) bool { return keys[a].FirstViolation.Before(keys[b].FirstViolation) })
			for i, k := range keys {
				if i == 50 {
					fmt.Fprintf(tw, "  ... %d more keys (--output json lists all)\n", len(keys)-50)
					break
				}
				after, lastBan, risk, reason := "-", "-", "-", k.FirstReason
				if n := len(k.Bans); n > 0 {
					b := k.Bans[n-1]
					until := "until lifted"
					if b.Until != nil {
						until = "until " + b.Until.Format(time.RFC3339)
					}
					after, lastBan, risk, reason = fmtAfter(b.After), b.Time.Format(time.RFC3339)+" "+until, riskKinds(b.Risks), b.Reason
				}
				fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", parser.Printable(k.Key), k.FirstViolation.Format(time.RFC3339), k.Throttles, len(k.Bans), after, lastBan, risk, parser.Printable(reason))
			}
			tw.Flush()
		}
		if rule == nil {
			continue
		}
		if len(rr.Limits) > 0 {
			// One table, a header for the limits whose higher value is
			// the more severe and one for those whose lower is
			// (limits.Kind.Lower: the last-N limits' peaks are spans,
			// where the shorter is the more severe; LimitReport).
			tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
			for _, lower := range []bool{false, true} {
				header := false
				for i, lr := range rr.Limits {
					lim := rule.Limits[i]
					if lim.Kind.Traits().Lower != lower {
						continue
					}
					if !header {
						if lower {
							fmt.Fprintln(tw, "  LIMIT\tKEYS\tp50\tp90\tp99\tMIN (shortest span of N per key: pNN is the span NN% of keys stay above)")
						} else {
							fmt.Fprintln(tw, "  LIMIT\tKEYS\tp50\tp90\tp99\tMAX (peak per key)")
						}
						header = true
					}
					fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%s\t%s\n", lr.Limit, lr.Keys, lim.Kind.FormatPeak(lr.P50), lim.Kind.FormatPeak(lr.P90), lim.Kind.FormatPeak(lr.P99), lim.Kind.FormatPeak(lr.Max))
				}
			}
			tw.Flush()
		}
		for _, tl := range r.Top {
			if tl.Rule != rr.Name || len(tl.Keys) == 0 {
				continue
			}
			tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
			fmt.Fprintf(tw, "  TOP BY %s\tREQUESTS\tBLOCKED\tCPU s\tPEAKS\n", strings.ToUpper(tl.By))
			for _, k := range tl.Keys {
				var peaks []string
				for i, p := range k.Peaks {
					v := "-"
					if p.Value != nil {
						v = rule.Limits[i].Kind.FormatPeak(*p.Value)
					}
					peaks = append(peaks, v+" vs "+p.Limit)
				}
				fmt.Fprintf(tw, "  %s\t%d\t%d\t%.1f\t%s\n", parser.Printable(k.Key), k.Requests, k.Blocked, k.CPU, strings.Join(peaks, "; "))
			}
			tw.Flush()
		}
	}
	for _, s := range r.Sweeps {
		fmt.Fprintf(w, "\nsweep %s[%d] (%s):\n", s.Rule, s.Limit, s.Text)
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  N\tTHROTTLED KEYS\tBANNED KEYS")
		for _, v := range s.Values {
			fmt.Fprintf(tw, "  %g\t%d\t%d\n", v.N, v.Throttled, v.Banned)
		}
		tw.Flush()
	}
	return nil
}

// span writes a duration for a person: days beyond two days.
func span(d time.Duration) string {
	d = d.Round(time.Second)
	if d < 48*time.Hour {
		return d.String()
	}
	days := d / (24 * time.Hour)
	return fmt.Sprintf("%dd%s", days, (d - days*24*time.Hour).String())
}
