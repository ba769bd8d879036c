package signatures

import (
	"embed"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

//go:embed families/*.yaml
var builtin embed.FS

// Family is one family file: a named set of patterns.
type Family struct {
	Name     string
	File     string // where it was read from ("families/secrets.yaml" for a built-in one)
	Patterns []*Pattern
}

// Pattern is one signature: a regular expression over some fields of an
// entry, with the literals one of which every match contains.
type Pattern struct {
	Family string
	Name   string
	ID     string // "family/name", as a ban's reason names it
	Fields []Field
	Expr   string
	// Literals are the pattern's required literals in lower case: every
	// match of Expr contains one of them, ignoring ASCII case. Declared
	// (`literal:`) or extracted from Expr's syntax tree.
	Literals []string
	// Declared says the literals were declared (`literal:`), not
	// extracted: then a match of Expr may lack them (a mixed encoding the
	// declaration left out), and the Set misses it.
	Declared bool
	// Match are full combined log lines the pattern must match; Clean are
	// request targets ("/path?query") or full combined log lines it must
	// not match.
	Match, Clean []string
	File         string
	Line         int

	re *regexp.Regexp
}

// Field is a part of an entry a pattern looks at.
type Field uint8

// The fields a pattern may look at. FieldRequest is the request line
// without the protocol: "METHOD PATH?QUERY" (or the request as logged
// when it is not one a parser could split, such as a bare
// "${jndi:...}").
const (
	FieldPath Field = iota
	FieldQuery
	FieldRequest
	FieldUserAgent
	FieldReferer
	numFields
)

var fieldNames = [numFields]string{"path", "query", "request", "user_agent", "referer"}

// String returns the field's name in a family file.
func (f Field) String() string {
	if f < numFields {
		return fieldNames[f]
	}
	return "Field(" + strconv.Itoa(int(f)) + ")"
}

// Error is one problem in a family file: its file, line and the path of
// the key ("patterns[3].pattern").
type Error struct {
	File string
	Line int
	Path string
	Msg  string
}

func (e *Error) Error() string {
	s := e.File
	if e.Line > 0 {
		s += ":" + strconv.Itoa(e.Line)
	}
	if e.Path != "" {
		s += ": " + e.Path
	}
	return s + ": " + e.Msg
}

// Builtin returns the names of the families built into the binary, sorted.
func Builtin() []string {
	ents, _ := builtin.ReadDir("families")
	var out []string
	for _, e := range ents {
		if name, ok := strings.CutSuffix(e.Name(), ".yaml"); ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// ErrUnknownFamily is returned (wrapped) by Load for a name that is no
// built-in family.
var ErrUnknownFamily = errors.New("unknown signature family")

// Load reads the built-in family name.
func Load(name string) (*Family, error) {
	file := "families/" + name + ".yaml"
	data, err := builtin.ReadFile(file)
	if err != nil || strings.ContainsAny(name, "/.") {
		return nil, fmt.Errorf("%w %q", ErrUnknownFamily, name)
	}
	return Parse(file, data)
}

// MinLiteral is the shortest required literal extracted from a pattern;
// a pattern whose best literal is shorter must declare one (`literal:`),
// since a short literal would make its regular expression run on most
// lines.
const MinLiteral = 3

// Parse reads a family file. Every problem is returned at once, as an
// errors.Join of *Error naming the file, the line and the key.
func Parse(file string, data []byte) (*Family, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, &Error{File: file, Msg: err.Error()}
	}
	d := &fdecoder{file: file}
	f := &Family{File: file}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, &Error{File: file, Msg: "want a mapping with family and patterns"}
	}
	root := doc.Content[0]
	var patterns *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		switch k.Value {
		case "family":
			f.Name = d.str(v, "family")
			if f.Name != "" && !nameRE.MatchString(f.Name) {
				d.errorf(v, "family", "%q: a name is lower-case letters, digits, '_' and '-'", f.Name)
			}
		case "patterns":
			patterns = v
		default:
			d.errorf(k, k.Value, "unknown key (want family, patterns)")
		}
	}
	if f.Name == "" {
		d.errorf(root, "family", "family (its name) is required")
	}
	if patterns == nil || patterns.Kind != yaml.SequenceNode || len(patterns.Content) == 0 {
		d.errorf(root, "patterns", "at least one pattern is required")
	} else {
		names := map[string]int{}
		for i, n := range patterns.Content {
			path := "patterns[" + strconv.Itoa(i) + "]"
			p := d.pattern(n, path)
			if p == nil {
				continue
			}
			p.Family = f.Name
			p.ID = f.Name + "/" + p.Name
			if first, dup := names[p.Name]; dup {
				d.errorf(n, path+".name", "duplicate name %q (first at line %d)", p.Name, first)
				continue
			}
			names[p.Name] = p.Line
			f.Patterns = append(f.Patterns, p)
		}
	}
	if len(d.errs) > 0 {
		return nil, errors.Join(d.errs...)
	}
	return f, nil
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

type fdecoder struct {
	file string
	errs []error
}

func (d *fdecoder) errorf(n *yaml.Node, path, format string, args ...any) {
	d.errs = append(d.errs, &Error{File: d.file, Line: n.Line, Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (d *fdecoder) str(n *yaml.Node, path string) string {
	if n.Kind != yaml.ScalarNode {
		d.errorf(n, path, "want a string")
		return ""
	}
	return n.Value
}

func (d *fdecoder) strs(n *yaml.Node, path string) []string {
	if n.Kind == yaml.ScalarNode {
		return []string{n.Value}
	}
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, path, "want a string or a list of strings")
		return nil
	}
	var out []string
	for i, it := range n.Content {
		out = append(out, d.str(it, path+"["+strconv.Itoa(i)+"]"))
	}
	return out
}

var patternKeys = []string{"name", "fields", "pattern", "literal", "match", "clean"}

func (d *fdecoder) pattern(n *yaml.Node, path string) *Pattern {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "want a mapping with %s", strings.Join(patternKeys, ", "))
		return nil
	}
	p := &Pattern{File: d.file, Line: n.Line}
	var literal []string
	var exprNode *yaml.Node
	nerr := len(d.errs)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		kp := path + "." + k.Value
		switch k.Value {
		case "name":
			p.Name = d.str(v, kp)
			if p.Name != "" && !nameRE.MatchString(p.Name) {
				d.errorf(v, kp, "%q: a name is lower-case letters, digits, '_' and '-'", p.Name)
			}
		case "fields":
			for j, s := range d.strs(v, kp) {
				i := slices.Index(fieldNames[:], s)
				if i < 0 {
					d.errorf(v, kp+"["+strconv.Itoa(j)+"]", "unknown field %q (want %s)", s, strings.Join(fieldNames[:], ", "))
					continue
				}
				if !slices.Contains(p.Fields, Field(i)) {
					p.Fields = append(p.Fields, Field(i))
				}
			}
		case "pattern":
			exprNode = v
			p.Expr = d.str(v, kp)
		case "literal":
			literal = d.strs(v, kp)
			for j, l := range literal {
				if len(l) == 0 {
					d.errorf(v, kp+"["+strconv.Itoa(j)+"]", "empty literal")
				}
			}
		case "match":
			p.Match = d.strs(v, kp)
		case "clean":
			p.Clean = d.strs(v, kp)
		default:
			d.errorf(k, kp, "unknown key (want %s)", strings.Join(patternKeys, ", "))
		}
	}
	switch {
	case p.Name == "":
		d.errorf(n, path+".name", "name is required")
	case len(p.Fields) == 0:
		d.errorf(n, path+".fields", "fields are required (%s)", strings.Join(fieldNames[:], ", "))
	case exprNode == nil || p.Expr == "":
		d.errorf(n, path+".pattern", "pattern is required")
	case len(p.Match) == 0:
		d.errorf(n, path+".match", "at least one log line the pattern must match is required")
	case len(p.Clean) == 0:
		d.errorf(n, path+".clean", "at least one real path the pattern must not match is required")
	}
	if exprNode != nil && p.Expr != "" {
		re, err := regexp.Compile(p.Expr)
		if err != nil {
			d.errorf(exprNode, path+".pattern", "%q: bad regular expression: %v", p.Expr, err)
		} else {
			p.re = re
			if literal != nil {
				p.Declared = true
				for _, l := range literal {
					p.Literals = append(p.Literals, lower(l))
				}
			} else if p.Literals = Required(p.Expr); len(p.Literals) == 0 {
				d.errorf(exprNode, path+".pattern", "%q: no required literal of %d bytes or more: declare one with `literal:`", p.Expr, MinLiteral)
			}
		}
	}
	if len(d.errs) > nerr {
		return nil
	}
	return p
}

// lower is ASCII lower case, as the matcher scans.
func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
