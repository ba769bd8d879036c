package parser

import (
	"sync/atomic"
	"time"

	"github.com/logjail/logjail/internal/word"
)

// zoneCache hands out one *time.Location per UTC offset. Offsets in whole
// minutes between -18h and +18h are cached in a fixed array of atomic
// pointers, so a hit neither locks nor allocates; other offsets are built on
// each use (they do not occur in real logs).
type zoneCache struct {
	zones [2*18*60 + 1]atomic.Pointer[time.Location]
}

const maxZoneMinutes = 18 * 60

func (c *zoneCache) get(offsetSec int) *time.Location {
	if offsetSec == 0 {
		return time.UTC
	}
	if offsetSec%60 != 0 || offsetSec > maxZoneMinutes*60 || offsetSec < -maxZoneMinutes*60 {
		return time.FixedZone(ZoneName(offsetSec), offsetSec)
	}
	i := offsetSec/60 + maxZoneMinutes
	if l := c.zones[i].Load(); l != nil {
		return l
	}
	l := time.FixedZone(ZoneName(offsetSec), offsetSec)
	c.zones[i].CompareAndSwap(nil, l)
	return c.zones[i].Load()
}

// ZoneName is the name the parser gives a fixed zone of off seconds east of
// UTC: "+0100", "-0530". Code that rebuilds a parsed time's zone (a restored
// checkpoint) uses it, so that times print the same.
func ZoneName(off int) string {
	sign := byte('+')
	if off < 0 {
		sign, off = '-', -off
	}
	h, m := off/3600, off%3600/60
	return string([]byte{sign, byte('0' + h/10), byte('0' + h%10), byte('0' + m/10), byte('0' + m%10)})
}

// timeReader holds what a time parser needs besides the text.
type timeReader struct {
	zones *zoneCache
	loc   *time.Location // for zone-less times
	clfs  *clfCache      // nil: no cache
}

// clfCache remembers the last usual CLF times read ("02/Jan/2006:15:04:05
// -0700", all 26 bytes of the text and the instant and zone it is), one a
// slot, a slot for each value of the last digit of the seconds masked to
// 3 bits (seconds 00, 08 and 10 share one): a log's lines come
// in runs of the same second, and two goroutines reading two blocks of one
// log a few seconds apart mostly use different slots. Each slot is a
// sequence lock of atomics: a reader takes a slot's time only if its
// sequence number was even and the same before and after it read the
// text; a writer that finds the slot busy (odd) or changed leaves it. It
// neither locks nor allocates; a miss reads the text (clfFixed) and fills
// the slot.
type clfCache struct {
	slots [8]clfSlot
}

type clfSlot struct {
	seq        atomic.Uint64 // odd while a writer fills the slot
	k0, k1, k2 atomic.Uint64 // the text's bytes 0-7, 8-15, 16-23
	k3         atomic.Uint64 // its bytes 24-25; 0: empty
	unix       atomic.Int64  // the instant, in seconds
	off        atomic.Int64  // the zone, in seconds east of UTC
	_          [8]byte       // a cache line a slot
}

// get returns the time of the 26-byte text s if a slot holds it.
func (c *clfCache) get(s string, zones *zoneCache) (time.Time, bool) {
	sl := &c.slots[(s[19]-'0')&7]
	q := sl.seq.Load()
	if q&1 != 0 || sl.k3.Load() != uint64(s[24])|uint64(s[25])<<8|1<<16 || sl.k2.Load() != word.LE(s, 16) ||
		sl.k1.Load() != word.LE(s, 8) || sl.k0.Load() != word.LE(s, 0) {
		return time.Time{}, false
	}
	unix, off := sl.unix.Load(), sl.off.Load()
	if sl.seq.Load() != q {
		return time.Time{}, false
	}
	return time.Unix(unix, 0).In(zones.get(int(off))), true
}

// put stores the time of the 26-byte text s, unless a writer holds its slot.
func (c *clfCache) put(s string, unix int64, off int) {
	sl := &c.slots[(s[19]-'0')&7]
	q := sl.seq.Load()
	if q&1 != 0 || !sl.seq.CompareAndSwap(q, q+1) {
		return
	}
	sl.k0.Store(word.LE(s, 0))
	sl.k1.Store(word.LE(s, 8))
	sl.k2.Store(word.LE(s, 16))
	sl.k3.Store(uint64(s[24]) | uint64(s[25])<<8 | 1<<16)
	sl.unix.Store(unix)
	sl.off.Store(int64(off))
	sl.seq.Store(q + 2)
}

// monthIndex returns 1-12 for an English month abbreviation (any case), 0 otherwise.
func monthIndex(s string) int {
	if len(s) < 3 {
		return 0
	}
	a, b, c := s[0]|0x20, s[1]|0x20, s[2]|0x20
	switch a {
	case 'j':
		if b == 'a' && c == 'n' {
			return 1
		}
		if b == 'u' && c == 'n' {
			return 6
		}
		if b == 'u' && c == 'l' {
			return 7
		}
	case 'f':
		if b == 'e' && c == 'b' {
			return 2
		}
	case 'm':
		if b == 'a' && c == 'r' {
			return 3
		}
		if b == 'a' && c == 'y' {
			return 5
		}
	case 'a':
		if b == 'p' && c == 'r' {
			return 4
		}
		if b == 'u' && c == 'g' {
			return 8
		}
	case 's':
		if b == 'e' && c == 'p' {
			return 9
		}
	case 'o':
		if b == 'c' && c == 't' {
			return 10
		}
	case 'n':
		if b == 'o' && c == 'v' {
			return 11
		}
	case 'd':
		if b == 'e' && c == 'c' {
			return 12
		}
	}
	return 0
}

// digits reads exactly n decimal digits at s[i:], returning ok=false otherwise.
func digits(s string, i, n int) (int, bool) {
	if i+n > len(s) {
		return 0, false
	}
	v := 0
	for k := i; k < i+n; k++ {
		c := s[k] - '0'
		if c > 9 {
			return 0, false
		}
		v = v*10 + int(c)
	}
	return v, true
}

// fraction reads ".ddd" (or ",ddd") at s[i:], returning nanoseconds and the index after it.
func fraction(s string, i int) (int, int) {
	if i >= len(s) || (s[i] != '.' && s[i] != ',') || i+1 >= len(s) || s[i+1]-'0' > 9 {
		return 0, i
	}
	i++
	ns, scale := 0, 100000000
	for ; i < len(s) && s[i]-'0' <= 9; i++ {
		ns += int(s[i]-'0') * scale
		scale /= 10
	}
	return ns, i
}

// zoneOffset reads "Z", "+hh:mm", "+hhmm" or "+hh" at s[i:]. ok is false when
// there is no zone (end of text or a space).
func zoneOffset(s string, i int) (off int, next int, ok bool, bad bool) {
	if i >= len(s) {
		return 0, i, false, false
	}
	switch s[i] {
	case 'Z', 'z':
		return 0, i + 1, true, false
	case '+', '-':
	default:
		return 0, i, false, false
	}
	sign := 1
	if s[i] == '-' {
		sign = -1
	}
	h, okh := digits(s, i+1, 2)
	if !okh {
		return 0, i, false, true
	}
	j := i + 3
	m := 0
	if j < len(s) && s[j] == ':' {
		j++
	}
	if mm, okm := digits(s, j, 2); okm {
		m = mm
		j += 2
	}
	if h > 23 || m > 59 {
		return 0, i, false, true
	}
	return sign * (h*3600 + m*60), j, true, false
}

// date builds a time after checking the ranges time.Date would normalise.
func (r *timeReader) date(y, mo, d, h, mi, sec, ns int, off int, hasZone bool) (time.Time, bool) {
	if mo < 1 || mo > 12 || d < 1 || d > 31 || h > 24 || mi > 59 || sec > 60 || y < 1970 || y > 9999 {
		return time.Time{}, false
	}
	if d > daysIn(mo, y) {
		return time.Time{}, false
	}
	if !hasZone {
		return time.Date(y, time.Month(mo), d, h, mi, sec, ns, r.loc), true
	}
	// A fixed offset: the instant is plain arithmetic, cheaper than
	// time.Date's general path, and normalises the same way (second 60,
	// hour 24).
	unix := daysFromCivil(y, mo, d)*86400 + int64(h*3600+mi*60+sec-off)
	return time.Unix(unix, int64(ns)).In(r.zones.get(off)), true
}

// daysFromCivil is the number of days from 1970-01-01 to y-m-d (proleptic
// Gregorian; y ≥ 0), after Howard Hinnant's days_from_civil.
func daysFromCivil(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	yoe := y - era*400
	doy := (153*((m+9)%12)+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era*146097 + doe - 719468)
}

func daysIn(m, y int) int {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// clf reads "02/Jan/2006:15:04:05 -0700", with an optional fraction after the
// seconds and an optional zone (zone-less times are read in r.loc). Leading and
// trailing blanks are ignored.
func (r *timeReader) clf(s string) (time.Time, bool) {
	s = trimSpace(s)
	if len(s) == 26 {
		if t, ok, done := r.clfFixed(s); done {
			return t, ok
		}
	}
	if len(s) < 20 || s[2] != '/' || s[6] != '/' || s[11] != ':' || s[14] != ':' || s[17] != ':' {
		return time.Time{}, false
	}
	d, ok1 := digits(s, 0, 2)
	mo := monthIndex(s[3:6])
	y, ok2 := digits(s, 7, 4)
	h, ok3 := digits(s, 12, 2)
	mi, ok4 := digits(s, 15, 2)
	sec, ok5 := digits(s, 18, 2)
	if !(ok1 && ok2 && ok3 && ok4 && ok5) || mo == 0 {
		return time.Time{}, false
	}
	return r.afterSeconds(s, 20, y, mo, d, h, mi, sec)
}

// clfFixed reads the usual "02/Jan/2006:15:04:05 -0700" (26 bytes, the
// zone's four digits) in one pass, as clf's general path reads it; done
// is false for any other shape of 26 bytes, which that path reads.
func (r *timeReader) clfFixed(s string) (t time.Time, ok, done bool) {
	if s[2] != '/' || s[6] != '/' || s[11] != ':' || s[14] != ':' || s[17] != ':' || s[20] != ' ' || (s[21] != '+' && s[21] != '-') {
		return time.Time{}, false, false
	}
	if r.clfs != nil {
		// A text the cache holds was read whole and was a time.
		if t, ok := r.clfs.get(s, r.zones); ok {
			return t, true, true
		}
	}
	d0, d1, y0, y1, y2, y3 := s[0]-'0', s[1]-'0', s[7]-'0', s[8]-'0', s[9]-'0', s[10]-'0'
	h0, h1, m0, m1, s0, s1 := s[12]-'0', s[13]-'0', s[15]-'0', s[16]-'0', s[18]-'0', s[19]-'0'
	z0, z1, z2, z3 := s[22]-'0', s[23]-'0', s[24]-'0', s[25]-'0'
	if d0 > 9 || d1 > 9 || y0 > 9 || y1 > 9 || y2 > 9 || y3 > 9 || h0 > 9 || h1 > 9 || m0 > 9 || m1 > 9 || s0 > 9 || s1 > 9 ||
		z0 > 9 || z1 > 9 || z2 > 9 || z3 > 9 {
		return time.Time{}, false, false
	}
	mo := monthIndex(s[3:6])
	if mo == 0 {
		return time.Time{}, false, true
	}
	zh, zm := int(z0)*10+int(z1), int(z2)*10+int(z3)
	if zh > 23 || zm > 59 {
		return time.Time{}, false, true
	}
	off := zh*3600 + zm*60
	if s[21] == '-' {
		off = -off
	}
	t, ok = r.date(int(y0)*1000+int(y1)*100+int(y2)*10+int(y3), mo, int(d0)*10+int(d1),
		int(h0)*10+int(h1), int(m0)*10+int(m1), int(s0)*10+int(s1), 0, off, true)
	if ok && r.clfs != nil {
		r.clfs.put(s, t.Unix(), off)
	}
	return t, ok, true
}

// iso reads "2006-01-02T15:04:05[.frac][Z|±hh:mm|±hhmm]" (also with a space
// or no separator-less forms other than 'T'/' ' between date and time).
func (r *timeReader) iso(s string) (time.Time, bool) {
	s = trimSpace(s)
	if len(s) < 19 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != ' ' && s[10] != 't') || s[13] != ':' || s[16] != ':' {
		return time.Time{}, false
	}
	y, ok1 := digits(s, 0, 4)
	mo, ok2 := digits(s, 5, 2)
	d, ok3 := digits(s, 8, 2)
	h, ok4 := digits(s, 11, 2)
	mi, ok5 := digits(s, 14, 2)
	sec, ok6 := digits(s, 17, 2)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) {
		return time.Time{}, false
	}
	return r.afterSeconds(s, 19, y, mo, d, h, mi, sec)
}

// afterSeconds reads what may follow the seconds at s[i:] in clf and iso
// times (an optional fraction, a blank, an optional zone, then the end of s)
// and returns the time.
func (r *timeReader) afterSeconds(s string, i, y, mo, d, h, mi, sec int) (time.Time, bool) {
	ns, i := fraction(s, i)
	if i < len(s) && s[i] == ' ' {
		i++
	}
	off, i, hasZone, bad := zoneOffset(s, i)
	if bad || i != len(s) {
		return time.Time{}, false
	}
	return r.date(y, mo, d, h, mi, sec, ns, off, hasZone)
}

// epoch reads seconds since 1970 with an optional fraction ("1700000000.123",
// nginx's $msec). Integers too large to be seconds are taken as milli-, micro-
// or nanoseconds. The time is shown in r.loc.
func (r *timeReader) epoch(s string) (time.Time, bool) {
	s = trimSpace(s)
	if s == "" {
		return time.Time{}, false
	}
	var sec int64
	i := 0
	for ; i < len(s) && s[i]-'0' <= 9; i++ {
		if i > 19 {
			return time.Time{}, false
		}
		sec = sec*10 + int64(s[i]-'0')
	}
	if i == 0 {
		return time.Time{}, false
	}
	ns, j := fraction(s, i)
	if j != len(s) {
		return time.Time{}, false
	}
	if j == i { // integer: guess the unit
		switch {
		case sec >= 1e17:
			return time.Unix(0, sec).In(r.loc), true
		case sec >= 1e14:
			return time.UnixMicro(sec).In(r.loc), true
		case sec >= 1e11:
			return time.UnixMilli(sec).In(r.loc), true
		}
	}
	if sec == 0 && ns == 0 {
		return time.Time{}, false
	}
	return time.Unix(sec, int64(ns)).In(r.loc), true
}

func trimSpace(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}
