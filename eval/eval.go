// Package eval is the labelled evaluation of the default configuration
// (the embedded example, rules.Example(), whatever it holds when the
// evaluation runs): it replays logs whose clients are labelled, through
// replay.Run as `logjail replay` does, and counts per log how many
// attackers the configuration bans, how many good clients it bans, and how
// soon. scripts/eval.sh prints the table; TestFigures compares it with
// testdata/eval/figures.txt, so that any change of detection quality
// shows in a diff.
//
// The logs:
//
//   - the real logs of ../shared/corpus/real, labelled by hand in
//     testdata/eval/labels/<log>.yaml (testdata/eval/README.md gives the
//     criteria and how the labels were made);
//   - the scenarios of internal/evalgen (an SPA answering 200 to probes,
//     a slow scanner over two weeks, short exploit bursts, an admin's
//     bursts, heavy page loads, monitors, crawlers following broken links,
//     a fake Googlebot, a flood), each with its truth;
//   - genlog.py's log (--lines 200000 --seed 7 --attackers 12): its truth
//     file names the abusive clients; every other client is good.
//
// Each log is read with the format of the configuration's source for it
// (`combined` in the example), as `logjail replay FILE` reads it, unless
// its Log says otherwise.
//
// The figures, per log:
//
//   - attackers, good: the labelled clients in the log.
//   - true bans: attackers banned at least once (a ban of any key
//     containing the address: the address, its /24 or /64, a range).
//   - false bans: good clients banned; listed by address under the table.
//   - missed: attackers never banned.
//   - unreviewed: banned keys that contain no labelled client (bans of
//     unlabelled clients, for a person to look at).
//   - before the ban (median, max): for each banned attacker, its own lines
//     in the log up to and including the first ban that covers it,
//     counted from the log itself (every line of the client parsed by the
//     source's format whose time is not after the ban's time: lines of
//     the same second after the banning line count too, as the log's
//     one-second times cannot order them).
//
// The total row sums the counts; its median and max are over every banned
// attacker of every log, and it gives missed as a share of the attackers.
// Goals (the "must show") are constants here; Goals reports which
// hold; TestFigures enforces them once EnforceGoals is switched on.
//
// Adding a log: put it in ../shared/corpus/real, write
// testdata/eval/labels/<name>.yaml (testdata/eval/clients.py lists each
// client's requests, and drafts labels to review), add it to RealLogs, and
// run `go test ./eval -run TestFigures -update` to write the new figures.
package eval

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/replay"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/source"
)

// Truth is one labelled client: an address (as a /32 or /128) or a prefix.
type Truth struct {
	Prefix   netip.Prefix
	Attacker bool
	Why      string
}

// Log is one evaluated log: its files (replayed together, merged by time)
// and its labels.
type Log struct {
	Name   string
	Files  []string
	Format string // "": the format of the configuration's source for the files
	Truth  []Truth
}

// Row is the evaluation of one log.
type Row struct {
	Log                 string
	Lines, Rejected     int64
	Attackers, Good     int
	TrueBans, FalseBans int
	Missed, Unreviewed  int
	Before              []int    // requests before the ban, per banned attacker, ascending
	FalseBanned         []string // "ADDRESS by RULE (KEY)", sorted
}

// Config is the configuration evaluated: the embedded example, compiled
// without this machine's addresses (which the daemon always allows), so
// that the figures do not depend on where they are computed.
func Config() (*rules.Config, error) {
	return rules.Parse("example.yaml", rules.Example(), rules.Options{HostAddrs: []netip.Addr{}, Cores: 4})
}

// ban is where one ban decision reaches.
type ban struct {
	d      replay.Decision
	covers []netip.Prefix
}

// Evaluate replays lg under cfg and scores its decisions against its truth.
func Evaluate(ctx context.Context, cfg *rules.Config, lg Log) (Row, error) {
	row := Row{Log: lg.Name}
	if len(lg.Files) == 0 {
		return row, fmt.Errorf("%s: no files", lg.Name)
	}
	src := cfg.SourceFor(lg.Files[0])
	if src == nil {
		return row, fmt.Errorf("%s: no source of %s reads %s", lg.Name, cfg.File, lg.Files[0])
	}
	if lg.Format != "" {
		own := *src
		own.Parser.Format = lg.Format
		src = &own
	}
	inputs := make([]replay.Input, len(lg.Files))
	for i, f := range lg.Files {
		inputs[i] = replay.Input{Name: f, Source: src}
	}
	rep, err := replay.Run(ctx, cfg, inputs, replay.Options{})
	if err != nil {
		return row, fmt.Errorf("%s: replay: %w", lg.Name, err)
	}
	row.Lines, row.Rejected = rep.Input.Lines, rep.Input.Rejected

	groups := cfg.GroupRanges()
	var bans []ban
	for _, d := range rep.Decisions {
		if d.Kind != string(detector.Ban) {
			continue
		}
		b := ban{d: d, covers: keyPrefixes(d.Key, groups)}
		for _, a := range d.Addresses {
			b.covers = append(b.covers, netip.PrefixFrom(a, a.BitLen()))
		}
		bans = append(bans, b)
	}

	// The first ban of each labelled client, and the keys that reach none.
	first := make([]*ban, len(lg.Truth))
	reviewed := map[string]bool{}
	for i := range bans {
		b := &bans[i]
		for j, tr := range lg.Truth {
			if covered(b.covers, tr.Prefix) {
				reviewed[b.d.Key] = true
				if first[j] == nil {
					first[j] = b
				}
			}
		}
	}
	unreviewed := map[string]bool{}
	for _, b := range bans {
		if !reviewed[b.d.Key] {
			unreviewed[b.d.Key] = true
		}
	}
	row.Unreviewed = len(unreviewed)

	for j, tr := range lg.Truth {
		switch {
		case tr.Attacker && first[j] != nil:
			row.Attackers++
			row.TrueBans++
		case tr.Attacker:
			row.Attackers++
			row.Missed++
		case first[j] != nil:
			row.Good++
			row.FalseBans++
			row.FalseBanned = append(row.FalseBanned, fmt.Sprintf("%s by %s (%s)", tr.Prefix, first[j].d.Rule, first[j].d.Key))
		default:
			row.Good++
		}
	}
	slices.Sort(row.FalseBanned)
	if row.Before, err = before(lg, src.Parser, first); err != nil {
		return row, err
	}
	return row, nil
}

// before counts, for each attacker with a ban, its lines up to the ban's
// time, reading lg's files again with the source's format.
func before(lg Log, po parser.Options, first []*ban) ([]int, error) {
	exact := map[netip.Addr]int{}
	var wide []int
	until := make([]time.Time, len(lg.Truth))
	for j, tr := range lg.Truth {
		if !tr.Attacker || first[j] == nil {
			continue
		}
		until[j] = first[j].d.Time
		if tr.Prefix.IsSingleIP() {
			exact[tr.Prefix.Addr()] = j
		} else {
			wide = append(wide, j)
		}
	}
	counts := make([]int, len(lg.Truth))
	for _, f := range lg.Files {
		l, err := source.OpenLog(f, po, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", lg.Name, err)
		}
		for {
			text, n, ok := l.Lines.Next()
			if !ok {
				break
			}
			e, err := l.Parser.ParseString(text, n)
			if err != nil {
				continue
			}
			j, ok := exact[e.IP]
			if !ok {
				j = -1
				for _, k := range wide {
					if lg.Truth[k].Prefix.Contains(e.IP) {
						j = k
						break
					}
				}
			}
			if j >= 0 && !e.Time.After(until[j]) {
				counts[j]++
			}
		}
		err = l.Lines.Err()
		l.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
	}
	var out []int
	for j, tr := range lg.Truth {
		if tr.Attacker && first[j] != nil {
			out = append(out, counts[j])
		}
	}
	slices.Sort(out)
	return out, nil
}

// keyPrefixes is what a ban of key blocks: an address, a prefix, or a
// group range's prefixes. Other keys (user:, ua:) block the addresses the
// decision lists.
func keyPrefixes(key string, groups map[string][]netip.Prefix) []netip.Prefix {
	if p, err := netip.ParsePrefix(key); err == nil {
		return []netip.Prefix{p.Masked()}
	}
	if a, err := netip.ParseAddr(key); err == nil {
		return []netip.Prefix{netip.PrefixFrom(a, a.BitLen())}
	}
	return slices.Clone(groups[key])
}

// covered reports whether a ban reaching covers reaches the labelled
// client p (an address, or every address of a prefix label).
func covered(covers []netip.Prefix, p netip.Prefix) bool {
	for _, c := range covers {
		if c.Bits() <= p.Bits() && c.Contains(p.Addr()) {
			return true
		}
		if p.Bits() < c.Bits() && p.Contains(c.Addr()) {
			return true // a ban inside a labelled prefix hits that client
		}
	}
	return false
}
