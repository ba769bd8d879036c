package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/logjail/logjail/actions"
	"github.com/logjail/logjail/endpoint"
	"github.com/logjail/logjail/rules"
	"github.com/spf13/cobra"
)

// defaultConfigPath is where the daemon and the commands look for the
// configuration when --config is not given.
const defaultConfigPath = "/etc/logjail/logjail.yaml"

// configFlag is the --config flag shared by the commands that read the config.
type configFlag struct {
	path string
}

func (c *configFlag) addFlag(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&c.path, "config", "c", "", "configuration file (default "+defaultConfigPath+", else the embedded example)")
}

// loadOptions are the options of every command's load of the
// configuration (check, run, replay, parse, clean and the operator's): the
// registry of action types checks each action's options in the pass that
// checks the rest of the file (rules.Options.Actions), so that one error
// lists every problem by line and every command accepts exactly the files
// `check` accepts. replay and parse act on nothing, yet refuse a file
// whose action options are wrong all the same: a careful operator expects
// `replay --config X` to accept what `check` and `run` accept, no more.
func loadOptions() rules.Options {
	return rules.Options{Actions: actions.Builtin(endpoint.CheckOptions)}
}

// load returns the configuration as DESIGN.md's "Operation" says: --config,
// else the default path, else (when allowExample) the embedded example with a
// note on stderr. A config that cannot be loaded is exit code 2, with every
// problem listed.
func (c *configFlag) load(stderr io.Writer, allowExample bool) (*rules.Config, error) {
	path := c.path
	if path == "" {
		if _, err := os.Stat(defaultConfigPath); err == nil {
			path = defaultConfigPath
		} else if allowExample {
			fmt.Fprintf(stderr, "logjail: no %s and no --config: using the embedded example config (see 'logjail example-config')\n", defaultConfigPath)
			cfg, err := rules.Parse("example.yaml", rules.Example(), loadOptions())
			if err != nil {
				return nil, &exitError{code: exitUsage, err: fmt.Errorf("embedded example config: %w", err)}
			}
			return cfg, nil
		} else {
			return nil, &exitError{code: exitUsage, err: fmt.Errorf("no %s: give --config", defaultConfigPath)}
		}
	}
	cfg, err := rules.Load(path, loadOptions())
	if err != nil {
		return nil, &exitError{code: exitUsage, err: configErrors(err)}
	}
	return cfg, nil
}

// configErrors puts each of a joined error's problems on its own line.
func configErrors(err error) error {
	var j interface{ Unwrap() []error }
	if !errors.As(err, &j) {
		return err
	}
	msg := "invalid configuration:"
	for _, e := range j.Unwrap() {
		msg += "\n  " + e.Error()
	}
	return errors.New(msg)
}
