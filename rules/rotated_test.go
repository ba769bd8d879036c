package rules

import "testing"

// TestSourceForRotatedSiblings: a source owns every rotated sibling that
// package rotation names, the files in its olddir included, and no other.
func TestSourceForRotatedSiblings(t *testing.T) {
	c := mustParse(t, `
sources:
  - {name: nginx, paths: [/var/log/nginx/access.log], olddir: old}
  - {name: shop, paths: [/var/log/shop/*.log], olddir: /srv/archive}
  - {name: fpm, paths: [/var/log/php*-fpm.log]}
`, testOptions)
	for path, want := range map[string]string{
		"/var/log/nginx/access.log.3.bz2":               "nginx",
		"/var/log/nginx/access.log.3.xz":                "nginx",
		"/var/log/nginx/access.log.3.zst":               "nginx",
		"/var/log/nginx/access.log-20261124":            "nginx",
		"/var/log/nginx/access.log-20261124.gz":         "nginx",
		"/var/log/nginx/access.log-20261124-1764000000": "nginx",
		"/var/log/nginx/access.log.2026-11-24":          "nginx",
		"/var/log/nginx/old/access.log.1":               "nginx",
		"/var/log/nginx/old/access.log-20261124.zst":    "nginx",
		"/srv/archive/a.log.2.gz":                       "shop",
		"/var/log/php8.2-fpm.log-20261124.bz2":          "fpm",
		"/var/log/nginx/old/access.log":                 "",
		"/var/log/nginx/other/access.log.1":             "",
		"/var/log/nginx/access.log.tmp":                 "",
		"/srv/archive/b.txt.1":                          "",
	} {
		got := ""
		if s := c.SourceFor(path); s != nil {
			got = s.Name
		}
		if got != want {
			t.Errorf("SourceFor(%q) = %q, want %q", path, got, want)
		}
	}
	if c.Sources[0].OldDir != "old" || c.Sources[2].OldDir != "" {
		t.Errorf("olddir %q, %q", c.Sources[0].OldDir, c.Sources[2].OldDir)
	}
}
