package parser

import "strings"

// Envoy's access log, in either of its defaults: the default format string
//
//	[%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%"
//	%RESPONSE_CODE% %RESPONSE_FLAGS% %BYTES_RECEIVED% %BYTES_SENT% %DURATION%
//	%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% "%REQ(X-FORWARDED-FOR)%" "%REQ(USER-AGENT)%"
//	"%REQ(X-REQUEST-ID)%" "%REQ(:AUTHORITY)%" "%UPSTREAM_HOST%"
//
// (extra fields after it are ignored), or JSON lines with the keys Envoy
// Gateway's default JSON format uses (start_time, method,
// x-envoy-origin-path, protocol, response_code, bytes_sent, duration,
// user-agent, :authority, downstream_remote_address, x-forwarded-for,
// x-request-id, ...); either may come wrapped by a container runtime's CRI
// log ("2025-12-31T17:37:40.49+01:00 stdout F <line>"), which is dropped:
// the time is Envoy's START_TIME, not the runtime's. %DURATION% is
// milliseconds. The default format string logs no peer address: the client
// is then the last X-Forwarded-For address (the peer that set it), or, when
// that is a trusted proxy, the rightmost untrusted one; a line with no
// X-Forwarded-For has no client and is rejected on field ip. The JSON lines'
// downstream_remote_address is the peer.

type envoyFormat struct {
	items []item
	json  *jsonFormat
}

func envoyPreset(p *Parser) *handFormat {
	dur := field(kDuration, "duration")
	dur.scale = 1e-3
	items := []item{lit("["), field(kTimeISO, "start_time"), lit(`] "`), field(kRequest, "request"), lit(`" `),
		field(kStatus, "response_code"), lit(" "), field(kField, "response_flags"), lit(" "), field(kField, "bytes_received"),
		lit(" "), field(kBytes, "bytes_sent"), lit(" "), dur, lit(" "), field(kField, "upstream_service_time"),
		lit(` "`), field(kXFF, "x_forwarded_for"), lit(`" "`), field(kUA, "user_agent"), lit(`" "`), field(kField, "request_id"),
		lit(`" "`), field(kHost, "authority"), lit(`" "`), field(kField, "upstream_host"), lit(`"`)}
	items, err := finish(items, "")
	if err != nil {
		panic("parser: bad preset envoy: " + err.Error())
	}
	ps := func(paths ...string) []jsonPath {
		out := make([]jsonPath, len(paths))
		for i, s := range paths {
			out[i] = jsonPath{path: s}
		}
		return out
	}
	jf, err := compileJSON(map[string][]jsonPath{
		"ip":              ps("downstream_remote_address"),
		"x_forwarded_for": ps("x-forwarded-for"),
		"time":            ps("start_time"),
		"method":          ps("method"),
		"path":            ps("x-envoy-origin-path", "path"),
		"protocol":        ps("protocol"),
		"status":          ps("response_code"),
		"bytes":           ps("bytes_sent"),
		"user_agent":      ps("user-agent"),
		"referer":         ps("referer"),
		"host":            ps(":authority"),
		"duration":        {{path: "duration", scale: 1e-3}},
		"request_id":      ps("x-request-id"),
		"response_flags":  ps("response_flags"),
		"upstream_host":   ps("upstream_host"),
		"route_name":      ps("route_name"),
	}, "")
	if err != nil {
		panic("parser: bad preset envoy: " + err.Error())
	}
	f := &envoyFormat{items: items, json: jf}
	h := &handFormat{envoy: f, nFields: 6, fields: items, read: f.read}
	for _, t := range jf.paths {
		h.fields = append(h.fields, t.item)
	}
	return h
}

// criPayload drops a CRI log wrapper ("<RFC 3339 time> stdout|stderr F|P ").
func criPayload(s string) string {
	if len(s) < 20 || s[4] != '-' || s[10] != 'T' {
		return s
	}
	_, rest, ok := strings.Cut(s, " ")
	if !ok {
		return s
	}
	stream, rest, ok := strings.Cut(rest, " ")
	if !ok || (stream != "stdout" && stream != "stderr") {
		return s
	}
	tag, rest, ok := strings.Cut(rest, " ")
	if !ok || (tag != "F" && tag != "P") {
		return s
	}
	return rest
}

func (f *envoyFormat) read(p *Parser, s string, _ int, e *Entry, st *lineState) bool {
	s = criPayload(s)
	if t := trimSpace(s); t != "" && t[0] == '{' {
		full := p.scanJSON(f.json, t, e, st)
		return full && e.Has&HasStatus != 0
	}
	return p.scanItems(f.items, s, e, st)
}
