package parser

import (
	"net/netip"
	"slices"
	"testing"
	"time"
)

// TestFieldRef: every field Get reads, by its DESIGN.md name, is present with
// its value on an entry that carries it and absent on one that does not; a
// name of the format's other fields reads Fields.
func TestFieldRef(t *testing.T) {
	full := Entry{
		IP: netip.MustParseAddr("203.0.113.7"), Time: time.Date(2026, 11, 2, 10, 0, 0, 500, time.UTC),
		Method: "GET", Path: "/p", Query: "q=1", Protocol: "HTTP/1.1", Status: 404, Bytes: 512,
		Referer: "https://ref.example/", UserAgent: "ua", User: "u", Host: "h.example", Duration: 0.25, CPU: 0.125,
		Has:    HasMethod | HasPath | HasQuery | HasProtocol | HasStatus | HasBytes | HasReferer | HasUserAgent | HasUser | HasHost | HasDuration | HasCPU,
		Fields: []Field{{Name: "upstream_addr", Value: "127.0.0.1:9000"}},
	}
	want := map[string]string{
		"ip": "203.0.113.7", "time": "2026-11-02T10:00:00.0000005Z", "method": "GET", "path": "/p", "query": "q=1",
		"protocol": "HTTP/1.1", "status": "404", "bytes": "512", "referer": "https://ref.example/", "user_agent": "ua",
		"user": "u", "host": "h.example", "duration": "0.25", "cpu": "0.125", "upstream_addr": "127.0.0.1:9000",
	}
	names := append(EntryFields(), "upstream_addr")
	if len(names) != len(want) {
		t.Fatalf("EntryFields() = %q: want the 14 names of DESIGN.md", EntryFields())
	}
	var empty Entry
	for _, name := range names {
		r := Ref(name)
		if r.Name() != name || r.Own() != slices.Contains(EntryFields(), name) {
			t.Errorf("Ref(%q) = name %q, own %v", name, r.Name(), r.Own())
		}
		if v, ok := r.Get(&full); !ok || v != want[name] {
			t.Errorf("%s: Get = %q, %v; want %q, true", name, v, ok, want[name])
		}
		if v, ok := full.Get(name); !ok || v != want[name] {
			t.Errorf("%s: Entry.Get = %q, %v; want %q, true", name, v, ok, want[name])
		}
		if v, ok := r.Get(&empty); ok {
			t.Errorf("%s: Get on an entry without it = %q, true; want absent", name, v)
		}
	}
}
