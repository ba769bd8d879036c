package rules

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Named periods of a rate limit ("20 per minute"). A month is 30 days.
var periods = map[string]time.Duration{
	"second": time.Second,
	"minute": time.Minute,
	"hour":   time.Hour,
	"day":    24 * time.Hour,
	"month":  30 * 24 * time.Hour,
}

// Token-bucket rate units ("10/s", "600/minute").
var rateUnits = map[string]time.Duration{
	"s": time.Second, "second": time.Second,
	"m": time.Minute, "minute": time.Minute,
	"h": time.Hour, "hour": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour,
}

// ParseLimit parses one limit as written in a rule's or a range's limits:
//
//	20 per second              rate: second, minute, hour, day, month (30 days)
//	5 per 10s                  rate over a duration (Go duration or days, "2d")
//	7% cpu over 15s            CPU seconds per second of window, as a share of one core
//	7% cpu over 15s of machine the same, as a share of the whole machine (all its cores)
//	10% duration over 1m       wall time instead of CPU time
//	10/s burst 20              token bucket: 10 tokens a second (/s, /m, /h, /d), 20 at most
//	last 10 within 2s          the last 10 requests span less than 2s
//
// N of a share is a fraction of one core: CPU seconds per second of window
// (0.07 for 7%). ParseLimit counts a machine as one core: "of machine" sets
// OfMachine and leaves N as written. The configuration multiplies N by its
// Cores (see ParseLimitCores).
func ParseLimit(s string) (Limit, error) {
	return ParseLimitCores(s, 1)
}

// ParseLimitCores is ParseLimit for a machine of the given number of cores.
// An "of machine" share is of all the cores, so its N, in CPU seconds per
// second, is the share as written times cores: "50% cpu over 10s of machine"
// is over above 2 CPU seconds a second on 4 cores, above 0.5 on one (DESIGN.md:
// the measured share of one core is divided by the core count and compared
// with the share as written, which is the same test).
func ParseLimitCores(s string, cores int) (Limit, error) {
	l, err := parseLimit(s, cores)
	if err != nil {
		return Limit{}, fmt.Errorf("%q: %w", s, err)
	}
	return l, nil
}

func parseLimit(s string, cores int) (Limit, error) {
	if cores < 1 {
		cores = 1
	}
	f := strings.Fields(s)
	l := Limit{Text: strings.Join(f, " ")}
	switch {
	case len(f) == 0:
		return l, errors.New("empty limit")

	case f[0] == "last":
		// last N within D
		if len(f) != 4 || f[2] != "within" {
			return l, errors.New(`want "last N within DURATION"`)
		}
		n, err := strconv.Atoi(f[1])
		if err != nil || n < 2 {
			return l, fmt.Errorf("count %q: want a whole number of at least 2", f[1])
		}
		if n > MaxLastN {
			// Each key keeps the times of its last N requests (8 bytes each).
			return l, fmt.Errorf("count %d: at most %d (each key keeps the times of its last N requests)", n, MaxLastN)
		}
		d, err := ParseDuration(f[3])
		if err != nil {
			return l, err
		}
		if d <= 0 {
			return l, errors.New("span must be positive")
		}
		l.Kind, l.N, l.Window = LimitLastN, float64(n), d
		return l, nil

	case strings.HasSuffix(f[0], "%"):
		// X% cpu|duration over D [of machine]
		if len(f) != 4 && !(len(f) == 6 && f[4] == "of" && f[5] == "machine") {
			return l, errors.New(`want "X% cpu over DURATION [of machine]"`)
		}
		switch f[1] {
		case "cpu":
			l.Kind = LimitCPUShare
		case "duration":
			l.Kind = LimitDurationShare
		default:
			return l, fmt.Errorf("unknown share %q: want cpu or duration", f[1])
		}
		if f[2] != "over" {
			return l, errors.New(`want "X% cpu over DURATION [of machine]"`)
		}
		pct, err := number(strings.TrimSuffix(f[0], "%"))
		if err != nil {
			return l, fmt.Errorf("share %q: %w", f[0], err)
		}
		w, err := window(f[3])
		if err != nil {
			return l, err
		}
		l.N, l.Window = pct/100, w
		if len(f) == 6 {
			l.OfMachine, l.Cores = true, cores
			l.N *= float64(cores)
		}
		return l, nil

	case strings.Contains(f[0], "/"):
		// R/UNIT [burst B]
		num, unit, _ := strings.Cut(f[0], "/")
		per, ok := rateUnits[unit]
		if !ok {
			return l, fmt.Errorf("unknown rate unit %q: want s, m, h or d", unit)
		}
		r, err := number(num)
		if err != nil {
			return l, fmt.Errorf("rate %q: %w", num, err)
		}
		if r <= 0 {
			return l, errors.New("rate must be positive")
		}
		burst := 1.0
		switch {
		case len(f) == 1:
		case len(f) == 3 && f[1] == "burst":
			burst, err = number(f[2])
			if err != nil {
				return l, fmt.Errorf("burst %q: %w", f[2], err)
			}
			if burst < 1 {
				return l, errors.New("burst must be at least 1")
			}
		default:
			return l, errors.New(`want "RATE/UNIT [burst N]"`)
		}
		l.Kind, l.N, l.Burst = LimitTokenBucket, r/per.Seconds(), burst
		l.Window = bucketWindow(l.N, burst)
		return l, nil

	case len(f) == 3 && f[1] == "per":
		// N per PERIOD
		n, err := number(f[0])
		if err != nil {
			return l, fmt.Errorf("count %q: %w", f[0], err)
		}
		p, ok := periods[f[2]]
		if !ok {
			if _, err := ParseDuration(f[2]); err != nil {
				return l, errors.New("unknown period")
			}
			if p, err = window(f[2]); err != nil {
				return l, err
			}
		}
		l.Kind, l.N, l.Window = LimitRate, n, p
		return l, nil
	}
	return l, errors.New(`unknown limit: want "N per PERIOD", "X% cpu over DURATION", "RATE/s burst N" or "last N within DURATION"`)
}

// bucketWindow is the time a token bucket of the given rate (per second) takes
// to fill its burst.
func bucketWindow(rate, burst float64) time.Duration {
	return time.Duration(burst / rate * float64(time.Second))
}

// number parses a non-negative finite decimal number.
func number(s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, errors.New("not a number")
	}
	if v < 0 {
		return 0, errors.New("must not be negative")
	}
	return v, nil
}

// window parses the window of a rate or share limit: a duration of at least a
// second (log times have a resolution of a second).
func window(s string) (time.Duration, error) {
	d, err := ParseDuration(s)
	if err != nil {
		return 0, err
	}
	if d < time.Second {
		return 0, fmt.Errorf("window %s is shorter than 1s", s)
	}
	return d, nil
}

// maxDays keeps days+rest within a time.Duration (about 292 years).
const maxDays = 100000

// ParseDuration parses a Go duration ("90s", "1h30m") that may begin with a
// number of days ("90d", "1d12h"). Negative durations are refused.
func ParseDuration(s string) (time.Duration, error) {
	orig := s
	var days time.Duration
	if i := strings.IndexByte(s, 'd'); i > 0 {
		n, err := strconv.ParseUint(s[:i], 10, 32)
		if err == nil && n > maxDays {
			return 0, fmt.Errorf("bad duration %q: too long", orig)
		}
		if err == nil {
			days = time.Duration(n) * 24 * time.Hour
			s = s[i+1:]
			if s == "" {
				return days, nil
			}
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("bad duration %q: want e.g. 30s, 10m, 24h or 30d", orig)
	}
	if d < 0 {
		return 0, fmt.Errorf("bad duration %q: must not be negative", orig)
	}
	return days + d, nil
}

// withFirstNumber returns l with its first number (the count, the share in
// percent, the token rate per unit or the N of last N) replaced by n.
func withFirstNumber(l Limit, n float64, cores int) (Limit, error) {
	f := strings.Fields(l.Text)
	if len(f) == 0 {
		return l, errors.New("empty limit")
	}
	ns := strconv.FormatFloat(n, 'f', -1, 64)
	switch l.Kind {
	case LimitCPUShare, LimitDurationShare:
		f[0] = ns + "%"
	case LimitTokenBucket:
		_, unit, _ := strings.Cut(f[0], "/")
		f[0] = ns + "/" + unit
	case LimitLastN:
		f[1] = strconv.FormatFloat(math.Round(n), 'f', -1, 64)
	default:
		f[0] = ns
	}
	return ParseLimitCores(strings.Join(f, " "), cores)
}
