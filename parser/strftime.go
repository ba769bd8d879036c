package parser

import (
	"fmt"
	"time"
)

// strftime is a compiled strftime(3) layout (Apache's %{format}t, PHP-FPM's
// %{format}t), read back without the C library.
type strftime struct {
	steps []strfStep
}

type strfStep struct {
	conv byte   // 0 for a literal
	lit  string // literal text when conv == 0
}

// compileStrftime checks a layout and returns its steps.
func compileStrftime(layout string) (*strftime, error) {
	var f strftime
	for i := 0; i < len(layout); i++ {
		c := layout[i]
		if c != '%' {
			j := i
			for j < len(layout) && layout[j] != '%' {
				j++
			}
			f.steps = append(f.steps, strfStep{lit: layout[i:j]})
			i = j - 1
			continue
		}
		i++
		if i >= len(layout) {
			return nil, fmt.Errorf("strftime %q: lone %% at the end", layout)
		}
		switch c := layout[i]; c {
		case '%':
			f.steps = append(f.steps, strfStep{lit: "%"})
		case 'T':
			f.steps = append(f.steps, strfStep{conv: 'H'}, strfStep{lit: ":"}, strfStep{conv: 'M'}, strfStep{lit: ":"}, strfStep{conv: 'S'})
		case 'R':
			f.steps = append(f.steps, strfStep{conv: 'H'}, strfStep{lit: ":"}, strfStep{conv: 'M'})
		case 'F':
			f.steps = append(f.steps, strfStep{conv: 'Y'}, strfStep{lit: "-"}, strfStep{conv: 'm'}, strfStep{lit: "-"}, strfStep{conv: 'd'})
		case 'D':
			f.steps = append(f.steps, strfStep{conv: 'm'}, strfStep{lit: "/"}, strfStep{conv: 'd'}, strfStep{lit: "/"}, strfStep{conv: 'y'})
		case 'd', 'e', 'b', 'h', 'B', 'm', 'Y', 'y', 'H', 'I', 'M', 'S', 'z', 'Z', 'a', 'A', 's', 'p', 'j', 'u', 'w', 'n', 't':
			f.steps = append(f.steps, strfStep{conv: c})
		default:
			return nil, fmt.Errorf("strftime %q: unsupported conversion %%%c", layout, c)
		}
	}
	return &f, nil
}

// hasZone reports whether the layout carries a UTC offset or is an epoch.
func (f *strftime) hasZone() bool {
	for _, s := range f.steps {
		if s.conv == 'z' || s.conv == 's' {
			return true
		}
	}
	return false
}

// num reads up to max digits (at least one), skipping one leading blank.
func num(s string, i, max int) (int, int, bool) {
	if i < len(s) && s[i] == ' ' {
		i++
	}
	v, j := 0, i
	for j < len(s) && j-i < max && s[j]-'0' <= 9 {
		v = v*10 + int(s[j]-'0')
		j++
	}
	return v, j, j > i
}

func letters(s string, i int) int {
	for i < len(s) && (s[i]|0x20) >= 'a' && (s[i]|0x20) <= 'z' {
		i++
	}
	return i
}

// parse reads a time written with the layout.
func (f *strftime) parse(r *timeReader, s string) (time.Time, bool) {
	s = trimSpace(s)
	y, mo, d, h, mi, sec, ns := 1970, 1, 1, 0, 0, 0, 0
	off, hasZone, pm, twelve := 0, false, false, false
	i := 0
	var ok bool
	for _, st := range f.steps {
		if st.conv == 0 {
			if len(s)-i < len(st.lit) || s[i:i+len(st.lit)] != st.lit {
				return time.Time{}, false
			}
			i += len(st.lit)
			continue
		}
		switch st.conv {
		case 'd', 'e':
			d, i, ok = num(s, i, 2)
		case 'm':
			mo, i, ok = num(s, i, 2)
		case 'Y':
			y, i, ok = num(s, i, 4)
		case 'y':
			y, i, ok = num(s, i, 2)
			if y < 69 {
				y += 2000
			} else {
				y += 1900
			}
		case 'H':
			h, i, ok = num(s, i, 2)
		case 'I':
			h, i, ok = num(s, i, 2)
			twelve = true
		case 'M':
			mi, i, ok = num(s, i, 2)
		case 'S':
			sec, i, ok = num(s, i, 2)
			if ok {
				ns, i = fraction(s, i)
			}
		case 'j', 'u', 'w':
			_, i, ok = num(s, i, 3)
		case 'b', 'h', 'B':
			j := letters(s, i)
			mo = monthIndex(s[i:j])
			i, ok = j, mo != 0
		case 'a', 'A', 'Z':
			j := letters(s, i)
			if st.conv == 'Z' && (s[i:j] == "UTC" || s[i:j] == "GMT") {
				hasZone, off = true, 0
			}
			i, ok = j, j > i
		case 'p':
			j := letters(s, i)
			pm = j-i == 2 && (s[i]|0x20) == 'p'
			i, ok = j, j-i == 2
		case 'z':
			var bad bool
			off, i, hasZone, bad = zoneOffset(s, i)
			ok = hasZone && !bad
		case 's':
			j := i
			for j < len(s) && s[j]-'0' <= 9 {
				j++
			}
			t, good := r.epoch(s[i:j])
			if !good {
				return time.Time{}, false
			}
			i = j
			var m time.Month
			y, m, d = t.Date()
			mo = int(m)
			h, mi, sec = t.Clock()
			ns = t.Nanosecond()
			off, hasZone, ok = 0, true, true
			if _, o := t.Zone(); o != 0 {
				off = o
			}
		case 'n', 't':
			for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
				i++
			}
			ok = true
		}
		if !ok {
			return time.Time{}, false
		}
	}
	if i != len(s) {
		return time.Time{}, false
	}
	if twelve {
		if h == 12 {
			h = 0
		}
		if pm {
			h += 12
		}
	}
	return r.date(y, mo, d, h, mi, sec, ns, off, hasZone)
}
