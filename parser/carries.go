package parser

import "slices"

// Carries returns the names of the fields (as Entry.Get takes them) that a
// line of this format can carry, sorted, and whether the format has an
// X-Forwarded-For field (an address list that trusted proxies make
// believed). The configuration checks a rule's `match:` fields and a
// source's `trusted_proxies` against it.
func (p *Parser) Carries() (fields []string, xff bool) {
	add := func(names ...string) {
		for _, n := range names {
			if n != "" && !slices.Contains(fields, n) {
				fields = append(fields, n)
			}
		}
	}
	one := func(it *item) {
		if it.cpu {
			add("cpu")
		}
		switch it.kind {
		case kIP:
			add("ip")
		case kXFF, kXFFAdd:
			xff = true
			add("ip", it.name)
		case kTimeCLF, kTimeISO, kTimeEpoch, kTimeStrf:
			add("time")
		case kRequest:
			add("method", "path", "query", "protocol")
		case kMethod:
			add("method")
		case kURI:
			add("path", "query")
		case kPath:
			add("path")
		case kQuery:
			add("query")
		case kProtocol:
			add("protocol")
		case kStatus:
			add("status")
		case kBytes:
			add("bytes")
		case kReferer:
			add("referer")
		case kUA:
			add("user_agent")
		case kUser:
			add("user")
		case kHost:
			add("host")
		case kHostPort:
			add("host", it.port)
		case kDuration, kDurMS:
			if !it.cpu {
				add("duration")
			}
		case kCPUPct:
			add("cpu")
		case kField:
			add(it.name)
		}
	}
	for i := range p.items {
		one(&p.items[i])
	}
	if p.hand != nil {
		for i := range p.hand.fields {
			one(&p.hand.fields[i])
		}
		if p.handCPU != "" {
			add("cpu", p.handCPU)
		}
	}
	if p.json != nil {
		for _, t := range p.json.paths {
			one(&t.item)
		}
	}
	slices.Sort(fields)
	return fields, xff
}
