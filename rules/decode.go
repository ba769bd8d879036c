package rules

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Error is one problem in a configuration: the file and line it is on and the
// path of the key in the YAML document ("rules[1].limits[0]").
type Error struct {
	File string // the configuration, or a `file:` list it names
	Line int    // 1-based; 0 when the problem has no line
	Path string // e.g. "rules[1].limits[0]"; empty for the whole file
	Msg  string
}

// Error formats e as `logjail.yaml:12: rules[1].limits[0]: "20 per fortnight": unknown period`.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// decoder walks a yaml.Node tree by hand, so that every value keeps its line
// and every problem is collected rather than the first one returned.
type decoder struct {
	file string
	errs []error
}

func (d *decoder) errorf(n *yaml.Node, path, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	d.errs = append(d.errs, &Error{File: d.file, Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// add records the problems of err, which another package found (an
// errors.Join of *Error, as an ActionChecker returns): each *Error as it
// is, anything else as an *Error of the file at path.
func (d *decoder) add(err error, path string) {
	if err == nil {
		return
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			d.add(e, path)
		}
		return
	}
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{File: d.file, Path: path, Msg: err.Error()}
	}
	d.errs = append(d.errs, e)
}

// err joins the problems in the order of the file: the configuration's by
// line, then those of the lists it names.
func (d *decoder) err() error {
	slices.SortStableFunc(d.errs, func(a, b error) int {
		var ea, eb *Error
		if !errors.As(a, &ea) || !errors.As(b, &eb) {
			return 0
		}
		if ea.File != eb.File {
			switch {
			case ea.File == d.file:
				return -1
			case eb.File == d.file:
				return 1
			}
			return strings.Compare(ea.File, eb.File)
		}
		return ea.Line - eb.Line
	})
	return errors.Join(d.errs...)
}

// resolve follows aliases.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	n = resolve(n)
	return n == nil || n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// field is one key of a mapping and its value.
type field struct {
	key  *yaml.Node
	val  *yaml.Node
	path string
}

// mapping returns the fields of the mapping n in file order, reporting a node
// that is not a mapping, duplicate keys and keys not in known (known == nil
// accepts any key). A null node is an empty mapping.
func (d *decoder) mapping(n *yaml.Node, path string, known ...string) []field {
	n = resolve(n)
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "want a mapping, not %s", describe(n))
		return nil
	}
	var out []field
	seen := make(map[string]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.errorf(k, path, "want a string key, not %s", describe(k))
			continue
		}
		p := join(path, k.Value)
		if known != nil && !contains(known, k.Value) {
			d.errorf(k, p, "unknown key %q%s", k.Value, suggest(k.Value, known))
			continue
		}
		if seen[k.Value] {
			d.errorf(k, p, "duplicate key %q", k.Value)
			continue
		}
		seen[k.Value] = true
		out = append(out, field{key: k, val: v, path: p})
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// suggest names a known key that differs from k by case, '-' for '_' or one edit.
func suggest(k string, known []string) string {
	norm := strings.ReplaceAll(strings.ToLower(k), "-", "_")
	for _, c := range known {
		if c == norm || editDistance1(norm, c) {
			return fmt.Sprintf(" (did you mean %q?)", c)
		}
	}
	return ""
}

// editDistance1 reports whether a and b differ by exactly one insertion,
// deletion, substitution or transposition.
func editDistance1(a, b string) bool {
	if a == b {
		return false
	}
	if len(a) > len(b) {
		a, b = b, a
	}
	if len(b)-len(a) > 1 {
		return false
	}
	i := 0
	for i < len(a) && a[i] == b[i] {
		i++
	}
	if len(a) == len(b) {
		if a[i+1:] == b[i+1:] {
			return true
		}
		return i+1 < len(a) && a[i] == b[i+1] && a[i+1] == b[i] && a[i+2:] == b[i+2:]
	}
	return a[i:] == b[i+1:]
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return strconv.Quote(n.Value)
	}
	return "an empty document"
}

// sequence returns the items of the list n; a null node is an empty list.
func (d *decoder) sequence(n *yaml.Node, path string) []*yaml.Node {
	n = resolve(n)
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, path, "want a list, not %s", describe(n))
		return nil
	}
	return n.Content
}

// scalar returns the text of the scalar n.
func (d *decoder) scalar(n *yaml.Node, path string) (string, bool) {
	n = resolve(n)
	if n == nil || n.Kind != yaml.ScalarNode {
		d.errorf(n, path, "want a value, not %s", describe(n))
		return "", false
	}
	return n.Value, true
}

func (d *decoder) str(n *yaml.Node, path string, dst *string) bool {
	s, ok := d.scalar(n, path)
	if !ok {
		return false
	}
	if isNull(n) {
		d.errorf(n, path, "want a value, not null")
		return false
	}
	*dst = s
	return true
}

// strs reads a list of strings; a single string is a list of one.
func (d *decoder) strs(n *yaml.Node, path string) []string {
	if r := resolve(n); r != nil && r.Kind == yaml.ScalarNode && !isNull(r) {
		return []string{r.Value}
	}
	var out []string
	for i, it := range d.sequence(n, path) {
		var s string
		if d.str(it, index(path, i), &s) {
			out = append(out, s)
		}
	}
	return out
}

func (d *decoder) integer(n *yaml.Node, path string, lo, hi int, dst *int) bool {
	s, ok := d.scalar(n, path)
	if !ok {
		return false
	}
	v, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64)
	if err != nil {
		d.errorf(n, path, "%q: want a whole number", s)
		return false
	}
	if v < int64(lo) || v > int64(hi) {
		if hi == math.MaxInt {
			d.errorf(n, path, "%d: want at least %d", v, lo)
		} else {
			d.errorf(n, path, "%d: want %d to %d", v, lo, hi)
		}
		return false
	}
	*dst = int(v)
	return true
}

func (d *decoder) float(n *yaml.Node, path string, lo float64, dst *float64) bool {
	s, ok := d.scalar(n, path)
	if !ok {
		return false
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		d.errorf(n, path, "%q: want a number", s)
		return false
	}
	if v < lo {
		d.errorf(n, path, "%s: want at least %g", s, lo)
		return false
	}
	*dst = v
	return true
}

func (d *decoder) boolean(n *yaml.Node, path string, dst *bool) bool {
	s, ok := d.scalar(n, path)
	if !ok {
		return false
	}
	switch s {
	case "true", "True", "TRUE", "yes", "on":
		*dst = true
	case "false", "False", "FALSE", "no", "off":
		*dst = false
	default:
		d.errorf(n, path, "%q: want true or false", s)
		return false
	}
	return true
}

// duration reads a duration of at least lo.
func (d *decoder) duration(n *yaml.Node, path string, lo time.Duration, dst *time.Duration) bool {
	s, ok := d.scalar(n, path)
	if !ok {
		return false
	}
	v, err := ParseDuration(s)
	if err != nil {
		d.errorf(n, path, "%v", err)
		return false
	}
	if v < lo {
		d.errorf(n, path, "%q: want at least %s", s, lo)
		return false
	}
	*dst = v
	return true
}

// oneOf reads a string that must be one of choices.
func (d *decoder) oneOf(n *yaml.Node, path string, dst *string, choices ...string) bool {
	var s string
	if !d.str(n, path, &s) {
		return false
	}
	if !contains(choices, s) {
		d.errorf(n, path, "%q: want %s", s, orList(choices))
		return false
	}
	*dst = s
	return true
}

func orList(choices []string) string {
	switch len(choices) {
	case 1:
		return choices[0]
	case 2:
		return choices[0] + " or " + choices[1]
	}
	return strings.Join(choices[:len(choices)-1], ", ") + " or " + choices[len(choices)-1]
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// name reads a source, rule or range name: letters, digits, '_', '.', '-'.
func (d *decoder) name(n *yaml.Node, path string, dst *string) bool {
	var s string
	if !d.str(n, path, &s) {
		return false
	}
	if !nameRE.MatchString(s) {
		d.errorf(n, path, "%q: a name is letters, digits, '_', '.' and '-'", s)
		return false
	}
	*dst = s
	return true
}

// syntaxError turns a YAML syntax error into an *Error with its line.
func syntaxError(file string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, after, ok := strings.Cut(rest, ": "); ok {
			if v, err := strconv.Atoi(num); err == nil {
				line, msg = v, after
			}
		}
	}
	return &Error{File: file, Line: line, Msg: msg}
}
