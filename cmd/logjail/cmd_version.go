package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// versionText is what `logjail version` and `logjail --version` print, from
// the build information Go writes into the binary: the module version (a
// tagged release, a pseudo-version of a build from a clone, or "devel"
// where Go recorded none), the VCS commit and its time with "modified" for
// uncommitted changes (absent from `go run` and -buildvcs=false builds:
// "commit unknown"), the Go release and the platform.
func versionText() string {
	v, commit := "devel", "commit unknown (built without VCS information)"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		var rev, when, modified string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					modified = ", modified"
				}
			}
		}
		if rev != "" {
			commit = "commit " + rev
			if when != "" {
				commit += " (" + when + modified + ")"
			}
		}
	}
	return strings.Join([]string{"logjail " + v, commit, fmt.Sprintf("%s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH)}, "\n")
}

func newVersionCmd(s streams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print logjail's version, the commit it was built from, and Go's",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(s.out, versionText())
			return err
		},
	}
}
