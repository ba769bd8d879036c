package rules

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/logjail/logjail/limits"
)

// LimitKinds is the table of limit kinds, in the order ParseLimit tries
// them: the first whose grammar the words are reads them. A kind is one
// type in one file of package limits (docs/architecture.md, "A limit
// kind"); adding one adds its row here.
func LimitKinds() []limits.Kind {
	return []limits.Kind{
		limits.LastN{},  // last N within D
		limits.Share{},  // X% cpu|duration over W [of machine]
		limits.Bucket{}, // RATE/UNIT [burst B]
		limits.Rate{},   // N per PERIOD
	}
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
	text := strings.Join(f, " ")
	if len(f) == 0 {
		return Limit{Text: text}, errors.New("empty limit")
	}
	for _, k := range LimitKinds() {
		l, ok, err := k.Parse(f, cores)
		if ok {
			l.Text = text
			return l, err
		}
	}
	return Limit{Text: text}, errors.New(`unknown limit: want "N per PERIOD", "X% cpu over DURATION", "RATE/s burst N" or "last N within DURATION"`)
}

// ParseDuration parses a Go duration ("90s", "1h30m") that may begin with a
// number of days ("90d", "1d12h"). Negative durations are refused.
func ParseDuration(s string) (time.Duration, error) { return limits.ParseDuration(s) }

// withFirstNumber returns l with its first number (the count, the share in
// percent, the token rate per unit or the N of last N) replaced by n.
func withFirstNumber(l Limit, n float64, cores int) (Limit, error) {
	f := strings.Fields(l.Text)
	if len(f) == 0 {
		return l, errors.New("empty limit")
	}
	l.Kind.Renumber(f, n)
	return ParseLimitCores(strings.Join(f, " "), cores)
}
