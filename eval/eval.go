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
//   - before the ban (median, max): for each banned attacker, its own
//     lines in the log up to and including the line at which the first
//     ban that covers it was decided (for a ban of its /24, the line may
//     be another address's). They are counted in the replay's own order
//     (replay.Options.Observe), so exactly; lines the format rejects are
//     not requests the rules could see and are not counted.
//
// Missed is also given as a share of the log's attackers. The total row
// sums the counts; its median and max are over every banned attacker of
// every log. The honeypot's thousand-odd attackers, most of them worms
// sending one to three requests, weigh most in the total: read the rows
// too. Goals (the "must show") are constants in table.go; Goals
// says which hold; TestFigures enforces them once EnforceGoals is on.
//
// Decisions the issue left open:
//
//   - The configuration is compiled without this machine's addresses
//     (always allowed live) and with 4 cores, so that the figures are the
//     same wherever they are computed.
//   - A ban of a log_only rule, or one the circuit breaker made log-only,
//     bans no one: it counts for nothing here.
//   - An attacker is one labelled client, however many addresses a ban of
//     its /24 also covers; a good client inside a banned /24 is a false
//     ban.
//   - ployt0's log is anonymised to /24s (x.y.z.0): each label is one such
//     address, as the log has it.
//   - genlog's log is evaluated twice. Row `genlog` is its combined
//     format under the configuration as it is; its `cpu` attackers (4 of
//     12) are abusive only by the CPU seconds a combined log does not
//     carry, so no configuration could see them there: they are left
//     unlabelled in that row (a ban of one would show as unreviewed).
//     Row `genlog+cpu` is the same requests at the same times in
//     combined_cpu, every attacker labelled, under CPUConfig: the
//     configuration as the example tells a user whose log carries CPU to
//     change it (its commented log_format and cpu_field, and its commented
//     `heavy` rule switched on).

// Adding a log: put it in ../shared/corpus/real, write
// testdata/eval/labels/<name>.yaml (testdata/eval/clients.py lists each
// client's requests, and drafts labels to review), add it to realLogs in
// logs.go, and run `go test ./eval -run TestFigures -update` to write the
// new figures.
//
// Boundaries: It owns the labelled evaluation. It must not label with
// logjail's own decisions: the labels come from testdata/eval/clients.py's
// criteria, reviewed by hand.
package eval

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/replay"
	"github.com/logjail/logjail/rules"
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
	// CPU: the log carries CPU seconds (genlog's combined_cpu), and is
	// evaluated under CPUConfig's variant of the configuration.
	CPU bool
}

// Row is the evaluation of one log.
type Row struct {
	Log                 string
	Lines, Rejected     int64
	Attackers, Good     int
	TrueBans, FalseBans int
	Missed              int
	Unreviewed          []string // banned keys that reach no labelled client, sorted
	Before              []int    // requests before the ban, per banned attacker, ascending
	FalseBanned         []string // "ADDRESS by RULE (KEY): WHY", sorted
	// Attackers' outcomes, for tuning (logjail-eval -v), in label order:
	// "banned ADDRESS by RULE (KEY) after N: WHY" or "missed ADDRESS: WHY".
	Outcomes []string
}

// Config is the configuration evaluated: the embedded example, compiled
// without this machine's addresses (which the daemon always allows), so
// that the figures do not depend on where they are computed.
func Config() (*rules.Config, error) {
	return rules.Parse("example.yaml", rules.Example(), configOptions())
}

// LoadConfig is Config for another configuration file, to try a variant
// of the defaults on the same logs (logjail-eval -config).
func LoadConfig(path string) (*rules.Config, error) {
	return rules.Load(path, configOptions())
}

func configOptions() rules.Options {
	return rules.Options{HostAddrs: []netip.Addr{}, Cores: 4}
}

// firstBan is the first ban that reached a labelled client.
type firstBan struct {
	rule, key string
}

// index finds the labelled client of an address: single addresses by a
// map, prefix labels by a scan (they are few).
type index struct {
	exact map[netip.Addr]int
	wide  []int
}

func newIndex(truth []Truth) *index {
	ix := &index{exact: map[netip.Addr]int{}}
	for j, tr := range truth {
		if tr.Prefix.IsSingleIP() {
			ix.exact[tr.Prefix.Addr()] = j
		} else {
			ix.wide = append(ix.wide, j)
		}
	}
	return ix
}

func (ix *index) find(truth []Truth, a netip.Addr) int {
	if j, ok := ix.exact[a]; ok {
		return j
	}
	for _, j := range ix.wide {
		if truth[j].Prefix.Contains(a) {
			return j
		}
	}
	return -1
}

// Evaluate replays lg under cfg and scores its decisions against its
// truth. A ban counts when it acts: bans of log_only rules (and those the
// circuit breaker turned log-only) ban no one and are left out.
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

	groups := cfg.GroupRanges()
	ix := newIndex(lg.Truth)
	first := make([]*firstBan, len(lg.Truth))
	requests := make([]int, len(lg.Truth)) // up to and including the banning line
	reviewed, unreviewed := map[string]bool{}, map[string]bool{}
	observe := func(e *parser.Entry, ds []detector.Decision) {
		if j := ix.find(lg.Truth, e.IP); j >= 0 && first[j] == nil {
			requests[j]++
		}
		for i := range ds {
			d := &ds[i]
			if d.Kind != detector.Ban || d.LogOnly {
				continue
			}
			covers := keyPrefixes(d.Key, groups)
			for _, a := range d.Addresses {
				covers = append(covers, netip.PrefixFrom(a, a.BitLen()))
			}
			hit := false
			for j, tr := range lg.Truth {
				if covered(covers, tr.Prefix) {
					hit = true
					if first[j] == nil {
						first[j] = &firstBan{rule: d.Rule, key: d.Key}
					}
				}
			}
			if hit {
				reviewed[d.Key] = true
			} else {
				unreviewed[d.Key] = true
			}
		}
	}
	rep, err := replay.Run(ctx, cfg, inputs, replay.Options{Observe: observe})
	if err != nil {
		return row, fmt.Errorf("%s: replay: %w", lg.Name, err)
	}
	row.Lines, row.Rejected = rep.Input.Lines, rep.Input.Rejected
	for k := range unreviewed {
		if !reviewed[k] {
			row.Unreviewed = append(row.Unreviewed, k)
		}
	}
	slices.Sort(row.Unreviewed)

	for j, tr := range lg.Truth {
		switch {
		case tr.Attacker && first[j] != nil:
			row.Attackers++
			row.TrueBans++
			row.Before = append(row.Before, requests[j])
			row.Outcomes = append(row.Outcomes, fmt.Sprintf("banned %s by %s (%s) after %d: %s", tr.Prefix, first[j].rule, first[j].key, requests[j], tr.Why))
		case tr.Attacker:
			row.Attackers++
			row.Missed++
			row.Outcomes = append(row.Outcomes, fmt.Sprintf("missed %s: %s", tr.Prefix, tr.Why))
		case first[j] != nil:
			row.Good++
			row.FalseBans++
			row.FalseBanned = append(row.FalseBanned, fmt.Sprintf("%s by %s (%s): %s", tr.Prefix, first[j].rule, first[j].key, tr.Why))
		default:
			row.Good++
		}
	}
	slices.Sort(row.Before)
	slices.Sort(row.FalseBanned)
	return row, nil
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
