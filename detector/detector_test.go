package detector

import (
	"math"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/logjail/logjail/limits"
	"github.com/logjail/logjail/rules"
)

var t0 = time.Date(2025, 1, 6, 12, 0, 0, 0, time.UTC)

// at is t0 plus sec seconds.
func at(sec float64) time.Time { return t0.Add(time.Duration(math.Round(sec * 1e9))) }

// ev is one step of a scenario: a charge, or with advance set, an Advance.
type ev struct {
	at      float64
	key     string
	cpu     float64
	dur     float64
	addr    string
	rule    *rules.Rule // the scenario's first rule when nil
	advance bool
}

var cmpOpts = []cmp.Option{
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmpopts.EquateEmpty(),
}

func run(d *Detector, r *rules.Rule, evs []ev) []Decision {
	var out []Decision
	for _, e := range evs {
		if e.advance {
			out = d.Advance(at(e.at), out)
			continue
		}
		c := rules.Charge{Rule: r, Key: e.key, CPU: e.cpu, Duration: e.dur}
		if e.rule != nil {
			c.Rule = e.rule
		}
		if e.addr != "" {
			c.Addr = netip.MustParseAddr(e.addr)
		}
		out = d.Charge(at(e.at), &c, out)
	}
	return out
}

func keys(key string, times ...float64) []ev {
	evs := make([]ev, len(times))
	for i, t := range times {
		evs[i] = ev{at: t, key: key}
	}
	return evs
}

func ban(rule, key string, t, until float64, violations int, reason string) Decision {
	return Decision{Rule: rule, Key: key, Kind: Ban, Time: at(t), Until: at(until), Violations: violations, Reason: reason, Origin: "detector"}
}

func unban(rule, key string, t float64) Decision {
	return Decision{Rule: rule, Key: key, Kind: Unban, Time: at(t), Reason: "ban expired", Origin: "detector"}
}

func throttle(rule, key string, t float64, delay time.Duration, violations int, reason string) Decision {
	return Decision{Rule: rule, Key: key, Kind: Throttle, Time: at(t), Until: at(t).Add(delay), Delay: delay, Violations: violations, Reason: reason, Origin: "detector"}
}

func rate(n float64, w time.Duration) rules.Limit {
	return rules.Limit{Kind: limits.Rate{}, N: n, Window: w}
}

func share(kind limits.Kind, n float64, w time.Duration) rules.Limit {
	return rules.Limit{Kind: kind, N: n, Window: w}
}

func banRule(name string, limits ...rules.Limit) *rules.Rule {
	return &rules.Rule{Name: name, Limits: limits, Ban: rules.Ban{For: time.Minute}}
}

func TestLimitBoundaries(t *testing.T) {
	const r = "r"
	tests := []struct {
		name string
		rule *rules.Rule
		evs  []ev
		want []Decision
	}{
		{
			name: "rate exactly N is not over",
			rule: banRule(r, rate(3, 10*time.Second)),
			evs:  keys("k", 0, 1, 2),
		},
		{
			name: "rate N+1 is over",
			rule: banRule(r, rate(3, 10*time.Second)),
			evs:  keys("k", 0, 1, 2, 3),
			want: []Decision{ban(r, "k", 3, 63, 0, "rate 4 per 10s > 3 (rule r)")},
		},
		{
			name: "rate window slides: the bucket of t-P is out",
			rule: banRule(r, rate(3, 10*time.Second)),
			evs:  keys("k", 0, 1, 2, 10),
		},
		{
			name: "rate window slides: the bucket of t-P+1s is in",
			rule: banRule(r, rate(3, 10*time.Second)),
			evs:  keys("k", 0.9, 1, 2, 10.8),
		},
		{
			name: "rate window slides: just inside",
			rule: banRule(r, rate(3, 10*time.Second)),
			evs:  keys("k", 1, 1, 2, 10.5),
			want: []Decision{ban(r, "k", 10.5, 70.5, 0, "rate 4 per 10s > 3 (rule r)")},
		},
		{
			name: "rate keys are separate",
			rule: banRule(r, rate(3, 10*time.Second)),
			evs:  append(keys("a", 0, 1), keys("b", 2, 3)...),
		},
		{
			name: "rate per hour in minute buckets",
			rule: banRule(r, rate(2, time.Hour)),
			// Buckets of 60s: the minute 0:01 is in the window of 1:00:59.
			evs:  keys("k", 60, 119, 3659),
			want: []Decision{ban(r, "k", 3659, 3719, 0, "rate 3 per 1h > 2 (rule r)")},
		},
		{
			name: "rate per hour: the oldest minute slid out",
			rule: banRule(r, rate(2, time.Hour)),
			evs:  keys("k", 60, 119, 3719),
		},
		{
			name: "cpu share exactly N is not over",
			rule: banRule(r, share(limits.Share{Weight: limits.CPU}, 0.07, 15*time.Second)),
			evs:  []ev{{at: 0, key: "k", cpu: 0.35}, {at: 1, key: "k", cpu: 0.35}, {at: 14, key: "k", cpu: 0.35}},
		},
		{
			name: "cpu share 1µs over N is over",
			rule: banRule(r, share(limits.Share{Weight: limits.CPU}, 0.07, 15*time.Second)),
			evs:  []ev{{at: 0, key: "k", cpu: 0.35}, {at: 1, key: "k", cpu: 0.35}, {at: 14, key: "k", cpu: 0.350001}},
			want: []Decision{ban(r, "k", 14, 74, 0, "cpu 7.0% over 15s > 7% (rule r)")},
		},
		{
			name: "cpu share slides",
			rule: banRule(r, share(limits.Share{Weight: limits.CPU}, 0.07, 15*time.Second)),
			evs:  []ev{{at: 0, key: "k", cpu: 0.6}, {at: 14, key: "k", cpu: 0.6}, {at: 15, key: "k", cpu: 0.6}},
			want: []Decision{ban(r, "k", 14, 74, 0, "cpu 8.0% over 15s > 7% (rule r)")},
		},
		{
			name: "cpu share ignores duration",
			rule: banRule(r, share(limits.Share{Weight: limits.CPU}, 0.07, 15*time.Second)),
			evs:  []ev{{at: 0, key: "k", dur: 5}},
		},
		{
			name: "duration share",
			rule: banRule(r, share(limits.Share{Weight: limits.Duration}, 0.5, 10*time.Second)),
			evs:  []ev{{at: 0, key: "k", dur: 3, cpu: 9}, {at: 5, key: "k", dur: 2}, {at: 6, key: "k", dur: 0.001}},
			want: []Decision{ban(r, "k", 6, 66, 0, "duration 50.0% over 10s > 50% (rule r)")},
		},
		{
			name: "token bucket: burst is not over",
			rule: banRule(r, rules.Limit{Kind: limits.Bucket{}, N: 1, Burst: 3, Window: 3 * time.Second}),
			evs:  keys("k", 0, 0, 0, 1, 2, 3, 4),
		},
		{
			name: "token bucket: burst+1 is over",
			rule: banRule(r, rules.Limit{Kind: limits.Bucket{}, N: 1, Burst: 3, Window: 3 * time.Second}),
			evs:  keys("k", 0, 0, 0, 0.5),
			want: []Decision{ban(r, "k", 0.5, 60.5, 0, "bucket 3.5 > burst 3 at 1/s (rule r)")},
		},
		{
			name: "token bucket refills up to the burst only",
			rule: banRule(r, rules.Limit{Kind: limits.Bucket{}, N: 2, Burst: 2, Window: time.Second}),
			evs:  keys("k", 0, 100, 100, 100),
			want: []Decision{ban(r, "k", 100, 160, 0, "bucket 3 > burst 2 at 2/s (rule r)")},
		},
		{
			name: "last N spanning exactly D is not over",
			rule: banRule(r, rules.Limit{Kind: limits.LastN{}, N: 3, Window: 2 * time.Second}),
			evs:  keys("k", 0, 1, 2, 4, 6),
		},
		{
			name: "last N within less than D is over",
			rule: banRule(r, rules.Limit{Kind: limits.LastN{}, N: 3, Window: 2 * time.Second}),
			evs:  keys("k", 0, 1, 2, 3.5, 3.999),
			want: []Decision{ban(r, "k", 3.999, 63.999, 0, "last 3 within 1.999s < 2s (rule r)")},
		},
		{
			name: "last N: N-1 requests are never over",
			rule: banRule(r, rules.Limit{Kind: limits.LastN{}, N: 3, Window: 2 * time.Second}),
			evs:  keys("k", 0, 0),
		},
		{
			name: "combine all: one limit over is not enough",
			rule: &rules.Rule{Name: r, Combine: rules.CombineAll, Ban: rules.Ban{For: time.Minute},
				Limits: []rules.Limit{rate(1, 10*time.Second), share(limits.Share{Weight: limits.CPU}, 0.1, 10*time.Second)}},
			evs: []ev{{at: 0, key: "k", cpu: 0.1}, {at: 1, key: "k", cpu: 0.1}, {at: 2, key: "k", cpu: 0.1}},
		},
		{
			name: "combine all: every limit over",
			rule: &rules.Rule{Name: r, Combine: rules.CombineAll, Ban: rules.Ban{For: time.Minute},
				Limits: []rules.Limit{rate(1, 10*time.Second), share(limits.Share{Weight: limits.CPU}, 0.1, 10*time.Second)}},
			evs:  []ev{{at: 0, key: "k", cpu: 0.1}, {at: 1, key: "k", cpu: 0.1}, {at: 2, key: "k", cpu: 0.9}},
			want: []Decision{ban(r, "k", 2, 62, 0, "rate 3 per 10s > 1 and cpu 11.0% over 10s > 10% (rule r)")},
		},
		{
			name: "combine any: one limit over",
			rule: &rules.Rule{Name: r, Ban: rules.Ban{For: time.Minute},
				Limits: []rules.Limit{rate(5, 10*time.Second), share(limits.Share{Weight: limits.CPU}, 0.1, 10*time.Second)}},
			evs:  []ev{{at: 0, key: "k", cpu: 0.5}, {at: 1, key: "k", cpu: 0.6}},
			want: []Decision{ban(r, "k", 1, 61, 0, "cpu 11.0% over 10s > 10% (rule r)")},
		},
		{
			name: "no throttle and no ban: no decision",
			rule: &rules.Rule{Name: r, Limits: []rules.Limit{rate(0, time.Second)}},
			evs:  keys("k", 0, 1),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := New(Options{Skew: 5 * time.Second})
			got := run(d, tt.rule, tt.evs)
			if diff := cmp.Diff(tt.want, got, cmpOpts...); diff != "" {
				t.Errorf("decisions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSkew(t *testing.T) {
	const r = "r"
	tests := []struct {
		name     string
		skew     time.Duration
		rule     *rules.Rule
		evs      []ev
		want     []Decision
		wantLate int64
	}{
		{
			// The late entry counts at 97, which has slid out by 107.
			name: "within skew: counted in its own bucket",
			skew: 5 * time.Second,
			rule: banRule(r, rate(2, 10*time.Second)),
			evs:  keys("k", 100, 97, 107),
		},
		{
			name: "within skew: counted",
			skew: 5 * time.Second,
			rule: banRule(r, rate(2, 10*time.Second)),
			evs:  keys("k", 100, 97, 106),
			want: []Decision{ban(r, "k", 106, 166, 0, "rate 3 per 10s > 2 (rule r)")},
		},
		{
			// Counted at 95 (newest−skew), in the window of 104.
			name:     "beyond skew: counted in the oldest open bucket",
			skew:     5 * time.Second,
			rule:     banRule(r, rate(2, 10*time.Second)),
			evs:      []ev{{at: 100, key: "other"}, {at: 60, key: "k"}, {at: 104, key: "k"}, {at: 104, key: "k"}},
			want:     []Decision{ban(r, "k", 104, 164, 0, "rate 3 per 10s > 2 (rule r)")},
			wantLate: 1,
		},
		{
			name:     "beyond skew: its bucket slides out like any other",
			skew:     5 * time.Second,
			rule:     banRule(r, rate(2, 10*time.Second)),
			evs:      []ev{{at: 100, key: "other"}, {at: 60, key: "k"}, {at: 105, key: "k"}, {at: 105, key: "k"}},
			wantLate: 1,
		},
		{
			// A late entry's decision is at newest−skew.
			name:     "beyond skew: decision at newest-skew",
			skew:     5 * time.Second,
			rule:     banRule(r, rate(1, 10*time.Second)),
			evs:      []ev{{at: 100, key: "k"}, {at: 50, key: "k"}},
			want:     []Decision{ban(r, "k", 95, 155, 0, "rate 2 per 10s > 1 (rule r)")},
			wantLate: 1,
		},
		{
			// With a skew longer than the window, an in-skew entry can be older
			// than the window: it is not counted and corrupts nothing.
			name: "within skew but older than the window",
			skew: 30 * time.Second,
			rule: banRule(r, rate(2, 3*time.Second)),
			evs:  keys("k", 100, 80, 81, 82, 83, 101),
		},
		{
			name: "within skew, older than the window, then over",
			skew: 30 * time.Second,
			rule: banRule(r, rate(2, 3*time.Second)),
			evs:  keys("k", 100, 80, 81, 82, 83, 99, 101),
			want: []Decision{ban(r, "k", 101, 161, 0, "rate 3 per 3s > 2 (rule r)")},
		},
		{
			name: "zero skew: a second older is late",
			skew: 0,
			rule: banRule(r, rate(1, 10*time.Second)),
			evs:  keys("k", 100, 99),
			// counted at 100
			want:     []Decision{ban(r, "k", 100, 160, 0, "rate 2 per 10s > 1 (rule r)")},
			wantLate: 1,
		},
		{
			name: "out of order cpu within skew fills a middle bucket",
			skew: 5 * time.Second,
			rule: banRule(r, share(limits.Share{Weight: limits.CPU}, 0.1, 10*time.Second)),
			evs: []ev{
				{at: 100, key: "k", cpu: 0.3}, {at: 103, key: "k", cpu: 0.3},
				{at: 101, key: "k", cpu: 0.3}, {at: 101, key: "k", cpu: 0.1}, {at: 110, key: "k", cpu: 0.2},
			},
			// At 110 the window is (100, 110]: 0.3 + 0.3 + 0.1 + 0.2 = 0.9.
		},
		{
			name: "out of order cpu within skew: then over",
			skew: 5 * time.Second,
			rule: banRule(r, share(limits.Share{Weight: limits.CPU}, 0.1, 10*time.Second)),
			evs: []ev{
				{at: 100, key: "k", cpu: 0.3}, {at: 103, key: "k", cpu: 0.3},
				{at: 101, key: "k", cpu: 0.3}, {at: 101, key: "k", cpu: 0.1}, {at: 110, key: "k", cpu: 0.31},
			},
			want: []Decision{ban(r, "k", 110, 170, 0, "cpu 10.1% over 10s > 10% (rule r)")},
		},
		{
			name: "last N with an out-of-order time",
			skew: 5 * time.Second,
			rule: banRule(r, rules.Limit{Kind: limits.LastN{}, N: 3, Window: 2 * time.Second}),
			// last three: 10, 11, 12 (span 2): not over; 9 is not among them.
			evs: keys("k", 10, 12, 11, 9),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := New(Options{Skew: tt.skew})
			got := run(d, tt.rule, tt.evs)
			if diff := cmp.Diff(tt.want, got, cmpOpts...); diff != "" {
				t.Errorf("decisions (-want +got):\n%s", diff)
			}
			if got := d.Stats().Late; got != tt.wantLate {
				t.Errorf("late = %d, want %d", got, tt.wantLate)
			}
		})
	}
}

// floodRule throttles over 1 per 10s: every entry within 10s of another is over.
func floodRule(after int, remember time.Duration) *rules.Rule {
	return &rules.Rule{
		Name:     "flood",
		Limits:   []rules.Limit{rate(1, 10*time.Second)},
		Throttle: &rules.Throttle{InitialDelay: 10 * time.Second, MaxDelay: 40 * time.Second, Quiet: 5 * time.Second},
		Ban:      rules.Ban{After: after, For: time.Minute, Factor: 2, Max: 3 * time.Minute, Remember: remember},
	}
}

func TestLadder(t *testing.T) {
	const f = "flood"
	over := "rate 2 per 10s > 1 (rule flood)"
	tests := []struct {
		name string
		rule *rules.Rule
		evs  []ev
		want []Decision
	}{
		{
			name: "throttle, doubling delay, capped, ban, escalation by factor, cap at max",
			rule: floodRule(3, time.Hour),
			evs: []ev{
				{at: 0, key: "k"},
				{at: 1, key: "k"}, // over: throttle 10s
				{at: 2, key: "k"}, // violation 1: 20s
				{at: 3, key: "k"}, // violation 2: 40s
				{at: 4, key: "k"}, // violation 3: 80s capped at 40s: no decision
				{at: 5, key: "k"}, // violation 4 > 3: ban 1m
				{at: 10, key: "k"},
				{at: 64.9, key: "k"},
				{at: 65, advance: true},
				{at: 66, key: "k"}, // the window holds only this one
				{at: 67, key: "k"},
				{at: 68, key: "k"},
				{at: 69, key: "k"},
				{at: 70, key: "k"},
				{at: 71, key: "k"}, // second ban: 2m
				{at: 191, advance: true},
				{at: 192, key: "k"},
				{at: 193, key: "k"},
				{at: 194, key: "k"},
				{at: 195, key: "k"},
				{at: 196, key: "k"},
				{at: 197, key: "k"}, // third ban: 4m capped at 3m
				{at: 400, advance: true},
			},
			want: []Decision{
				throttle(f, "k", 1, 10*time.Second, 0, over),
				throttle(f, "k", 2, 20*time.Second, 1, "1 violation, delay 20s (rule flood)"),
				throttle(f, "k", 3, 40*time.Second, 2, "2 violations, delay 40s (rule flood)"),
				ban(f, "k", 5, 65, 4, "4 violations > after 3 (rule flood)"),
				unban(f, "k", 65),
				throttle(f, "k", 67, 10*time.Second, 0, over),
				throttle(f, "k", 68, 20*time.Second, 1, "1 violation, delay 20s (rule flood)"),
				throttle(f, "k", 69, 40*time.Second, 2, "2 violations, delay 40s (rule flood)"),
				ban(f, "k", 71, 191, 4, "4 violations > after 3 (rule flood)"),
				unban(f, "k", 191),
				throttle(f, "k", 193, 10*time.Second, 0, over),
				throttle(f, "k", 194, 20*time.Second, 1, "1 violation, delay 20s (rule flood)"),
				throttle(f, "k", 195, 40*time.Second, 2, "2 violations, delay 40s (rule flood)"),
				ban(f, "k", 197, 377, 4, "4 violations > after 3 (rule flood)"),
				unban(f, "k", 377),
			},
		},
		{
			name: "earlier bans are forgotten after remember",
			rule: floodRule(0, 60*time.Second),
			evs: []ev{
				{at: 0, key: "k"},
				{at: 1, key: "k"}, // throttle
				{at: 2, key: "k"}, // violation 1 > 0: ban 1m, until 62
				{at: 62, key: "k"},
				{at: 63, key: "k"}, // throttle
				{at: 64, key: "k"}, // ban: the ban at 2 is within (4, 64]: 2m, until 184
				{at: 184, key: "k"},
				{at: 185, key: "k"},
				{at: 186, key: "k"}, // ban: the bans at 2 and 64 are out of (126, 186]: 1m
			},
			want: []Decision{
				throttle(f, "k", 1, 10*time.Second, 0, over),
				ban(f, "k", 2, 62, 1, "1 violation > after 0 (rule flood)"),
				unban(f, "k", 62),
				throttle(f, "k", 63, 10*time.Second, 0, over),
				ban(f, "k", 64, 124, 1, "1 violation > after 0 (rule flood)"),
				unban(f, "k", 124),
				throttle(f, "k", 185, 10*time.Second, 0, over),
				ban(f, "k", 186, 246, 1, "1 violation > after 0 (rule flood)"),
			},
		},
		{
			name: "quiet after until resets violations; not quiet re-throttles with the same delay",
			rule: floodRule(3, time.Hour),
			evs: []ev{
				{at: 0, key: "k"},
				{at: 1, key: "k"},  // throttle 10s, until 11
				{at: 2, key: "k"},  // violation 1: 20s, until 22
				{at: 22, key: "k"}, // at until: no violation, under the limit
				{at: 23, key: "k"}, // over, 1s after the last entry: throttle again 20s, violations kept
				{at: 24, key: "k"}, // violation 2: 40s, until 64
				{at: 69, key: "k"}, // quiet since 64: allowed again; under the limit
				{at: 70, key: "k"}, // over: a fresh throttle
				{at: 71, key: "k"}, // violation 1
			},
			want: []Decision{
				throttle(f, "k", 1, 10*time.Second, 0, over),
				throttle(f, "k", 2, 20*time.Second, 1, "1 violation, delay 20s (rule flood)"),
				throttle(f, "k", 23, 20*time.Second, 1, over),
				throttle(f, "k", 24, 40*time.Second, 2, "2 violations, delay 40s (rule flood)"),
				throttle(f, "k", 70, 10*time.Second, 0, over),
				throttle(f, "k", 71, 20*time.Second, 1, "1 violation, delay 20s (rule flood)"),
			},
		},
		{
			name: "quiet counts from the last entry past until",
			rule: func() *rules.Rule { r := floodRule(3, time.Hour); r.Limits[0].N = 3; return r }(),
			evs: []ev{
				{at: 0, key: "k"}, {at: 0.5, key: "k"}, {at: 1, key: "k"},
				{at: 1.5, key: "k"}, // over: throttle 10s
				{at: 2, key: "k"},   // violation 1: 20s, until 22
				{at: 23, key: "k"},  // past until, under the limit
				{at: 27, key: "k"},  // quiet since until, but not since 23
				{at: 31, key: "k"},
				{at: 35, key: "k"},
				{at: 35.5, key: "k"}, // over, not quiet: throttled again with 20s, violations kept
				{at: 36, key: "k"},   // violation 2
			},
			want: []Decision{
				throttle(f, "k", 1.5, 10*time.Second, 0, "rate 4 per 10s > 3 (rule flood)"),
				throttle(f, "k", 2, 20*time.Second, 1, "1 violation, delay 20s (rule flood)"),
				throttle(f, "k", 35.5, 20*time.Second, 1, "rate 4 per 10s > 3 (rule flood)"),
				throttle(f, "k", 36, 40*time.Second, 2, "2 violations, delay 40s (rule flood)"),
			},
		},
		{
			name: "a throttle without a ban step throttles on",
			rule: &rules.Rule{
				Name:     f,
				Limits:   []rules.Limit{rate(1, 10*time.Second)},
				Throttle: &rules.Throttle{InitialDelay: 10 * time.Second, MaxDelay: 15 * time.Second},
			},
			evs: keys("k", 0, 1, 2, 3, 4),
			want: []Decision{
				throttle(f, "k", 1, 10*time.Second, 0, over),
				throttle(f, "k", 2, 15*time.Second, 1, "1 violation, delay 15s (rule flood)"),
			},
		},
		{
			name: "log_only rules decide the same, marked",
			rule: func() *rules.Rule { r := floodRule(1, time.Hour); r.LogOnly = true; return r }(),
			evs:  append(keys("k", 0, 1, 2, 3, 4, 30), ev{at: 100, advance: true}),
			want: func() []Decision {
				ds := []Decision{
					throttle(f, "k", 1, 10*time.Second, 0, over),
					throttle(f, "k", 2, 20*time.Second, 1, "1 violation, delay 20s (rule flood)"),
					ban(f, "k", 3, 63, 2, "2 violations > after 1 (rule flood)"),
					unban(f, "k", 63),
				}
				for i := range ds {
					ds[i].LogOnly = true
				}
				return ds
			}(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := New(Options{Skew: 5 * time.Second})
			got := run(d, tt.rule, tt.evs)
			if diff := cmp.Diff(tt.want, got, cmpOpts...); diff != "" {
				t.Errorf("decisions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBannedEntriesNotCharged(t *testing.T) {
	// Stonehenge: 10% cpu over 10s, banned for one window; refused requests
	// are not charged, so the share has fallen when the ban lifts.
	r := &rules.Rule{Name: "cpu", Limits: []rules.Limit{share(limits.Share{Weight: limits.CPU}, 0.1, 10*time.Second)}, Ban: rules.Ban{For: 10 * time.Second}}
	evs := []ev{{at: 0, key: "k", cpu: 1.5}}
	for s := 1.0; s < 10; s++ {
		evs = append(evs, ev{at: s, key: "k", cpu: 2})
	}
	evs = append(evs, ev{at: 10, key: "k", cpu: 0.5}, ev{at: 11, key: "k", cpu: 0.5})
	d := New(Options{})
	got := run(d, r, evs)
	want := []Decision{
		ban("cpu", "k", 0, 10, 0, "cpu 15.0% over 10s > 10% (rule cpu)"),
		unban("cpu", "k", 10),
	}
	if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
		t.Errorf("decisions (-want +got):\n%s", diff)
	}
	st := d.Stats()
	if st.Blocked != 9 || st.Charges != 3 {
		t.Errorf("blocked, charges = %d, %d; want 9, 3", st.Blocked, st.Charges)
	}
	var peaks []KeyPeak
	d.Peaks(func(kp KeyPeak) {
		kp.Peak = append([]float64(nil), kp.Peak...)
		peaks = append(peaks, kp)
	})
	wantPeaks := []KeyPeak{{Rule: r, Key: "k", Requests: 3, Blocked: 9, CPU: 2.5, Peak: []float64{0.15}, FirstOver: at(0)}}
	if diff := cmp.Diff(wantPeaks, peaks, cmpOpts...); diff != "" {
		t.Errorf("peaks (-want +got):\n%s", diff)
	}
}

func TestBreaker(t *testing.T) {
	r := banRule("r", rate(0, 10*time.Second))
	quiet := banRule("q", rate(0, 10*time.Second))
	quiet.LogOnly = true
	var tripped []BreakerState
	d := New(Options{MaxBansPerMinute: 2, BreakerTripped: func(b BreakerState) { tripped = append(tripped, b) }})
	got := run(d, r, []ev{
		{at: 0, key: "a"},
		{at: 1, key: "x", rule: quiet}, // log_only bans do not count
		{at: 10, key: "b"},
		{at: 59.9, key: "c"}, // the third within a minute: trips
		{at: 61, key: "d"},   // open: log only
		{at: 69.9, advance: true},
	})
	st := d.Stats()
	if !st.BreakerOpen || st.BreakerTrips != 1 {
		t.Errorf("breaker open, trips = %v, %d; want true, 1", st.BreakerOpen, st.BreakerTrips)
	}
	trip := BreakerState{Open: true, Trips: 1, Tripped: at(59.9), Bans: 3, Limit: 2, Window: time.Minute,
		Rule: "r", Key: "c", MaxBansPerMinute: 2}
	if diff := cmp.Diff(trip, d.Breaker(), cmpOpts...); diff != "" {
		t.Errorf("Breaker (-want +got):\n%s", diff)
	}
	if !d.ResetBreaker() {
		t.Error("ResetBreaker of an open breaker = false")
	}
	if d.ResetBreaker() {
		t.Error("ResetBreaker of a closed breaker = true")
	}
	got = append(got, run(d, r, []ev{{at: 70, key: "e"}})...)
	if st := d.Stats(); st.BreakerOpen || st.BreakerTrips != 1 {
		t.Errorf("after reset: breaker open, trips = %v, %d; want false, 1", st.BreakerOpen, st.BreakerTrips)
	}
	closed := trip
	closed.Open = false
	if diff := cmp.Diff(closed, d.Breaker(), cmpOpts...); diff != "" {
		t.Errorf("Breaker after the reset (-want +got):\n%s", diff)
	}
	logOnly := func(d Decision) Decision { d.LogOnly = true; return d }
	why := "rate 1 per 10s > 0 (rule r)"
	want := []Decision{
		ban("r", "a", 0, 60, 0, why),
		logOnly(ban("q", "x", 1, 61, 0, "rate 1 per 10s > 0 (rule q)")),
		ban("r", "b", 10, 70, 0, why),
		logOnly(ban("r", "c", 59.9, 119.9, 0, why)),
		unban("r", "a", 60),          // a ban in force is lifted for real
		logOnly(unban("q", "x", 61)), // as its ban was
		logOnly(ban("r", "d", 61, 121, 0, why)),
		unban("r", "b", 70),
		ban("r", "e", 70, 130, 0, why), // reset: acted on again
	}
	if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
		t.Errorf("decisions (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]BreakerState{trip}, tripped, cmpOpts...); diff != "" {
		t.Errorf("tripped (-want +got):\n%s", diff)
	}

	t.Run("spread over minutes", func(t *testing.T) {
		d := New(Options{MaxBansPerMinute: 2})
		got := run(d, r, []ev{{at: 0, key: "a"}, {at: 30, key: "b"}, {at: 60, key: "c"}, {at: 90, key: "d"}})
		for _, dec := range got {
			if dec.LogOnly {
				t.Errorf("log only: %+v", dec)
			}
		}
		if st := d.Stats(); st.BreakerOpen || st.Bans != 4 {
			t.Errorf("breaker open %v, bans %d; want false, 4", st.BreakerOpen, st.Bans)
		}
	})
	t.Run("limit raised while open", func(t *testing.T) {
		d := New(Options{MaxBansPerMinute: 1})
		run(d, r, []ev{{at: 0, key: "a"}, {at: 1, key: "b"}})
		d.SetMaxBansPerMinute(10)
		got := run(d, r, []ev{{at: 2, key: "c"}})
		if b := d.Breaker(); !b.Open || b.MaxBansPerMinute != 10 || len(got) != 1 || !got[0].LogOnly {
			t.Errorf("breaker %+v, decisions %+v: want it open, limit 10, the ban log-only", b, got)
		}
		d.ResetBreaker()
		// Two bans in the minute before the reset are forgotten: ten more
		// act before the breaker trips again.
		for i := range 10 {
			if got := run(d, r, []ev{{at: 3 + float64(i), key: string(rune('k' + i))}}); len(got) != 1 || got[0].LogOnly {
				t.Fatalf("ban %d after the reset: %+v", i, got)
			}
		}
		if got := run(d, r, []ev{{at: 13, key: "z"}}); len(got) != 1 || !got[0].LogOnly || d.Breaker().Trips != 2 {
			t.Errorf("the 11th ban within a minute: %+v, breaker %+v: want log-only, 2 trips", got, d.Breaker())
		}
	})
	t.Run("disabled", func(t *testing.T) {
		d := New(Options{MaxBansPerMinute: -1})
		run(d, r, keys("a", 0))
		run(d, r, keys("b", 0))
		if st := d.Stats(); st.BreakerOpen || st.Bans != 2 {
			t.Errorf("breaker open %v, bans %d; want false, 2", st.BreakerOpen, st.Bans)
		}
	})
}
