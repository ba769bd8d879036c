package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/logjail/logjail/control"
	"github.com/spf13/cobra"
)

type bouncersOptions struct {
	cfg     configFlag
	out     outputFlag
	headers headersFlag
}

func newBouncersCmd(s streams) *cobra.Command {
	var o bouncersOptions
	cmd := &cobra.Command{
		Use:   "bouncers add NAME | list | delete NAME",
		Short: "The CrowdSec bouncers that may pull decisions from a `type: crowdsec` action",
		Long: `bouncers manages the API keys of the CrowdSec bouncers (crowdsec-firewall-bouncer,
the custom bouncer, the nginx, Traefik and Caddy bouncers) that pull logjail's
decisions from a crowdsec action (README, "CrowdSec bouncers").

  add NAME      makes a new key, prints it this once (put it in the bouncer's
                api_key) and keeps only its SHA-256; it works within a second
  list          name, created, last pull, and the address and User-Agent of it
  delete NAME   removes the key: the bouncer is refused within a second

Through the running daemon, or on the database when none answers.

` + operatorExits,
	}
	pf := cmd.PersistentFlags()
	pf.StringVarP(&o.cfg.path, "config", "c", "", "configuration file (default "+defaultConfigPath+")")
	pf.StringVarP(&o.out.format, "output", "o", "text", "text or json")
	add := &cobra.Command{
		Use: "add NAME", Short: "Make a key for a bouncer: printed once", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.out.check(); err != nil {
				return err
			}
			return runBouncersAdd(cmd.Context(), &o, s, args[0], time.Now())
		},
	}
	list := &cobra.Command{
		Use: "list", Short: "The bouncers and their last pulls", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.out.check(); err != nil {
				return err
			}
			return runBouncersList(cmd.Context(), &o, s)
		},
	}
	o.headers.addFlag(list)
	del := &cobra.Command{
		Use: "delete NAME", Short: "Remove a bouncer's key", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.out.check(); err != nil {
				return err
			}
			return runBouncersDelete(cmd.Context(), &o, s, args[0])
		},
	}
	cmd.AddCommand(add, list, del)
	return cmd
}

// bouncersDo runs live through the daemon, or, when none answers, offline
// on the database opened as its writer (write) or a reader.
func bouncersDo[R any](ctx context.Context, o *bouncersOptions, s streams, write bool,
	live func(context.Context, *control.Client) (R, error), offline func(db any) (R, error)) (R, error) {
	var zero R
	op, err := open(&o.cfg, s)
	if err != nil {
		return zero, err
	}
	c := op.client()
	defer c.Close()
	cctx, cancel := withTimeout(ctx, readTimeout)
	defer cancel()
	res, err := live(cctx, c)
	if !errors.Is(err, control.ErrNoDaemon) {
		return res, apiError(err)
	}
	if !write {
		db, err := op.reader()
		if err != nil || db == nil {
			return zero, err
		}
		defer db.Close()
		res, err := offline(db)
		return res, apiError(err)
	}
	db, err := op.writer()
	if err != nil {
		return zero, err
	}
	defer db.Close()
	res, err = offline(db)
	return res, apiError(err)
}

func runBouncersAdd(ctx context.Context, o *bouncersOptions, s streams, name string, now time.Time) error {
	res, err := bouncersDo(ctx, o, s, true,
		func(ctx context.Context, c *control.Client) (*control.BouncerAdded, error) {
			return c.AddBouncer(ctx, name)
		},
		func(db any) (*control.BouncerAdded, error) { return control.AddBouncer(db, name, now) })
	if err != nil {
		return err
	}
	if o.out.json() {
		return writeJSON(s.out, res)
	}
	fmt.Fprintf(s.err, "bouncer %s added; its API key, shown this once (the bouncer's api_key):\n", res.Name)
	fmt.Fprintln(s.out, res.Key)
	return nil
}

func runBouncersList(ctx context.Context, o *bouncersOptions, s streams) error {
	l, err := bouncersDo(ctx, o, s, false,
		func(ctx context.Context, c *control.Client) (*control.BouncerList, error) { return c.Bouncers(ctx) },
		func(db any) (*control.BouncerList, error) { return control.ListBouncers(db) })
	if err != nil {
		return err
	}
	if l == nil {
		l = &control.BouncerList{Bouncers: []control.BouncerInfo{}}
	}
	if o.out.json() {
		return writeJSON(s.out, l)
	}
	tty := o.headers.table(s.out)
	if len(l.Bouncers) == 0 {
		sayEmpty(s, tty, "no bouncers: add one with `logjail bouncers add NAME`")
		return nil
	}
	t := newTable(s.out, tty, "NAME", "CREATED", "LAST PULL", "IP", "USER AGENT")
	for _, b := range l.Bouncers {
		t.row(b.Name, fmtTime(b.Created), fmtTimePtr(b.LastPull), orDash(b.IP), orDash(b.UserAgent))
	}
	return t.flush()
}

func runBouncersDelete(ctx context.Context, o *bouncersOptions, s streams, name string) error {
	_, err := bouncersDo(ctx, o, s, true,
		func(ctx context.Context, c *control.Client) (struct{}, error) {
			return struct{}{}, c.DeleteBouncer(ctx, name)
		},
		func(db any) (struct{}, error) { return struct{}{}, control.DeleteBouncer(db, name) })
	if err != nil {
		return err
	}
	if o.out.json() {
		return writeJSON(s.out, control.BouncerRequest{Name: name})
	}
	fmt.Fprintf(s.out, "bouncer %s deleted\n", name)
	return nil
}

// orDash is s, or "-" when empty, cleaned for a terminal.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return clean(s)
}
