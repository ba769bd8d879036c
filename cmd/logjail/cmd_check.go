package main

import (
	"fmt"
	"io"
	"os"

	"github.com/logjail/logjail/actions"
	"github.com/logjail/logjail/rules"
	"github.com/spf13/cobra"
)

func newCheckCmd(s streams) *cobra.Command {
	var cf configFlag
	var systemd bool
	cmd := &cobra.Command{
		Use:   "check [--config F] [--systemd]",
		Short: "Validate the configuration: exit 0 when valid, 1 when not",
		Long: `check loads the configuration (--config, else ` + defaultConfigPath + `) with every
list file it names, compiles its formats, regexes, CIDRs and limits, checks
every action's options (without touching anything), and lists every problem
at once, in the order of the file, each with its file, line and path (an
action's option by the line of its value). run, replay, parse, clean and
the operator's commands load the file in the same pass: they refuse what
check refuses. What is valid but likely a
mistake (/metrics on a non-loopback address, a decision endpoint with
allow_remote on a public address) is printed on stderr as a warning, with
how to silence it (silence: [metrics_remote, endpoint_public]); the exit
code stays 0.

--systemd prints, when the configuration is valid, the systemd drop-in that
gives logjail.service what the configured actions need (capabilities such as
CAP_NET_ADMIN, ReadWritePaths= for list files and the xtables lock), each
line with a comment saying why:

  logjail check --systemd > /etc/systemd/system/logjail.service.d/actions.conf

Exit codes: 0 valid; 1 invalid; 2 no configuration file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := cf.path
			if path == "" {
				path = defaultConfigPath
			}
			if _, err := os.Stat(path); err != nil {
				return usageError(err)
			}
			cfg, err := rules.Load(path, loadOptions())
			if err != nil {
				return &exitError{code: exitNegative, err: configErrors(err)}
			}
			// Warnings go to stderr and leave the exit code 0: the
			// configuration is valid, perhaps not as intended.
			for _, w := range cfg.Warnings() {
				fmt.Fprintf(s.err, "warning: %v\n", w)
			}
			if systemd {
				fmt.Fprintf(s.err, "%s: valid: %s\n", path, checkCounts(cfg))
				_, err := io.WriteString(s.out, actions.SystemdDropIn(cfg))
				return err
			}
			fmt.Fprintf(s.out, "%s: valid: %s\n", path, checkCounts(cfg))
			return nil
		},
	}
	cf.addFlag(cmd)
	cmd.Flags().BoolVar(&systemd, "systemd", false, "print the systemd drop-in the configured actions need")
	return cmd
}

func newExampleConfigCmd(s streams) *cobra.Command {
	return &cobra.Command{
		Use:   "example-config",
		Short: "Print the commented example configuration, the reference for every key",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := s.out.Write(rules.Example())
			return err
		},
	}
}

// checkCounts says what a valid configuration holds: "1 source, 2 rules,
// 1 action".
func checkCounts(cfg *rules.Config) string {
	return plural(len(cfg.Sources), "source", "sources") + ", " + plural(len(cfg.Rules), "rule", "rules") + ", " + plural(len(cfg.Actions), "action", "actions")
}
