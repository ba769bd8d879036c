package ops

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/state"
)

// records reads JSON log lines.
func records(t *testing.T, out string) []map[string]any {
	t.Helper()
	var rs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("not a JSON line: %q: %v", line, err)
		}
		delete(r, "time")
		rs = append(rs, r)
	}
	return rs
}

func TestDecisionLogLines(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	until := t0.Add(10 * time.Minute)
	tests := []struct {
		name   string
		source string
		d      detector.Decision
		want   map[string]any
	}{
		{"ban", "nginx",
			detector.Decision{Rule: "flood", Key: "203.0.113.7", Kind: detector.Ban, Time: t0, Until: until, Violations: 5,
				Reason: "rate 21 per 1s > 20 (rule flood)", Origin: state.OriginDetector},
			map[string]any{"level": "INFO", "msg": "ban", "rule": "flood", "key": "203.0.113.7", "kind": "ban",
				"until": "2026-11-25T09:10:00Z", "reason": "rate 21 per 1s > 20 (rule flood)", "source": "nginx",
				"violations": 5.0, "log_time": "2026-11-25T09:00:00Z"}},
		{"ban of a prefix, log-only (backlog)", "nginx",
			detector.Decision{Rule: "flood", Key: "203.0.113.0/24", Kind: detector.Ban, Time: t0, Until: until,
				Addresses: []netip.Addr{netip.MustParseAddr("203.0.113.7"), netip.MustParseAddr("203.0.113.9")},
				Reason:    "r; already over when read (backlog): not applied", Origin: state.OriginDetector, LogOnly: true},
			map[string]any{"level": "INFO", "msg": "ban", "rule": "flood", "key": "203.0.113.0/24", "kind": "ban",
				"until": "2026-11-25T09:10:00Z", "reason": "r; already over when read (backlog): not applied", "source": "nginx",
				"log_only": true, "addresses": []any{"203.0.113.7", "203.0.113.9"}, "log_time": "2026-11-25T09:00:00Z"}},
		{"unban by the cleaner", SourceCleaner,
			detector.Decision{Rule: "flood", Key: "203.0.113.7", Kind: detector.Unban, Time: until, Reason: "expired", Origin: state.OriginDetector},
			map[string]any{"level": "INFO", "msg": "unban", "rule": "flood", "key": "203.0.113.7", "kind": "unban",
				"until": "", "reason": "expired", "source": "cleaner"}},
		{"throttle", "nginx",
			detector.Decision{Rule: "flood", Key: "198.51.100.1", Kind: detector.Throttle, Time: t0, Until: t0.Add(10 * time.Second),
				Delay: 10 * time.Second, Reason: "rate", Origin: state.OriginDetector},
			map[string]any{"level": "DEBUG", "msg": "throttle", "rule": "flood", "key": "198.51.100.1", "kind": "throttle",
				"until": "2026-11-25T09:00:10Z", "reason": "rate", "source": "nginx", "delay": "10s", "log_time": "2026-11-25T09:00:00Z"}},
		{"deny", SourceDeny,
			detector.Decision{Rule: "deny", Key: "198.51.100.0/24", Kind: detector.Ban, Time: t0, Reason: "deny list", Origin: state.OriginDeny},
			map[string]any{"level": "INFO", "msg": "deny", "rule": "deny", "key": "198.51.100.0/24", "kind": "ban",
				"until": "", "reason": "deny list", "source": "deny"}},
		{"allow-lift", SourceDeny,
			detector.Decision{Rule: "deny", Key: "198.51.100.0/24", Kind: detector.Unban, Time: t0, Reason: "removed from config", Origin: state.OriginDeny},
			map[string]any{"level": "INFO", "msg": "allow-lift", "rule": "deny", "key": "198.51.100.0/24", "kind": "unban",
				"until": "", "reason": "removed from config", "source": "deny"}},
		{"operator ban", SourceOperator,
			detector.Decision{Rule: "operator", Key: "2001:db8::/64", Kind: detector.Ban, Time: t0, Until: until, Reason: "scraper",
				Origin: state.OriginOperator, Who: "uid 0 (root)"},
			map[string]any{"level": "INFO", "msg": "ban", "rule": "operator", "key": "2001:db8::/64", "kind": "ban",
				"until": "2026-11-25T09:10:00Z", "reason": "scraper", "source": "operator", "who": "uid 0 (root)"}},
		{"ban in a fleet", "nginx",
			detector.Decision{Rule: "flood", Key: "203.0.113.7", Kind: detector.Ban, Time: t0, Until: until,
				Reason: "rate 21 per 1s > 20 (rule flood)", Origin: state.OriginDetector, Node: "web2"},
			map[string]any{"level": "INFO", "msg": "ban", "rule": "flood", "key": "203.0.113.7", "kind": "ban",
				"until": "2026-11-25T09:10:00Z", "reason": "rate 21 per 1s > 20 (rule flood)", "source": "nginx",
				"node": "web2", "log_time": "2026-11-25T09:00:00Z"}},
		{"operator unban in a fleet", SourceOperator,
			detector.Decision{Rule: "operator", Key: "2001:db8::/64", Kind: detector.Unban, Time: t0, Reason: "lifted",
				Origin: state.OriginOperator, Who: "uid 0 (root)", Node: "web1"},
			map[string]any{"level": "INFO", "msg": "unban", "rule": "operator", "key": "2001:db8::/64", "kind": "unban",
				"until": "", "reason": "lifted", "source": "operator", "who": "uid 0 (root)", "node": "web1"}},
		{"operator forget", SourceOperator,
			detector.Decision{Rule: "flood", Key: "203.0.113.7", Kind: detector.Kind(state.KindForget), Time: t0, Reason: "forgotten",
				Origin: state.OriginOperator, Who: "uid 0 (root)"},
			map[string]any{"level": "INFO", "msg": "forget", "rule": "flood", "key": "203.0.113.7", "kind": "forget",
				"until": "", "reason": "forgotten", "source": "operator", "who": "uid 0 (root)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			l := NewDecisionLog(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), DecisionLogOptions{})
			l.Decisions(tt.source, []detector.Decision{tt.d})
			rs := records(t, buf.String())
			if len(rs) != 1 {
				t.Fatalf("%d lines, want 1:\n%s", len(rs), buf.String())
			}
			if diff := cmp.Diff(tt.want, rs[0]); diff != "" {
				t.Errorf("line (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecisionLogText: the text handler (a terminal) writes the same
// attributes, and a breaker trip comes out at ERROR.
func TestDecisionLogText(t *testing.T) {
	var buf bytes.Buffer
	l := NewDecisionLog(slog.New(slog.NewTextHandler(&buf, nil)), DecisionLogOptions{})
	until := time.Date(2026, 11, 25, 9, 10, 0, 0, time.UTC)
	l.Decisions("nginx", []detector.Decision{{Rule: "flood", Key: "203.0.113.7", Kind: detector.Ban, Until: until, Reason: "rate 21 per 1s > 20", Origin: state.OriginDetector}})
	l.Decisions("nginx", []detector.Decision{{Rule: "flood", Key: "203.0.113.8", Kind: detector.Throttle, Until: until, Origin: state.OriginDetector}})
	l.Breaker(BreakerEvent{Level: slog.LevelError, Event: "trip", Rule: "flood", Key: "203.0.113.9", Reason: "3 bans within 1m", Source: "nginx"})
	out := buf.String()
	for _, want := range []string{
		`level=INFO msg=ban rule=flood key=203.0.113.7 kind=ban until=2026-11-25T09:10:00Z reason="rate 21 per 1s > 20" source=nginx`,
		`level=ERROR msg=breaker rule=flood key=203.0.113.9 kind=breaker-trip until="" reason="3 bans within 1m" source=nginx`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "throttle") {
		t.Errorf("a throttle logged at Info:\n%s", out)
	}
}

// fakeClock is the limiter's clock, moved by the test.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// bans are n ban decisions of distinct keys.
func bans(n int, origin string) []detector.Decision {
	ds := make([]detector.Decision, n)
	for i := range ds {
		ds[i] = detector.Decision{Rule: "flood", Key: fmt.Sprintf("203.0.113.%d", i%256), Kind: detector.Ban,
			Until: time.Date(2026, 11, 25, 9, 10, 0, 0, time.UTC), Reason: "rate", Origin: origin}
	}
	return ds
}

// count is how many records have msg (and, for suppressed lines, their
// total count).
func count(rs []map[string]any, msg string) (lines int, suppressed int) {
	for _, r := range rs {
		if r["msg"] == msg {
			lines++
		}
		if r["msg"] == MsgSuppressed && r["of"] == msg {
			suppressed += int(r["count"].(float64))
		}
	}
	return lines, suppressed
}

// TestDecisionLogStorm: at most PerSecond lines of a message a second; the
// rest are counted in one "suppressed" line when the next second starts
// (or at Tick); an operator's ban in the storm is written; throttles not
// written at the logger's level are not counted either.
func TestDecisionLogStorm(t *testing.T) {
	var buf bytes.Buffer
	clock := &fakeClock{time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)}
	l := NewDecisionLog(slog.New(slog.NewJSONHandler(&buf, nil)), DecisionLogOptions{PerSecond: 3, Now: clock.now})
	throttles := bans(100, state.OriginDetector)
	for i := range throttles {
		throttles[i].Kind = detector.Throttle
	}

	l.Decisions("nginx", bans(10, state.OriginDetector))
	l.Decisions("nginx", throttles)
	clock.t = clock.t.Add(500 * time.Millisecond)
	l.Decisions("nginx", bans(5, state.OriginDetector))
	l.Decisions(SourceOperator, bans(1, state.OriginOperator))
	rs := records(t, buf.String())
	if n, s := count(rs, MsgBan); n != 4 || s != 0 {
		t.Fatalf("within the first second: %d ban lines (want 3 + the operator's), %d counted suppressed (want none yet):\n%s", n, s, buf.String())
	}
	clock.t = clock.t.Add(600 * time.Millisecond) // a new second
	l.Decisions("nginx", bans(1, state.OriginDetector))
	rs = records(t, buf.String())
	if n, s := count(rs, MsgBan); n != 5 || s != 12 {
		t.Fatalf("after the second: %d ban lines (want 5), %d suppressed (want 12):\n%s", n, s, buf.String())
	}
	sup := rs[4]
	want := map[string]any{"level": "WARN", "msg": "suppressed", "of": "ban", "operator": false, "count": 12.0,
		"since": "2026-11-25T09:00:00Z", "seconds": "1.1s", "per_second": 3.0}
	if diff := cmp.Diff(want, sup); diff != "" {
		t.Errorf("suppressed line (-want +got):\n%s", diff)
	}
	if rs[5]["msg"] != "ban" {
		t.Errorf("the suppressed line does not come before the next ban: %v", rs)
	}

	// A storm that ends: Tick writes its count once its second is over.
	l.Decisions("nginx", bans(7, state.OriginDetector))
	l.Tick()
	if _, s := count(records(t, buf.String()), MsgBan); s != 12 {
		t.Errorf("Tick within the second wrote a count: %d", s)
	}
	clock.t = clock.t.Add(time.Second)
	l.Tick()
	l.Tick()
	if n, s := count(records(t, buf.String()), MsgBan); n != 7 || s != 17 {
		t.Errorf("after Tick: %d ban lines (want 7), %d suppressed (want 17):\n%s", n, s, buf.String())
	}
	// Every decision is either a line or counted.
	l.Decisions("nginx", bans(50, state.OriginDetector))
	l.Flush()
	if n, s := count(records(t, buf.String()), MsgBan); n+s != 10+5+1+1+7+50 {
		t.Errorf("%d lines + %d suppressed != %d decisions", n, s, 10+5+1+1+7+50)
	}
	if n, s := count(records(t, buf.String()), MsgThrottle); n != 0 || s != 0 {
		t.Errorf("throttles at Info level: %d lines, %d suppressed", n, s)
	}
}

// TestDecisionLogUnlimited: PerSecond < 0 writes every line.
func TestDecisionLogUnlimited(t *testing.T) {
	var buf bytes.Buffer
	l := NewDecisionLog(slog.New(slog.NewJSONHandler(&buf, nil)), DecisionLogOptions{PerSecond: -1})
	l.Decisions("nginx", bans(500, state.OriginDetector))
	l.Flush()
	if n, s := count(records(t, buf.String()), MsgBan); n != 500 || s != 0 {
		t.Errorf("%d lines, %d suppressed; want 500, 0", n, s)
	}
}

// BenchmarkDecisionLog10kBans logs a storm of 10,000 bans (one op) with
// the daemon's JSON handler: the default limit (what the daemon does), and
// no limit (every line formatted and written).
func BenchmarkDecisionLog10kBans(b *testing.B) {
	ds := bans(10000, state.OriginDetector)
	for i := range ds {
		ds[i].Time = ds[i].Until.Add(-10 * time.Minute)
		ds[i].Reason = "rate 21 per 1s > 20 (rule flood)"
	}
	for _, bc := range []struct {
		name string
		rate int
	}{{"default", 0}, {"unlimited", -1}} {
		b.Run(bc.name, func(b *testing.B) {
			l := NewDecisionLog(slog.New(slog.NewJSONHandler(io.Discard, nil)), DecisionLogOptions{PerSecond: bc.rate})
			b.ReportAllocs()
			for b.Loop() {
				for i := range ds {
					l.Decisions("nginx", ds[i:i+1])
				}
			}
		})
	}
}
