package replay

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/logjail/logjail/parser"
)

// summaryKeys is how many keys the summary's busiest and costliest lists
// show; each rule's own top lists show more.
const summaryKeys = 5

// writeSummary writes the head of the text report: what was read, what the
// rules decided (per rule: keys throttled and banned, throttle and ban
// decisions), and the keys that asked the most and cost the most over all
// rules, with the rules that banned them.
func (r *Report) writeSummary(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	in := r.Input
	fmt.Fprintln(tw, "SUMMARY")
	fmt.Fprintf(tw, "  lines:\t%d read, %d parsed, %d rejected", in.Lines, in.Parsed, in.Rejected)
	if in.Skipped > 0 {
		fmt.Fprintf(tw, ", %d outside --from/--to", in.Skipped)
	}
	if in.Outliers > 0 {
		fmt.Fprintf(tw, ", %d outliers (far ahead of their neighbours: not charged)", in.Outliers)
	}
	fmt.Fprintln(tw)
	if in.First != nil {
		fmt.Fprintf(tw, "  time:\t%s .. %s (%s)\n", in.First.Format(time.RFC3339), in.Last.Format(time.RFC3339), span(in.Last.Sub(*in.First)))
	}
	for _, f := range r.Files {
		fmt.Fprintf(tw, "  file:\t%s (source %s, format %s, %s, %d rejected)\n", parser.Printable(f.Name), f.Source, f.Format, plural(int(f.Lines), "line"), f.Rejected)
	}
	for _, s := range in.Samples {
		msg := strings.TrimPrefix(s.Error, fmt.Sprintf("line %d: ", s.Line)) // the line is named once
		fmt.Fprintf(tw, "  rejected:\t%s:%d: %s\n", parser.Printable(s.File), s.Line, parser.Printable(msg))
	}
	l, d := r.Lists, r.Detector
	fmt.Fprintf(tw, "  requests:\t%d charged to rules, %d seen while banned (not charged); %d allowed, %d exempt, %d denied by the lists\n",
		l.Charged, d.Blocked, l.Allowed, l.Exempt, l.Denied)
	fmt.Fprintf(tw, "  keys:\t%d tracked (a key once for each rule that charged it), %d evicted\n", d.Keys, d.Evictions)
	fmt.Fprintf(tw, "  decisions:\t%s, %s, %s", plural(int(d.Throttles), "throttle"), plural(int(d.Bans), "ban"), plural(int(d.Unbans), "unban"))
	if d.BreakerTrips > 0 {
		fmt.Fprintf(tw, "; the circuit breaker tripped %s", plural(int(d.BreakerTrips), "time"))
	}
	fmt.Fprintln(tw)
	tw.Flush()

	tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "\n  RULE\tKEYS THROTTLED\tKEYS BANNED\tTHROTTLES\tBANS")
	bannedBy := map[string][]string{}
	for _, rr := range r.Rules {
		throttles, bans := 0, 0
		for _, k := range rr.Keys {
			throttles += k.Throttles
			bans += len(k.Bans)
			if len(k.Bans) > 0 {
				bannedBy[k.Key] = append(bannedBy[k.Key], rr.Name)
			}
		}
		name := rr.Name
		if rr.LogOnly {
			name += " (log_only)"
		}
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%d\n", parser.Printable(name), rr.Throttled, rr.Banned, throttles, bans)
	}
	tw.Flush()

	// A key's totals differ by rule (each rule sees the entries it
	// matches): the summary shows the most any rule saw.
	type total struct {
		key      string
		requests int64
		cpu      float64
	}
	byKey := map[string]*total{}
	for _, tl := range r.Top {
		for _, k := range tl.Keys {
			t := byKey[k.Key]
			if t == nil {
				t = &total{key: k.Key}
				byKey[k.Key] = t
			}
			t.requests, t.cpu = max(t.requests, k.Requests), max(t.cpu, k.CPU)
		}
	}
	keys := make([]*total, 0, len(byKey))
	for _, t := range byKey {
		keys = append(keys, t)
	}
	for _, by := range []string{"requests", "cpu"} {
		sort.Slice(keys, func(i, j int) bool {
			a, b := keys[i], keys[j]
			if by == "cpu" && a.cpu != b.cpu {
				return a.cpu > b.cpu
			}
			if a.requests != b.requests {
				return a.requests > b.requests
			}
			return a.key < b.key
		})
		title := "BUSIEST KEYS"
		if by == "cpu" {
			title = "COSTLIEST KEYS"
			if len(keys) == 0 || keys[0].cpu == 0 {
				fmt.Fprintln(w, "\n  COSTLIEST KEYS: none (no line carried CPU seconds)")
				continue
			}
		}
		if len(keys) == 0 {
			fmt.Fprintln(w, "\n  BUSIEST KEYS: none (no request was charged to a rule)")
			continue
		}
		tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintf(tw, "\n  %s\tREQUESTS\tCPU s\tBANNED BY\n", title)
		for i, t := range keys {
			if i == summaryKeys || (by == "cpu" && t.cpu == 0) {
				break
			}
			rules := "-"
			if b := bannedBy[t.key]; len(b) > 0 {
				rules = strings.Join(b, ", ")
			}
			fmt.Fprintf(tw, "  %s\t%d\t%.1f\t%s\n", parser.Printable(t.key), t.requests, t.cpu, parser.Printable(rules))
		}
		tw.Flush()
	}
}

// plural writes n and the noun, with an s unless n is 1: "1 key", "2 keys".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// riskyLines is how many risky bans the text report lists.
const riskyLines = 20

// writeRisky writes the bans of clients that may be good (Report.Risky),
// the rules with the most of them first, each rule's in time order.
func (r *Report) writeRisky(w io.Writer) {
	if len(r.Risky) == 0 {
		fmt.Fprintln(w, "\nRISKY BANS: none (no ban of a burst of 2xx/304, a known monitor or crawler, or a range)")
		return
	}
	count := map[string]int{}
	order := map[string]int{}
	for i, rr := range r.Rules {
		order[rr.Name] = i
	}
	for _, b := range r.Risky {
		count[b.Rule]++
	}
	bans := slices.Clone(r.Risky)
	sort.SliceStable(bans, func(i, j int) bool {
		a, b := bans[i], bans[j]
		if count[a.Rule] != count[b.Rule] {
			return count[a.Rule] > count[b.Rule]
		}
		return order[a.Rule] < order[b.Rule]
	})
	fmt.Fprintf(w, "\nRISKY BANS (%s of clients that may be good: look at these rules first)\n", plural(len(bans), "ban"))
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  RULE\tKEY\tBANNED AT\tAFTER\tRISK")
	for i, b := range bans {
		if i == riskyLines {
			fmt.Fprintf(tw, "  ... %d more (--output json lists all)\n", len(bans)-riskyLines)
			break
		}
		var why []string
		for _, rk := range b.Risks {
			why = append(why, rk.Kind+": "+rk.Detail)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", parser.Printable(b.Rule), parser.Printable(b.Key), b.Time.Format(time.RFC3339), fmtAfter(b.After), parser.Printable(strings.Join(why, "; ")))
	}
	tw.Flush()
}
