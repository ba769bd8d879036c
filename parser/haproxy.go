package parser

import (
	"fmt"
	"strings"
)

// HAProxy's `option httplog` line, after whatever syslog header the log
// has (RFC 3164 "Apr  4 14:30:19 host haproxy[123]: ", RFC 5424, or none):
//
//	client:port [accept_date] frontend backend/server TR/Tw/Tc/Tr/Ta status bytes_read
//	    captured_request_cookie captured_response_cookie termination_state
//	    actconn/feconn/beconn/srv_conn/retries srv_queue/backend_queue
//	    [{captured_request_headers}] [{captured_response_headers}] "request"
//
// The accept date has no zone (Options.Location); the duration is the last
// timer, Ta (Tt before HAProxy 1.9), in milliseconds, "+" (option logasap)
// dropped, -1 absent. `option tcplog` lines (Tw/Tc/Tt, no request) read as
// entries without method or status, and so do the connection errors HAProxy
// logs in the same format ("frontend/bind: SSL handshake failure"): a client
// and a time, the text in the field message.

func haproxyPreset() *handFormat {
	return &handFormat{read: readHAProxy, nFields: 8, fields: []item{
		field(kIP, "client"), field(kTimeCLF, "accept_date"), field(kRequest, "request"),
		field(kStatus, "status_code"), field(kBytes, "bytes_read"), field(kDuration, "ta"),
		field(kField, "client_port"), field(kField, "frontend"), field(kField, "backend"), field(kField, "server"),
		field(kField, "timers"), field(kField, "termination_state"),
		field(kField, "captured_request_headers"), field(kField, "captured_response_headers"), field(kField, "message"),
	}}
}

// haproxyDate finds "[dd/Mon/yyyy:" after a blank: the accept date, which
// the client:port stands before. It returns the index of the '['.
func haproxyDate(s string) int {
	for from := 0; from < len(s); {
		j := strings.IndexByte(s[from:], '[')
		if j < 0 {
			return -1
		}
		k := from + j
		if k > 0 && s[k-1] == ' ' && k+13 < len(s) && s[k+3] == '/' && s[k+7] == '/' && s[k+12] == ':' {
			return k
		}
		from = k + 1
	}
	return -1
}

func readHAProxy(p *Parser, s string, _ int, e *Entry, st *lineState) bool {
	k := haproxyDate(s)
	if k < 0 {
		return st.failLine("time", "no HAProxy accept date \"[dd/Mon/yyyy:hh:mm:ss.mmm]\" in the line")
	}
	client := s[:k-1]
	if j := strings.LastIndexByte(client, ' '); j >= 0 {
		client = client[j+1:]
	}
	if c := strings.LastIndexByte(client, ':'); c > 0 && isPort(client[c:]) {
		p.put(kIP, "client", client[:c], e, st)
		p.addField("client_port", client[c+1:], e, st)
	} else {
		p.put(kIP, "client", client, e, st)
	}
	end := strings.IndexByte(s[k:], ']')
	if end < 0 {
		return st.failLine("time", fmt.Sprintf("%q: the accept date is not closed", s[k:min(len(s), k+32)]))
	}
	p.put(kTimeCLF, "accept_date", s[k+1:k+end], e, st)
	t := tokens{s: s, i: k + end + 2}
	front, ok := t.word()
	if !ok {
		return false
	}
	if strings.HasSuffix(front, ":") || strings.Contains(front, "/") {
		// "frontend/bind: SSL handshake failure ...": a connection error.
		name, _, _ := strings.Cut(strings.TrimSuffix(front, ":"), "/")
		p.addField("frontend", name, e, st)
		if !t.done() {
			p.addField("message", s[t.i:], e, st)
		}
		return true
	}
	p.addField("frontend", front, e, st)
	bs, _ := t.word()
	backend, server, _ := strings.Cut(bs, "/")
	p.addField("backend", backend, e, st)
	p.addField("server", server, e, st)
	timers, ok := t.word()
	if !ok {
		return false
	}
	n := strings.Count(timers, "/")
	if n != 4 && n != 2 {
		return st.failLine("timers", fmt.Sprintf("%q: not HAProxy's TR/Tw/Tc/Tr/Ta (httplog) or Tw/Tc/Tt (tcplog)", timers))
	}
	p.addField("timers", timers, e, st)
	if last := strings.TrimPrefix(timers[strings.LastIndexByte(timers, '/')+1:], "+"); last != "-1" {
		p.putDuration(last, 1e-3, e, st)
	}
	if n == 4 { // httplog: the status comes before the bytes
		status, _ := t.word()
		if status != "-1" {
			p.put(kStatus, "status_code", status, e, st)
		}
	}
	bytes, ok := t.word()
	if !ok {
		return false
	}
	p.put(kBytes, "bytes_read", strings.TrimPrefix(bytes, "+"), e, st)
	if n == 4 {
		t.word() // captured request cookie
		t.word() // captured response cookie
	}
	term, _ := t.word()
	p.addField("termination_state", term, e, st)
	t.word()                    // actconn/feconn/beconn/srv_conn/retries
	if _, ok := t.word(); !ok { // srv_queue/backend_queue
		return false
	}
	if n == 2 {
		return t.done()
	}
	var capt [2]string
	nc := 0
	for t.i < len(s) && s[t.i] == '{' {
		j := strings.IndexByte(s[t.i:], '}')
		if j < 0 {
			return st.failLine("request", "a captured header block \"{\" is not closed")
		}
		if nc < 2 {
			capt[nc] = s[t.i+1 : t.i+j]
			nc++
		}
		t.i += j + 2
	}
	switch nc {
	case 1:
		p.addField("captured_request_headers", capt[0], e, st)
	case 2:
		p.addField("captured_request_headers", capt[0], e, st)
		p.addField("captured_response_headers", capt[1], e, st)
	}
	if t.i >= len(s) || s[t.i] != '"' {
		return false
	}
	req := strings.TrimSuffix(s[t.i+1:], `"`)
	p.put(kRequest, "request", req, e, st)
	return true
}
