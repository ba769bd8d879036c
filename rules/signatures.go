package rules

import (
	"errors"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/logjail/logjail/signatures"
)

// signatures compiles a rule's (or a range's) `signatures:` list: names of
// built-in families and `file:PATH` family files (relative to the
// configuration's directory), each read, validated and checked against
// its own test lines (signatures.Check) at load. Problems in a family
// file name that file, its line and the key in it.
func (b *builder) signatures(f field) *signatures.Set {
	list := b.strs(f.val, f.path)
	if len(list) == 0 && !b.hasErrorAt(f.path) {
		b.errorf(f.val, f.path, "empty: name at least one family (%s) or file:PATH", strings.Join(signatures.Builtin(), ", "))
		return nil
	}
	var fams []*signatures.Family
	seen := map[string]bool{}
	ok := true
	for j, item := range list {
		p := index(f.path, j)
		var fam *signatures.Family
		if name, isFile := strings.CutPrefix(item, "file:"); isFile {
			fam = b.familyFile(f.val, p, item, strings.TrimSpace(name))
		} else {
			var err error
			if fam, err = signatures.Load(item); err != nil {
				if errors.Is(err, signatures.ErrUnknownFamily) {
					b.errorf(f.val, p, "unknown signature family %q%s: want one of %s, or file:PATH", item, suggest(item, signatures.Builtin()), strings.Join(signatures.Builtin(), ", "))
				} else {
					b.errorf(f.val, p, "%v", err)
				}
			}
		}
		if fam == nil {
			ok = false
			continue
		}
		if seen[fam.Name] {
			b.errorf(f.val, p, "family %q is named twice", fam.Name)
			continue
		}
		seen[fam.Name] = true
		fams = append(fams, fam)
	}
	if !ok || len(fams) == 0 {
		return nil
	}
	set, err := signatures.Compile(fams...)
	if err != nil {
		b.errorf(f.val, f.path, "%v", err)
		return nil
	}
	return set
}

// familyFile reads a family file named by `file:PATH`.
func (b *builder) familyFile(n *yaml.Node, path, item, name string) *signatures.Family {
	name, data := b.readFile(n, path, item, name) // a change reloads, as a list's does
	if name == "" {
		return nil
	}
	fam, err := signatures.Parse(name, data)
	if err == nil {
		err = signatures.Check(fam)
	}
	if err != nil {
		for _, e := range unjoin(err) {
			var se *signatures.Error
			if errors.As(e, &se) {
				b.errs = append(b.errs, &Error{File: se.File, Line: se.Line, Path: path, Msg: se.Path + ": " + se.Msg})
			} else {
				b.errorf(n, path, "%q: %v", item, e)
			}
		}
		return nil
	}
	return fam
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
