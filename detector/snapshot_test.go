package detector

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp/cmpopts"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/rules"
)

// snapConfig exercises every limit form, alone and combined (any and all),
// the ladder with and without throttle, escalation, caps and remember, every
// key kind that matters to a state (ip, IPv6 /64 and prefix keys that list
// addresses, users, a grouped range, a range with limits), a log_only rule,
// the deny list and a banned range, and a circuit breaker that trips.
const snapConfig = `
ipv6_prefix: 64
skew: 5s
max_keys: MAX_KEYS
max_bans_per_minute: 8
sources:
  - {name: fpm, paths: [/var/log/php/*.access.log], format: phpfpm}
deny: [203.0.113.66, 198.51.100.0/28, "2001:db8:dead::/48"]
ranges:
  crawler:
    cidrs: [203.0.113.128/26]
    group: true
    limits: ["40 per 10s"]
    throttle: {initial_delay: 5s, max_delay: 20s, quiet: 3s}
    ban: {after: 2, for: 30s}
  bad:
    cidrs: [203.0.113.200/29]
    limits: banned
  office:
    cidrs: ["2001:db8:bbbb::/48"]
    key: prefix
    limits: ["60 per minute", "last 15 within 2s"]
    ban: {for: 1m, factor: 2}
rules:
  - name: flood
    limits: ["8 per second", "60 per minute"]
    throttle: {initial_delay: 2s, max_delay: 16s, quiet: 3s}
    ban: {after: 3, for: 20s, factor: 2, max: 2m, remember: 5m}
  - name: heavy
    limits: ["30% cpu over 10s", "50% duration over 10s"]
    ban: {for: 15s, factor: 3, max: 1m}
  - name: both
    limits: ["3/s burst 6", "last 5 within 2s"]
    combine: all
    throttle: {initial_delay: 3s, max_delay: 12s, quiet: 2s}
    ban: {after: 2, for: 30s, factor: 2, remember: 2m}
  - name: nets
    key: prefix
    limits: ["150 per minute", "last 20 within 3s"]
    ban: {for: 45s}
  - name: users
    key: user
    limits: ["20 per 10s", "2/s burst 8"]
    throttle: {initial_delay: 4s}
    ban: {after: 1, for: 1m, factor: 2, max: 4m}
  - name: watch
    limits: ["5 per second"]
    ban: {for: 10s}
    log_only: true
`

func snapConfigWith(maxKeys int) string {
	return strings.Replace(snapConfig, "MAX_KEYS", fmt.Sprint(maxKeys), 1)
}

func parseConfig(t testing.TB, text string) *rules.Config {
	t.Helper()
	cfg, err := rules.Parse("test.yaml", []byte(text), rules.Options{HostAddrs: []netip.Addr{}, Cores: 4})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func detectorFor(cfg *rules.Config) *Detector {
	return New(Options{Skew: cfg.Skew, MaxKeys: cfg.MaxKeys, MaxBansPerMinute: cfg.MaxBansPerMinute})
}

// snapEvent is a log entry, or an operator's ResetBreaker or Lift at Time.
type snapEvent struct {
	kind int
	e    parser.Entry
	rule string // Lift
	key  string // Lift
}

const (
	evEntry = iota
	evReset
	evLift
)

// snapEvents generates n deterministic events over several minutes of log
// time in a +0100 zone: background traffic from many clients, bursts from
// one client (some CPU-heavy, some as a user) that throttle and ban it,
// entries out of order within and beyond the skew, denied clients, and now
// and then an operator resetting the breaker or lifting a key.
func snapEvents(cfg *rules.Config, n int) []snapEvent {
	rnd := rand.New(rand.NewPCG(7, 11))
	zone := time.FixedZone("+0100", 3600)
	now := time.Date(2025, 3, 4, 10, 0, 0, 0, zone)
	var clients []netip.Addr
	for i := range 48 {
		clients = append(clients, netip.AddrFrom4([4]byte{198, 51, 100, byte(16 + i)}))
	}
	for i := range 40 {
		clients = append(clients, netip.AddrFrom4([4]byte{203, 0, 113, byte(1 + i)}))
	}
	for i := range 10 {
		clients = append(clients, netip.AddrFrom4([4]byte{203, 0, 113, byte(130 + i)})) // crawler
	}
	for x := range 5 {
		for y := range 6 {
			clients = append(clients, netip.MustParseAddr(fmt.Sprintf("2001:db8:1:%x::%x", x, y+1)))
		}
	}
	for x := range 3 {
		for y := range 5 {
			clients = append(clients, netip.MustParseAddr(fmt.Sprintf("2001:db8:bbbb:%x::%x", x, y+1))) // office
		}
	}
	denied := []netip.Addr{
		netip.MustParseAddr("203.0.113.66"), netip.MustParseAddr("198.51.100.3"),
		netip.MustParseAddr("2001:db8:dead::5"), netip.MustParseAddr("203.0.113.201"),
	}
	users := []string{"alice", "bob", "carol", "dave"}
	liftRules := []string{"flood", "both", "users", "nets", "range:crawler"}

	var evs []snapEvent
	burst := 0
	var burstAddr netip.Addr
	var burstUser string
	var burstCPU float64
	for len(evs) < n {
		if rnd.IntN(700) == 0 {
			evs = append(evs, snapEvent{kind: evReset, e: parser.Entry{Time: now}})
		}
		if rnd.IntN(150) == 0 {
			r := liftRules[rnd.IntN(len(liftRules))]
			a := clients[rnd.IntN(len(clients))]
			var key string
			switch r {
			case "users":
				key = "user:" + users[rnd.IntN(len(users))]
			case "nets":
				key = cfg.PrefixKey(a)
			case "range:crawler":
				key = r
			default:
				key = cfg.IPKey(a)
			}
			evs = append(evs, snapEvent{kind: evLift, e: parser.Entry{Time: now}, rule: r, key: key})
		}
		if burst == 0 && rnd.IntN(60) == 0 {
			burst = 20 + rnd.IntN(80)
			burstAddr = clients[rnd.IntN(len(clients))]
			burstUser, burstCPU = "", 0.02
			if rnd.IntN(3) == 0 {
				burstUser = users[rnd.IntN(len(users))]
			}
			if rnd.IntN(3) == 0 {
				burstCPU = 0.3 + rnd.Float64()
			}
		}
		e := parser.Entry{
			Method: "GET", Path: "/", Status: 200,
			Has: parser.HasMethod | parser.HasPath | parser.HasStatus | parser.HasCPU | parser.HasDuration,
		}
		if burst > 0 && rnd.IntN(4) != 0 {
			burst--
			now = now.Add(time.Duration(rnd.ExpFloat64() * 0.05 * 1e9))
			e.IP, e.User, e.CPU = burstAddr, burstUser, burstCPU*rnd.Float64()
			e.Duration = e.CPU * 1.5
		} else {
			now = now.Add(time.Duration(rnd.ExpFloat64() * 0.12 * 1e9))
			e.IP = clients[rnd.IntN(len(clients))]
			if rnd.IntN(40) == 0 {
				e.IP = denied[rnd.IntN(len(denied))]
			}
			if rnd.IntN(8) == 0 {
				e.User = users[rnd.IntN(len(users))]
			}
			e.CPU = rnd.ExpFloat64() * 0.03
			e.Duration = e.CPU + rnd.ExpFloat64()*0.05
		}
		if e.User != "" {
			e.Has |= parser.HasUser
		}
		e.Time = now
		switch r := rnd.IntN(100); {
		case r < 4:
			e.Time = now.Add(-time.Duration(rnd.Float64() * 4.5 * 1e9)) // within the skew
		case r < 5:
			e.Time = now.Add(-time.Duration((6 + rnd.Float64()*30) * 1e9)) // late
		}
		evs = append(evs, snapEvent{kind: evEntry, e: e})
	}
	return evs
}

// snapRun feeds events to a detector as the pipeline does: the static bans
// at the first entry, then each entry's charges (or an Advance).
type snapRun struct {
	cfg     *rules.Config
	d       *Detector
	started bool
	charges []rules.Charge
	out     []Decision
	marks   []int // len(out) after each event fed
}

func (r *snapRun) feed(evs []snapEvent) {
	for i := range evs {
		ev := &evs[i]
		switch ev.kind {
		case evReset:
			r.d.ResetBreaker()
		case evLift:
			r.out = r.d.Lift(ev.e.Time, r.cfg.Rule(ev.rule), ev.key, r.out)
		default:
			e := &ev.e
			if !r.started {
				r.started = true
				r.out = r.d.Static(e.Time, r.cfg.StaticBans(), r.out)
			}
			r.charges, _ = r.cfg.Classify(r.cfg.Sources[0], e, r.charges[:0])
			if len(r.charges) == 0 {
				r.out = r.d.Advance(e.Time, r.out)
			}
			for j := range r.charges {
				r.out = r.d.Charge(e.Time, &r.charges[j], r.out)
			}
		}
		r.marks = append(r.marks, len(r.out))
	}
}

// keyStore is what the store keeps: the latest Data per (rule, key).
type keyStore map[string]*KeyState

// checkpoint applies the detector's Changes to the store, checking that no
// (rule, key) is reported twice but deleted then tracked again.
func (ks keyStore) checkpoint(t testing.TB, d *Detector) (changed, deleted int) {
	t.Helper()
	seen := map[string]bool{}
	d.Changes(func(s *KeyState) {
		k := s.Rule + "\x00" + s.Key
		if seen[k] {
			t.Errorf("%s/%s reported twice", s.Rule, s.Key)
		}
		if s.Data == nil {
			delete(ks, k)
			deleted++
			return
		}
		seen[k] = true
		changed++
		c := *s
		c.Data = bytes.Clone(s.Data)
		ks[k] = &c
	})
	return changed, deleted
}

func (ks keyStore) clone() keyStore {
	c := keyStore{}
	for k, v := range ks {
		c[k] = v
	}
	return c
}

// Dumps of a detector's internal state in comparable form: everything a
// checkpoint must give back, nothing of where it lives (slots, chains, rule
// ids, checkpoint flags, stale heap entries).

type winDump struct {
	Elems  []uint64
	Cap    int
	N      uint32
	Acc    uint64
	Tokens float64
	Peak   float64
}

type extraDump struct {
	Until      int64
	UntilT     string
	Delay      time.Duration
	Last       int64
	Violations int
	FirstOver  int64
	BanLogOnly bool
	BanSeq     uint64
	Bans       []int64
	BanAddrs   []string
}

type stateDump struct {
	Rule, Key string
	Phase     uint8
	Multi     bool
	Seen      int64
	Requests  int64
	Blocked   int64
	CPU       float64
	Wins      []winDump
	Addrs     []string
	X         *extraDump
}

type detectorDump struct {
	Newest   int64
	NewestT  string
	Started  bool
	Seq      uint64
	BrkTimes []int64
	BrkOpen  bool
	BrkTrips int64
	Stats    Stats
	Static   []string
	Expiries []string
	LRU      []string
	States   []stateDump
}

func timeDump(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format(time.RFC3339Nano) + " " + t.Location().String()
}

func dump(d *Detector) detectorDump {
	dd := detectorDump{
		Newest: d.newest, NewestT: timeDump(d.newestT), Started: d.started, Seq: d.seq,
		BrkOpen: d.brk.open, BrkTrips: d.brk.trips, Stats: d.Stats(),
	}
	for i := range d.brk.times {
		dd.BrkTimes = append(dd.BrkTimes, d.brk.times[(d.brk.head+i)%len(d.brk.times)])
	}
	for k, b := range d.static {
		dd.Static = append(dd.Static, fmt.Sprintf("%s %s %s %s", k, b.Key, b.Origin, b.Reason))
	}
	slices.Sort(dd.Static)
	var live []expiry
	for _, e := range d.expiries {
		if s := d.at(e.slot); s.kid != 0 && s.phase == phaseBanned && d.xOf(s).banSeq == e.seq {
			live = append(live, e)
		}
	}
	slices.SortFunc(live, func(a, b expiry) int { return cmp.Or(cmp.Compare(a.until, b.until), cmp.Compare(a.seq, b.seq)) })
	for _, e := range live {
		s := d.at(e.slot)
		dd.Expiries = append(dd.Expiries, fmt.Sprintf("%d %d %s/%s", e.until, e.seq, d.ri(s).rule.Name, d.keys.textOf(s.kid)))
	}
	for l := range d.lru {
		for i := d.lru[l].head; i >= 0; i = d.at(i).next {
			dd.LRU = append(dd.LRU, fmt.Sprint(l)+" "+d.ri(d.at(i)).rule.Name+"/"+d.keys.textOf(d.at(i).kid))
		}
	}
	for i := range d.used {
		s := d.at(i)
		if s.kid == 0 {
			continue
		}
		ri := d.ri(s)
		sd := stateDump{Rule: ri.rule.Name, Key: d.keys.textOf(s.kid), Phase: s.phase, Multi: s.multi(), Seen: s.seen,
			Requests: d.requests(s), Blocked: d.blocked(s), CPU: s.cpu}
		for j := range ri.lims {
			w := d.win(s, j)
			cp, elems, acc, tokens := w.Dump(&d.rings, ri.lims[j].Kind.Traits().Layout)
			wd := winDump{Cap: cp, N: uint32(w.Len()), Acc: acc, Peak: *d.peak(i, j), Tokens: tokens, Elems: elems}
			sd.Wins = append(sd.Wins, wd)
		}
		for _, a := range d.seenAddrs(s) {
			sd.Addrs = append(sd.Addrs, fmt.Sprintf("%s@%d", a.addr(), a.seen))
		}
		if x := d.xOf(s); x != nil {
			xd := &extraDump{Until: x.until, UntilT: timeDump(x.untilT), Delay: x.delay, Last: x.last,
				Violations: x.violations, FirstOver: x.firstOver, BanLogOnly: x.banLogOnly, BanSeq: x.banSeq,
				Bans: slices.Clone(x.bans)}
			for _, a := range x.banAddrs {
				xd.BanAddrs = append(xd.BanAddrs, a.String())
			}
			sd.X = xd
		}
		dd.States = append(dd.States, sd)
	}
	slices.SortFunc(dd.States, func(a, b stateDump) int {
		return cmp.Or(strings.Compare(a.Rule, b.Rule), strings.Compare(a.Key, b.Key))
	})
	return dd
}

// strictOpts compare decisions exactly: times by instant, zone name and
// offset; addresses by value, nil and empty slices apart.
var strictOpts = []gocmp.Option{
	gocmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	gocmp.Comparer(func(a, b time.Time) bool { return timeDump(a) == timeDump(b) }),
}

type peakDump struct {
	Rule      string
	Key       string
	Requests  int64
	Blocked   int64
	CPU       float64
	Peak      []float64
	FirstOver time.Time
}

func peaks(d *Detector) []peakDump {
	var ps []peakDump
	d.Peaks(func(kp KeyPeak) {
		ps = append(ps, peakDump{kp.Rule.Name, strings.Clone(kp.Key), kp.Requests, kp.Blocked, kp.CPU, slices.Clone(kp.Peak), kp.FirstOver})
	})
	slices.SortFunc(ps, func(a, b peakDump) int { return cmp.Or(strings.Compare(a.Rule, b.Rule), strings.Compare(a.Key, b.Key)) })
	return ps
}

// answers is what Status and Banned say of every (rule, key) of ps at t.
func answers(d *Detector, cfg *rules.Config, ps []peakDump, t time.Time) []string {
	var as []string
	for _, p := range ps {
		r := cfg.Rule(p.Rule)
		k, until := d.Status(r, p.Key, t)
		b := d.Banned(t, &rules.Charge{Rule: r, Key: p.Key})
		as = append(as, fmt.Sprintf("%s/%s %q %s %v", p.Rule, p.Key, k, timeDump(until), b))
	}
	return as
}

func TestCheckpointRoundTrip(t *testing.T) {
	for _, maxKeys := range []int{100_000, 60} {
		t.Run(fmt.Sprintf("max_keys=%d", maxKeys), func(t *testing.T) {
			cfg := parseConfig(t, snapConfigWith(maxKeys))
			evs := snapEvents(cfg, 4000)
			n := len(evs)

			a := &snapRun{cfg: cfg, d: detectorFor(cfg)}
			a.feed(evs)
			checkCoverage(t, a, evs, maxKeys < 1000)
			end := evs[n-1].e.Time
			whens := []time.Time{end, end.Add(20 * time.Second), end.Add(5 * time.Minute)}
			aStats, aPeaks, aDump := a.d.Stats(), peaks(a.d), dump(a.d)
			var aAnswers [][]string
			for _, when := range whens {
				aAnswers = append(aAnswers, answers(a.d, cfg, aPeaks, when))
			}

			// B checkpoints every 100 events, and at each cut.
			cuts := []int{1, 99, 100, 777, 1500, 2222, 3001, 3650, n - 1}
			type saved struct {
				store  keyStore
				global []byte
				dump   detectorDump
			}
			saves := map[int]saved{}
			b := &snapRun{cfg: cfg, d: detectorFor(cfg)}
			store := keyStore{}
			for k := 0; k < n; k++ {
				b.feed(evs[k : k+1])
				if (k+1)%100 == 0 || slices.Contains(cuts, k+1) {
					store.checkpoint(t, b.d)
				}
				if slices.Contains(cuts, k+1) {
					saves[k+1] = saved{store.clone(), b.d.SaveGlobal(), dump(b.d)}
				}
			}

			for _, k := range cuts {
				t.Run(fmt.Sprintf("cut=%d", k), func(t *testing.T) {
					sv := saves[k]
					c := &snapRun{cfg: cfg, d: detectorFor(cfg)}
					st, err := c.d.Restore(cfg, sv.global, maps.Values(sv.store))
					if err != nil {
						t.Fatal(err)
					}
					if st.Keys != len(sv.store) || st.Dropped != 0 || st.Reset != 0 {
						t.Errorf("restore stats = %+v, want %d keys", st, len(sv.store))
					}
					if diff := gocmp.Diff(sv.dump, dump(c.d), cmpopts.EquateEmpty()); diff != "" {
						t.Errorf("state after restore (-saved +restored):\n%s", diff)
					}
					if ch, del := (keyStore{}).checkpoint(t, c.d); ch+del != 0 {
						t.Errorf("restored detector reports %d changed, %d deleted", ch, del)
					}

					c.feed(evs[k:])
					want := a.out[a.marks[k-1]:]
					if len(want) == 0 {
						want = nil
					}
					if diff := gocmp.Diff(want, c.out, strictOpts...); diff != "" {
						t.Errorf("decisions after the cut (-uninterrupted +restored):\n%s", diff)
					}
					if diff := gocmp.Diff(aStats, c.d.Stats()); diff != "" {
						t.Errorf("stats (-uninterrupted +restored):\n%s", diff)
					}
					if diff := gocmp.Diff(aPeaks, peaks(c.d), strictOpts...); diff != "" {
						t.Errorf("peaks (-uninterrupted +restored):\n%s", diff)
					}
					for i, when := range whens {
						if diff := gocmp.Diff(aAnswers[i], answers(c.d, cfg, aPeaks, when)); diff != "" {
							t.Errorf("status and banned at %v (-uninterrupted +restored):\n%s", when, diff)
						}
					}
					if diff := gocmp.Diff(aDump, dump(c.d), cmpopts.EquateEmpty()); diff != "" {
						t.Errorf("final state (-uninterrupted +restored):\n%s", diff)
					}
				})
			}
		})
	}
}

// checkCoverage fails the round trip test if its events did not make the
// detector do what the test claims to cover.
func checkCoverage(t *testing.T, a *snapRun, evs []snapEvent, evicting bool) {
	t.Helper()
	st := a.d.Stats()
	kinds := map[string]int{}
	for _, d := range a.out {
		kinds[d.Rule+" "+string(d.Kind)]++
		if d.LogOnly {
			kinds["log only"]++
		}
		if len(d.Addresses) > 0 {
			kinds["addresses"]++
		}
		if d.Reason == "lifted" {
			kinds["lifted"]++
		}
	}
	want := []string{
		"flood throttle", "flood ban", "flood unban", "heavy ban", "both throttle", "both ban",
		"nets ban", "users throttle", "users ban", "watch ban", "range:office ban", "deny ban",
		"log only", "addresses", "lifted",
	}
	if !evicting {
		want = append(want, "range:crawler throttle", "range:crawler ban")
	}
	for _, k := range want {
		if kinds[k] == 0 {
			t.Errorf("no %q decision: %v", k, kinds)
		}
	}
	if st.BreakerTrips < 2 || st.Late == 0 || st.Blocked == 0 || (evicting && st.Evictions == 0) {
		t.Errorf("stats = %+v; want breaker trips, late and blocked entries (and evictions)", st)
	}
	if testing.Verbose() {
		t.Logf("%d events, %d decisions %v, stats %+v", len(evs), len(a.out), kinds, st)
	}
}

// changesOf returns what one Changes reports, as "rule/key" for a state and
// "-rule/key" for a deletion.
func changesOf(d *Detector) []string {
	var got []string
	d.Changes(func(ks *KeyState) {
		if ks.Data == nil {
			got = append(got, "-"+ks.Rule+"/"+ks.Key)
		} else {
			got = append(got, ks.Rule+"/"+ks.Key)
		}
	})
	return got
}

func TestChanges(t *testing.T) {
	cfg := parseConfig(t, `
max_keys: 3
sources: [{name: web, paths: [/var/log/access.log]}]
deny: [203.0.113.66, 198.51.100.0/28]
rules:
  - {name: r, limits: ["2 per 10s"], ban: {for: 1m}}
  - {name: s, key: prefix, limits: ["100 per 10s"]}
`)
	r, s := cfg.Rule("r"), cfg.Rule("s")
	d := detectorFor(cfg)
	charge := func(sec float64, rule *rules.Rule, key string) []Decision {
		return d.Charge(at(sec), &rules.Charge{Rule: rule, Key: key}, nil)
	}
	d.Static(at(0), cfg.StaticBans(), nil)
	charge(0, r, "198.51.100.20")
	charge(0, s, "198.51.100.0/24")
	charge(1, r, "203.0.113.9")
	want := []string{"r/198.51.100.20", "s/198.51.100.0/24", "r/203.0.113.9", "deny/198.51.100.0/28", "deny/203.0.113.66"}
	if diff := gocmp.Diff(want, changesOf(d), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("first call (-want +got):\n%s", diff)
	}
	if got := changesOf(d); len(got) != 0 {
		t.Errorf("nothing changed: %v", got)
	}
	charge(2, r, "198.51.100.20")
	if diff := gocmp.Diff([]string{"r/198.51.100.20"}, changesOf(d)); diff != "" {
		t.Errorf("one charge (-want +got):\n%s", diff)
	}

	// A ban takes the state off the LRU list; entries while banned, and the
	// unban, change it.
	if got := charge(3, r, "198.51.100.20"); len(got) != 1 || got[0].Kind != Ban {
		t.Fatalf("want a ban: %+v", got)
	}
	changesOf(d)
	charge(4, r, "198.51.100.20")
	if diff := gocmp.Diff([]string{"r/198.51.100.20"}, changesOf(d)); diff != "" {
		t.Errorf("blocked entry (-want +got):\n%s", diff)
	}
	d.Advance(at(63), nil)
	if diff := gocmp.Diff([]string{"r/198.51.100.20"}, changesOf(d)); diff != "" {
		t.Errorf("unban (-want +got):\n%s", diff)
	}

	// Eviction: the new state reuses the evicted one's slot.
	charge(64, r, "203.0.113.10") // evicts s/198.51.100.0/24, the least recent
	charge(65, r, "203.0.113.11") // evicts r/203.0.113.9
	charge(66, r, "203.0.113.12") // evicts r/198.51.100.20
	charge(67, r, "203.0.113.13") // evicts r/203.0.113.10, never reported
	want = []string{"-s/198.51.100.0/24", "-r/203.0.113.9", "-r/198.51.100.20", "r/203.0.113.11", "r/203.0.113.12", "r/203.0.113.13"}
	if diff := gocmp.Diff(want, changesOf(d)); diff != "" {
		t.Errorf("evictions (-want +got):\n%s", diff)
	}
	if st := d.Stats(); st.Evictions != 4 || st.Keys != 3 {
		t.Errorf("stats = %+v", st)
	}
	// Evicted and tracked again before the next call: deleted, then saved.
	charge(68, r, "203.0.113.10")
	charge(69, r, "203.0.113.11")
	charge(70, r, "203.0.113.12") // evicts r/203.0.113.13
	charge(71, r, "203.0.113.13") // evicts r/203.0.113.10
	want = []string{"-r/203.0.113.11", "-r/203.0.113.12", "-r/203.0.113.13", "r/203.0.113.11", "r/203.0.113.12", "r/203.0.113.13"}
	if diff := gocmp.Diff(want, changesOf(d)); diff != "" {
		t.Errorf("evicted and back (-want +got):\n%s", diff)
	}

	// Static bans: one removed, one added.
	d.Static(at(72), []rules.StaticBan{{Key: netip.MustParsePrefix("203.0.113.66/32"), Origin: "deny", Reason: "deny list"},
		{Key: netip.MustParsePrefix("2001:db8::/32"), Origin: "deny", Reason: "deny list"}}, nil)
	if diff := gocmp.Diff([]string{"-deny/198.51.100.0/28", "deny/2001:db8::/32"}, changesOf(d)); diff != "" {
		t.Errorf("static (-want +got):\n%s", diff)
	}

	// A restored detector reports nothing until it changes.
	store := keyStore{}
	d = detectorFor(cfg)
	d.Static(at(0), cfg.StaticBans(), nil)
	for i, k := range []string{"203.0.113.11", "203.0.113.12", "203.0.113.13"} {
		d.Charge(at(80+float64(i)), &rules.Charge{Rule: r, Key: k}, nil)
	}
	store.checkpoint(t, d)
	d2 := detectorFor(cfg)
	if _, err := d2.Restore(cfg, d.SaveGlobal(), maps.Values(store)); err != nil {
		t.Fatal(err)
	}
	if got := changesOf(d2); len(got) != 0 {
		t.Errorf("restored: %v", got)
	}
	d2.Charge(at(81), &rules.Charge{Rule: r, Key: "203.0.113.12"}, nil)
	if diff := gocmp.Diff([]string{"r/203.0.113.12"}, changesOf(d2)); diff != "" {
		t.Errorf("restored, one charge (-want +got):\n%s", diff)
	}
	// The LRU order came back: 203.0.113.11 is the least recent.
	d2.Charge(at(82), &rules.Charge{Rule: r, Key: "203.0.113.14"}, nil)
	if diff := gocmp.Diff([]string{"-r/203.0.113.11", "r/203.0.113.14"}, changesOf(d2)); diff != "" {
		t.Errorf("restored, eviction (-want +got):\n%s", diff)
	}
}

func TestChangesSummary(t *testing.T) {
	cfg := parseConfig(t, `
sources: [{name: fpm, paths: [/var/log/php/*.access.log], format: phpfpm}]
rules:
  - name: r
    limits: ["1 per 10s"]
    throttle: {initial_delay: 5s}
    ban: {after: 0, for: 1m}
`)
	r := cfg.Rule("r")
	d := detectorFor(cfg)
	zone := time.FixedZone("+0530", 5*3600+1800)
	t0 := time.Date(2025, 1, 6, 12, 0, 0, 0, zone)
	d.Charge(t0, &rules.Charge{Rule: r, Key: "203.0.113.7", CPU: 0.25}, nil)
	d.Charge(t0.Add(time.Second), &rules.Charge{Rule: r, Key: "203.0.113.7", CPU: 0.5}, nil) // throttle
	var got []KeyState
	summary := func(ks *KeyState) {
		c := *ks
		c.Data = nil
		got = append(got, c)
	}
	d.Changes(summary)
	want := []KeyState{{Rule: "r", Key: "203.0.113.7", LastSeen: t0.Add(time.Second), Requests: 2, CPU: 0.75,
		Phase: Throttle, Until: t0.Add(6 * time.Second)}}
	if diff := gocmp.Diff(want, got, strictOpts...); diff != "" {
		t.Errorf("throttled (-want +got):\n%s", diff)
	}
	got = nil
	d.Charge(t0.Add(2*time.Second), &rules.Charge{Rule: r, Key: "203.0.113.7"}, nil) // ban
	d.Charge(t0.Add(3*time.Second), &rules.Charge{Rule: r, Key: "203.0.113.7"}, nil) // blocked
	d.Changes(summary)
	want = []KeyState{{Rule: "r", Key: "203.0.113.7", LastSeen: t0.Add(3 * time.Second), Requests: 3, Blocked: 1, CPU: 0.75,
		Phase: Ban, Until: t0.Add(62 * time.Second)}}
	if diff := gocmp.Diff(want, got, strictOpts...); diff != "" {
		t.Errorf("banned (-want +got):\n%s", diff)
	}
}

func TestRestoreChangedConfig(t *testing.T) {
	const before = `
sources: [{name: web, paths: [/var/log/access.log]}]
rules:
  - name: flood
    limits: ["%s"]
    throttle: {initial_delay: 10s, max_delay: 40s, quiet: 5s}
    ban: {after: 1, for: 1m, factor: 2, max: 1h}
  %s
`
	gone := `- {name: gone, limits: ["100 per 10s"]}`
	cfg1 := parseConfig(t, fmt.Sprintf(before, "1 per 10s", gone))
	cfg2 := parseConfig(t, fmt.Sprintf(before, "2 per 10s", ""))
	cfgSame := parseConfig(t, fmt.Sprintf(before, "1 per 10s", ""))

	// A key banned until 126 (its next ban will last 2m), and a key
	// throttled with two entries in its window.
	var evs []ev
	for _, s := range []float64{0, 1, 2, 62, 64, 65, 66} {
		evs = append(evs, ev{at: s, key: "203.0.113.1"})
	}
	evs = append(evs, ev{at: 66, key: "203.0.113.2"}, ev{at: 66.5, key: "203.0.113.2"})
	prime := func(cfg *rules.Config) (*Detector, []Decision) {
		d := detectorFor(cfg)
		out := run(d, cfg.Rule("flood"), evs)
		for _, k := range []string{"203.0.113.1", "203.0.113.3"} {
			if r := cfg.Rule("gone"); r != nil {
				out = d.Charge(at(67), &rules.Charge{Rule: r, Key: k}, out)
			}
		}
		return d, out
	}
	d1, out := prime(cfg1)
	if len(out) == 0 || out[len(out)-1].Kind != Throttle || out[len(out)-2].Kind != Ban || !out[len(out)-2].Until.Equal(at(126)) {
		t.Fatalf("setup: %+v", out)
	}
	store := keyStore{}
	store.checkpoint(t, d1)
	global := d1.SaveGlobal()

	t.Run("limits changed, rule removed", func(t *testing.T) {
		d := detectorFor(cfg2)
		st, err := d.Restore(cfg2, global, maps.Values(store))
		if err != nil {
			t.Fatal(err)
		}
		if diff := gocmp.Diff(RestoreStats{Keys: 2, Dropped: 2, Reset: 2}, st); diff != "" {
			t.Errorf("restore stats (-want +got):\n%s", diff)
		}
		// The dropped states are deleted at the next checkpoint.
		if diff := gocmp.Diff([]string{"-gone/203.0.113.1", "-gone/203.0.113.3"}, changesOf(d), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
			t.Errorf("changes (-want +got):\n%s", diff)
		}
		// The same as a reload to cfg2 without a restart.
		r := cfg2.Rule("flood")
		if k, until := d.Status(r, "203.0.113.1", at(67)); k != Ban || !until.Equal(at(126)) {
			t.Errorf("ban kept: %q %v", k, until)
		}
		if k, until := d.Status(r, "203.0.113.2", at(67)); k != Throttle || !until.Equal(at(76.5)) {
			t.Errorf("throttle kept: %q %v", k, until)
		}
		var peak []float64
		d.Peaks(func(kp KeyPeak) {
			if kp.Key == "203.0.113.2" {
				peak = slices.Clone(kp.Peak)
			}
		})
		if diff := gocmp.Diff([]float64{0}, peak); diff != "" {
			t.Errorf("windows afresh: peak (-want +got):\n%s", diff)
		}
		reloaded, _ := prime(cfg1)
		more := []ev{
			{at: 77, key: "203.0.113.2"}, {at: 78, key: "203.0.113.2"}, // 2 in 10s: not over 2
			{at: 79, key: "203.0.113.2"}, // over: throttle again (not quiet)
			{at: 80, key: "203.0.113.2"}, // violation 1
			{at: 81, key: "203.0.113.2"}, // violation 2 > 1: ban
			{at: 126, advance: true},
			{at: 127, key: "203.0.113.1"}, {at: 128, key: "203.0.113.1"}, {at: 129, key: "203.0.113.1"}, // throttle
			{at: 130, key: "203.0.113.1"}, {at: 131, key: "203.0.113.1"}, // ban: the second, 2m
		}
		want := run(reloaded, r, more)
		got := run(d, r, more)
		if diff := gocmp.Diff(want, got, strictOpts...); diff != "" {
			t.Errorf("after restore (-reloaded +restored):\n%s", diff)
		}
		if len(got) == 0 || got[len(got)-1].Kind != Ban || got[len(got)-1].Until.Sub(got[len(got)-1].Time) != 2*time.Minute {
			t.Errorf("ladder not kept: %+v", got)
		}
	})
	t.Run("same limits", func(t *testing.T) {
		d := detectorFor(cfgSame)
		st, err := d.Restore(cfgSame, global, maps.Values(store))
		if err != nil {
			t.Fatal(err)
		}
		if diff := gocmp.Diff(RestoreStats{Keys: 2, Dropped: 2}, st); diff != "" {
			t.Errorf("restore stats (-want +got):\n%s", diff)
		}
	})
	t.Run("fewer keys allowed", func(t *testing.T) {
		d := New(Options{MaxKeys: 2})
		st, err := d.Restore(cfg1, global, maps.Values(store))
		if err != nil {
			t.Fatal(err)
		}
		// The banned state stays, and the throttled one (flood/.2, the
		// least recent, but hot); the allowed ones are evicted, and
		// deleted at the next checkpoint.
		if st.Keys != 4 || d.Stats().Keys != 2 || d.Stats().Evictions != 2 {
			t.Errorf("restore stats %+v, stats %+v", st, d.Stats())
		}
		if diff := gocmp.Diff([]string{"-gone/203.0.113.1", "-gone/203.0.113.3"}, changesOf(d)); diff != "" {
			t.Errorf("changes (-want +got):\n%s", diff)
		}
	})
	t.Run("not empty", func(t *testing.T) {
		if _, err := d1.Restore(cfg1, global, maps.Values(store)); !errors.Is(err, ErrNotEmpty) {
			t.Errorf("err = %v, want ErrNotEmpty", err)
		}
	})
}

// corpus returns the key states and global state of a detector that went
// through the round trip events: every kind of window and extra state.
func corpus(t testing.TB) (*rules.Config, []*KeyState, []byte) {
	cfg := parseConfig(t, snapConfigWith(100_000))
	r := &snapRun{cfg: cfg, d: detectorFor(cfg)}
	r.feed(snapEvents(cfg, 1500))
	store := keyStore{}
	store.checkpoint(t, r.d)
	states := slices.Collect(maps.Values(store))
	slices.SortFunc(states, func(a, b *KeyState) int { return cmp.Compare(a.Rule+a.Key, b.Rule+b.Key) })
	return cfg, states, r.d.SaveGlobal()
}

func TestRestoreCorrupt(t *testing.T) {
	cfg, states, global := corpus(t)
	restore := func(global []byte, ks ...*KeyState) error {
		d := detectorFor(cfg)
		_, err := d.Restore(cfg, global, slices.Values(ks))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("error does not wrap ErrCorrupt: %v", err)
			}
			if st := d.Stats(); st != (Stats{}) || len(peaks(d)) != 0 {
				t.Errorf("not left empty after %v: %+v", err, st)
			}
			return err
		}
		exercise(d, cfg)
		return nil
	}
	if err := restore(global, states...); err != nil {
		t.Fatal(err)
	}
	for n := range global {
		if restore(global[:n]) == nil {
			t.Errorf("global cut to %d of %d bytes: no error", n, len(global))
		}
	}
	if restore(append(slices.Clone(global), 0)) == nil {
		t.Errorf("global with a trailing byte: no error")
	}
	g := slices.Clone(global)
	g[0] = 99
	if err := restore(g); err == nil || !strings.Contains(err.Error(), "version 99") {
		t.Errorf("global of another version: %v", err)
	}
	for i, ks := range states {
		if i%4 != 0 && ks.Rule != staticRule {
			continue // a sample of every shape is enough
		}
		for n := range ks.Data {
			c := *ks
			c.Data = ks.Data[:n]
			if restore(global, &c) == nil {
				t.Errorf("%s/%s cut to %d of %d bytes: no error", ks.Rule, ks.Key, n, len(ks.Data))
			}
		}
		c := *ks
		c.Data = append(slices.Clone(ks.Data), 0)
		if restore(global, &c) == nil {
			t.Errorf("%s/%s with a trailing byte: no error", ks.Rule, ks.Key)
		}
	}
	// Garbled bytes: an error or a usable detector, never a panic.
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		ks := *states[rnd.IntN(len(states))]
		ks.Data = slices.Clone(ks.Data)
		for range 1 + rnd.IntN(3) {
			ks.Data[rnd.IntN(len(ks.Data))] = byte(rnd.Uint32())
		}
		restore(global, &ks)
	}
	for i := range 3000 {
		g := slices.Clone(global)
		g[rnd.IntN(len(g))] = byte(rnd.Uint32())
		if i%30 == 0 {
			restore(g, states...)
		} else {
			restore(g)
		}
	}
}

// exercise drives a restored detector through every operation, so that a
// state read from garbled data that Restore accepted shows if it breaks an
// invariant (a panic).
func exercise(d *Detector, cfg *rules.Config) {
	var keys []*rules.Charge
	d.Peaks(func(kp KeyPeak) {
		keys = append(keys, &rules.Charge{Rule: kp.Rule, Key: strings.Clone(kp.Key), CPU: 0.5, Duration: 1})
	})
	for _, r := range cfg.Rules {
		keys = append(keys, &rules.Charge{Rule: r, Key: "2001:db8::/64", Addr: netip.MustParseAddr("2001:db8::1")})
	}
	start := d.newestT
	if start.IsZero() {
		start = at(0)
	}
	for i := range 16 {
		t := start.Add(time.Duration(i-3) * time.Second)
		for _, c := range keys {
			d.Charge(t, c, nil)
		}
		if i == 8 && len(keys) > 0 {
			d.Lift(t, keys[0].Rule, keys[0].Key, nil)
			d.ResetBreaker()
		}
	}
	d.Advance(start.Add(200*365*24*time.Hour), nil)
	d.Peaks(func(KeyPeak) {})
	d.Changes(func(*KeyState) {})
	d.SaveGlobal()
}

func FuzzRestore(f *testing.F) {
	cfg, states, global := corpus(f)
	for i, ks := range states {
		if i%7 == 0 || ks.Rule == staticRule {
			f.Add(ks.Rule, ks.Key, ks.Data, global)
		}
	}
	f.Add("flood", "203.0.113.7", []byte{snapshotVersion, tagRule}, []byte{snapshotVersion})
	f.Fuzz(func(t *testing.T, rule, key string, data, global []byte) {
		d := detectorFor(cfg)
		ks := &KeyState{Rule: rule, Key: key, Data: data}
		if _, err := d.Restore(cfg, global, slices.Values([]*KeyState{ks})); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		exercise(d, cfg)
	})
}

// benchDetector returns a detector of a flood rule (two windows and the
// ladder) tracking n single IPv6 address keys, and the charge of each key.
func benchDetector(n int) (*Detector, *rules.Config, []rules.Charge) {
	cfg, err := rules.Parse("bench.yaml", []byte(`
sources: [{name: fpm, paths: [/var/log/php/*.access.log], format: phpfpm}]
ipv6_prefix: 128
rules:
  - name: flood
    limits: ["20 per second", "300 per minute"]
    throttle: {initial_delay: 10s, max_delay: 60s, quiet: 3s}
    ban: {after: 4, for: 3m, factor: 2, max: 24h, remember: 30d}
`), rules.Options{HostAddrs: []netip.Addr{}, Cores: 4})
	if err != nil {
		panic(err)
	}
	d := New(Options{Skew: 5 * time.Second, MaxKeys: 2 * n})
	cs := make([]rules.Charge, n)
	for i := range cs {
		a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 12: byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)})
		cs[i] = rules.Charge{Rule: cfg.Rules[0], Key: a.String(), Addr: a, CPU: 0.01}
	}
	for i := range cs {
		d.Charge(at(float64(i)/1e4), &cs[i], nil)
	}
	return d, cfg, cs
}

// BenchmarkChanges times one Changes after some keys were charged once
// since the last (the charges are not timed), 61s of log time later, so
// that each window holds one bucket. ns/key is per changed key.
func BenchmarkChanges(b *testing.B) {
	for _, bc := range []struct {
		name             string
		tracked, changed int
	}{
		{"changed=10k", 10_000, 10_000},
		{"changed=100k", 100_000, 100_000},
		{"changed=1M", 1_000_000, 1_000_000},
		{"tracked=1M,changed=1%", 1_000_000, 10_000},
	} {
		b.Run(bc.name, func(b *testing.B) {
			d, _, cs := benchDetector(bc.tracked)
			d.Changes(func(*KeyState) {})
			now := at(1000)
			var size int
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				b.StopTimer()
				now = now.Add(61 * time.Second)
				for i := range bc.changed {
					d.Charge(now, &cs[i*(bc.tracked/bc.changed)], nil)
				}
				size = 0
				b.StartTimer()
				d.Changes(func(ks *KeyState) { size += len(ks.Data) })
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*bc.changed), "ns/key")
			b.ReportMetric(float64(size)/float64(bc.changed), "B/state")
		})
	}
}

// BenchmarkChangesCold is a live checkpoint's collect (ChangesAppend, the
// keys views) of 16,384 of 200,000 keys charged since the last, in random
// order, with the caches flushed (64 MiB written) between the charges and
// the collect, as row 2's daemon (issue 23) collects states the charges
// left in memory some time before. ns/key is per changed key.
func BenchmarkChangesCold(b *testing.B) {
	const tracked, changed = 200_000, 16_384
	d, _, cs := benchDetector(tracked)
	d.Changes(func(*KeyState) {})
	rng := rand.New(rand.NewPCG(2, 3))
	now := at(1000)
	flush := make([]byte, 64<<20)
	var buf []byte
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		now = now.Add(61 * time.Second)
		for range changed {
			d.Charge(now, &cs[rng.IntN(tracked)], nil)
		}
		for i := 0; i < len(flush); i += 64 {
			flush[i]++
		}
		b.StartTimer()
		buf = d.ChangesAppend(buf[:0], func(ks *KeyState) {})
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*changed), "ns/key")
}

// BenchmarkRestore restores a checkpoint of keys states (a tenth of them
// banned). ns/key is per state.
func BenchmarkRestore(b *testing.B) {
	for _, n := range []int{100_000} {
		b.Run(fmt.Sprintf("keys=%s", count(n)), func(b *testing.B) {
			d, cfg, cs := benchDetector(n)
			for i := 0; i < n; i += 10 {
				for j := range 25 {
					d.Charge(at(2000+float64(j)/100), &cs[i], nil)
				}
			}
			var states []*KeyState
			d.Changes(func(ks *KeyState) {
				c := *ks
				c.Data = bytes.Clone(ks.Data)
				states = append(states, &c)
			})
			global := d.SaveGlobal()
			b.ReportAllocs()
			for b.Loop() {
				d := New(Options{Skew: 5 * time.Second, MaxKeys: 2 * n})
				if _, err := d.Restore(cfg, global, slices.Values(states)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
		})
	}
}

// TestChangesAppend: ChangesAppend reports what Changes reports, in the
// same order, each state's Data appended in turn to the caller's buffer
// (a buffer that grows keeps the Data appended before valid), on two
// detectors fed the same events with checkpoints between.
func TestChangesAppend(t *testing.T) {
	cfg := parseConfig(t, snapConfigWith(60)) // evictions: deleted states too
	evs := snapEvents(cfg, 3000)
	a := &snapRun{cfg: cfg, d: detectorFor(cfg)}
	b := &snapRun{cfg: cfg, d: detectorFor(cfg)}
	var buf []byte
	from := 0
	for i, cut := range []int{1, 40, 41, 500, 1700, 2999, len(evs)} {
		a.feed(evs[from:cut])
		b.feed(evs[from:cut])
		from = cut
		var want, got []KeyState
		a.d.Changes(func(ks *KeyState) {
			c := *ks
			c.Data = bytes.Clone(ks.Data)
			want = append(want, c)
		})
		if i%2 == 0 {
			buf = buf[:0]
		} else {
			buf = make([]byte, 0, 3) // grows while appended to
		}
		start := len(buf)
		var appended []byte
		buf = b.d.ChangesAppend(buf, func(ks *KeyState) {
			c := *ks
			c.Key = strings.Clone(ks.Key) // a view
			got = append(got, c)
			appended = append(appended, ks.Data...)
		})
		if len(want) == 0 {
			t.Fatalf("cut %d: no change reported: nothing compared", cut)
		}
		if diff := gocmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("cut %d: states (-Changes +ChangesAppend):\n%s", cut, diff)
		}
		if !bytes.Equal(buf[start:], appended) {
			t.Errorf("cut %d: buf holds %d bytes after its start, want the %d of the states' Data in order", cut, len(buf)-start, len(appended))
		}
		for j, ks := range got {
			if cap(ks.Data) != len(ks.Data) {
				t.Errorf("cut %d: state %d (%s/%s): Data's capacity %d, want its length %d", cut, j, ks.Rule, ks.Key, cap(ks.Data), len(ks.Data))
			}
		}
	}
}
