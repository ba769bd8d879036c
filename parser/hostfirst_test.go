package parser

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
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
		{"server address", vhostIPLine, `remote_addr: "198.51.100.10" is followed by another address "203.0.113.5"` + hint},
		{"server address:port", vhostIPPort, `remote_addr: "198.51.100.10:80" is followed by another address "203.0.113.5"` + hint},
		{"bracketed v6:port", vhostV6Line, `remote_addr: "[2001:db8::10]:443" is followed by another address "2001:db8:5::7"` + hint},
		{"v6 client", hostV6Bare, `remote_addr: "example.org" is a host name, not an address` + hint},
		{"forwarded list", hostXFFLine, `remote_addr: "example.org" is a host name, not an address` + hint},
		{"client localhost", `198.51.100.1:82 localhost - - [22/Mar/2009:09:30:31 +0100] "GET / HTTP/1.1" 301 4937 "-" "-"`, `remote_addr: "198.51.100.1:82" is followed by another address "localhost"` + hint},
		{"client a malformed IPv6", `2001:db8:1ce::1:82 2001:db8:2ce:1 - - [22/Mar/2009:09:30:31 +0100] "GET / HTTP/1.1" 301 4937 "-" "-"`, `remote_addr: "2001:db8:1ce::1:82" is followed by another address "2001:db8:2ce:1"` + hint},
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

// TestConformanceHostFirst reads the host-first logs of the shared corpus
// (see its SOURCES.md): Beats' nginx test-with-host.log (`$host
// $remote_addr ...`, the remote_addr sometimes a forwarding chain) and
// Netdata's weblog full.log (`$host:$server_port $remote_addr - - ...`
// and more fields). Under combined no line is read, so no host is charged;
// auto picks a host-first preset; host_combined finds the expected client,
// host, status and bytes, and Netdata's per-host counts.
func TestConformanceHostFirst(t *testing.T) {
	corpus := needCorpus(t)
	trusted := prefixes(t, beatsTrusted...)
	sample := func(lines []string) [][]byte {
		var out [][]byte
		for _, l := range lines {
			out = append(out, []byte(l))
		}
		return out
	}

	t.Run("beats-nginx-with-host", func(t *testing.T) {
		dir := filepath.Join(corpus, "ipextract")
		lines := readLines(t, filepath.Join(dir, "beats-nginx-access-test-with-host.log"))
		combined := mustParser(t, Options{Format: "combined", TrustedProxies: trusted})
		for i, l := range lines {
			if e, err := combined.ParseString(l, i+1); err == nil {
				t.Errorf("line %d: combined read it with client %v: %q", i+1, e.IP, l)
			}
		}
		if got, err := Detect(sample(lines), Options{TrustedProxies: trusted}); err != nil || got != "host_combined" {
			t.Errorf("Detect = %q, %v; want host_combined", got, err)
		}
		p := mustParser(t, Options{Format: "host_combined", TrustedProxies: trusted})
		rows := 0
		for _, row := range readLines(t, filepath.Join(dir, "beats-nginx-access-test-with-host.expected.tsv")) {
			c := strings.Split(row, "\t")
			if strings.HasPrefix(row, "#") || len(c) < 8 {
				continue
			}
			n, _ := strconv.Atoi(c[0])
			l := lines[n-1]
			if beatsFormat(l, true) == hostPrefix+nginxQuotedXFF || beatsFormat(l, true) == hostPrefix+nginxUnquotedXFF || c[3] == "-" {
				continue // an X-Forwarded-For field before the address, or a name for one: not the preset's format
			}
			rows++
			e, err := p.ParseString(l, n)
			if err != nil {
				t.Errorf("line %d: %v", n, err)
				continue
			}
			// Deliberate: Beats keeps "example.com:80" as the host; logjail
			// splits the port off into its own field.
			host := e.Host
			if port, ok := e.Get("server_port"); ok {
				host += ":" + port
			}
			if got := fmt.Sprintf("%s %s %d %d", e.IP, host, e.Status, e.Bytes); got != strings.Join([]string{netip.MustParseAddr(c[3]).String(), c[5], c[6], c[7]}, " ") {
				t.Errorf("line %d: ip host status bytes = %s, want %s %s %s %s", n, got, c[3], c[5], c[6], c[7])
			}
		}
		atLeast(t, "beats with-host lines in host_combined's format", rows, 5)
	})

	t.Run("netdata-full", func(t *testing.T) {
		dir := filepath.Join(corpus, "formats", "netdata-weblog")
		lines := readLines(t, filepath.Join(dir, "full.log"))
		want := map[string]int{}
		matched := 0
		for _, row := range readLines(t, filepath.Join(dir, "expected-aggregates.tsv")) {
			c := strings.Split(row, "\t")
			if len(c) != 3 || c[0] != "full.log" {
				continue
			}
			n, _ := strconv.Atoi(c[2])
			switch {
			case c[1] == "requests":
				matched += n
			case c[1] == "req_unmatched":
				matched -= n
			case strings.HasPrefix(c[1], "req_vhost_"):
				want[strings.TrimPrefix(c[1], "req_vhost_")] = n
			}
		}
		atLeast(t, "netdata vhosts", len(want), 5)
		combined := mustParser(t, Options{Format: "combined"})
		for i, l := range lines {
			if e, err := combined.ParseString(l, i+1); err == nil {
				t.Errorf("line %d: combined read it with client %v: %q", i+1, e.IP, l)
			}
		}
		// Its extra fields after the size make every preset's reading
		// partial, so auto may find none; it must not pick a common-based one.
		if got, err := Detect(sample(lines[:200]), Options{}); err == nil && got != "vhost_combined" && got != "host_combined" {
			t.Errorf("Detect = %q; want a host-first preset or none", got)
		}
		// Netdata counts a host for every line it matches; logjail also
		// refuses the lines whose client is "localhost" or a malformed IPv6
		// address (see the TSV's caveats): those are counted apart.
		p := mustParser(t, Options{Format: "host_combined"})
		got := map[string]int{}
		read, noClient, valid := 0, 0, 0
		for i, l := range lines {
			if f := strings.Fields(l); len(f) > 1 && strings.Contains(l, "[") {
				if _, err := netip.ParseAddr(f[1]); err == nil {
					valid++
				}
			}
			e, err := p.ParseString(l, i+1)
			var pe *Error
			switch {
			case err == nil:
				got[e.Host]++
				read++
			case errors.As(err, &pe) && pe.Field == "ip" && strings.Contains(l, "[") && strings.Contains(l, `"`):
				noClient++
			}
		}
		if read+noClient != matched {
			t.Errorf("%d lines read and %d refused for their client, want %d matched lines", read, noClient, matched)
		}
		for host, n := range got {
			if n > want[host] {
				t.Errorf("host %q: %d lines read, netdata counts %d", host, n, want[host])
			}
		}
		if read != valid {
			t.Errorf("%d lines read, want the %d whose client is an address", read, valid)
		}
	})
}
