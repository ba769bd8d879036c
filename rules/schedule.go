package rules

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// checkSchedule checks a cleaner schedule: "@every DURATION" (at least a
// second), a descriptor (@hourly, @daily, @midnight, @weekly, @monthly,
// @yearly, @annually) or a five-field cron expression (minute hour
// day-of-month month day-of-week) with *, lists, ranges, steps and the
// English names of months and days.
func checkSchedule(s string) error {
	s = strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(s, "@every "); ok {
		d, err := ParseDuration(strings.TrimSpace(rest))
		if err != nil {
			return err
		}
		if d < time.Second {
			return errors.New("want at least @every 1s")
		}
		return nil
	}
	if strings.HasPrefix(s, "@") {
		switch s {
		case "@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@yearly", "@annually":
			return nil
		}
		return errors.New("unknown descriptor: want @every DURATION, @hourly, @daily, @weekly, @monthly or @yearly")
	}
	f := strings.Fields(s)
	if len(f) != 5 {
		return fmt.Errorf("a cron expression has 5 fields (minute hour day month weekday), not %d", len(f))
	}
	specs := []struct {
		name   string
		lo, hi int
		names  []string
	}{
		{"minute", 0, 59, nil},
		{"hour", 0, 23, nil},
		{"day of month", 1, 31, nil},
		{"month", 1, 12, []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}},
		{"day of week", 0, 7, []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}},
	}
	for i, sp := range specs {
		if err := checkCronField(f[i], sp.lo, sp.hi, sp.names); err != nil {
			return fmt.Errorf("%s %q: %v", sp.name, f[i], err)
		}
	}
	return nil
}

func checkCronField(s string, lo, hi int, names []string) error {
	val := func(v string) (int, error) {
		for i, n := range names {
			if strings.EqualFold(v, n) {
				return i + lo, nil
			}
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, fmt.Errorf("%q is not a number", v)
		}
		if n < lo || n > hi {
			return 0, fmt.Errorf("%d is out of range %d-%d", n, lo, hi)
		}
		return n, nil
	}
	for _, part := range strings.Split(s, ",") {
		rng, step, hasStep := strings.Cut(part, "/")
		if hasStep {
			n, err := strconv.Atoi(step)
			if err != nil || n < 1 {
				return fmt.Errorf("bad step %q", step)
			}
		}
		if rng == "*" {
			continue
		}
		a, b, isRange := strings.Cut(rng, "-")
		x, err := val(a)
		if err != nil {
			return err
		}
		if isRange {
			y, err := val(b)
			if err != nil {
				return err
			}
			if y < x {
				return fmt.Errorf("range %s runs backwards", rng)
			}
		}
	}
	return nil
}
