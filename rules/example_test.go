package rules

import (
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/logjail/logjail/parser"
)

func TestExample(t *testing.T) {
	c, err := Parse("example.yaml", Example(), testOptions)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Sources) != 1 {
		t.Fatalf("%d sources, want 1", len(c.Sources))
	}
	web := c.Sources[0]
	if web.Name != "web" || web.Parser.Format != "combined" || !slices.Contains(web.Paths, "/var/log/nginx/access.log") {
		t.Errorf("source: %+v", web)
	}
	if c.Rule("probes") == nil || c.Rule("panels") == nil || c.Rule("probes").Index > c.Rule("flood").Index {
		t.Errorf("want rules probes and panels above flood")
	}
	for _, tc := range []struct {
		path   string
		status int
		want   []string
	}{
		{"/wp-login.php", 404, []string{"panels", "flood", "scanners"}},
		{"/wp-login.php", 401, []string{"flood"}},
		{"/.git/config", 404, []string{"probes", "flood", "scanners"}},
	} {
		e := parser.Entry{IP: netip.MustParseAddr("203.0.113.7"), Path: tc.path, Status: tc.status, Has: parser.HasPath | parser.HasStatus}
		charges, _ := c.Classify(c.Sources[0], &e, nil)
		var got []string
		for _, ch := range charges {
			got = append(got, ch.Rule.Name)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s %d (-want +got):\n%s", tc.path, tc.status, diff)
		}
	}
	if c.Rule("flood") == nil || c.Rule("flood").Throttle == nil || c.Rule("scanners") == nil {
		t.Errorf("want rules flood (with throttle) and scanners, have %d rules", len(c.Rules))
	}
	for _, a := range []string{"127.0.0.1", "127.9.9.9", "::1"} {
		if !c.Allowed(netip.MustParseAddr(a)) {
			t.Errorf("%s not allowed", a)
		}
	}
	// Static files do not count towards flood; pages do. Probes count
	// whatever the status; panels only on a 4xx other than 401.
	for path, want := range map[string][]string{
		"/static/js/vendor.2df89c15.js": nil,
		"/images/products/50239.webp":   nil,
		"/products/82441-utpara":        {"flood"},
		"/.env":                         {"probes", "flood"},
		"/wp-login.php":                 {"flood"},
	} {
		e := parser.Entry{IP: netip.MustParseAddr("203.0.113.7"), Path: path, Status: 200, Has: parser.HasPath | parser.HasStatus}
		charges, _ := c.Classify(web, &e, nil)
		var got []string
		for _, ch := range charges {
			got = append(got, ch.Rule.Name)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", path, diff)
		}
	}
}

// TestExampleDocumentsEveryKey checks that every key the loader accepts, every
// preset, key kind, limit form and action type is named in the example.
func TestExampleDocumentsEveryKey(t *testing.T) {
	text := string(Example())
	var keys []string
	for _, list := range [][]string{topKeys, sourceKeys, ruleKeys, rangeKeys, banKeys, throttleKeys, fleetKeys} {
		keys = append(keys, list...)
	}
	keys = append(keys, "not")
	for _, k := range keys {
		if !regexp.MustCompile(`(?m)^[ #]*(- )?` + regexp.QuoteMeta(k) + `:|[{,] ?` + regexp.QuoteMeta(k) + `:|^#\s+` + regexp.QuoteMeta(k) + `:`).MatchString(text) {
			t.Errorf("key %q is not documented", k)
		}
	}
	words := append(append(append([]string{}, parser.Presets()...), keyKinds...), actionTypes...)
	words = append(words, "per second", "per minute", "hour", "day", "month", "% cpu over", "of machine", "% duration over", "burst", "last N within", "cpu_fallback: duration")
	for _, w := range words {
		if !strings.Contains(text, w) {
			t.Errorf("%q is not mentioned", w)
		}
	}
}

// TestExampleActionsWording: the example says that actions make bans real
// and names every type, not that later releases will implement them.
func TestExampleActionsWording(t *testing.T) {
	text := string(Example())
	i := strings.Index(text, "# Actions make bans real")
	j := strings.Index(text, "\nactions:")
	if i < 0 || j < i {
		t.Fatal("no paragraph before actions: that starts \"# Actions make bans real\"")
	}
	para := text[i:j]
	for _, bad := range []string{"later release", "checked for their types only"} {
		if strings.Contains(para, bad) {
			t.Errorf("the actions paragraph says %q:\n%s", bad, para)
		}
	}
	for _, typ := range ActionTypes() {
		if !strings.Contains(para, typ) {
			t.Errorf("the actions paragraph does not name %s:\n%s", typ, para)
		}
	}
}
