package rules

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/logjail/logjail/limits"
)

func TestParseLimit(t *testing.T) {
	tests := []struct {
		in   string
		want Limit
	}{
		{"20 per second", Limit{Kind: limits.Rate{}, N: 20, Window: time.Second}},
		{"100 per minute", Limit{Kind: limits.Rate{}, N: 100, Window: time.Minute}},
		{"1000 per hour", Limit{Kind: limits.Rate{}, N: 1000, Window: time.Hour}},
		{"5000 per day", Limit{Kind: limits.Rate{}, N: 5000, Window: 24 * time.Hour}},
		{"100000 per month", Limit{Kind: limits.Rate{}, N: 100000, Window: 30 * 24 * time.Hour}},
		{"5 per 10s", Limit{Kind: limits.Rate{}, N: 5, Window: 10 * time.Second}},
		{"0 per 1h", Limit{Kind: limits.Rate{}, N: 0, Window: time.Hour}},
		{"50 per 2d", Limit{Kind: limits.Rate{}, N: 50, Window: 48 * time.Hour}},
		{"  30   per  10s ", Limit{Text: "30 per 10s", Kind: limits.Rate{}, N: 30, Window: 10 * time.Second}},
		{"7% cpu over 15s", Limit{Kind: limits.Share{Weight: limits.CPU}, N: 0.07, Window: 15 * time.Second}},
		{"25% cpu over 1m", Limit{Kind: limits.Share{Weight: limits.CPU}, N: 0.25, Window: time.Minute}},
		{"150% cpu over 1m", Limit{Kind: limits.Share{Weight: limits.CPU}, N: 1.5, Window: time.Minute}},
		{"7% cpu over 15s of machine", Limit{Kind: limits.Share{Weight: limits.CPU}, N: 0.07, Window: 15 * time.Second, OfMachine: true, Cores: 1}},
		{"10% duration over 1m", Limit{Kind: limits.Share{Weight: limits.Duration}, N: 0.1, Window: time.Minute}},
		{"12.5% duration over 30s of machine", Limit{Kind: limits.Share{Weight: limits.Duration}, N: 0.125, Window: 30 * time.Second, OfMachine: true, Cores: 1}},
		{"10/s burst 20", Limit{Kind: limits.Bucket{}, N: 10, Burst: 20, Window: 2 * time.Second}},
		{"10/s", Limit{Kind: limits.Bucket{}, N: 10, Burst: 1, Window: 100 * time.Millisecond}},
		{"60/m burst 30", Limit{Kind: limits.Bucket{}, N: 1, Burst: 30, Window: 30 * time.Second}},
		{"3600/hour burst 60", Limit{Kind: limits.Bucket{}, N: 1, Burst: 60, Window: time.Minute}},
		{"last 10 within 2s", Limit{Kind: limits.LastN{}, N: 10, Window: 2 * time.Second}},
		{"last 5 within 500ms", Limit{Kind: limits.LastN{}, N: 5, Window: 500 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseLimit(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if tt.want.Text == "" {
				tt.want.Text = tt.in
			}
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(approx)); diff != "" {
				t.Errorf("ParseLimit(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func approx(a, b float64) bool { return a == b || (a-b)*(a-b) < 1e-18 }

func TestParseLimitCores(t *testing.T) {
	got, err := ParseLimitCores("8% cpu over 15s of machine", 4)
	if err != nil {
		t.Fatal(err)
	}
	// 8% of 4 cores is 0.32 CPU seconds a second.
	if !approx(got.N, 0.32) || !got.OfMachine || got.Text != "8% cpu over 15s of machine" {
		t.Errorf("N = %v, OfMachine = %v, Text %q, want 0.32, true, as written", got.N, got.OfMachine, got.Text)
	}
	got, err = ParseLimitCores("8% cpu over 15s", 4)
	if err != nil {
		t.Fatal(err)
	}
	if !approx(got.N, 0.08) {
		t.Errorf("N = %v, want 0.08 (one core)", got.N)
	}
}

func TestParseLimitErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "empty limit"},
		{"20 per fortnight", `"20 per fortnight": unknown period`},
		{"20 per", "unknown limit"},
		{"twenty per second", `count "twenty": not a number`},
		{"-5 per second", "must not be negative"},
		{"5 per 500ms", "shorter than 1s"},
		{"5 per -10s", "unknown period"},
		{"7% memory over 15s", `unknown share "memory"`},
		{"7% cpu during 15s", "want"},
		{"7% cpu over 15s of galaxy", "want"},
		{"x% cpu over 15s", "not a number"},
		{"7% cpu over soon", "bad duration"},
		{"10/fortnight", "unknown rate unit"},
		{"0/s burst 3", "rate must be positive"},
		{"10/s burst 0", "burst must be at least 1"},
		{"10/s burst", "want"},
		{"10/s bursts 3", "want"},
		{"last 1 within 2s", "at least 2"},
		{"last 10001 within 2s", "at most 10000"},
		{"last ten within 2s", "at least 2"},
		{"last 10 within 0s", "span must be positive"},
		{"last 10 in 2s", "want"},
		{"NaN per second", "not a number"},
		{"Inf per second", "not a number"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := ParseLimit(tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseLimit(%q) = %v, want error containing %q", tt.in, err, tt.want)
			}
		})
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		err  bool
	}{
		{"10s", 10 * time.Second, false},
		{"1h30m", 90 * time.Minute, false},
		{"90d", 90 * 24 * time.Hour, false},
		{"30d", 30 * 24 * time.Hour, false},
		{"1d12h", 36 * time.Hour, false},
		{"0", 0, false},
		{"500ms", 500 * time.Millisecond, false},
		{"10", 0, true},
		{"d", 0, true},
		{"-5s", 0, true},
		{"-5d", 0, true},
		{"5d-3h", 0, true},
		{"3 months", 0, true},
		{"999999999d", 0, true},
		{"", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseDuration(tt.in)
			if (err != nil) != tt.err || got != tt.want {
				t.Errorf("ParseDuration(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.err)
			}
		})
	}
}

func TestCheckSchedule(t *testing.T) {
	for _, s := range []string{"@every 1m", "@every 30s", "@hourly", "@daily", "*/5 * * * *", "0 3 * * sun", "15 2,14 1-15/2 jan-jun mon-fri", "0 0 1 1 7"} {
		if err := checkSchedule(s); err != nil {
			t.Errorf("checkSchedule(%q) = %v", s, err)
		}
	}
	for _, s := range []string{"@every 100ms", "@every soon", "@often", "* * * *", "60 * * * *", "* * 0 * *", "* * * 13 *", "*/0 * * * *", "5-1 * * * *", "* * * foo *"} {
		if err := checkSchedule(s); err == nil {
			t.Errorf("checkSchedule(%q) = nil, want error", s)
		}
	}
}
