package main

import (
	"errors"
	"fmt"
	"io"
	"os"

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
			cfg, err := rules.Parse("example.yaml", rules.Example(), rules.Options{})
			if err != nil {
				return nil, &exitError{code: exitUsage, err: fmt.Errorf("embedded example config: %w", err)}
			}
			return cfg, nil
		} else {
			return nil, &exitError{code: exitUsage, err: fmt.Errorf("no %s: give --config", defaultConfigPath)}
		}
	}
	cfg, err := rules.Load(path, rules.Options{})
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
