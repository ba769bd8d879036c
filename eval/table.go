package eval

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// The goals of issue 18, over the total row. With EnforceGoals on,
// TestFigures fails when one is not met, whatever the figures file says;
// off, it prints their status (for an experiment on the defaults).
const (
	EnforceGoals      = true
	GoalFalseBans     = 0  // good clients banned, in every log
	GoalMissedPercent = 10 // attackers never banned, % of the labelled attackers, at most
	GoalMedianBefore  = 20 // median requests before the ban, at most
)

// Total sums rows: counts add up; Before holds every banned attacker's
// figure; FalseBanned each log's, prefixed with the log's name.
func Total(rows []Row) Row {
	t := Row{Log: "total"}
	for _, r := range rows {
		t.Lines += r.Lines
		t.Rejected += r.Rejected
		t.Attackers += r.Attackers
		t.Good += r.Good
		t.TrueBans += r.TrueBans
		t.FalseBans += r.FalseBans
		t.Missed += r.Missed
		for _, k := range r.Unreviewed {
			t.Unreviewed = append(t.Unreviewed, r.Log+": "+k)
		}
		t.Before = append(t.Before, r.Before...)
		for _, f := range r.FalseBanned {
			t.FalseBanned = append(t.FalseBanned, r.Log+": "+f)
		}
	}
	slices.Sort(t.Before)
	return t
}

// Median is the median of sorted (the lower middle for an even count), -1
// for none.
func Median(sorted []int) int {
	if len(sorted) == 0 {
		return -1
	}
	return sorted[(len(sorted)-1)/2]
}

// MissedPercent is missed as a share of the attackers, in percent.
func (r Row) MissedPercent() float64 {
	if r.Attackers == 0 {
		return 0
	}
	return 100 * float64(r.Missed) / float64(r.Attackers)
}

// Goal is one goal and whether the total meets it.
type Goal struct {
	Name string
	Met  bool
	Got  string
}

// Goals checks the total row against the goals.
func Goals(total Row) []Goal {
	med := Median(total.Before)
	return []Goal{
		{fmt.Sprintf("false bans <= %d", GoalFalseBans), total.FalseBans <= GoalFalseBans, fmt.Sprint(total.FalseBans)},
		{fmt.Sprintf("missed <= %d%%", GoalMissedPercent), total.MissedPercent() <= GoalMissedPercent, fmt.Sprintf("%.1f%%", total.MissedPercent())},
		{fmt.Sprintf("median requests before a ban <= %d", GoalMedianBefore), med >= 0 && med <= GoalMedianBefore, fmt.Sprint(med)},
	}
}

// WriteTable writes the table of rows and their total, the good clients
// banned, and the goals' status: the text of scripts/eval.sh and of
// testdata/eval/figures.txt.
func WriteTable(w io.Writer, rows []Row) error {
	total := Total(rows)
	all := append(slices.Clone(rows), total)
	width := len("log")
	for _, r := range all {
		width = max(width, len(r.Log))
	}
	// The log's name is aligned left, the figures right.
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "lines\trejected\tattackers\tgood\ttrue bans\tfalse bans\tmissed\tunreviewed\tbefore median\tbefore max\t")
	for _, r := range all {
		missed := fmt.Sprint(r.Missed)
		if r.Attackers > 0 {
			missed = fmt.Sprintf("%d (%.0f%%)", r.Missed, r.MissedPercent())
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t%s\t%s\t\n", r.Lines, r.Rejected, r.Attackers, r.Good,
			r.TrueBans, r.FalseBans, missed, len(r.Unreviewed), orDash(Median(r.Before)), orDash(maxOf(r.Before)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	names := append([]string{"log"}, make([]string, 0, len(all))...)
	for _, r := range all {
		names = append(names, r.Log)
	}
	for i, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		fmt.Fprintf(w, "%-*s%s\n", width, names[i], strings.TrimRight(line, " "))
	}
	fmt.Fprintln(w)
	if len(total.FalseBanned) == 0 {
		fmt.Fprintln(w, "good clients banned: none")
	} else {
		fmt.Fprintln(w, "good clients banned:")
		for _, f := range total.FalseBanned {
			fmt.Fprintln(w, "  "+f)
		}
	}
	if len(total.Unreviewed) == 0 {
		fmt.Fprintln(w, "unlabelled keys banned (unreviewed): none")
	} else {
		fmt.Fprintln(w, "unlabelled keys banned (unreviewed):")
		for _, k := range total.Unreviewed {
			fmt.Fprintln(w, "  "+k)
		}
	}
	state := "not enforced yet (eval.EnforceGoals)"
	if EnforceGoals {
		state = "enforced"
	}
	fmt.Fprintf(w, "\ngoals, %s:\n", state)
	for _, g := range Goals(total) {
		met := "MET"
		if !g.Met {
			met = "NOT MET"
		}
		fmt.Fprintf(w, "  %-40s %-8s %s\n", g.Name, g.Got, met)
	}
	_, err := fmt.Fprintln(w)
	return err
}

func maxOf(xs []int) int {
	if len(xs) == 0 {
		return -1
	}
	return slices.Max(xs)
}

func orDash(n int) string {
	if n < 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

// WriteOutcomes writes each log's attackers, banned (by which rule, after
// how many requests) or missed, with why they are attackers: what a person
// tuning the defaults reads after the table.
func WriteOutcomes(w io.Writer, rows []Row) error {
	for _, r := range rows {
		if len(r.Outcomes) == 0 {
			continue
		}
		fmt.Fprintf(w, "%s:\n", r.Log)
		for _, o := range r.Outcomes {
			fmt.Fprintf(w, "  %s\n", o)
		}
	}
	return nil
}
