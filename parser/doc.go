// Package parser turns access-log lines into Entry values.
//
// A format (a preset, an nginx log_format, an Apache LogFormat, a PHP-FPM
// access.format, or a JSON field mapping) is compiled once by New into a
// field scanner: a list of literal separators and field readers. Parsing a
// line walks that list; no regular expression runs on the hot path, times
// and numbers are read by hand. Apache's LogFormat and PHP-FPM's
// access.format are one compiler (compilePercent); what sets the two
// families apart (escapes, modifiers, %t's brackets, the finest duration,
// the directive letters) is data.
//
// The scan (scan.go). A field ends where the literal after it starts:
// finish gives each field that literal (sep), and the scan looks for it
// byte by byte in a value's first 16 bytes, then with IndexByte on its
// rarest byte (sepAt); the literal found is taken without being compared
// again. A literal of at most 8 bytes is compared as one word where 8
// bytes of the line follow (hasWord: the item carries its literal's and
// sep's word and mask). Quoted fields end at a quote that starts the
// next literal (findClose). The usual CLF time, "02/Jan/2006:15:04:05 -0700", is read
// in one pass (clfFixed), and remembered: a log's lines come in runs of
// the same second, and a parser keeps the last time read for each value
// of the last digit of the seconds, masked to 3 bits (clfCache, a sequence lock of atomics a slot,
// the whole text compared). A caller that parses one line at a time on
// its goroutine (a replay's block, the daemon's parsing goroutine of a
// source) may pass a TimeMemo of its own
// (ParseStringMemo): the CLF prefix's time is then first compared with
// the last one that caller read, as three words and two bytes, before
// the shared cache. Dotted quads and hex IPv6 ("2001:db8::1") are
// read without netip (parseDottedQuad, parseHexIPv6), anything else by
// netip.ParseAddr. A format that begins with the CLF prefix (`%h %l %u
// %t "%r" %>s %b` or nginx's `$remote_addr - $remote_user [$time_local]
// "$request" $status $body_bytes_sent`, then a literal: combined and the
// presets built on it, the genlog's log_format; clfPrefix decides at New)
// has that prefix, and a referer and user agent after it, read in a
// straight line for the usual values (readCLF: an IPv4 or hex IPv6
// client, "-" idents, the 26-byte time, quoted fields closed by their
// first quote, three-digit statuses, digit sizes, up to 8 digits read
// at once by digitsAt), with no dispatch on
// the items; at the first value of any other shape the item loop
// (scanFrom) reads on from that item (TestCLFPrefix). A timing field
// (a duration other than Apache's %D, or a plain field such as the CPU
// field), unquoted and before a literal that starts with neither a digit
// nor '.', reads a plain number where it starts (item.num, numAt: the
// value parseFloat would compute, without findSep or set); after the CLF
// prefix a tail of them is read by readNums ("rt=0.034 cpu=0.026"), and
// anything else takes the loop's way (TestNumTailAsReference). main's scanner
// before issue 23's round 4 is kept as a test-only reference
// (ref_scan_test.go): TestScanAsReference compares
// every Entry, error and completeness on the corpora and on mutated lines,
// TestHelpersAsReference the number, address and time readers on random
// values, and every fuzzer compares as well.
//
// A field of an Entry is read by name in one place: FieldRef (Ref resolves
// the name once; Entry.Get is Ref(name).Get). rules' `match` reads its
// fields through it.
//
// Invariants:
//   - no I/O, no package-level mutable state, no clock: the time of an Entry
//     is the line's own, and a zone-less time is read in Options.Location;
//   - a *Parser is immutable after New, but for the W3C presets' record of
//     the `#Fields:` lines it has read and its caches of zones and CLF
//     times, and safe for concurrent use by any number of goroutines (the
//     caches and that record are lock-free; the caches do not allocate on
//     a hit, the CLF times' not at all for zone offsets within ±18h:
//     a zone past that is made again each time);
//   - Parse and ParseString never panic; a line that cannot yield a client
//     address and a time is an *Error naming the line, the field and why;
//     anything else missing or unreadable is absent (its Has bit clear);
//   - ParseString does not copy: the Entry's strings may point into the
//     line (a value is decoded into a new string only when it carries
//     escapes). Parse copies the line once. ParseStringBuf is ParseString
//     with the Entry's other named fields (Entry.Fields) kept in a buffer
//     the caller reuses (replay: one a block of lines), so that a format
//     with named fields (a log_format's cpu=$upstream_http_x_cpu_time)
//     allocates nothing a line either; the Entry is ParseString's, field
//     for field (TestParseStringBufSameEntry on the corpus, the fuzzers).
//     ParseStringTo is ParseStringBuf writing the Entry into one the
//     caller holds (replay: its place in the block), whatever that held:
//     every field is written (the zero Entry on an error), and no Entry is
//     copied; the same tests read every line through it into an Entry full
//     of another line's values.
//
// Host-first logs. The presets vhost_combined (Apache's `%v:%p %h %l %u %t
// "%r" %>s %O ...`, Debian's other_vhosts_access.log) and host_combined
// (nginx's `$host $remote_addr - $remote_user [$time_local] ...`) read a
// first field "host" or "host:port" into Entry.Host and the port into the
// field port_canonical (Apache's %p) or server_port (nginx); "[v6]:port"
// loses its brackets, and an unbracketed IPv6 host is split at its last
// ":digits" only when what is before is itself an IPv6 address (Netdata's
// "2001:db8:1ce::1:82"). Their size, %O in Apache's, is read as Bytes. The
// two read the same lines; Detect picks vhost_combined when most of the
// lines it read carry a port, host_combined otherwise (and when only
// host_combined reads a forwarding chain in $remote_addr).
//
// Strict common and combined. The presets built on `%h %l %u` (common,
// combined, nginx_timing, apache_timing, traefik_clf) refuse a line whose
// ident (%l, "-" unless identd answers with a user name) looks like an
// address: an IP, anything with a '.' or ':', or "localhost". Such a line
// is host-first, and reading it would charge the host, or the server's own
// address, as the client. It is an *Error on the field ip whose reason
// names remote_addr and the presets that read it. A line whose first field
// is an address followed by "-" or a user name reads as before. An
// apache_format or log_format written by the user is read as written.
//
// Presets read by hand (hand.go). haproxy, alb, cloudfront, iis and envoy
// are not a list of items but a function each, since their lines are not
// one fixed sequence of literals and fields: HAProxy's httplog behind any
// syslog header, with optional capture blocks and connection-error lines
// (haproxy.go); the ALB's fields with an absolute URL and three processing
// times (alb.go); the W3C extended format, whose columns the last
// `#Fields:` line names, per file and again mid-file (w3c.go); Envoy's
// default format string or Envoy Gateway's JSON lines, in an optional CRI
// wrapper (envoy.go). Each file's comment says what each field becomes and
// which time, client and duration it takes. None logs CPU of its own, so a
// `% cpu` rule on them is refused unless cpu_fallback: duration, or unless
// cpu_field names one of their named fields holding CPU seconds (an IIS
// custom field, say; Envoy's JSON keys are a fixed set); all carry a
// duration in seconds (HAProxy's Ta, the ALB's three processing times
// summed, time-taken in IIS's milliseconds or CloudFront's seconds, Envoy's
// %DURATION% in milliseconds). A W3C directive line (`#Fields:`,
// `#Version:`, ...) is an *Error that is ErrDirective: no entry, and no
// malformed line; Parser.Directive lets a reader that parses blocks out of
// order note them in file order first.
//
// What `auto` (Detect) can and cannot tell apart among them: a W3C log
// is cloudfront when its columns (its `#Fields:`, or the 33 tab-separated
// default columns) include x-edge-* fields, iis otherwise, so a W3C log of
// another server reads as iis (time-taken in milliseconds); a
// Classic ELB log (no type field first) is not alb, and no preset reads it;
// HAProxy's or Envoy's own log-format strings other than their defaults
// are not recognised (write them as a log_format); Envoy's JSON lines are
// recognised by their keys (downstream_remote_address, start_time,
// response_code), other JSON access logs are not taken for Envoy's.
//
// The client address honours X-Forwarded-For only when the connecting
// address is in Options.TrustedProxies: the client is then the rightmost
// address that is not a trusted proxy.
//
// Boundaries: It owns the formats and parser.Entry. It must not do I/O (it
// is given text, never a file), know the rules, keys or limits, or read the
// clock: every time it returns is the line's own.
package parser
