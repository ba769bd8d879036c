package control

import (
	"fmt"
	"log/slog"
	"net/netip"
	"regexp"
	"strings"
	"time"
	"unicode"

	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/state"
)

// OperatorRule is the rule name of an operator's ban made without --rule.
// No configured rule may bear it (rules' names have no such reserved
// word, but the detector never decides under a name it does not know).
const OperatorRule = "operator"

// Recorder takes the decisions an operation makes, in order:
// checkpoint.Writer.
type Recorder interface {
	Decisions(ds []detector.Decision)
}

// Engine carries out an operator's ban and unban on the detector and
// records them. The daemon runs it in its decider goroutine (which owns
// the detector and the writer), then hands the decisions to its actions;
// the CLI runs it on a detector restored from the database when no daemon
// runs, then checkpoints. Either way the same change is made, and the
// history says who made it.
type Engine struct {
	Cfg *rules.Config
	Det *detector.Detector
	W   Recorder
	// Bans are the active bans, up to date with Det and W (the writer's
	// checkpoints all written).
	Bans []state.Ban
	// Now is the wall clock; LogTime the newest log time the detector
	// has seen (zero: none).
	Now, LogTime time.Time
	// Node names the node the decisions are made on, in a fleet ("":
	// none): the store and `list` show it.
	Node string
}

// NewEngine is the engine of an operator's change on det and w, whether
// the daemon's (its decider's) or restored from the database: bans the
// active bans (nil for a ban), now the wall clock, logTime the newest log
// time the caller knows (the daemon's newest line, the checkpoint's time;
// zero: none). The engine acts at the later of logTime and det's own clock
// (detector.Detector.Newest, which the checkpoint restores): a daemon just
// restarted, which has read no line yet, acts at the log time the
// database holds, as the command does with no daemon.
func NewEngine(cfg *rules.Config, det *detector.Detector, w Recorder, bans []state.Ban, now, logTime time.Time) *Engine {
	if n := det.Newest(); n.After(logTime) {
		logTime = n
	}
	return &Engine{Cfg: cfg, Det: det, W: w, Bans: bans, Now: now, LogTime: logTime}
}

// detTime is the log time the detector acts at: its newest, or the wall
// clock before any line. An imposed ban ends by the wall clock, so it
// acts at the later of the two (a quiet log must not end it early).
func (e *Engine) detTime(late bool) time.Time {
	t := e.LogTime
	if t.IsZero() || (late && e.Now.After(t)) {
		t = e.Now
	}
	return t
}

// Target is what an operator names: an address, a CIDR or a key.
type Target struct {
	Text   string       // as given
	Key    string       // canonical: the address, the masked CIDR (an address when full length), or the key
	Prefix netip.Prefix // the address (full length) or CIDR; invalid for other keys
	IsAddr bool         // an address, not a CIDR
}

// keyForm is what a key that is no address or CIDR looks like: the forms
// rules.KeyKind gives keys (DESIGN.md, "Keys").
var keyForm = regexp.MustCompile(`^(user:|ua:|range:|[0-9A-Fa-f.:]+(/[0-9]+)?\|ua:).`)

// ParseTarget reads an address, a CIDR or a key, every address and CIDR
// with net/netip. A CIDR with bits set past its length is refused rather
// than guessed.
func ParseTarget(s string) (Target, error) {
	t := Target{Text: s}
	if s == "" {
		return t, errf(ErrBadRequest, "no address, CIDR or key given")
	}
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Zone() != "" {
			return t, errf(ErrBadRequest, "%q: an address with a zone is not a client address", s)
		}
		a = a.Unmap()
		t.Key, t.Prefix, t.IsAddr = a.String(), netip.PrefixFrom(a, a.BitLen()), true
		return t, nil
	}
	if p, err := netip.ParsePrefix(s); err == nil {
		a := p.Addr()
		if a.Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		if m := p.Masked(); m != p {
			return t, errf(ErrBadRequest, "%q: bits set past /%d: did you mean %s?", s, p.Bits(), m)
		}
		t.Prefix = p
		t.Key = p.String()
		if p.IsSingleIP() {
			t.Key, t.IsAddr = p.Addr().String(), true
		}
		return t, nil
	}
	if strings.Contains(s, "/") && !strings.Contains(s, ":") || looksNumeric(s) {
		return t, errf(ErrBadRequest, "%q: not an address or CIDR", s)
	}
	if !keyForm.MatchString(s) || strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return t, errf(ErrBadRequest, "%q: not an address, a CIDR or a key (user:NAME, ua:TEXT, range:NAME, ADDRESS|ua:TEXT)", s)
	}
	if addr, _, ok := strings.Cut(s, "|ua:"); ok && !strings.HasPrefix(s, "user:") && !strings.HasPrefix(s, "ua:") && !strings.HasPrefix(s, "range:") {
		if _, err := netip.ParseAddr(addr); err != nil {
			if _, err := netip.ParsePrefix(addr); err != nil {
				return t, errf(ErrBadRequest, "%q: %q is not an address", s, addr)
			}
		}
	}
	t.Key = s
	return t, nil
}

// looksNumeric says whether s is made of what addresses are made of (a
// mistyped address, not a key).
func looksNumeric(s string) bool {
	return strings.Trim(s, "0123456789.") == ""
}

// Matches reports whether a ban of key (blocking addrs) is one the target
// names: for an address, every key containing it (its ip and prefix keys,
// a CIDR, a group range, the key of a user seen from it); for a CIDR,
// every key overlapping it; for a key, that key.
func (t Target) Matches(cfg *rules.Config, key string, addrs []netip.Addr) bool {
	if key == t.Key {
		return true
	}
	if !t.Prefix.IsValid() {
		return false
	}
	if p, ok := keyPrefix(key); ok {
		if t.IsAddr {
			return p.Contains(t.Prefix.Addr())
		}
		return p.Overlaps(t.Prefix)
	}
	for _, a := range addrs {
		if t.Prefix.Contains(a.Unmap()) {
			return true
		}
	}
	if strings.HasPrefix(key, "range:") {
		// The range's CIDRs, which its ban blocks: an address in them, or
		// a CIDR overlapping them.
		for _, p := range cfg.GroupRanges()[key] {
			if p.Overlaps(t.Prefix) {
				return true
			}
		}
	}
	return false
}

// keyPrefix is the prefix an address or CIDR key (or the address of an
// ADDRESS|ua:TEXT key) stands for.
func keyPrefix(key string) (netip.Prefix, bool) {
	if addr, _, ok := strings.Cut(key, "|ua:"); ok {
		key = addr
	}
	if a, err := netip.ParseAddr(key); err == nil {
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), true
	}
	if p, err := netip.ParsePrefix(key); err == nil {
		return p.Masked(), true
	}
	return netip.Prefix{}, false
}

// maxBan is the longest ban an operator may give.
const maxBan = 100 * 365 * 24 * time.Hour

// ParseFor reads a ban's duration: logjail's durations (90s, 10m, 1h, 7d,
// 1d12h), more than zero.
func ParseFor(s string) (time.Duration, error) {
	if s == "" {
		return 0, errf(ErrBadRequest, "no duration: give --for (90s, 10m, 1h, 7d)")
	}
	d, err := rules.ParseDuration(s)
	if err != nil {
		return 0, errf(ErrBadRequest, "--for %s: %v", s, err)
	}
	if d <= 0 || d > maxBan {
		return 0, errf(ErrBadRequest, "--for %s: want more than 0 and at most 100 years", s)
	}
	return d, nil
}

// Ban bans req.Key on who's word (see BanRequest) and records it.
func (e *Engine) Ban(req BanRequest, who string) (*BanResult, []detector.Decision, error) {
	c, err := CheckBan(e.Cfg, req)
	if err != nil {
		return nil, nil, err
	}
	dec := e.impose(c, who)
	ds := []detector.Decision{dec}
	e.W.Decisions(ds)
	return e.result(c, &dec), ds, nil
}

// CheckedBan is a ban request read and checked against a configuration
// (CheckBan): what Engine.Ban and Engine.BanBatch impose.
type CheckedBan struct {
	Target Target
	For    time.Duration
	Rule   *rules.Rule // nil: the operator's rule
	Reason string      // "banned by an operator" when the request gave none
	// Allowed names the allow-list entry the key is on (req.Force);
	// Exempt the allowed prefixes inside it.
	Allowed string
	Exempt  []string
}

// CheckBan reads req and checks it against cfg as Engine.Ban does,
// changing nothing: the target (ParseTarget), the duration (ParseFor),
// the rule, a range key's range, and the allow list (ErrAllowed unless
// req.Force).
func CheckBan(cfg *rules.Config, req BanRequest) (*CheckedBan, error) {
	t, err := ParseTarget(req.Key)
	if err != nil {
		return nil, err
	}
	length, err := ParseFor(req.For)
	if err != nil {
		return nil, err
	}
	c := &CheckedBan{Target: t, For: length, Reason: req.Reason, Exempt: []string{}}
	if c.Reason == "" {
		c.Reason = "banned by an operator"
	}
	if req.Rule != "" && req.Rule != OperatorRule {
		if c.Rule = cfg.Rule(req.Rule); c.Rule == nil {
			return nil, errf(ErrBadRequest, "rule %q: not in the configuration (leave --rule out for an operator's ban)", req.Rule)
		}
	}
	blocked := []netip.Prefix{}
	if p, ok := keyPrefix(t.Key); ok {
		blocked = append(blocked, p)
	} else if strings.HasPrefix(t.Key, "range:") {
		// A range's key blocks the range's CIDRs (package actions): a
		// range that is not configured would block nothing.
		cidrs, ok := cfg.GroupRanges()[t.Key]
		if !ok {
			return nil, errf(ErrBadRequest, "%s: no range of that name with group: true in the configuration: its ban would block nothing (ban its CIDRs instead)", t.Key)
		}
		blocked = cidrs
	}
	allow := cfg.AllowList()
	for _, p := range blocked {
		for _, a := range allow {
			if a.Addr().Is4() == p.Addr().Is4() && a.Bits() <= p.Bits() && a.Contains(p.Addr()) {
				if !req.Force {
					return nil, errf(ErrAllowed, "%s is on the allow list (%s): give --force to ban it all the same", t.Key, a)
				}
				c.Allowed = a.String()
				break
			}
		}
		for _, a := range allow {
			if a.Addr().Is4() == p.Addr().Is4() && a.Bits() > p.Bits() && p.Contains(a.Addr()) {
				c.Exempt = append(c.Exempt, a.String())
			}
		}
	}
	return c, nil
}

// impose makes the decision of a checked ban on who's word (the
// detector's, for a configured rule), recording nothing.
func (e *Engine) impose(c *CheckedBan, who string) detector.Decision {
	until := e.Now.Add(c.For)
	var dec detector.Decision
	if c.Rule != nil {
		dec = e.Det.Impose(e.detTime(true), c.Rule, c.Target.Key, until, c.Reason)
	} else {
		dec = detector.Decision{Rule: OperatorRule, Key: c.Target.Key, Kind: detector.Ban, Until: until, Reason: c.Reason}
	}
	dec.Time, dec.Origin, dec.Who, dec.Node = e.Now, state.OriginOperator, who, e.Node
	return dec
}

// result is the answer to the ban dec of c.
func (e *Engine) result(c *CheckedBan, dec *detector.Decision) *BanResult {
	return &BanResult{Version: SchemaVersion, Ban: banOfDecision(dec, e.Now), Allowed: c.Allowed, Exempt: c.Exempt}
}

// LogAttrs are the decision log's attributes of the ban (beside the
// decision's own): a forced ban of an allowed key says so. The daemon and
// an offline ban write the same.
func (r *BanResult) LogAttrs() []slog.Attr {
	if r.Allowed == "" {
		return nil
	}
	return []slog.Attr{slog.Bool("forced", true), slog.String("allowed", r.Allowed)}
}

// Unban lifts what req names on who's word (see UnbanRequest) and records
// it. The keys' escalation memory stays unless req.Forget.
func (e *Engine) Unban(req UnbanRequest, who string) (*UnbanResult, []detector.Decision, error) {
	var t Target
	switch {
	case req.All && (req.Key != "" || req.Rule != ""):
		return nil, nil, errf(ErrBadRequest, "--all lifts every ban: give no key and no --rule with it")
	case !req.All && req.Key == "" && req.Rule == "":
		return nil, nil, errf(ErrBadRequest, "give an address, a CIDR, a key, --rule or --all")
	case req.Key != "":
		var err error
		if t, err = ParseTarget(req.Key); err != nil {
			return nil, nil, err
		}
	}
	if req.Rule != "" && req.Rule != OperatorRule && e.Cfg.Rule(req.Rule) == nil && !e.hasBansOf(req.Rule) {
		return nil, nil, errf(ErrBadRequest, "rule %q: not in the configuration and no active ban of it", req.Rule)
	}
	reason := req.Reason
	if reason == "" {
		reason = "lifted by an operator"
	}
	res := &UnbanResult{Version: SchemaVersion, Removed: []Ban{}, Kept: []Kept{}, Forgotten: []Forgotten{}}
	var out []detector.Decision
	lifted := map[state.BanKey]bool{}
	for i := range e.Bans {
		b := &e.Bans[i]
		if req.Rule != "" && b.Rule != req.Rule {
			continue
		}
		if req.Key != "" && !t.Matches(e.Cfg, b.Key, b.Addresses) {
			continue
		}
		if b.Origin == state.OriginDeny || b.Origin == state.OriginRange {
			res.Kept = append(res.Kept, Kept{Ban: BanOf(b, e.Now), Why: "a deny list entry or a banned range: remove it from the configuration, then reload"})
			continue
		}
		n := len(out)
		if r := e.Cfg.Rule(b.Rule); r != nil {
			out = e.Det.Lift(e.detTime(false), r, b.Key, out)
		}
		if len(out) == n {
			// Not the detector's to lift (a throttle ends silently, an
			// operator's ban, a rule removed): its end is recorded all
			// the same.
			out = append(out, detector.Decision{Rule: b.Rule, Key: b.Key, Kind: detector.Unban,
				Addresses: b.Addresses, LogOnly: b.LogOnly})
		}
		lifted[state.BanKey{Rule: b.Rule, Key: b.Key}] = true
		res.Removed = append(res.Removed, BanOf(b, e.Now))
	}
	if req.Forget {
		for _, k := range e.forgettable(req, t, lifted) {
			r := e.Cfg.Rule(k.Rule)
			if r == nil || !e.Det.Forget(r, k.Key) {
				continue
			}
			res.Forgotten = append(res.Forgotten, Forgotten{Rule: k.Rule, Key: k.Key})
			out = append(out, detector.Decision{Rule: k.Rule, Key: k.Key, Kind: detector.Kind(state.KindForget),
				Reason: "windows and escalation memory forgotten"})
		}
	}
	if len(res.Removed) == 0 && len(res.Forgotten) == 0 {
		what := "no active throttle or ban"
		if req.Forget {
			what += " and no state to forget"
		}
		if len(res.Kept) > 0 {
			return res, nil, errf(ErrNotFound, "%s that an unban may lift: %s %s is %s", what, res.Kept[0].Ban.Rule, res.Kept[0].Ban.Key, res.Kept[0].Why)
		}
		return res, nil, errf(ErrNotFound, "%s matches %s", what, describe(req))
	}
	for i := range out {
		out[i].Time, out[i].Origin, out[i].Who, out[i].Node = e.Now, state.OriginOperator, who, e.Node
		if out[i].Kind == detector.Unban {
			out[i].Reason = reason
		}
	}
	e.W.Decisions(out)
	return res, out, nil
}

func (e *Engine) hasBansOf(rule string) bool {
	for i := range e.Bans {
		if e.Bans[i].Rule == rule {
			return true
		}
	}
	return false
}

// forgettable lists the (rule, key) states an unban --forget drops: those
// whose ban it lifted, and for a key or address every configured rule's
// state of that key (of the keys containing the address).
func (e *Engine) forgettable(req UnbanRequest, t Target, lifted map[state.BanKey]bool) []state.BanKey {
	var ks []state.BanKey
	seen := map[state.BanKey]bool{}
	add := func(k state.BanKey) {
		if !seen[k] {
			seen[k] = true
			ks = append(ks, k)
		}
	}
	for i := range e.Bans {
		if k := (state.BanKey{Rule: e.Bans[i].Rule, Key: e.Bans[i].Key}); lifted[k] {
			add(k)
		}
	}
	if req.Key == "" {
		return ks
	}
	keys := []string{t.Key}
	if t.IsAddr {
		for _, k := range e.Cfg.KeysContaining(t.Prefix.Addr()) {
			if k != t.Key {
				keys = append(keys, k)
			}
		}
	}
	for _, r := range e.Cfg.Rules {
		if req.Rule != "" && r.Name != req.Rule {
			continue
		}
		for _, k := range keys {
			add(state.BanKey{Rule: r.Name, Key: k})
		}
	}
	return ks
}

func describe(req UnbanRequest) string {
	var parts []string
	if req.Key != "" {
		parts = append(parts, req.Key)
	}
	if req.Rule != "" {
		parts = append(parts, "rule "+req.Rule)
	}
	if req.All {
		parts = append(parts, "--all")
	}
	return strings.Join(parts, ", ")
}

// BanOf is the API's view of an active ban at now.
func BanOf(b *state.Ban, now time.Time) Ban {
	v := banFields(b)
	setUntil(&v, b.Until, now)
	return v
}

// banFields is the API's view of b but for its Until and LeftSeconds,
// which BanOf and a list's banSlab each fill in their own way.
func banFields(b *state.Ban) Ban {
	return Ban{Rule: b.Rule, Key: b.Key, Kind: b.Kind, Since: b.Since, Violations: b.Violations,
		Addresses: addrStrings(b.Addresses), Reason: b.Reason, Origin: b.Origin, Who: b.Who, LogOnly: b.LogOnly, Node: b.Node}
}

func banOfDecision(d *detector.Decision, now time.Time) Ban {
	v := Ban{Rule: d.Rule, Key: d.Key, Kind: string(d.Kind), Since: d.Time, Violations: d.Violations,
		Addresses: addrStrings(d.Addresses), Reason: d.Reason, Origin: d.Origin, Who: d.Who, LogOnly: d.LogOnly, Node: d.Node}
	setUntil(&v, d.Until, now)
	return v
}

func setUntil(v *Ban, until, now time.Time) {
	if until.IsZero() {
		return
	}
	u := until
	v.Until = &u
	left := leftSeconds(until, now)
	v.LeftSeconds = &left
}

// leftSeconds is the time left of a ban ending at until, in whole seconds.
func leftSeconds(until, now time.Time) int64 { return int64(max(0, until.Sub(now)) / time.Second) }

func addrStrings(as []netip.Addr) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.String()
	}
	return out
}

// Who names a caller for the history: "uid 0 (root)", or "uid 1234" when
// the user has no name.
func Who(uid uint32, name string) string {
	if name == "" {
		return fmt.Sprintf("uid %d", uid)
	}
	return fmt.Sprintf("uid %d (%s)", uid, name)
}
