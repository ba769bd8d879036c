package main

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/logjail/logjail/control"
	"github.com/spf13/cobra"
)

type historyOptions struct {
	cfg     configFlag
	out     outputFlag
	headers headersFlag
}

func newHistoryCmd(s streams) *cobra.Command {
	var o historyOptions
	cmd := &cobra.Command{
		Use:   "history ADDRESS|CIDR|KEY",
		Short: "Every decision and operator action about an address or key, oldest first",
		Long: `history lists every throttle, ban and unban of a key, and every operator
action on it (with who made it and why), oldest first, from the database's
history (kept for history_retention), with or without a running daemon. An
address stands for every key containing it (its ip and prefix keys, a CIDR,
a group range, a user seen from it); a CIDR for every key overlapping it.
In a fleet, a last column, NODE, names the node that decided each event
("node" in JSON).

` + operatorExits,
		Args: oneTarget("history"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.out.check(); err != nil {
				return err
			}
			return runHistory(&o, s, args[0])
		},
	}
	o.cfg.addFlag(cmd)
	o.out.addFlag(cmd)
	o.headers.addFlag(cmd)
	return cmd
}

func runHistory(o *historyOptions, s streams, key string) error {
	t, err := control.ParseTarget(key)
	if err != nil {
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
	h := &control.History{Version: control.SchemaVersion, Query: key, Keys: control.Search(cfg, t), Events: []control.Event{}}
	if db != nil {
		defer db.Close()
		if h, err = control.ReadHistory(db, cfg, key); err != nil {
			return apiError(err)
		}
	}
	w := bufio.NewWriter(s.out)
	if o.out.json() {
		err = writeJSON(w, h)
	} else {
		if len(h.Events) > 0 { // else the exit error says so
			err = printHistory(w, h, o.headers.table(s.out))
		}
	}
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		return err
	}
	if len(h.Events) == 0 {
		return &exitError{code: exitNegative, err: fmt.Errorf("no history of %s (keys %s)", key, strings.Join(h.Keys, ", "))}
	}
	return nil
}

// printHistory writes h's events as a table. As in list, when an event
// has a node (a fleet), the node that decided each is the last column,
// NODE ("-" for none).
func printHistory(w io.Writer, h *control.History, terminal bool) error {
	header := []string{"TIME", "KIND", "RULE", "KEY", "UNTIL", "WHO", "REASON"}
	nodes := slices.ContainsFunc(h.Events, func(e control.Event) bool { return e.Node != "" })
	if nodes {
		header = append(header, "NODE")
	}
	t := newTable(w, terminal, header...)
	for i := range h.Events {
		e := &h.Events[i]
		who := e.Who
		if who == "" {
			who = e.Origin
		}
		reason := e.Reason
		if e.LogOnly {
			reason += " [log only]"
		}
		row := []string{fmtTime(e.Time), e.Kind, e.Rule, e.Key, fmtTimePtr(e.Until), who, reason}
		if nodes {
			row = append(row, e.Node)
		}
		t.row(row...)
	}
	return t.flush()
}
