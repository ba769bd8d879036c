package actions

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/logjail/logjail/rules"
)

// Options reads one action's options (the YAML keys beside `type:`). Every
// getter marks its key as known; Err reports the errors and every key no
// getter asked for, each a *rules.Error naming the configuration's file,
// the line of the option's value (rules.Action.Lines; the action's line
// for an option it does not list, such as a default) and the option:
// `logjail.yaml:88: actions[1].reload: want a list of strings`.
type Options struct {
	file  string
	line  int
	lines map[string]int
	index int
	typ   string
	m     map[string]any
	used  map[string]bool
	errs  []error
}

func newOptions(file string, index int, a rules.Action) *Options {
	return &Options{file: file, line: a.Line, lines: a.Lines, index: index, typ: a.Type, m: a.Options, used: map[string]bool{}}
}

// NewOptions makes Options for action index of a configuration file from
// its decoded YAML keys (tests, and builders that nest options).
func NewOptions(file string, index int, typ string, m map[string]any) *Options {
	return newOptions(file, index, rules.Action{Type: typ, Options: m})
}

// Type is the action's type.
func (o *Options) Type() string { return o.typ }

// Index is the action's position in the configuration's actions list.
func (o *Options) Index() int { return o.index }

func (o *Options) path(key string) string { return fmt.Sprintf("actions[%d].%s", o.index, key) }

// lineOf is the line of key's value, else the action's.
func (o *Options) lineOf(key string) int {
	if l, ok := o.lines[key]; ok {
		return l
	}
	return o.line
}

// errorf records an error about key.
func (o *Options) errorf(key, format string, a ...any) {
	o.errs = append(o.errs, fmtErr(o.file, o.lineOf(key), o.path(key), format, a...))
}

// Errorf records an error about the option key; Err returns it.
func (o *Options) Errorf(key, format string, a ...any) { o.errorf(key, format, a...) }

// Has reports whether the option is set (and marks it known).
func (o *Options) Has(key string) bool {
	o.used[key] = true
	_, ok := o.m[key]
	return ok
}

func (o *Options) get(key string) (any, bool) {
	o.used[key] = true
	v, ok := o.m[key]
	return v, ok && v != nil
}

// String is a string option, def when absent.
func (o *Options) String(key, def string) string {
	v, ok := o.get(key)
	if !ok {
		return def
	}
	s, ok := v.(string)
	if !ok {
		o.errorf(key, "want a string, not %v", v)
		return def
	}
	return s
}

// OneOf is a string option that must be one of choices, in any case
// ("drop" or "DROP"); it returns the choice as listed, def when absent.
func (o *Options) OneOf(key, def string, choices ...string) string {
	s := o.String(key, def)
	for _, c := range choices {
		if strings.EqualFold(s, c) {
			return c
		}
	}
	o.errorf(key, "%q: want %s", s, strings.Join(choices, ", "))
	return def
}

// Path is a file or directory option: required when def is "", made
// absolute against the configuration's directory.
func (o *Options) Path(key, def string) string {
	s := o.String(key, def)
	if s == "" {
		if def == "" && !o.hasErr(key) {
			o.errorf(key, "is required")
		}
		return ""
	}
	if strings.ContainsRune(s, 0) {
		o.errorf(key, "%q: not a path", s)
		return ""
	}
	if !filepath.IsAbs(s) && o.file != "" {
		s = filepath.Join(filepath.Dir(o.file), s)
	}
	return filepath.Clean(s)
}

func (o *Options) hasErr(key string) bool {
	p := o.path(key) + ":"
	for _, e := range o.errs {
		if strings.Contains(e.Error(), p) {
			return true
		}
	}
	return false
}

// Argv is a command option: a non-empty list of strings, run without a
// shell. nil when absent.
func (o *Options) Argv(key string) []string {
	v, ok := o.get(key)
	if !ok {
		return nil
	}
	l, ok := v.([]any)
	if !ok || len(l) == 0 {
		o.errorf(key, "want a command as a list of strings, e.g. [nginx, -s, reload] (it is run without a shell)")
		return nil
	}
	out := make([]string, 0, len(l))
	for _, x := range l {
		s, ok := x.(string)
		if !ok {
			s = fmt.Sprint(x)
			if _, num := x.(int); !num {
				o.errorf(key, "want a list of strings, not %v", x)
				return nil
			}
		}
		out = append(out, s)
	}
	if out[0] == "" {
		o.errorf(key, "the command is empty")
		return nil
	}
	return out
}

// Strings is a list-of-strings option (a single string is a list of one).
func (o *Options) Strings(key string) []string {
	v, ok := o.get(key)
	if !ok {
		return nil
	}
	if s, ok := v.(string); ok {
		return []string{s}
	}
	l, ok := v.([]any)
	if !ok {
		o.errorf(key, "want a list of strings, not %v", v)
		return nil
	}
	out := make([]string, 0, len(l))
	for _, x := range l {
		s, ok := x.(string)
		if !ok {
			o.errorf(key, "want a list of strings, not %v", x)
			return nil
		}
		out = append(out, s)
	}
	return out
}

// Bool is a boolean option.
func (o *Options) Bool(key string, def bool) bool {
	v, ok := o.get(key)
	if !ok {
		return def
	}
	b, ok := v.(bool)
	if !ok {
		o.errorf(key, "want true or false, not %v", v)
		return def
	}
	return b
}

// Int is an integer option within [lo, hi].
func (o *Options) Int(key string, def, lo, hi int) int {
	v, ok := o.get(key)
	if !ok {
		return def
	}
	n, ok := v.(int)
	if !ok || n < lo || n > hi {
		o.errorf(key, "want a whole number from %d to %d, not %v", lo, hi, v)
		return def
	}
	return n
}

// Duration is a duration option ("2s", "500ms", "1d") within [lo, hi].
func (o *Options) Duration(key string, def, lo, hi time.Duration) time.Duration {
	v, ok := o.get(key)
	if !ok {
		return def
	}
	s, ok := v.(string)
	if !ok {
		o.errorf(key, "want a duration such as 2s, not %v", v)
		return def
	}
	d, err := rules.ParseDuration(s)
	if err == nil && d == 0 && s != "0" && s != "0s" {
		err = fmt.Errorf("not a duration")
	}
	if err != nil {
		if d2, err2 := time.ParseDuration(s); err2 == nil {
			d, err = d2, nil
		}
	}
	if err != nil {
		o.errorf(key, "%q: want a duration such as 2s", s)
		return def
	}
	if d < lo || d > hi {
		o.errorf(key, "%s: want %s to %s", s, lo, hi)
		return def
	}
	return d
}

// Ports is a list of TCP/UDP ports (1-65535).
func (o *Options) Ports(key string) []uint16 {
	v, ok := o.get(key)
	if !ok {
		return nil
	}
	l, ok := v.([]any)
	if !ok {
		l = []any{v}
	}
	var out []uint16
	for _, x := range l {
		n, ok := x.(int)
		if !ok {
			if s, isStr := x.(string); isStr {
				var err error
				n, err = strconv.Atoi(s)
				ok = err == nil
			}
		}
		if !ok || n < 1 || n > 65535 {
			o.errorf(key, "want ports from 1 to 65535, not %v", x)
			return nil
		}
		out = append(out, uint16(n))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Prefixes is a list of CIDRs or addresses.
func (o *Options) Prefixes(key string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range o.Strings(key) {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, unmapPrefix(p))
		} else if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
			a = a.Unmap()
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		} else {
			o.errorf(key, "%q: want an address or a CIDR", s)
		}
	}
	return out
}

// kinds reads `on:`: the kinds the action acts on, default [ban].
func (o *Options) kinds() []Kind {
	if !o.Has("on") {
		return []Kind{KindBan}
	}
	var out []Kind
	for _, s := range o.Strings("on") {
		switch Kind(s) {
		case KindBan, KindThrottle:
			if !slices.Contains(out, Kind(s)) {
				out = append(out, Kind(s))
			}
		default:
			o.errorf("on", "%q: want throttle or ban", s)
		}
	}
	if len(out) == 0 && !o.hasErr("on") {
		o.errorf("on", "want at least one of throttle, ban")
		return []Kind{KindBan}
	}
	return out
}

// Err returns the errors recorded and one for each option no getter asked
// for, or nil.
func (o *Options) Err() error {
	var unknown []string
	for k := range o.m {
		if !o.used[k] && k != "name" && k != "on" {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	errs := slices.Clone(o.errs)
	if len(unknown) > 0 {
		var known []string
		for k := range o.used {
			known = append(known, k)
		}
		sort.Strings(known)
		for _, k := range unknown {
			errs = append(errs, fmtErr(o.file, o.lineOf(k), o.path(k), "unknown option of a %s action (it has: %s)", o.typ, strings.Join(append([]string{"type", "name", "on"}, known...), ", ")))
		}
	}
	return joinErrors(errs)
}
