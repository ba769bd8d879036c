// Command logjail is a log-driven ban daemon for web servers. This package
// only wires the commands together: each command lives in its own file
// (cmd_parse.go, cmd_replay.go, ...), and main alone calls os.Exit.
//
// Choices made here where DESIGN.md is silent:
//
//   - replay exits 1 when any line was rejected, as parse does (the same
//     exit codes for every command); it still prints the whole report.
//   - replay and parse share the format flags (formatFlags); given, they
//     replace the config source's format, while the file still belongs to
//     that source for the rules' sources:.
//   - A file more than half of whose lines were rejected gets a hint on
//     stderr (formatHint): the presets that read most of its first 200
//     lines, the one auto picks first, or how to describe the format.
//   - list, top and history print a header and aligned columns on a
//     terminal, tab-separated rows without a header otherwise or with
//     --no-headers; an empty listing says so on stdout under a terminal's
//     table, else on stderr, so that a script reads no rows.
//   - run asks whether another process holds the database (store.Held)
//     before binding anything, so that a second daemon names the first
//     one's pid instead of failing on an address in use.
//   - version and --version print the module version, the VCS commit and
//     Go's release, from the build information.
//   - export and import (cmd_export.go, cmd_import.go; README "Import
//     and export"): export writes bans only (no throttles, no log-only
//     bans, which block nothing); plain and crowdsec leave out keys that
//     are no address and count them on stderr; a ban until lifted is
//     100 years in crowdsec's duration. import refuses a CIDR with host
//     bits (as ban does) rather than masking it; a file with any bad
//     entry (a line that does not read, an allowed entry without
//     --force) imports nothing and exits 1, as parse's rejected lines
//     do; what is no ban (captcha, throttle, simulated, a Country scope,
//     an ended decision) is left out and counted, not an error; the
//     file's rule names are not taken over (the bans are operator's or
//     --rule's); an entry named twice is banned once to the later end.
//
// Exit codes, the same for every command (DESIGN.md, "Operation"):
//
//	0  done; every line parsed; the config is valid
//	1  done, with a negative answer: some lines rejected (parse, replay),
//	   the config is invalid (check), nothing matched
//	2  usage error, or a config that cannot be loaded
//	3  the daemon is needed and unreachable
//	4  runtime failure: the command started and failed (database, I/O)
//
// Code 4 is logjail's addition to DESIGN.md's table: an error a command
// returns without a code of its own (exitError) is a runtime failure, so
// that a script tells "fix the command line or the config" (2) from "the
// machine failed under it" (4). Cobra's own errors (unknown command, bad
// arguments, bad flags) stay usage errors. A command interrupted by a
// signal before it finished is a runtime failure too.
//
// Boundaries: It owns the command line (flags, help, output formats, exit
// codes) and only wires the packages together: a command's logic lives in
// control, ops, replay or daemon, so that the commands decide nothing a
// test of those packages does not see. Only its openers name store.Open
// (everything else takes the state package's interfaces), and main alone
// calls os.Exit.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	// The IANA zone database in the binary (about 450 KB), so that a
	// source's `timezone: Europe/Paris` reads the same on a machine or in a
	// container without /usr/share/zoneinfo.
	_ "time/tzdata"

	"github.com/spf13/cobra"
)

// Exit codes.
const (
	exitOK          = 0
	exitNegative    = 1
	exitUsage       = 2
	exitUnreachable = 3
	exitRuntime     = 4
)

// exitError carries an exit code up to main. A nil err with a code means
// "say nothing more, exit with code" (the command already explained itself).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usageError marks err as a usage error (exit 2).
func usageError(err error) error { return &exitError{code: exitUsage, err: err} }

// streams are the command's standard streams, injected so tests can run
// commands without a process.
type streams struct {
	in       io.Reader
	out, err io.Writer
}

func newRootCmd(s streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "logjail",
		Short: "A log-driven ban daemon for web servers",
		Long: `logjail reads web server access logs, charges every request to a client key
(IP, prefix, range, user), keeps sliding windows of request rate and CPU share
per key, and throttles or bans the keys that go over a rule's limits.

Exit codes: 0 done (every line parsed, config valid); 1 done with a negative
answer (lines rejected, config invalid, nothing matched); 2 usage error or a
config that cannot be loaded; 3 the daemon is needed and unreachable; 4 runtime
failure: the command started and failed (database, I/O).`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetIn(s.in)
	root.SetOut(s.out)
	root.SetErr(s.err)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError(err) })
	root.AddCommand(
		newParseCmd(s),
		newReplayCmd(s),
		newCheckCmd(s),
		newExampleConfigCmd(s),
		newRunCmd(s),
		newCleanCmd(s),
		newListCmd(s),
		newBanCmd(s),
		newUnbanCmd(s),
		newExportCmd(s),
		newImportCmd(s),
		newTopCmd(s),
		newHistoryCmd(s),
		newStatusCmd(s),
		newBreakerCmd(s),
		newBouncersCmd(s),
		newVersionCmd(s),
	)
	runtimeFailures(root)
	root.Version = versionText()
	root.SetVersionTemplate("{{.Version}}\n")
	return root
}

// runtimeFailures makes every command under c return an error that carries
// no exit code as a runtime failure (exit 4): the command had started.
func runtimeFailures(c *cobra.Command) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			err := run(cmd, args)
			var ee *exitError
			if err != nil && !errors.As(err, &ee) {
				return &exitError{code: exitRuntime, err: err}
			}
			return err
		}
	}
	for _, sub := range c.Commands() {
		runtimeFailures(sub)
	}
}

// execute runs the command line args and returns the process exit code.
func execute(ctx context.Context, args []string, s streams) int {
	root := newRootCmd(s)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	code := exitUsage // cobra's own errors (unknown command, bad args) are usage errors
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
		if ee.err == nil {
			return code
		}
	}
	fmt.Fprintf(s.err, "logjail: %v\n", err)
	return code
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, os.Args[1:], streams{in: os.Stdin, out: os.Stdout, err: os.Stderr})
	stop()
	os.Exit(code)
}
