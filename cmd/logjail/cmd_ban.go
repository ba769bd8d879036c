package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/logjail/logjail/control"
	"github.com/logjail/logjail/ops"
	"github.com/spf13/cobra"
)

type banOptions struct {
	cfg configFlag
	out outputFlag
	req control.BanRequest
}

func newBanCmd(s streams) *cobra.Command {
	var o banOptions
	cmd := &cobra.Command{
		Use:   "ban ADDRESS|CIDR|KEY --for DURATION [--reason TEXT] [--rule NAME] [--force]",
		Short: "Ban an address, a CIDR or a key for a while, on an operator's word",
		Long: `ban bans an address (203.0.113.7), a CIDR (203.0.113.0/24) or a key
(user:bob, range:NAME) for --for (90s, 10m, 1h, 7d, 1d12h). The running
daemon applies it in every action before the command returns; with no daemon
it is written to the database (this command is then its one writer) and
applied when the daemon starts. The cleaner lifts it at its end; 'logjail
unban' before.

The ban is the rule "operator"'s unless --rule names a configured rule: it is
then that rule's ban (its requests not charged, lifted like its own bans),
but counts for no escalation. A key on the allow list (the host's addresses
and the trusted proxies included), or a CIDR inside it, is refused unless
--force: a forced ban wins over the allow list until it ends or is lifted.
Allowed addresses inside a banned CIDR stay exempt. A ban of a key that is no
address (user:bob) blocks no address in the actions.

The reason and who gave it (the caller's uid, from the socket) are in the
history and in 'logjail list'.

` + operatorExits,
		Args: oneTarget("ban"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.out.check(); err != nil {
				return err
			}
			o.req.Key = args[0]
			return runBan(cmd.Context(), &o, s)
		},
	}
	o.cfg.addFlag(cmd)
	o.out.addFlag(cmd)
	f := cmd.Flags()
	f.StringVar(&o.req.For, "for", "", "how long: 90s, 10m, 1h, 7d, 1d12h (required)")
	f.StringVar(&o.req.Reason, "reason", "", "why, for the history and the list")
	f.StringVar(&o.req.Rule, "rule", "", "a configured rule to ban it under (default: operator)")
	f.BoolVar(&o.req.Force, "force", false, "ban an allowed key all the same")
	return cmd
}

// checkBan checks a ban's arguments before anything is opened.
func checkBan(req control.BanRequest) error {
	if _, err := control.ParseTarget(req.Key); err != nil {
		return err
	}
	_, err := control.ParseFor(req.For)
	return err
}

func runBan(ctx context.Context, o *banOptions, s streams) error {
	if err := checkBan(o.req); err != nil {
		return apiError(err)
	}
	res, cfg, err := change(ctx, &o.cfg, s,
		func(ctx context.Context, c *control.Client) (*control.BanResult, error) { return c.Ban(ctx, o.req) },
		func(e *control.Engine, who string, dl *ops.DecisionLog) (*control.BanResult, error) {
			res, ds, err := e.Ban(o.req, who)
			if err == nil {
				dl.Decisions(ops.SourceOperator, ds, res.LogAttrs()...)
			}
			return res, err
		})
	if err != nil {
		return err
	}
	if o.out.json() {
		return writeJSON(s.out, res)
	}
	printBan(s.out, res, cfg.ControlSocket)
	return nil
}

func printBan(w io.Writer, r *control.BanResult, socket string) {
	b := &r.Ban
	until := "until lifted"
	if b.Until != nil {
		until = "until " + fmtTime(*b.Until)
	}
	fmt.Fprintf(w, "banned %s (rule %s) %s: %s\n", b.Key, b.Rule, until, b.Reason)
	if r.Allowed != "" {
		fmt.Fprintf(w, "  forced: %s is on the allow list (%s)\n", b.Key, r.Allowed)
	}
	if len(r.Exempt) > 0 {
		fmt.Fprintf(w, "  exempt (allowed, inside it): %s\n", strings.Join(r.Exempt, ", "))
	}
	if _, isAddr := keyIsAddress(b.Key); !isAddr && len(b.Addresses) == 0 {
		fmt.Fprintf(w, "  %s is no address: the actions block no address for it\n", b.Key)
	} else if len(b.Addresses) > 0 {
		fmt.Fprintf(w, "  blocks %s\n", strings.Join(b.Addresses, ", "))
	}
	if r.Live {
		fmt.Fprintln(w, "  applied by the daemon in every action")
	} else {
		fmt.Fprintf(w, "  no daemon answers on %s: written to the database; applied when the daemon starts\n", socket)
	}
}

// keyIsAddress reports whether key is an address or a CIDR.
func keyIsAddress(key string) (control.Target, bool) {
	t, err := control.ParseTarget(key)
	return t, err == nil && t.Prefix.IsValid() && !strings.Contains(key, "|")
}
