package evalgen

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
)

// TestScenarios checks what the package doc promises of every scenario:
// the same bytes on every run, lines in time order, only documentation
// addresses (and Googlebot's published range for the verified crawler),
// and a truth whose every client appears in the log.
func TestScenarios(t *testing.T) {
	allowed := []netip.Prefix{
		netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("203.0.113.0/24"),
		netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("66.249.64.0/19"),
	}
	a, b := Scenarios(), Scenarios()
	if len(a) != 9 {
		t.Fatalf("%d scenarios, want 9", len(a))
	}
	for i, s := range a {
		t.Run(s.Name, func(t *testing.T) {
			var x, y bytes.Buffer
			if err := s.Write(&x); err != nil {
				t.Fatal(err)
			}
			if err := b[i].Write(&y); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(x.Bytes(), y.Bytes()) {
				t.Fatal("two runs wrote different logs")
			}
			if s.Lines() == 0 || len(s.Truth) == 0 {
				t.Fatalf("%d lines, %d clients in the truth", s.Lines(), len(s.Truth))
			}
			for j := 1; j < len(s.lines); j++ {
				if s.lines[j].t.Before(s.lines[j-1].t) {
					t.Fatalf("line %d is older than line %d", j+1, j)
				}
			}
			seen := map[netip.Addr]bool{}
			for _, l := range s.lines {
				seen[l.ip] = true
				ok := false
				for _, p := range allowed {
					ok = ok || p.Contains(l.ip)
				}
				if !ok {
					t.Fatalf("address %s outside the documentation ranges", l.ip)
				}
			}
			for _, c := range s.Truth {
				if !seen[c.Addr] || c.Why == "" {
					t.Errorf("truth client %s: in the log %v, why %q", c.Addr, seen[c.Addr], c.Why)
				}
			}
		})
	}
}

// TestSPAAnswers200: the SPA answers 200 with index.html's size to every
// path that is no asset, the prober's /.env included, and the monitor scenario has its 503 stretch.
func TestSPAAnswers200(t *testing.T) {
	for _, s := range Scenarios() {
		var buf bytes.Buffer
		if err := s.Write(&buf); err != nil {
			t.Fatal(err)
		}
		switch s.Name {
		case "spa":
			if !strings.Contains(buf.String(), `"GET /.env HTTP/1.1" 200 1843`) || strings.Contains(buf.String(), `" 404 `) {
				t.Errorf("spa: want /.env answered 200 and no 404 at all")
			}
			for _, l := range s.lines {
				asset := strings.HasPrefix(l.target, "/static/") || l.target == "/favicon.ico"
				if !asset && (l.status != 200 || l.bytes != 1843) {
					t.Errorf("spa: %s answered %d with %d bytes, want index.html's 200 and 1843", l.target, l.status, l.bytes)
				}
			}
		case "monitor":
			if !strings.Contains(buf.String(), `"GET /health HTTP/1.1" 503`) {
				t.Errorf("monitor: no 503 on /health")
			}
		}
	}
}
