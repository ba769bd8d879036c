package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/rules"
	"github.com/spf13/pflag"
)

// formatFlags are the flags that say how to read a log, shared by `parse`
// and `replay`: one format (a preset or auto, an nginx log_format, an Apache
// LogFormat, a PHP-FPM access.format, or a JSON field mapping), and the
// cpu field, time zone and trusted proxies. Given, they override the config
// source's; the source still names the lines for the rules' `sources:`.
type formatFlags struct {
	format       string
	logFormat    string
	apacheFormat string
	fpmFormat    string
	jsonFields   []string
	cpuField     string
	timezone     string
	trusted      []string
}

func (o *formatFlags) addFlags(f *pflag.FlagSet) {
	f.StringVar(&o.format, "format", "", "preset: "+strings.Join(parser.Presets(), ", ")+", or auto (the preset that reads the first lines)")
	f.StringVar(&o.logFormat, "log-format", "", "an nginx log_format string")
	f.StringVar(&o.apacheFormat, "apache-format", "", "an Apache LogFormat string")
	f.StringVar(&o.fpmFormat, "fpm-format", "", "a PHP-FPM access.format string")
	f.StringArrayVar(&o.jsonFields, "json-field", nil, "JSON lines: `NAME=PATH` maps an Entry field to a dotted JSON path (repeatable)")
	f.StringVar(&o.cpuField, "cpu-field", "", "the named field that holds CPU seconds")
	f.StringVar(&o.timezone, "timezone", "", "zone for times without one (default: the source's, else Local)")
	f.StringArrayVar(&o.trusted, "trusted-proxy", nil, "`CIDR` of a proxy whose X-Forwarded-For is believed (repeatable)")
}

// given reports whether a format came from the command line.
func (o *formatFlags) given() bool {
	return o.format != "" || o.logFormat != "" || o.apacheFormat != "" || o.fpmFormat != "" || len(o.jsonFields) > 0
}

// overrides reports whether any flag changes the source's parser options.
func (o *formatFlags) overrides() bool {
	return o.given() || o.cpuField != "" || o.timezone != "" || len(o.trusted) > 0
}

// parserOptions builds the parser options: the command line's format when
// given, else the config source's; the other flags override the source's.
func (o *formatFlags) parserOptions(src *rules.Source) (parser.Options, error) {
	var po parser.Options
	if src != nil {
		po = src.Parser
	}
	if o.given() {
		n := 0
		for _, s := range []string{o.format, o.logFormat, o.apacheFormat, o.fpmFormat} {
			if s != "" {
				n++
			}
		}
		if len(o.jsonFields) > 0 {
			n++
		}
		if n > 1 {
			return po, errors.New("give one of --format, --log-format, --apache-format, --fpm-format, --json-field")
		}
		po.Format, po.LogFormat, po.ApacheFormat, po.FPMFormat, po.JSONFields = o.format, o.logFormat, o.apacheFormat, o.fpmFormat, nil
		if len(o.jsonFields) > 0 {
			po.JSONFields = map[string]string{}
			for _, kv := range o.jsonFields {
				name, path, ok := strings.Cut(kv, "=")
				if !ok || name == "" || path == "" {
					return po, fmt.Errorf("--json-field %q: want NAME=PATH", kv)
				}
				po.JSONFields[name] = path
			}
		}
		if src == nil || o.cpuField != "" {
			po.CPUField = o.cpuField
		}
	} else if o.cpuField != "" {
		po.CPUField = o.cpuField
	}
	if o.timezone != "" {
		loc, err := time.LoadLocation(o.timezone)
		if err != nil {
			return po, fmt.Errorf("--timezone: %w", err)
		}
		po.Location = loc
	}
	if len(o.trusted) > 0 {
		po.TrustedProxies = nil
		for _, s := range o.trusted {
			p, err := parsePrefix(s)
			if err != nil {
				return po, fmt.Errorf("--trusted-proxy: %w", err)
			}
			po.TrustedProxies = append(po.TrustedProxies, p)
		}
	}
	return po, nil
}
