package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/source"
)

// hintSample is how many of a file's first lines formatHint tries the
// presets on: as many as `auto` looks at, and some more.
const hintSample = 200

// formatHint returns a hint for a file most of whose lines (more than half)
// were rejected under format: the presets that read its first lines, best
// first (the one `--format auto` picks), as `auto` finds them; or, when none
// does, how to describe the format. It returns "" when most lines parsed.
// po supplies the time zone, trusted proxies and cpu field.
func formatHint(name string, po parser.Options, format string, lines, rejected int64) string {
	if lines == 0 || rejected*2 <= lines {
		return ""
	}
	head := fmt.Sprintf("hint: %d of %d lines of %s were rejected under format %s", rejected, lines, parser.Printable(name), format)
	const describe = "describe the format with --log-format, --apache-format, --fpm-format or --json-field (logjail parse shows how each line is read)"
	if name == source.Stdin {
		return head + ": `logjail parse --format auto FILE` on a copy names the preset that reads it, else " + describe
	}
	lg, err := source.OpenLog(name, parser.Options{Format: "common"}, nil)
	if err != nil {
		return head
	}
	defer lg.Close()
	var sample [][]byte
	for len(sample) < hintSample {
		line, _, ok := lg.Lines.Next()
		if !ok {
			break
		}
		if strings.TrimSpace(line) != "" {
			sample = append(sample, []byte(line))
		}
	}
	best, err := parser.Detect(sample, parser.Options{Location: po.Location, TrustedProxies: po.TrustedProxies, CPUField: po.CPUField})
	if err != nil {
		return fmt.Sprintf("%s; no preset reads any of its first %d lines: %s", head, len(sample), describe)
	}
	type cand struct {
		name string
		n    int
	}
	var cands []cand
	for _, preset := range parser.Presets() {
		p, err := parser.New(parser.Options{Format: preset, Location: po.Location, TrustedProxies: po.TrustedProxies, CPUField: po.CPUField})
		if err != nil {
			continue
		}
		n := 0
		for i, l := range sample {
			if _, err := p.ParseString(string(l), i+1); err == nil {
				n++
			}
		}
		if n*2 > len(sample) {
			cands = append(cands, cand{preset, n})
		}
	}
	slices.SortStableFunc(cands, func(a, b cand) int {
		switch {
		case a.name == best:
			return -1
		case b.name == best:
			return 1
		}
		return b.n - a.n
	})
	if len(cands) == 0 {
		return fmt.Sprintf("%s; no preset reads most of its first %d lines: %s", head, len(sample), describe)
	}
	var read []string
	for _, c := range cands {
		read = append(read, fmt.Sprintf("%s reads %d", c.name, c.n))
	}
	return fmt.Sprintf("%s; of its first %d lines, %s: try --format %s (or --format auto)", head, len(sample), strings.Join(read, ", "), cands[0].name)
}
