package rules

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/logjail/logjail/limits"
)

// reservedRuleNames are the rule names logjail's own bans carry: the deny
// list's static bans (rule "deny") and an operator's (rule "operator").
// A rule of the configuration named so would share their key states, their
// rows in the database and the fleet's records, so it is refused.
var reservedRuleNames = []string{"deny", "operator"}

var ruleKeys = []string{"name", "sources", "match", "signatures", "key", "limits", "combine", "throttle", "ban", "log_only", "scope"}

var rangeKeys = []string{"cidrs", "group", "signatures", "key", "limits", "combine", "throttle", "ban", "log_only", "scope"}

var banKeys = []string{"after", "for", "factor", "max", "remember"}

var throttleKeys = []string{"initial_delay", "max_delay", "quiet"}

var keyKinds = []string{"ip", "prefix", "user", "user_agent", "ip+user_agent"}

// rules reads the ordinary rules.
func (b *builder) rules(top field) {
	c := b.c
	lines := map[string]int{}
	for i, n := range b.sequence(top.val, top.path) {
		path := index(top.path, i)
		r := &Rule{Index: len(c.Rules)}
		var body []field
		var nameNode *yaml.Node
		var sources []int
		restricted := false
		fields := b.mapping(n, path, ruleKeys...)
		for _, f := range fields {
			switch f.key.Value {
			case "name":
				nameNode = f.val
				b.name(f.val, f.path, &r.Name)
			case "sources":
				restricted = true
				list := b.strs(f.val, f.path)
				if len(list) == 0 && !b.hasErrorAt(f.path) {
					b.errorf(f.val, f.path, "empty: leave sources out for every source")
				}
				for j, s := range list {
					src := c.Source(s)
					if src == nil {
						b.errorf(f.val, index(f.path, j), "unknown source %q", s)
						continue
					}
					sources = append(sources, src.Index)
				}
			case "match":
				m := b.matcher(f.val, f.path)
				if m != nil {
					for _, mf := range mappingFields(f.val, f.path) {
						if mf.key.Value != "not" {
							b.matchNodes[r.Index] = append(b.matchNodes[r.Index], nodeRef{mf.key, mf.path})
						}
					}
				}
				c.ruleSpecs = growSpecs(c.ruleSpecs, r.Index)
				c.ruleSpecs[r.Index].match = m
			default:
				body = append(body, f)
			}
		}
		if resolve(n) == nil || resolve(n).Kind != yaml.MappingNode {
			continue
		}
		if nameNode == nil {
			b.errorf(n, path+".name", "name is required")
		} else if r.Name != "" {
			if slices.Contains(reservedRuleNames, r.Name) {
				b.errorf(nameNode, path+".name", "rule name %q is reserved: bans of the deny list are rule \"deny\", an operator's are rule \"operator\"; choose another name", r.Name)
			} else if first, dup := lines[r.Name]; dup {
				b.errorf(nameNode, path+".name", "duplicate rule name %q (first at line %d)", r.Name, first)
			} else {
				lines[r.Name] = nameNode.Line
			}
		}
		b.ruleBody(r, n, path, body, false)
		c.ruleSpecs = growSpecs(c.ruleSpecs, r.Index)
		if restricted {
			b.ruleSources[r.Index] = sources
		}
		if r.Name != "" {
			if _, dup := c.ruleIndex[r.Name]; !dup {
				c.ruleIndex[r.Name] = r.Index
			}
		}
		c.Rules = append(c.Rules, r)
	}
}

func growSpecs(s []ruleSpec, i int) []ruleSpec {
	for len(s) <= i {
		s = append(s, ruleSpec{})
	}
	return s
}

// ruleBody reads what rules and ranges with limits share: key, limits,
// combine, throttle, ban and log_only; group says the range charges one key.
func (b *builder) ruleBody(r *Rule, n *yaml.Node, path string, fields []field, group bool) {
	r.Ban = Ban{After: 0, For: DefaultBanFor, Factor: 1, Remember: DefaultRemember}
	var afterNode, maxNode, scopeNode *yaml.Node
	var scopePath string
	scope := ""
	haveLimits := false
	if group {
		r.Key = KeyRange
	}
	for _, f := range fields {
		switch f.key.Value {
		case "key":
			if group {
				b.errorf(f.key, f.path, "a range with group: true is keyed by its name; leave key out")
				continue
			}
			var k string
			if b.oneOf(f.val, f.path, &k, keyKinds...) {
				r.Key = keyKind(k)
			}
		case "limits":
			haveLimits = true
			var items []*yaml.Node
			if rn := resolve(f.val); rn != nil && rn.Kind == yaml.ScalarNode && !isNull(rn) {
				items = []*yaml.Node{rn} // a single limit
			} else {
				items = b.sequence(f.val, f.path)
			}
			if len(items) == 0 && !b.hasErrorAt(f.path) {
				b.errorf(f.val, f.path, "at least one limit is required")
			}
			for j, it := range items {
				p := index(f.path, j)
				var s string
				if !b.str(it, p, &s) {
					continue
				}
				l, err := ParseLimitCores(s, b.c.Cores)
				if err != nil {
					b.errorf(it, p, "%v", err)
					continue
				}
				r.Limits = append(r.Limits, l)
				b.limitNodes[r.Index] = append(b.limitNodes[r.Index], nodeRef{it, p})
			}
		case "combine":
			var s string
			if b.oneOf(f.val, f.path, &s, "any", "all") && s == "all" {
				r.Combine = CombineAll
			}
		case "throttle":
			r.Throttle = b.throttle(f)
		case "ban":
			for _, bf := range b.mapping(f.val, f.path, banKeys...) {
				switch bf.key.Value {
				case "after":
					afterNode = bf.key
					b.integer(bf.val, bf.path, 0, 1<<30, &r.Ban.After)
				case "for":
					b.duration(bf.val, bf.path, time.Second, &r.Ban.For)
				case "factor":
					b.float(bf.val, bf.path, 1, &r.Ban.Factor)
				case "max":
					if b.duration(bf.val, bf.path, time.Second, &r.Ban.Max) {
						maxNode = bf.val
					}
				case "remember":
					b.duration(bf.val, bf.path, 0, &r.Ban.Remember)
				}
			}
		case "log_only":
			b.boolean(f.val, f.path, &r.LogOnly)
		case "scope":
			if b.oneOf(f.val, f.path, &scope, ScopeFleet, ScopeNode) {
				scopeNode, scopePath = f.val, f.path
			}
		case "signatures":
			set := b.signatures(f)
			b.c.ruleSpecs = growSpecs(b.c.ruleSpecs, r.Index)
			b.c.ruleSpecs[r.Index].sigs = set
		}
	}
	if !haveLimits {
		b.errorf(n, path+".limits", "limits are required")
	}
	b.scope(r, scope, scopeNode, scopePath)
	if afterNode != nil && r.Throttle == nil {
		b.errorf(afterNode, path+".ban.after", "has no effect without throttle: a rule without throttle bans on the first entry over its limits")
	}
	switch {
	case maxNode == nil:
		r.Ban.Max = max(DefaultBanMax, r.Ban.For)
	case r.Ban.Max < r.Ban.For:
		b.errorf(maxNode, path+".ban.max", "%s is shorter than ban.for %s", r.Ban.Max, r.Ban.For)
	}
}

func (b *builder) throttle(f field) *Throttle {
	t := &Throttle{InitialDelay: DefaultInitialDelay, Quiet: DefaultQuiet}
	var maxNode *yaml.Node
	for _, tf := range b.mapping(f.val, f.path, throttleKeys...) {
		switch tf.key.Value {
		case "initial_delay":
			b.duration(tf.val, tf.path, time.Second, &t.InitialDelay)
		case "max_delay":
			if b.duration(tf.val, tf.path, time.Second, &t.MaxDelay) {
				maxNode = tf.val
			}
		case "quiet":
			b.duration(tf.val, tf.path, 0, &t.Quiet)
		}
	}
	switch {
	case maxNode == nil:
		t.MaxDelay = max(DefaultMaxDelay, t.InitialDelay)
	case t.MaxDelay < t.InitialDelay:
		b.errorf(maxNode, f.path+".max_delay", "%s is shorter than initial_delay %s", t.MaxDelay, t.InitialDelay)
	}
	return t
}

func keyKind(s string) KeyKind {
	switch s {
	case "prefix":
		return KeyPrefix
	case "user":
		return KeyUser
	case "user_agent":
		return KeyUserAgent
	case "ip+user_agent":
		return KeyIPUserAgent
	}
	return KeyIP
}

// String returns the configuration's name of k.
func (k KeyKind) String() string {
	switch k {
	case KeyIP:
		return "ip"
	case KeyPrefix:
		return "prefix"
	case KeyUser:
		return "user"
	case KeyUserAgent:
		return "user_agent"
	case KeyIPUserAgent:
		return "ip+user_agent"
	case KeyRange:
		return "range"
	}
	return fmt.Sprintf("KeyKind(%d)", int(k))
}

// rangeList reads the ranges: name -> {cidrs, group, limits, ...}.
func (b *builder) rangeList(top field) {
	c := b.c
	owner := map[string]string{} // prefix -> range name
	for _, rf := range b.mapping(top.val, top.path) {
		name := rf.key.Value
		path := rf.path
		if !nameRE.MatchString(name) {
			b.errorf(rf.key, path, "%q: a name is letters, digits, '_', '.' and '-'", name)
			continue
		}
		def := rangeDef{name: name, key: "range:" + name, rule: -1}
		var cidrs []listed
		var body []field
		var limitsField *field
		var group, haveCIDRs bool
		for _, f := range b.mapping(rf.val, path, rangeKeys...) {
			switch f.key.Value {
			case "cidrs":
				haveCIDRs = true
				cidrs = b.prefixList(f.val, f.path)
			case "group":
				b.boolean(f.val, f.path, &group)
			case "limits":
				f := f
				limitsField = &f
				if s := resolve(f.val); s != nil && s.Kind == yaml.ScalarNode && (s.Value == "none" || s.Value == "banned") {
					if s.Value == "none" {
						def.mode = rangeNone
					} else {
						def.mode = rangeBanned
					}
					continue
				}
				body = append(body, f)
			default:
				body = append(body, f)
			}
		}
		if resolve(rf.val) == nil || resolve(rf.val).Kind != yaml.MappingNode {
			if !b.hasErrorAt(path) {
				b.errorf(rf.val, path, "want a mapping with cidrs and limits")
			}
			continue
		}
		if !haveCIDRs {
			b.errorf(rf.key, path+".cidrs", "cidrs are required")
		}
		def.group = group
		if limitsField == nil {
			b.errorf(rf.key, path+".limits", "limits are required: none, banned or a list of limits")
		} else if def.mode != rangeLimits {
			for _, f := range body {
				b.errorf(f.key, f.path, "only for a range with a list of limits, not %q", resolve(limitsField.val).Value)
			}
			if group {
				b.errorf(rf.val, path+".group", "only for a range with a list of limits")
			}
		} else {
			r := &Rule{Name: "range:" + name, Index: len(c.Rules)}
			b.ruleBody(r, rf.val, path, body, group)
			def.rule = r.Index
			c.ruleSpecs = growSpecs(c.ruleSpecs, r.Index)
			c.ruleIndex[r.Name] = r.Index
			c.Rules = append(c.Rules, r)
		}
		ri := len(c.rangeDefs)
		c.rangeDefs = append(c.rangeDefs, def)
		for _, p := range cidrs {
			switch {
			case def.mode == rangeBanned && b.wholeFamily(p, "a banned range of it bans every client"),
				def.mode == rangeNone && b.wholeFamily(p, "a none range of it exempts every client from every rule"):
				continue
			}
			k := p.Prefix.String()
			if other, dup := owner[k]; dup {
				b.errs = append(b.errs, &Error{File: p.file, Line: p.line, Path: path + ".cidrs",
					Msg: fmt.Sprintf("%s is also in range %q", k, other)})
				continue
			}
			owner[k] = name
			c.ranges.Insert(p.Prefix, ri)
			c.listed.add(p.Prefix)
			if def.mode == rangeBanned {
				c.staticBans = append(c.staticBans, StaticBan{Key: p.Prefix, Origin: "range", Reason: "range " + name + " banned"})
			}
		}
	}
}

// checkCPU reports `% cpu` limits of rules that see a source whose format
// carries no CPU and that does not fall back on duration.
func (b *builder) checkCPU() {
	c := b.c
	for _, r := range c.Rules {
		srcs, restricted := b.ruleSources[r.Index]
		if !restricted {
			srcs = nil
			for _, s := range c.Sources {
				srcs = append(srcs, s.Index)
			}
		}
		var blind []string
		for _, si := range srcs {
			s := c.Sources[si]
			if !s.hasCPU && s.CPUFallback != "duration" {
				blind = append(blind, fmt.Sprintf("%q", s.Name))
			}
		}
		if len(blind) == 0 {
			continue
		}
		for j, l := range r.Limits {
			if l.Kind.Traits().Weighs != limits.CPU {
				continue
			}
			ref := b.limitNodes[r.Index][j]
			b.errorf(ref.node, ref.path, "%q: source %s carries no CPU: set its cpu_field, or cpu_fallback: duration", l.Text, strings.Join(blind, ", "))
		}
	}
}

// mappingFields are the key/value pairs of a mapping node, without
// reporting anything (the matcher has).
func mappingFields(n *yaml.Node, path string) []field {
	r := resolve(n)
	if r == nil || r.Kind != yaml.MappingNode {
		return nil
	}
	var out []field
	for i := 0; i+1 < len(r.Content); i += 2 {
		k := r.Content[i]
		out = append(out, field{key: k, val: r.Content[i+1], path: path + "." + k.Value})
	}
	return out
}

// checkMatch refuses a `match:` field that no source of the rule can
// carry (a rule that would silently match nothing). A source of format
// `auto` may carry anything.
func (b *builder) checkMatch() {
	c := b.c
	for ri, refs := range b.matchNodes {
		srcs, restricted := b.ruleSources[ri]
		if !restricted {
			srcs = nil
			for _, s := range c.Sources {
				srcs = append(srcs, s.Index)
			}
		}
		for _, ref := range refs {
			name := ref.node.Value
			if name == "ip" || name == "time" {
				continue
			}
			var names []string
			carried := false
			for _, si := range srcs {
				s := c.Sources[si]
				if !s.known || slices.Contains(s.fields, name) {
					carried = true
					break
				}
				names = append(names, fmt.Sprintf("%q", s.Name))
			}
			if !carried && len(names) > 0 {
				b.errorf(ref.node, ref.path, "field %q: no source of the rule carries it (source %s): the rule would match nothing; add the field to the format, or match another", name, strings.Join(names, ", "))
			}
		}
	}
}
