package parser

import (
	"fmt"
	"strings"
)

// An AWS Application Load Balancer access log entry: blank-separated
// fields, some quoted, in the order AWS documents and never reorders (new
// ones are appended, and read as absent here):
//
//	type time elb client:port target:port request_processing_time
//	target_processing_time response_processing_time elb_status_code
//	target_status_code received_bytes sent_bytes "request" "user_agent"
//	ssl_cipher ssl_protocol target_group_arn "trace_id" "domain_name"
//	"chosen_cert_arn" matched_rule_priority request_creation_time
//	"actions_executed" "redirect_url" "error_reason" ...
//
// The entry's time is request_creation_time (when the request arrived, as
// HAProxy's accept date and Envoy's START_TIME), or `time` (when the
// response was sent) on entries older than that field; `time` is kept as
// the field response_time. The duration is the sum of the three processing
// times, in seconds, absent when one of them is -1 (no target answered).
// The request's absolute URL gives the host (without its port), the path
// and the query. Status is elb_status_code, bytes sent_bytes. The client is
// the connecting address: a proxy in front of the ALB is the client.

func albPreset() *handFormat {
	return &handFormat{read: readALB, nFields: 10, fields: []item{
		field(kIP, "client"), field(kTimeISO, "request_creation_time"), field(kRequest, "request"),
		field(kHost, "host"), field(kStatus, "elb_status_code"), field(kBytes, "sent_bytes"), field(kUA, "user_agent"),
		field(kDuration, "duration"), field(kField, "type"), field(kField, "elb"), field(kField, "target"),
		field(kField, "target_status_code"), field(kField, "received_bytes"), field(kField, "trace_id"),
		field(kField, "domain_name"), field(kField, "actions_executed"), field(kField, "error_reason"), field(kField, "response_time"),
	}}
}

func readALB(p *Parser, s string, _ int, e *Entry, st *lineState) bool {
	t := tokens{s: s}
	var f [25]string
	n := 0
	for n < len(f) {
		v, ok := t.quoted()
		if !ok {
			break
		}
		f[n] = v
		n++
	}
	if n < 13 {
		return st.failLine("line", fmt.Sprintf("%d fields: an ALB entry has at least 13 (type time elb client:port ... \"request\")", n))
	}
	switch f[0] {
	case "http", "https", "h2", "grpcs", "ws", "wss":
	default:
		return st.failLine("type", fmt.Sprintf("%q: not an ALB request type (http, https, h2, grpcs, ws, wss)", f[0]))
	}
	client := f[3] // client:port, an IPv6 address without brackets
	if c := strings.LastIndexByte(client, ':'); c > 0 && isPort(client[c:]) {
		client = client[:c]
	}
	p.put(kIP, "client", client, e, st)
	if n > 21 && !absent(f[21]) {
		p.put(kTimeISO, "request_creation_time", f[21], e, st)
		p.addField("response_time", f[1], e, st)
	} else {
		p.put(kTimeISO, "time", f[1], e, st)
	}
	p.addField("type", f[0], e, st)
	p.addField("elb", f[2], e, st)
	p.addField("target", f[4], e, st)
	if f[5] != "-1" && f[6] != "-1" && f[7] != "-1" {
		a, ok1 := parseFloat(f[5])
		b, ok2 := parseFloat(f[6])
		c, ok3 := parseFloat(f[7])
		if ok1 && ok2 && ok3 {
			e.Duration, e.Has = a+b+c, e.Has|HasDuration
		} else {
			st.bad = true
		}
	}
	p.put(kStatus, "elb_status_code", f[8], e, st)
	p.addField("target_status_code", f[9], e, st)
	p.addField("received_bytes", f[10], e, st)
	p.put(kBytes, "sent_bytes", f[11], e, st)
	readALBRequest(p, f[12], e, st)
	if n > 13 {
		p.put(kUA, "user_agent", f[13], e, st)
	}
	if n > 17 {
		p.addField("trace_id", f[17], e, st)
	}
	if n > 18 {
		p.addField("domain_name", f[18], e, st)
	}
	if n > 22 {
		p.addField("actions_executed", f[22], e, st)
	}
	if n > 24 {
		p.addField("error_reason", f[24], e, st)
	}
	return true
}

// readALBRequest reads "GET https://host:443/p?q HTTP/1.1" (the ALB logs
// the absolute URL it was asked for).
func readALBRequest(p *Parser, req string, e *Entry, st *lineState) {
	method, rest, ok := strings.Cut(req, " ")
	if !ok || !isMethod(method) {
		p.put(kRequest, "request", req, e, st)
		return
	}
	target, proto := rest, ""
	if l := strings.LastIndexByte(rest, ' '); l >= 0 && strings.HasPrefix(rest[l+1:], "HTTP/") {
		target, proto = rest[:l], rest[l+1:]
	}
	host, uri := splitAbsolute(target)
	if uri == "" || uri == "-" {
		p.put(kRequest, "request", req, e, st)
		return
	}
	e.Method, e.Has = method, e.Has|HasMethod
	if proto != "" {
		e.Protocol, e.Has = proto, e.Has|HasProtocol
	}
	if host != "" {
		p.put(kHost, "host", host, e, st)
	}
	setURI(uri, e)
}
