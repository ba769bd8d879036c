package parser

import (
	"fmt"
	"strings"
)

// field builds a field item.
func field(k kind, name string) item { return item{kind: k, name: name} }

func lit(s string) item { return item{kind: kLit, lit: s} }

// appendLit adds literal text, merging it with a literal before it.
func appendLit(items []item, s string) []item {
	if s == "" {
		return items
	}
	if n := len(items); n > 0 && items[n-1].kind == kLit {
		items[n-1].lit += s
		return items
	}
	return append(items, lit(s))
}

// --- nginx log_format ---

func isVarChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// compileNginx turns an nginx log_format string into items.
func compileNginx(f string) ([]item, error) {
	var items []item
	for i := 0; i < len(f); {
		c := f[i]
		if c != '$' {
			j := strings.IndexByte(f[i:], '$')
			if j < 0 {
				j = len(f) - i
			}
			items = appendLit(items, f[i:i+j])
			i += j
			continue
		}
		var name string
		if i+1 < len(f) && f[i+1] == '{' {
			j := strings.IndexByte(f[i:], '}')
			if j < 0 {
				return nil, fmt.Errorf("log_format: %q: unclosed ${", f[i:])
			}
			name = f[i+2 : i+j]
			i += j + 1
		} else {
			j := i + 1
			for j < len(f) && isVarChar(f[j]) {
				j++
			}
			name = f[i+1 : j]
			i = j
		}
		if name == "" {
			return nil, fmt.Errorf("log_format: \"$\" at byte %d: no variable name", i-1)
		}
		for k := 0; k < len(name); k++ {
			if !isVarChar(name[k]) {
				return nil, fmt.Errorf("log_format: $%s: not a variable name", name)
			}
		}
		items = append(items, nginxVar(name))
	}
	return items, nil
}

func nginxVar(name string) item {
	switch name {
	case "remote_addr", "realip_remote_addr":
		it := field(kIP, name)
		if name == "remote_addr" {
			it.strength = 1
		}
		return it
	case "http_x_forwarded_for":
		return field(kXFF, name)
	case "proxy_add_x_forwarded_for":
		return field(kXFFAdd, name)
	case "time_local":
		return field(kTimeCLF, name)
	case "time_iso8601":
		return field(kTimeISO, name)
	case "msec":
		return field(kTimeEpoch, name)
	case "request":
		return field(kRequest, name)
	case "request_method":
		return field(kMethod, name)
	case "request_uri":
		return field(kURI, name)
	case "uri", "document_uri":
		return field(kPath, name)
	case "is_args":
		return field(kSkip, name)
	case "args", "query_string":
		return field(kQuery, name)
	case "server_protocol":
		return field(kProtocol, name)
	case "status":
		return field(kStatus, name)
	case "body_bytes_sent", "bytes_sent":
		return field(kBytes, name)
	case "http_referer":
		return field(kReferer, name)
	case "http_user_agent":
		return field(kUA, name)
	case "remote_user":
		return field(kUser, name)
	case "host", "server_name", "http_host":
		return field(kHost, name)
	case "request_time":
		it := field(kDuration, name)
		it.scale = 1
		return it
	}
	return field(kField, name)
}

// --- Apache LogFormat ---

// apacheHeaderName turns "User-Agent" into "user_agent".
func headerName(prefix, h string) string {
	return prefix + strings.ReplaceAll(strings.ToLower(h), "-", "_")
}

// directive reads the %-directive at f[i] of an Apache or PHP-FPM format:
// optional modifiers (Apache only: status conditions and '<' '>' '!' ','),
// an optional {argument}, and the letter. It returns the letter, the
// argument and the index after the letter.
func directive(f string, i int, family string, modifiers bool) (c byte, arg string, hasArg bool, next int, err error) {
	start := i
	i++
	for modifiers && i < len(f) && (f[i] == '<' || f[i] == '>' || f[i] == '!' || f[i] == ',' || f[i]-'0' <= 9) {
		i++
	}
	if i < len(f) && f[i] == '{' {
		j := strings.IndexByte(f[i:], '}')
		if j < 0 {
			return 0, "", false, 0, fmt.Errorf("%s format: %q: unclosed {", family, f[start:])
		}
		arg, hasArg = f[i+1:i+j], true
		i += j + 1
	}
	if i >= len(f) {
		return 0, "", false, 0, fmt.Errorf("%s format: %q: directive without a letter", family, f[start:])
	}
	return f[i], arg, hasArg, i + 1, nil
}

// percentFormat is what sets one %-directive format family apart (Apache's
// LogFormat, PHP-FPM's access.format); compilePercent is the one compiler
// of both.
type percentFormat struct {
	family    string // "apache" or "fpm", in errors
	unescape  bool   // read the backslash escapes of a server config first
	modifiers bool   // status conditions and '<' '>' '!' ',' before the letter
	// bracketTime: %t without an argument writes its own brackets.
	bracketTime bool
	// finestDuration: of several durations, the finest is the entry's.
	finestDuration bool
	directive      func(c byte, arg string, hasArg bool) (item, error)
}

// compileApache turns an Apache LogFormat string into items.
func compileApache(f string) ([]item, error) {
	return compilePercent(f, percentFormat{family: "apache", unescape: true, modifiers: true,
		bracketTime: true, finestDuration: true, directive: apacheDirective})
}

// compilePercent turns a format string of the family pf into items.
func compilePercent(f string, pf percentFormat) ([]item, error) {
	if pf.unescape {
		f = unescapeFormat(f)
	}
	var items []item
	for i := 0; i < len(f); {
		if f[i] != '%' {
			j := strings.IndexByte(f[i:], '%')
			if j < 0 {
				j = len(f) - i
			}
			items = appendLit(items, f[i:i+j])
			i += j
			continue
		}
		start := i
		c, arg, hasArg, next, err := directive(f, i, pf.family, pf.modifiers)
		if err != nil {
			return nil, err
		}
		i = next
		if c == '%' {
			items = appendLit(items, "%")
			continue
		}
		it, err := pf.directive(c, arg, hasArg)
		if err != nil {
			return nil, fmt.Errorf("%s format: %s: %w", pf.family, f[start:i], err)
		}
		if pf.bracketTime && c == 't' && !hasArg {
			// %t writes its own brackets.
			items = appendLit(items, "[")
			items = append(items, it)
			items = appendLit(items, "]")
			continue
		}
		items = append(items, it)
	}
	if pf.finestDuration {
		finestDuration(items)
	}
	return items, nil
}

// finestDuration keeps, of several durations in one format (Apache's %T
// and %D), the finest as the entry's duration, wherever it stands: %T is
// whole seconds, %D microseconds, and the coarser one must not override
// the finer. The others stay as named fields (%T as duration_s, %{ms}T
// as duration_ms).
func finestDuration(items []item) {
	best := -1
	for i := range items {
		if items[i].kind == kDuration && (best < 0 || items[i].scale < items[best].scale) {
			best = i
		}
	}
	for i := range items {
		if items[i].kind == kDuration && i != best {
			items[i].kind = kField
			if items[i].name == "duration" {
				switch items[i].scale {
				case 1e-3:
					items[i].name = "duration_ms"
				case 1e-6:
					items[i].name = "duration_us"
				default:
					items[i].name = "duration_s"
				}
			}
		}
	}
}

// unescapeFormat reads the backslash escapes of a format string as written in
// a server's configuration (\" \\ \t \n).
func unescapeFormat(f string) string {
	if !strings.Contains(f, `\`) {
		return f
	}
	r := strings.NewReplacer(`\"`, `"`, `\\`, `\`, `\t`, "\t", `\n`, "\n")
	return r.Replace(f)
}

func apacheDirective(c byte, arg string, hasArg bool) (item, error) {
	switch c {
	case 'h':
		return field(kIP, "remote_host"), nil
	case 'a':
		it := field(kIP, "remote_addr")
		it.strength = 1
		if arg == "c" {
			it.name = "peer_addr"
		}
		return it, nil
	case 'l':
		return field(kSkip, "ident"), nil
	case 'u':
		return field(kUser, "user"), nil
	case 't':
		if !hasArg {
			return field(kTimeCLF, "time"), nil
		}
		a := strings.TrimPrefix(strings.TrimPrefix(arg, "begin:"), "end:")
		switch a {
		case "sec", "msec", "usec":
			return field(kTimeEpoch, "time"), nil
		case "msec_frac", "usec_frac":
			return field(kField, "time_"+a), nil
		}
		sf, err := compileStrftime(a)
		if err != nil {
			return item{}, err
		}
		it := field(kTimeStrf, "time")
		it.strf = sf
		return it, nil
	case 'r':
		return field(kRequest, "request"), nil
	case 's':
		return field(kStatus, "status"), nil
	case 'b', 'B':
		return field(kBytes, "bytes"), nil
	case 'D':
		it := field(kDuration, "duration_us")
		it.scale = 1e-6
		it.intOnly = true
		return it, nil
	case 'T':
		it := field(kDuration, "duration")
		switch arg {
		case "", "s":
			it.scale = 1
		case "ms":
			it.scale = 1e-3
		case "us":
			it.scale = 1e-6
		default:
			return item{}, fmt.Errorf("unknown unit %q (s, ms or us)", arg)
		}
		return it, nil
	case 'm':
		return field(kMethod, "method"), nil
	case 'U':
		return field(kPath, "path"), nil
	case 'q':
		return field(kQuery, "query"), nil
	case 'H':
		return field(kProtocol, "protocol"), nil
	case 'v', 'V':
		return field(kHost, "host"), nil
	case 'p':
		if arg == "" {
			arg = "canonical"
		}
		return field(kField, "port_"+strings.ToLower(arg)), nil
	case 'P':
		return field(kField, "pid"), nil
	case 'i':
		if !hasArg {
			return item{}, fmt.Errorf("needs a header name")
		}
		switch strings.ToLower(arg) {
		case "referer":
			return field(kReferer, "in_referer"), nil
		case "user-agent":
			return field(kUA, "in_user_agent"), nil
		case "x-forwarded-for":
			return field(kXFF, "in_x_forwarded_for"), nil
		case "host":
			return field(kHost, "in_host"), nil
		}
		return field(kField, headerName("in_", arg)), nil
	case 'o', 'e', 'C', 'n':
		if !hasArg {
			return item{}, fmt.Errorf("needs a name")
		}
		prefix := map[byte]string{'o': "out_", 'e': "env_", 'C': "cookie_", 'n': "note_"}[c]
		return field(kField, headerName(prefix, arg)), nil
	case 'I':
		return field(kField, "bytes_received"), nil
	case 'O':
		return field(kField, "bytes_sent"), nil
	case 'S':
		return field(kField, "bytes_transferred"), nil
	case 'f':
		return field(kField, "filename"), nil
	case 'k':
		return field(kField, "keepalive"), nil
	case 'X':
		return field(kField, "conn_status"), nil
	case 'R':
		return field(kField, "handler"), nil
	case 'L':
		return field(kField, "log_id"), nil
	case 'A':
		return field(kField, "local_addr"), nil
	}
	return item{}, fmt.Errorf("unknown directive %%%c", c)
}

// --- PHP-FPM access.format ---

// compileFPM turns a PHP-FPM access.format string into items.
func compileFPM(f string) ([]item, error) {
	return compilePercent(f, percentFormat{family: "fpm", directive: fpmDirective})
}

func fpmDirective(c byte, arg string, hasArg bool) (item, error) {
	switch c {
	case 'C':
		switch arg {
		case "", "total":
			return field(kCPUPct, "cpu_percent"), nil
		case "user", "system":
			return field(kField, "cpu_"+arg+"_percent"), nil
		}
		return item{}, fmt.Errorf("unknown argument %q (total, user or system)", arg)
	case 'd':
		it := field(kDuration, "duration")
		switch arg {
		case "", "seconds":
			it.scale = 1
		case "mili", "milli", "miliseconds", "milliseconds":
			it.scale = 1e-3
		case "micro", "microseconds":
			it.scale = 1e-6
		default:
			return item{}, fmt.Errorf("unknown unit %q", arg)
		}
		return it, nil
	case 'e':
		if !hasArg {
			return item{}, fmt.Errorf("needs a variable name")
		}
		switch strings.ToUpper(arg) {
		case "REMOTE_ADDR":
			it := field(kIP, "env_remote_addr")
			it.strength = 2
			return it, nil
		case "HTTP_X_FORWARDED_FOR":
			return field(kXFF, "env_http_x_forwarded_for"), nil
		case "HTTP_USER_AGENT":
			return field(kUA, "env_http_user_agent"), nil
		case "HTTP_REFERER":
			return field(kReferer, "env_http_referer"), nil
		case "REQUEST_URI":
			return field(kURI, "env_request_uri"), nil
		case "HTTP_HOST", "SERVER_NAME":
			return field(kHost, headerName("env_", arg)), nil
		case "REQUEST_METHOD":
			return field(kMethod, "env_request_method"), nil
		case "SERVER_PROTOCOL":
			return field(kProtocol, "env_server_protocol"), nil
		}
		return field(kField, headerName("env_", arg)), nil
	case 'f':
		return field(kField, "script_filename"), nil
	case 'l':
		return field(kField, "content_length"), nil
	case 'm':
		return field(kMethod, "method"), nil
	case 'M':
		if arg == "kilo" {
			return field(kField, "memory_kb"), nil
		}
		if arg == "mega" {
			return field(kField, "memory_mb"), nil
		}
		return field(kField, "memory"), nil
	case 'n':
		return field(kField, "pool"), nil
	case 'o':
		if !hasArg {
			return item{}, fmt.Errorf("needs a header name")
		}
		return field(kField, headerName("out_", arg)), nil
	case 'p':
		return field(kField, "pid"), nil
	case 'P':
		return field(kField, "ppid"), nil
	case 'q':
		return field(kQuery, "query"), nil
	case 'Q':
		return field(kSkip, "query_glue"), nil
	case 'r':
		return field(kPath, "request_uri"), nil
	case 'R':
		return field(kIP, "remote_ip"), nil
	case 's':
		return field(kStatus, "status"), nil
	case 't', 'T':
		if !hasArg {
			return field(kTimeCLF, "time"), nil
		}
		sf, err := compileStrftime(arg)
		if err != nil {
			return item{}, err
		}
		it := field(kTimeStrf, "time")
		it.strf = sf
		return it, nil
	case 'u':
		return field(kUser, "user"), nil
	}
	return item{}, fmt.Errorf("unknown directive %%%c", c)
}

// --- common to the line formats ---

func isNumeric(k kind) bool {
	switch k {
	case kStatus, kBytes, kDuration, kDurMS, kCPUPct, kTimeEpoch:
		return true
	}
	return false
}

// finish merges path+query runs, refuses fields that touch, and sets the
// reading flags of every item.
func finish(items []item, cpuField string) ([]item, error) {
	// Merge "path" "?"-glue "query" written without separators into one URI field.
	var out []item
	for i := 0; i < len(items); i++ {
		it := items[i]
		if it.kind == kPath && i+1 < len(items) {
			j := i + 1
			if items[j].kind == kSkip && (items[j].name == "is_args" || items[j].name == "query_glue") {
				j++
			}
			if j < len(items) && items[j].kind == kQuery {
				it.kind = kURI
				out = append(out, it)
				i = j
				continue
			}
		}
		out = append(out, it)
	}
	items = out
	hasIP, hasTime := false, false
	for i := range items {
		it := &items[i]
		if it.kind == kLit {
			it.litW, it.litM = word8(it.lit)
			continue
		}
		switch it.kind {
		case kIP, kXFFAdd, kXFF:
			hasIP = true
		case kTimeCLF, kTimeISO, kTimeEpoch, kTimeStrf:
			hasTime = true
		}
		if i+1 < len(items) && items[i+1].kind != kLit {
			return nil, fmt.Errorf("%s and %s are not separated by any text: cannot tell where one ends", items[i].name, items[i+1].name)
		}
		it.numeric = isNumeric(it.kind)
		it.cpu = cpuField != "" && it.name == cpuField
		it.list = it.kind == kXFF || it.kind == kXFFAdd || strings.HasPrefix(it.name, "upstream_") || it.cpu
		if i > 0 && i+1 < len(items) && strings.HasSuffix(items[i-1].lit, `"`) && strings.HasPrefix(items[i+1].lit, `"`) {
			it.quoted = true
			it.closing = i+2 == len(items)
			if i+2 < len(items) {
				it.nextNum = isNumeric(items[i+2].kind)
			}
		}
		if i+1 == len(items) && !it.numeric {
			it.toEOL = true
		}
		if i+1 < len(items) {
			it.sep = items[i+1].lit
			it.sepAt = uint8(sepAt(it.sep))
			it.sepW, it.sepM = word8(it.sep)
			it.gap = len(it.sep) > 1 && it.sep[0] == ' ' && (it.sep[1] == '[' || it.sep[1] == '"')
			it.clfFixed = it.kind == kTimeCLF
			it.quad = it.kind == kIP && !it.list && !it.cpu && it.sep[0]-'0' > 9 && it.sep[0] != '.'
			it.hex6 = it.kind == kIP && !it.list && !it.cpu && hexValue[it.sep[0]] > 15 && it.sep[0] != ':'
		}
		it.num = !it.quoted && (it.kind == kDuration && !it.intOnly || it.kind == kField) &&
			(it.sep == "" || it.sep[0]-'0' > 9 && it.sep[0] != '.')
	}
	if !hasIP {
		return nil, fmt.Errorf("no field gives the client address")
	}
	if !hasTime {
		return nil, fmt.Errorf("no field gives the time")
	}
	return items, nil
}
