package signatures

import "strings"

// automaton is an Aho–Corasick automaton over lower-cased bytes, built
// into a full transition table: one load per byte of input, no failure
// links followed while scanning, no allocation.
//
// Bytes are mapped to classes first: every byte that occurs in no literal
// (after lower-casing) is class 0, so the table has a row per state of
// only as many columns as distinct literal bytes plus one. A table entry
// is the next state's row offset (state × classes), with flagOut set when
// that state ends a literal.
type automaton struct {
	class [256]uint8
	start [256]bool // the byte leaves the root: it starts a literal
	// few are the bytes that start a literal when they are at most
	// maxFew: the scan then skips to the next of them with
	// strings.IndexByte (vectorised) instead of byte by byte.
	few     string
	classes int
	next    []uint32
	// out[state] lists the hits of a state: the literals that end there
	// (its own and, through failure links, its suffixes').
	out [][]hit
}

// hit is a literal of a pattern ending at a state.
type hit struct {
	pattern int32
	length  int32
}

const flagOut = 1 << 31

const maxFew = 3

// skipFew returns the index in s of the first of the bytes a.few, or -1.
func (a *automaton) skipFew(s string) int {
	best := -1
	for k := 0; k < len(a.few); k++ {
		end := len(s)
		if best >= 0 {
			end = best
		}
		if j := strings.IndexByte(s[:end], a.few[k]); j >= 0 {
			best = j
		}
	}
	return best
}

// lit is one literal to find, for pattern.
type lit struct {
	text    string
	pattern int
}

func buildAutomaton(lits []lit) *automaton {
	a := &automaton{}
	// Byte classes: lower-cased literal bytes get classes 1..n; an
	// upper-case letter shares its lower-case class.
	var seen [256]bool
	for _, l := range lits {
		for i := 0; i < len(l.text); i++ {
			seen[l.text[i]] = true
		}
	}
	n := 1
	for c := 0; c < 256; c++ {
		if seen[c] {
			a.class[c] = uint8(n)
			n++
		}
	}
	for c := 'A'; c <= 'Z'; c++ {
		a.class[c] = a.class[c+'a'-'A']
	}
	a.classes = n
	// The trie, with goto as -1 where absent.
	type node struct {
		goTo []int32
		fail int32
		out  []hit
	}
	newNode := func() node {
		g := make([]int32, n)
		for i := range g {
			g[i] = -1
		}
		return node{goTo: g}
	}
	nodes := []node{newNode()}
	for _, l := range lits {
		s := int32(0)
		for i := 0; i < len(l.text); i++ {
			c := a.class[l.text[i]]
			if nodes[s].goTo[c] < 0 {
				nodes = append(nodes, newNode())
				nodes[s].goTo[c] = int32(len(nodes) - 1)
			}
			s = nodes[s].goTo[c]
		}
		nodes[s].out = append(nodes[s].out, hit{pattern: int32(l.pattern), length: int32(len(l.text))})
	}
	// Breadth first: failure links, merged outputs, and the full table.
	queue := make([]int32, 0, len(nodes))
	for c := 0; c < n; c++ {
		if t := nodes[0].goTo[c]; t < 0 {
			nodes[0].goTo[c] = 0
		} else {
			nodes[t].fail = 0
			queue = append(queue, t)
		}
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		f := nodes[s].fail
		nodes[s].out = append(nodes[s].out, nodes[f].out...)
		for c := 0; c < n; c++ {
			t := nodes[s].goTo[c]
			if t < 0 {
				nodes[s].goTo[c] = nodes[f].goTo[c]
				continue
			}
			nodes[t].fail = nodes[f].goTo[c]
			queue = append(queue, t)
		}
	}
	var few []byte
	for c := 0; c < 256; c++ {
		a.start[c] = a.class[c] != 0 && nodes[0].goTo[a.class[c]] != 0
		if a.start[c] {
			few = append(few, byte(c))
		}
	}
	if len(few) <= maxFew {
		a.few = string(few)
	}
	a.next = make([]uint32, len(nodes)*n)
	a.out = make([][]hit, len(nodes))
	for s, nd := range nodes {
		a.out[s] = nd.out
		for c, t := range nd.goTo {
			v := uint32(int(t) * n)
			if len(nodes[t].out) > 0 {
				v |= flagOut
			}
			a.next[s*n+c] = v
		}
	}
	return a
}
