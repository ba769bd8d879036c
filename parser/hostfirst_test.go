package parser

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The lines of a host-first log (Apache's vhost_combined, nginx's
// "$host $remote_addr ..."), as the presets common and combined must refuse
// them and vhost_combined and host_combined read them.
const (
	vhostPortLine = `www.example.com:443 203.0.113.5 - - [22/Nov/2026:07:09:34 +0100] "GET /index.html HTTP/1.1" 200 4523 "https://www.example.com/" "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"`
	vhostLine     = `www.example.com 203.0.113.5 - - [22/Nov/2026:07:09:34 +0100] "GET /index.html HTTP/1.1" 200 4523 "-" "curl/8.5.0"`
	vhostIPLine   = `198.51.100.10 203.0.113.5 - - [22/Nov/2026:07:09:34 +0100] "GET /.env HTTP/1.1" 404 153 "-" "Mozilla/5.0"`
	vhostIPPort   = `198.51.100.10:80 203.0.113.5 - - [22/Nov/2026:07:09:34 +0100] "GET /.env HTTP/1.1" 404 153 "-" "Mozilla/5.0"`
	vhostV6Line   = `[2001:db8::10]:443 2001:db8:5::7 - alice [22/Nov/2026:07:09:34 +0100] "POST /login HTTP/2.0" 302 0 "-" "Mozilla/5.0"`
	hostV6Bare    = `example.org 2001:db8:5::7 - - [22/Nov/2026:07:09:34 +0100] "GET / HTTP/1.1" 200 612 "-" "Mozilla/5.0"`
	hostXFFLine   = `example.org 198.51.100.2, 203.0.113.9 - - [22/Nov/2026:07:09:34 +0100] "GET /ocelot HTTP/1.1" 200 571 "-" "Mozilla/5.0"`
	plainLine     = `203.0.113.5 - - [22/Nov/2026:07:09:34 +0100] "GET /index.html HTTP/1.1" 200 4523 "-" "curl/8.5.0"`
	plainUserLine = `203.0.113.5 - frank [22/Nov/2026:07:09:34 +0100] "GET /index.html HTTP/1.1" 200 4523 "-" "curl/8.5.0"`
)

// TestHostFirstRejected: the common-based presets never charge a host as the
// client. A line whose first field is a host (name, host:port or the
// server's own address) followed by an address is an *Error on the field ip
// whose reason names remote_addr and the presets that read it.
func TestHostFirstRejected(t *testing.T) {
	const hint = ": the log puts the virtual host first; try format vhost_combined / host_combined or auto"
	tests := []struct {
		name, line, reason string
	}{
		{"host name", vhostLine, `remote_addr: "www.example.com" is a host name, not an address` + hint},
		{"host:port", vhostPortLine, `remote_addr: "www.example.com:443" is a host name, not an address` + hint},
		{"server address", vhostIPLine, `remote_addr: "198.51.100.10" is followed by a second address "203.0.113.5"` + hint},
		{"server address:port", vhostIPPort, `remote_addr: "198.51.100.10:80" is followed by a second address "203.0.113.5"` + hint},
		{"bracketed v6:port", vhostV6Line, `remote_addr: "[2001:db8::10]:443" is followed by a second address "2001:db8:5::7"` + hint},
		{"v6 client", hostV6Bare, `remote_addr: "example.org" is a host name, not an address` + hint},
		{"forwarded list", hostXFFLine, `remote_addr: "example.org" is a host name, not an address` + hint},
	}
	for _, format := range []string{"combined", "common", "nginx_timing", "apache_timing", "traefik_clf"} {
		p := mustParser(t, Options{Format: format})
		for _, tc := range tests {
			t.Run(format+"/"+tc.name, func(t *testing.T) {
				e, err := p.ParseString(tc.line, 7)
				var pe *Error
				if !errors.As(err, &pe) {
					t.Fatalf("accepted with client %v, want an *Error", e.IP)
				}
				if pe.Field != "ip" || pe.Line != 7 {
					t.Errorf("field %q line %d, want ip, 7", pe.Field, pe.Line)
				}
				if diff := cmp.Diff(tc.reason, pe.Reason); diff != "" {
					t.Errorf("reason (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// TestHostFirstNotTripped: an ordinary line (an address, then "-" or a
// user) reads as before under the strict presets, and an ident that is not
// an address is no host-first line.
func TestHostFirstNotTripped(t *testing.T) {
	p := mustParser(t, Options{Format: "combined"})
	for _, line := range []string{
		plainLine, plainUserLine,
		`203.0.113.5 identd-user - [22/Nov/2026:07:09:34 +0100] "GET / HTTP/1.1" 200 5 "-" "-"`,
		`2001:db8::7 - - [22/Nov/2026:07:09:34 +0100] "GET / HTTP/1.1" 200 5 "-" "-"`,
	} {
		e, err := p.ParseString(line, 1)
		if err != nil {
			t.Errorf("%q: %v", line, err)
			continue
		}
		if want := line[:strings.IndexByte(line, ' ')]; e.IP.String() != want {
			t.Errorf("%q: client %v, want %s", line, e.IP, want)
		}
	}
}

// TestHostFirstPresets reads host-first lines with vhost_combined and
// host_combined: the host (without its port) in Host, the port as a named
// field, the client in IP.
func TestHostFirstPresets(t *testing.T) {
	type want struct {
		IP, Host, Port, User, Path string
		Status                     int
		Bytes                      int64
	}
	tests := []struct {
		name, line string
		want       want
	}{
		{"with port", vhostPortLine, want{IP: "203.0.113.5", Host: "www.example.com", Port: "443", Path: "/index.html", Status: 200, Bytes: 4523}},
		{"without port", vhostLine, want{IP: "203.0.113.5", Host: "www.example.com", Path: "/index.html", Status: 200, Bytes: 4523}},
		{"server address first", vhostIPLine, want{IP: "203.0.113.5", Host: "198.51.100.10", Path: "/.env", Status: 404, Bytes: 153}},
		{"server address:port first", vhostIPPort, want{IP: "203.0.113.5", Host: "198.51.100.10", Port: "80", Path: "/.env", Status: 404, Bytes: 153}},
		{"IPv6 client, bracketed IPv6 host", vhostV6Line, want{IP: "2001:db8:5::7", Host: "2001:db8::10", Port: "443", User: "alice", Path: "/login", Status: 302}},
		{"IPv6 client", hostV6Bare, want{IP: "2001:db8:5::7", Host: "example.org", Path: "/", Status: 200, Bytes: 612}},
		{"unbracketed IPv6 host:port", `2001:db8:1ce::1:82 203.0.113.1 - - [22/Mar/2009:09:30:31 +0100] "GET / HTTP/1.1" 301 1130 "-" "-"`,
			want{IP: "203.0.113.1", Host: "2001:db8:1ce::1", Port: "82", Path: "/", Status: 301, Bytes: 1130}},
		{"unbracketed IPv6 host", `2001:db8::1 203.0.113.1 - - [22/Mar/2009:09:30:31 +0100] "GET / HTTP/1.1" 301 1130 "-" "-"`,
			want{IP: "203.0.113.1", Host: "2001:db8::1", Path: "/", Status: 301, Bytes: 1130}},
	}
	for _, format := range []struct{ name, port string }{{"vhost_combined", "port_canonical"}, {"host_combined", "server_port"}} {
		p := mustParser(t, Options{Format: format.name})
		for _, tc := range tests {
			t.Run(format.name+"/"+tc.name, func(t *testing.T) {
				e, err := p.ParseString(tc.line, 1)
				if err != nil {
					t.Fatal(err)
				}
				port, _ := e.Get(format.port)
				got := want{IP: e.IP.String(), Host: e.Host, Port: port, User: e.User, Path: e.Path, Status: e.Status, Bytes: e.Bytes}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
			})
		}
	}
	// nginx's $remote_addr may hold a forwarding chain; the peer is its last.
	e, err := mustParser(t, Options{Format: "host_combined"}).ParseString(hostXFFLine, 1)
	if err != nil || e.IP.String() != "203.0.113.9" || e.Host != "example.org" {
		t.Errorf("host_combined on a forwarded list: %v %q %v", e.IP, e.Host, err)
	}
	// An ordinary combined line is no host-first line.
	for _, name := range []string{"vhost_combined", "host_combined"} {
		if e, err := mustParser(t, Options{Format: name}).ParseString(plainLine, 1); err == nil {
			t.Errorf("%s read %q with client %v, want an error", name, plainLine, e.IP)
		}
	}
}

// TestDetectHostFirst: auto picks vhost_combined for Apache's default
// other_vhosts_access.log (host:port first), host_combined for nginx's
// "$host $remote_addr" (no port, or a forwarding chain), and still combined
// for an ordinary combined log, even with a host-first line among them.
func TestDetectHostFirst(t *testing.T) {
	lines := func(ss ...string) [][]byte {
		var out [][]byte
		for _, s := range ss {
			out = append(out, []byte(s))
		}
		return out
	}
	tests := []struct {
		name   string
		sample [][]byte
		want   string
	}{
		{"apache other_vhosts_access.log", lines(vhostPortLine, vhostIPPort, vhostV6Line, vhostPortLine), "vhost_combined"},
		{"nginx $host first", lines(vhostLine, hostV6Bare, vhostIPLine, vhostLine), "host_combined"},
		{"nginx $host first with a forwarding chain", lines(hostXFFLine, vhostPortLine, vhostPortLine), "host_combined"},
		{"combined", lines(plainLine, plainUserLine, plainLine), "combined"},
		{"combined with a stray host-first line", lines(plainLine, plainUserLine, vhostLine), "combined"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Detect(tc.sample, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("Detect = %q, want %q", got, tc.want)
			}
		})
	}
}
