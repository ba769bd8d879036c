package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/logjail/logjail/control"
	"github.com/logjail/logjail/ops"
	"github.com/spf13/cobra"
)

type unbanOptions struct {
	cfg configFlag
	out outputFlag
	req control.UnbanRequest
}

func newUnbanCmd(s streams) *cobra.Command {
	var o unbanOptions
	cmd := &cobra.Command{
		Use:   "unban ADDRESS|CIDR|KEY|--rule R|--all [--reason TEXT] [--forget]",
		Short: "Lift bans and throttles: in effect in every action when the command returns",
		Long: `unban lifts the active throttles and bans of an address (of every key
containing it: its ip and prefix keys, a CIDR, a group range, a user seen from
it), of a CIDR (every key overlapping it), of a key (user:bob), of a rule
(--rule R alone, or with a key: that rule's only), or all of them (--all).
It says what it removed. Through the running daemon it returns once every
action has lifted them: the firewall rule gone, the files rewritten and
reloaded. With no daemon it writes to the database, and the daemon applies
it when it starts.

The keys' escalation memory (their earlier bans, which lengthen the next)
stays unless --forget, which also drops their windows. The deny list and
banned ranges are lifted by editing the configuration, not here.

` + operatorExits,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageError(errors.New("unban takes one address, CIDR or key"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.out.check(); err != nil {
				return err
			}
			if len(args) == 1 {
				o.req.Key = args[0]
			}
			return runUnban(cmd.Context(), &o, s)
		},
	}
	o.cfg.addFlag(cmd)
	o.out.addFlag(cmd)
	f := cmd.Flags()
	f.StringVar(&o.req.Rule, "rule", "", "that rule's bans only (alone: all of them)")
	f.BoolVar(&o.req.All, "all", false, "every active ban and throttle")
	f.StringVar(&o.req.Reason, "reason", "", "why, for the history")
	f.BoolVar(&o.req.Forget, "forget", false, "also forget the keys' windows and escalation memory")
	return cmd
}

// checkUnban checks an unban's arguments before anything is opened.
func checkUnban(req control.UnbanRequest) error {
	switch {
	case req.All && (req.Key != "" || req.Rule != ""):
		return fmt.Errorf("--all lifts every ban: give no key and no --rule with it: %w", control.ErrBadRequest)
	case !req.All && req.Key == "" && req.Rule == "":
		return fmt.Errorf("give an address, a CIDR, a key, --rule or --all: %w", control.ErrBadRequest)
	case req.Key != "":
		_, err := control.ParseTarget(req.Key)
		return err
	}
	return nil
}

func runUnban(ctx context.Context, o *unbanOptions, s streams) error {
	if err := checkUnban(o.req); err != nil {
		return apiError(err)
	}
	res, cfg, err := change(ctx, &o.cfg, s,
		func(ctx context.Context, c *control.Client) (*control.UnbanResult, error) { return c.Unban(ctx, o.req) },
		func(e *control.Engine, who string, dl *ops.DecisionLog) (*control.UnbanResult, error) {
			res, ds, err := e.Unban(o.req, who)
			if err == nil {
				dl.Decisions(ops.SourceOperator, ds)
			}
			return res, err
		})
	if err != nil {
		return err
	}
	if o.out.json() {
		return writeJSON(s.out, res)
	}
	printUnban(s.out, res, cfg.ControlSocket)
	return nil
}

func printUnban(w io.Writer, r *control.UnbanResult, socket string) {
	for _, b := range r.Removed {
		fmt.Fprintf(w, "unbanned %s (rule %s, %s)\n", b.Key, b.Rule, b.Kind)
	}
	for _, k := range r.Kept {
		fmt.Fprintf(w, "kept %s (rule %s): %s\n", k.Ban.Key, k.Ban.Rule, k.Why)
	}
	for _, f := range r.Forgotten {
		fmt.Fprintf(w, "forgot %s (rule %s): windows and escalation memory\n", f.Key, f.Rule)
	}
	if r.Live {
		fmt.Fprintln(w, "  lifted in every action")
	} else {
		fmt.Fprintf(w, "  no daemon answers on %s: written to the database; applied when the daemon starts\n", socket)
	}
}
