// Package parser turns access-log lines into Entry values.
//
// A format (a preset, an nginx log_format, an Apache LogFormat, a PHP-FPM
// access.format, or a JSON field mapping) is compiled once by New into a
// field scanner: a list of literal separators and field readers. Parsing a
// line walks that list; no regular expression runs on the hot path, times
// and numbers are read by hand.
//
// Invariants:
//   - no I/O, no package-level mutable state, no clock: the time of an Entry
//     is the line's own, and a zone-less time is read in Options.Location;
//   - a *Parser is immutable after New and safe for concurrent use by any
//     number of goroutines (its zone cache is lock-free and does not
//     allocate on a hit);
//   - Parse and ParseString never panic; a line that cannot yield a client
//     address and a time is an *Error naming the line, the field and why;
//     anything else missing or unreadable is absent (its Has bit clear);
//   - ParseString does not copy: the Entry's strings may point into the
//     line (a value is decoded into a new string only when it carries
//     escapes). Parse copies the line once.
//
// The client address honours X-Forwarded-For only when the connecting
// address is in Options.TrustedProxies: the client is then the rightmost
// address that is not a trusted proxy.
package parser
