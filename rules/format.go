package rules

import (
	"errors"
	"strings"

	"github.com/logjail/logjail/parser"
)

// checkFormat compiles a source's format once, so that a bad format string is
// a configuration error. "auto" is decided on a file's first lines, later.
func checkFormat(o parser.Options) error {
	if o.Format == "auto" && o.LogFormat == "" && o.ApacheFormat == "" && o.FPMFormat == "" && len(o.JSONFields) == 0 {
		return nil
	}
	if _, err := parser.New(o); err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "parser: "))
	}
	return nil
}
