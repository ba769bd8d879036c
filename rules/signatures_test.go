package rules

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/logjail/logjail/parser"
)

func charged(t *testing.T, c *Config, e parser.Entry) []string {
	t.Helper()
	charges, _ := c.Classify(c.Sources[0], &e, nil)
	var got []string
	for _, ch := range charges {
		got = append(got, ch.Rule.Name)
	}
	return got
}

func entry(ip, method, target string, status int) parser.Entry {
	e := parser.Entry{IP: netip.MustParseAddr(ip), Method: method, Status: status, Has: parser.HasMethod | parser.HasPath | parser.HasStatus}
	e.Path = target
	if p, q, ok := strings.Cut(target, "?"); ok {
		e.Path, e.Query, e.Has = p, q, e.Has|parser.HasQuery
	}
	return e
}

// TestSignatures: a rule with signatures sees an entry when it matches
// `match` AND a pattern of its families; a range with limits too; a
// family file of the user's is read relative to the configuration.
func TestSignatures(t *testing.T) {
	dir := t.TempDir()
	family := `family: mine
patterns:
  - name: old-admin
    fields: [path]
    pattern: '(?i)^/old-admin/'
    match: ['198.51.100.7 - - [25/Nov/2026:10:00:00 +0000] "GET /old-admin/ HTTP/1.1" 404 153 "-" "curl/8.5.0"']
    clean: [/old-administration-guide/]
`
	if err := os.WriteFile(filepath.Join(dir, "mine.yaml"), []byte(family), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "logjail.yaml")
	text := `sources:
  - {name: web, paths: [/var/log/nginx/access.log]}
ranges:
  lab:
    cidrs: [198.51.100.0/24]
    signatures: [traversal]
    limits: ["1 per 1d"]
rules:
  - name: probes
    signatures: [secrets, vcs]
    limits: ["1 per 14d"]
  - name: panels
    match: {status: '^4'}
    signatures: [panels, "file:mine.yaml"]
    limits: ["2 per 1d"]
`
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(cfg, testOptions)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(c.ListFiles(), filepath.Join(dir, "mine.yaml")) {
		t.Errorf("ListFiles %v: the family file is not watched", c.ListFiles())
	}
	for _, tc := range []struct {
		e    parser.Entry
		want []string
	}{
		{entry("203.0.113.7", "GET", "/.env", 200), []string{"probes"}},
		{entry("203.0.113.7", "GET", "/.git/config", 404), []string{"probes"}},
		{entry("203.0.113.7", "GET", "/environment/", 200), nil},
		{entry("203.0.113.7", "POST", "/wp-login.php", 404), []string{"panels"}},
		{entry("203.0.113.7", "POST", "/wp-login.php", 200), nil},
		{entry("203.0.113.7", "GET", "/old-admin/x", 403), []string{"panels"}},
		{entry("203.0.113.7", "GET", "/products/1", 404), nil},
		{entry("198.51.100.9", "GET", "/a/../../etc/passwd", 400), []string{"range:lab"}},
		{entry("198.51.100.9", "GET", "/.env", 404), nil},
	} {
		if diff := cmp.Diff(tc.want, charged(t, c, tc.e)); diff != "" {
			t.Errorf("%s %s %d (-want +got):\n%s", tc.e.IP, tc.e.Path, tc.e.Status, diff)
		}
	}
}
