package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/logjail/logjail/control"
	"github.com/spf13/cobra"
)

type listOptions struct {
	cfg     configFlag
	out     outputFlag
	headers headersFlag
	q       control.ListQuery
	header  bool // a header and aligned columns even when not on a terminal
}

func newListCmd(s streams) *cobra.Command {
	var o listOptions
	cmd := &cobra.Command{
		Use:   "list [--rule R] [--key ADDRESS|CIDR|KEY] [--kind throttle|ban] [--expired] [--sort until|since|rule]",
		Short: "List the active throttles and bans: key, rule, kind, since, until, time left, why",
		Long: `list shows the active throttles and bans from the database (the daemon
records a decision there within 10 ms, and an unban before it returns), with
or without a running daemon: key, rule, kind, since, until and the time left,
violations, the addresses a ban of a key that is no address blocks, and the
reason (an operator's with who gave it). In a fleet, a last column, NODE,
names the node that decided each ban ("node" in JSON); without one there is
no such column.

--key takes an address (every key containing it: its ip and prefix keys, a
CIDR, a group range, a user seen from it), a CIDR (every key overlapping it)
or a key (user:bob). --expired lists the bans that have ended (from the
history, within history_retention), with when and why. --sort until (the
soonest end first, the default), since (newest first) or rule.

On a terminal: a header and aligned columns, and a line saying so when
there is nothing to list; else (or with --no-headers) one ban a line, fields
separated by tabs, and the empty line on stderr; --output json: the document
of docs/control.md.

` + operatorExits,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.out.check(); err != nil {
				return err
			}
			return runList(&o, s, time.Now())
		},
	}
	o.cfg.addFlag(cmd)
	o.out.addFlag(cmd)
	o.headers.addFlag(cmd)
	f := cmd.Flags()
	f.StringVar(&o.q.Rule, "rule", "", "only this rule's")
	f.StringVar(&o.q.Key, "key", "", "only the keys an address, CIDR or key names")
	f.StringVar(&o.q.Kind, "kind", "", "throttle or ban")
	f.BoolVar(&o.q.Expired, "expired", false, "the bans that have ended, instead of the active ones")
	f.StringVar(&o.q.Sort, "sort", "until", "until, since or rule")
	return cmd
}

func runList(o *listOptions, s streams, now time.Time) error {
	if err := o.q.Validate(); err != nil {
		return apiError(err)
	}
	op, err := open(&o.cfg, s)
	if err != nil {
		return err
	}
	cfg := op.cfg
	db, err := op.reader()
	if err != nil {
		return err
	}
	l := &control.BanList{Version: control.SchemaVersion, Now: now, Expired: o.q.Expired, Bans: []control.Ban{}}
	if db != nil {
		defer db.Close()
		if l, err = control.List(db, cfg, o.q, now); err != nil {
			return apiError(err)
		}
	}
	w := bufio.NewWriterSize(s.out, 64<<10)
	table := o.header || o.headers.table(s.out)
	if o.out.json() {
		err = l.WriteJSON(w) // compact: 100,000 bans are 26 MB already
	} else if len(l.Bans) == 0 {
		what := "no active throttles or bans"
		if l.Expired {
			what = "no ended throttles or bans"
		}
		if o.q.Key == "" || table { // else the exit error says it
			w.Flush()
			sayEmpty(s, table, what)
		}
	} else {
		err = printList(w, l, table)
	}
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		return err
	}
	if o.q.Key != "" && len(l.Bans) == 0 {
		what := "active throttle or ban"
		if o.q.Expired {
			what = "ended throttle or ban"
		}
		return &exitError{code: exitNegative, err: fmt.Errorf("no %s matches %s", what, o.q.Key)}
	}
	return nil
}

// printList writes l's bans as a table: one row a ban, built in one buffer
// (a list may have 100,000 rows), the same text as table.row of each
// field's string (TestPrintList). When a ban listed has a node (a fleet),
// the node that decided each is the last column, NODE ("-" for none), so
// that the columns before it are where they are without a fleet.
func printList(w io.Writer, l *control.BanList, terminal bool) error {
	header := []string{"KEY", "RULE", "KIND", "SINCE", "UNTIL", "LEFT", "VIOLATIONS", "ADDRESSES", "REASON"}
	if l.Expired {
		header = []string{"KEY", "RULE", "KIND", "SINCE", "UNTIL", "ENDED", "VIOLATIONS", "ADDRESSES", "REASON", "END"}
	}
	nodes := false
	for i := range l.Bans {
		if nodes = l.Bans[i].Node != ""; nodes {
			break
		}
	}
	if nodes {
		header = append(header, "NODE")
	}
	t := newTable(w, terminal, header...)
	b := make([]byte, 0, 512)
	for i := range l.Bans {
		v := &l.Bans[i]
		b = appendCell(b[:0], true, v.Key)
		b = appendCell(b, false, v.Rule)
		b = appendCell(b, false, v.Kind)
		// Times and the time left are printable and never empty: no clean.
		b = appendTime(append(b, '\t'), v.Since)
		b = append(b, '\t')
		if v.Until == nil {
			b = append(b, "until lifted"...)
		} else {
			b = appendTime(b, *v.Until)
		}
		b = append(b, '\t')
		switch {
		case l.Expired && v.Ended != nil:
			b = appendTime(b, *v.Ended)
		case l.Expired, v.Until == nil:
			b = append(b, '-')
		default:
			b = appendLeft(b, time.Duration(*v.LeftSeconds)*time.Second)
		}
		b = strconv.AppendInt(append(b, '\t'), int64(v.Violations), 10)
		b = appendCell(b, false, strings.Join(v.Addresses, ","))
		reason := v.Reason
		if v.Who != "" {
			reason += " (by " + v.Who + ")"
		}
		if v.LogOnly {
			reason += " [log only]"
		}
		b = appendCell(b, false, reason)
		if l.Expired {
			b = appendCell(b, false, v.EndReason)
		}
		if nodes {
			b = appendCell(b, false, v.Node)
		}
		t.line(append(b, '\n'))
	}
	return t.flush()
}
