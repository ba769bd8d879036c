package main

// Tests of export and import on a real database, with no daemon (the
// command is then the database's one writer); import_live_test.go runs
// them against a real daemon.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/logjail/logjail/control"
)

// ioConfig is a configuration in dir (no daemon serves its socket) with
// an allow list.
func ioConfig(t testing.TB, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "logjail.yaml")
	cfg := fmt.Sprintf(`state_dir: %[1]s/state
control_socket: %[1]s/control.sock
metrics: ""
allow: [127.0.0.0/8]
sources:
  - name: web
    paths: [%[1]s/access.log]
    format: combined
rules:
  - name: flood
    limits: ["5 per 10s"]
    ban: {for: 1h}
`, dir)
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// activeBans lists the active bans of cfg's database, by key.
func activeBans(t *testing.T, cfg string) map[string]control.Ban {
	t.Helper()
	code, out, stderr := run(t, "", "list", "--output", "json", "--config", cfg)
	if code != 0 {
		t.Fatalf("list: exit %d: %s", code, stderr)
	}
	var l control.BanList
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("list: %v\n%s", err, out)
	}
	m := map[string]control.Ban{}
	for _, b := range l.Bans {
		m[b.Key] = b
	}
	return m
}

func keysOf(m map[string]control.Ban) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// left is how long a ban has left, from its until.
func left(b control.Ban) time.Duration {
	if b.Until == nil {
		return -1
	}
	return time.Until(*b.Until)
}

// near reports whether d is want, give or take the test's own time.
func near(d, want time.Duration) bool { return d > want-time.Minute && d <= want+time.Second }

type wantBan struct {
	reason string
	left   time.Duration
}

// TestImportFormats: each format's sample is imported into an empty
// database as the operator's bans: the keys, their ends (--for, the
// entry's own, else 24h) and their reasons; what is no ban is left out
// and counted.
func TestImportFormats(t *testing.T) {
	until2099 := time.Until(time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC))
	day := 24 * time.Hour
	tests := []struct {
		file, format string
		want         map[string]wantBan
		leftOut      []string // on stderr
	}{
		{"plain.txt", "auto", map[string]wantBan{
			"203.0.113.7":       {"imported from testdata/import/plain.txt", day},
			"198.51.100.0/24":   {"imported from testdata/import/plain.txt", day},
			"203.0.113.9":       {"imported from testdata/import/plain.txt", day}, // ::ffff:203.0.113.9, unmapped
			"2001:db8:1:2::/64": {"imported from testdata/import/plain.txt", day},
			"2001:db8::5":       {"imported from testdata/import/plain.txt", day},
		}, nil},
		{"bans.csv", "auto", map[string]wantBan{
			"203.0.113.7":       {"rate 6 per 10s > 5 (rule flood)", until2099},
			"198.51.100.0/24":   {"scanner, net-wide", day}, // no until
			"2001:db8:1:2::/64": {"from a partner's list", until2099},
			"user:mallory":      {"credential stuffing", until2099},
		}, []string{"1 entry left out: no ban (throttle)"}},
		{"cscli-raw.csv", "csv", map[string]wantBan{
			"203.0.113.7":     {"crowdsecurity/http-probing", 3*time.Hour + 59*time.Minute + 31*time.Second},
			"198.51.100.0/24": {"manual 'ban' from 'localhost'", 23 * time.Hour},
			"2001:db8::5":     {"crowdsecurity/ssh-bf", time.Hour},
		}, []string{"1 entry left out: no ban (captcha)", "1 entry left out: simulated", "1 entry left out: scope Country: no address"}},
		{"cscli-list.json", "auto", map[string]wantBan{
			"203.0.113.7":     {"Ip 203.0.113.7 performed 'crowdsecurity/http-probing' (11 events over 4s) at 2026-11-25 10:00:00 +0000 UTC", until2099},
			"198.51.100.0/24": {"manual 'ban' from 'localhost'", 23 * time.Hour},
			"2001:db8::5":     {"manual 'ban' from 'localhost'", time.Hour},
		}, []string{"1 entry left out: no ban (captcha)", "1 entry left out: simulated", "1 entry left out: ended already"}},
		{"cscli-import.json", "crowdsec", map[string]wantBan{
			"203.0.113.7":     {"manual import", time.Hour},
			"198.51.100.0/24": {"manual import", 2 * time.Hour},
			"2001:db8::5":     {"imported from testdata/import/cscli-import.json", day},
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			cfg := ioConfig(t, t.TempDir())
			code, out, stderr := run(t, "", "import", "testdata/import/"+tt.file, "--format", tt.format, "--config", cfg)
			if code != 0 {
				t.Fatalf("import: exit %d\n%s\n%s", code, out, stderr)
			}
			if want := fmt.Sprintf("banned %d keys from testdata/import/%s (rule operator)", len(tt.want), tt.file); !strings.Contains(out, want) {
				t.Errorf("import said %q, want %q", out, want)
			}
			for _, w := range tt.leftOut {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q: want %q", stderr, w)
				}
			}
			got := activeBans(t, cfg)
			var want []string
			for k := range tt.want {
				want = append(want, k)
			}
			slices.Sort(want)
			if diff := cmpStrings(want, keysOf(got)); diff != "" {
				t.Fatalf("banned (-want +got):\n%s", diff)
			}
			for k, w := range tt.want {
				b := got[k]
				if b.Rule != control.OperatorRule || b.Kind != "ban" || b.Origin != "operator" || b.Reason != w.reason || !near(left(b), w.left) {
					t.Errorf("%s: rule %s kind %s origin %s reason %q, %v left; want operator ban, reason %q, %v left",
						k, b.Rule, b.Kind, b.Origin, b.Reason, left(b), w.reason, w.left)
				}
			}
		})
	}
}

// TestImportBadEntries: a file with a bad entry applies nothing, and
// every bad entry is named by its line and field.
func TestImportBadEntries(t *testing.T) {
	tests := []struct {
		name, format, in string
		want             []string
	}{
		{"plain", "auto", "203.0.113.7\n198.51.100.0/24\n203.0.113.300\n2001:db8::5\n10.1.2.3/8\n203.0.113.8 203.0.113.9\n", []string{
			`stdin:3: value: "203.0.113.300": not an address or CIDR`,
			`stdin:5: value: "10.1.2.3/8": bits set past /8: did you mean 10.0.0.0/8?`,
			`stdin:6: value: "203.0.113.8 203.0.113.9": one address or CIDR a line`,
		}},
		{"plain has no keys", "plain", "203.0.113.7\nuser:bob\n", []string{`stdin:2: value: "user:bob": not an address or CIDR`}},
		{"csv", "auto", "rule,key,kind,since,until,reason,origin\nflood,203.0.113.7,ban,,2099-01-01T00:00:00Z,x,detector\nflood,203.0.113.8,ban,,tomorrow,x,detector\nflood,bob,ban,,,x,operator\n", []string{
			`stdin:3: until: "tomorrow": not an RFC 3339 time`,
			`stdin:4: key: "bob": not an address, a CIDR or a key`,
		}},
		{"csv short row", "csv", "value,duration\n203.0.113.7,1h\n203.0.113.8\n", []string{`stdin:3: csv: 1 fields, the header has 2`}},
		{"csv no value column", "csv", "address,duration\n203.0.113.7,1h\n", []string{`stdin:1: header: no key, value or ip column`}},
		{"logjail json", "auto", "{\"version\": 1,\n \"bans\": [\n  {\"key\": \"203.0.113.7\", \"kind\": \"ban\", \"until\": null},\n  {\"key\": \"203.0.113.8\", \"kind\": \"ban\", \"until\": \"soon\"},\n  {\"key\": 7}\n ]\n}\n", []string{
			`stdin:4: bans[1].until: "soon": not an RFC 3339 time`,
			`stdin:5: bans[2].key: want a string, not a number`,
		}},
		{"crowdsec", "auto", "[\n {\"decisions\": [\n  {\"value\": \"203.0.113.7\", \"scope\": \"Ip\", \"type\": \"ban\", \"duration\": \"1h\"},\n  {\"value\": \"203.0.113.0/24\", \"scope\": \"Ip\", \"type\": \"ban\", \"duration\": \"1h\"},\n  {\"value\": \"2001:db8::zz\", \"scope\": \"Ip\", \"type\": \"ban\", \"duration\": \"1h\"},\n  {\"value\": \"203.0.113.9\", \"scope\": \"Ip\", \"type\": \"ban\", \"duration\": \"an hour\"}\n ]}\n]\n", []string{
			`stdin:4: [0].decisions[1].scope: Ip, but "203.0.113.0/24" is a CIDR (scope Range)`,
			`stdin:5: [0].decisions[2].value: "2001:db8::zz": not an address or CIDR`,
			`stdin:6: [0].decisions[3].duration: "an hour": not a duration (4h0m0s)`,
		}},
		{"truncated json", "auto", "[\n {\"value\": \"203.0.113.7\",\n", []string{`stdin:3: json: the file ends before the JSON does`}},
		{"json that is not logjail's", "json", "[]\n", []string{`stdin:1: json: want logjail's JSON`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ioConfig(t, t.TempDir())
			code, out, stderr := run(t, tt.in, "import", "-", "--format", tt.format, "--config", cfg)
			if code != exitNegative || !strings.Contains(stderr, "nothing imported") {
				t.Errorf("exit %d, stderr %q; want %d and nothing imported (stdout %q)", code, stderr, exitNegative, out)
			}
			// Every bad entry, in the order of the file (each line
			// starting so), then the summary.
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			got := lines[:len(lines)-1]
			ok := len(got) == len(tt.want)
			for i := 0; ok && i < len(got); i++ {
				ok = strings.HasPrefix(got[i], tt.want[i])
			}
			if !ok {
				t.Errorf("stderr (-want +got):\n%s", cmpStrings(tt.want, got))
			}
			if bans := activeBans(t, cfg); len(bans) != 0 {
				t.Errorf("a file with a bad entry banned %v", keysOf(bans))
			}
		})
	}
}

// TestImportAllowList: an entry on the allow list is a bad entry (nothing
// imported), unless --force.
func TestImportAllowList(t *testing.T) {
	cfg := ioConfig(t, t.TempDir())
	code, _, stderr := run(t, "", "import", "testdata/import/allowed.txt", "--config", cfg)
	if code != exitNegative || !strings.Contains(stderr, "testdata/import/allowed.txt:2: value: 127.0.0.9 is on the allow list (127.0.0.0/8): give --force") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	if bans := activeBans(t, cfg); len(bans) != 0 {
		t.Errorf("a refused import banned %v", keysOf(bans))
	}
	code, out, stderr := run(t, "", "import", "testdata/import/allowed.txt", "--force", "--config", cfg)
	if code != 0 || !strings.Contains(out, "forced: 1 key on the allow list") {
		t.Errorf("--force: exit %d\n%s%s", code, out, stderr)
	}
	if diff := cmpStrings([]string{"127.0.0.9", "203.0.113.7"}, keysOf(activeBans(t, cfg))); diff != "" {
		t.Errorf("--force banned (-want +got):\n%s", diff)
	}
}

// TestImportDryRun: --dry-run prints what would be banned and changes
// nothing: no database is even made.
func TestImportDryRun(t *testing.T) {
	dir := t.TempDir()
	cfg := ioConfig(t, dir)
	code, out, stderr := run(t, "", "import", "testdata/import/plain.txt", "--dry-run", "--for", "2h", "--config", cfg)
	if code != 0 || !strings.Contains(stderr, "would ban 5 keys") {
		t.Fatalf("exit %d\n%s%s", code, out, stderr)
	}
	var keys []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(l, "\t")
		if len(f) != 4 || f[1] != "operator" {
			t.Errorf("dry run line %q: want KEY, operator, UNTIL, REASON", l)
			continue
		}
		keys = append(keys, f[0])
	}
	slices.Sort(keys)
	if diff := cmpStrings([]string{"198.51.100.0/24", "2001:db8:1:2::/64", "2001:db8::5", "203.0.113.7", "203.0.113.9"}, keys); diff != "" {
		t.Errorf("dry run (-want +got):\n%s", diff)
	}
	code, out, _ = run(t, "", "import", "testdata/import/bans.csv", "--dry-run", "--output", "json", "--config", cfg)
	var dr struct {
		DryRun bool                 `json:"dry_run"`
		Bans   []control.BanRequest `json:"bans"`
	}
	if err := json.Unmarshal([]byte(out), &dr); code != 0 || err != nil || !dr.DryRun || len(dr.Bans) != 4 {
		t.Errorf("dry run --output json: exit %d, %v: %s", code, err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "state")); err == nil {
		t.Errorf("a dry run made the state directory")
	}
}

// TestImportFlags: --for replaces the entries' ends, --reason their
// reasons, --rule bans under a configured rule; an entry named twice is
// banned once, to the later end; usage errors are exit 2.
func TestImportFlags(t *testing.T) {
	cfg := ioConfig(t, t.TempDir())
	in := "value,duration\n203.0.113.7,1h\n203.0.113.7,3h\n::ffff:203.0.113.7,2h\n"
	if code, out, stderr := run(t, in, "import", "-", "--config", cfg); code != 0 || !strings.Contains(out, "banned 1 key") {
		t.Fatalf("exit %d\n%s%s", code, out, stderr)
	}
	if b := activeBans(t, cfg)["203.0.113.7"]; !near(left(b), 3*time.Hour) {
		t.Errorf("merged duplicates: %v left, want 3h", left(b))
	}
	cfg = ioConfig(t, t.TempDir())
	code, out, stderr := run(t, "", "import", "testdata/import/bans.csv", "--for", "2h", "--reason", "partner list", "--rule", "flood", "--config", cfg)
	if code != 0 || !strings.Contains(out, "banned 4 keys from testdata/import/bans.csv (rule flood)") {
		t.Fatalf("exit %d\n%s%s", code, out, stderr)
	}
	bans := activeBans(t, cfg)
	for _, k := range []string{"203.0.113.7", "198.51.100.0/24", "2001:db8:1:2::/64", "user:mallory"} {
		if b := bans[k]; b.Reason != "partner list" || !near(left(b), 2*time.Hour) {
			t.Errorf("%s: reason %q, %v left; want partner list, 2h", k, b.Reason, left(b))
		}
	}
	l := banListOf(t, cfg, "--rule", "flood")
	if len(l.Bans) != 4 {
		t.Errorf("--rule flood: %d bans of flood, want 4", len(l.Bans))
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"import", "testdata/import/plain.txt", "--rule", "nope"}, `--rule "nope": not in the configuration`},
		{[]string{"import", "testdata/import/plain.txt", "--format", "yaml"}, `--format "yaml"`},
		{[]string{"import", "testdata/import/plain.txt", "--for", "soon"}, "--for soon"},
		{[]string{"import", "testdata/import/none.txt"}, "no such file"},
		{[]string{"import"}, "one file"},
		{[]string{"export", "-o", "yaml"}, `--output "yaml"`},
	} {
		if code, _, stderr := run(t, "", append(tt.args, "--config", cfg)...); code != exitUsage || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tt.args, code, stderr, exitUsage, tt.want)
		}
	}
}

func banListOf(t *testing.T, cfg string, args ...string) control.BanList {
	t.Helper()
	code, out, stderr := run(t, "", append([]string{"list", "--output", "json", "--config", cfg}, args...)...)
	if code != 0 {
		t.Fatalf("list: exit %d: %s", code, stderr)
	}
	var l control.BanList
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatal(err)
	}
	return l
}

// operatorBans bans, with no daemon, keys of every form with their own
// durations and reasons.
func operatorBans(t *testing.T, cfg string) {
	t.Helper()
	for _, b := range [][]string{
		{"203.0.113.7", "1h", "credential stuffing, from the WAF"},
		{"198.51.100.0/24", "2h", "scanner net"},
		{"2001:db8:1:2::/64", "3h", `a "quoted" reason`},
		{"2001:db8::5", "5h", "one v6 address"},
		{"user:bob", "4h", "shared password"},
	} {
		if code, _, stderr := run(t, "", "ban", b[0], "--for", b[1], "--reason", b[2], "--config", cfg); code != 0 {
			t.Fatalf("ban %s: exit %d: %s", b[0], code, stderr)
		}
	}
}

// TestExportFormats: what each format writes of the active bans.
func TestExportFormats(t *testing.T) {
	cfg := ioConfig(t, t.TempDir())
	// An empty database, and none at all: an empty document.
	for format, want := range map[string]string{"json": `"bans":[]`, "csv": "rule,key,kind,since,until,reason,origin\n", "plain": "", "crowdsec": "[]\n"} {
		if code, out, stderr := run(t, "", "export", "-o", format, "--config", cfg); code != 0 || !strings.Contains(out, want) || (format == "plain" && out != "") {
			t.Errorf("export -o %s of no bans: exit %d, %q (%s); want %q", format, code, out, stderr, want)
		}
	}
	operatorBans(t, cfg)
	bans := activeBans(t, cfg)

	code, out, stderr := run(t, "", "export", "-o", "plain", "--config", cfg)
	if diff := cmpStrings([]string{"198.51.100.0/24", "2001:db8:1:2::/64", "2001:db8::5", "203.0.113.7"}, strings.Fields(out)); code != 0 || diff != "" {
		t.Errorf("plain: exit %d (-want +got):\n%s", code, diff)
	}
	if !strings.Contains(stderr, "1 ban left out: no address") {
		t.Errorf("plain: stderr %q: want the count of keys left out", stderr)
	}

	code, out, _ = run(t, "", "export", "-o", "csv", "--config", cfg)
	rows := strings.Split(strings.TrimSpace(out), "\n")
	b := bans["203.0.113.7"]
	wantRow := fmt.Sprintf(`operator,203.0.113.7,ban,%s,%s,"credential stuffing, from the WAF",operator`, b.Since.UTC().Format(time.RFC3339), b.Until.UTC().Format(time.RFC3339))
	if code != 0 || len(rows) != 6 || rows[0] != "rule,key,kind,since,until,reason,origin" || !slices.Contains(rows, wantRow) {
		t.Errorf("csv: exit %d, want 6 rows with %q:\n%s", code, wantRow, out)
	}

	code, out, _ = run(t, "", "export", "-o", "json", "--config", cfg)
	var l control.BanList
	if err := json.Unmarshal([]byte(out), &l); code != 0 || err != nil || len(l.Bans) != 5 {
		t.Errorf("json: exit %d, %v, %d bans; want the list's 5", code, err, len(l.Bans))
	}

	code, out, _ = run(t, "", "export", "-o", "crowdsec", "--config", cfg)
	var alerts []struct {
		Scenario  string `json:"scenario"`
		Message   string `json:"message"`
		Decisions []struct {
			Duration, Origin, Scenario, Scope, Type, Value, Until string
		} `json:"decisions"`
		Source struct{ Scope, Value, IP, Range string } `json:"source"`
	}
	if err := json.Unmarshal([]byte(out), &alerts); code != 0 || err != nil || len(alerts) != 4 {
		t.Fatalf("crowdsec: exit %d, %v, %d alerts; want 4:\n%s", code, err, len(alerts), out)
	}
	seen := map[string]bool{}
	for _, a := range alerts {
		if len(a.Decisions) != 1 {
			t.Fatalf("alert %+v: want one decision", a)
		}
		d := a.Decisions[0]
		seen[d.Value] = true
		wantScope := "Range"
		if !strings.Contains(d.Value, "/") {
			wantScope = "Ip"
		}
		dur, err := time.ParseDuration(d.Duration)
		ban := bans[d.Value]
		if err != nil || !near(dur, left(ban)) || d.Origin != "logjail" || d.Scenario != "operator" || a.Scenario != "operator" ||
			d.Scope != wantScope || d.Type != "ban" || d.Until != ban.Until.UTC().Format(time.RFC3339) ||
			a.Message != ban.Reason || a.Source.Scope != wantScope || a.Source.Value != d.Value {
			t.Errorf("alert %+v: want the ban %+v", a, ban)
		}
	}
	if len(seen) != 4 || seen["user:bob"] {
		t.Errorf("crowdsec decisions of %v", seen)
	}
}

// TestExportImportRoundTrip: what export writes in each format, import
// reads back into another database as the same bans (plain: the same
// addresses, for 24h).
func TestExportImportRoundTrip(t *testing.T) {
	from := ioConfig(t, t.TempDir())
	operatorBans(t, from)
	orig := activeBans(t, from)
	for _, format := range exportFormats {
		t.Run(format, func(t *testing.T) {
			dir := t.TempDir()
			code, out, stderr := run(t, "", "export", "-o", format, "--config", from)
			if code != 0 {
				t.Fatalf("export: exit %d: %s", code, stderr)
			}
			file := filepath.Join(dir, "bans."+format)
			if err := os.WriteFile(file, []byte(out), 0o600); err != nil {
				t.Fatal(err)
			}
			to := ioConfig(t, dir)
			if code, out, stderr := run(t, "", "import", file, "--config", to); code != 0 {
				t.Fatalf("import: exit %d\n%s%s", code, out, stderr)
			}
			got := activeBans(t, to)
			want := keysOf(orig)
			if format == "plain" || format == "crowdsec" {
				want = slices.DeleteFunc(want, func(k string) bool { return k == "user:bob" })
			}
			if diff := cmpStrings(want, keysOf(got)); diff != "" {
				t.Fatalf("round trip (-want +got):\n%s", diff)
			}
			for k, g := range got {
				o := orig[k]
				wantLeft, wantReason := left(o), o.Reason
				if format == "plain" {
					wantLeft, wantReason = 24*time.Hour, "imported from "+file
				}
				if d := left(g) - wantLeft; d < -2*time.Second || d > 2*time.Second || g.Reason != wantReason || g.Rule != o.Rule {
					t.Errorf("%s: %v left, reason %q, rule %s; want %v, %q, %s", k, left(g), g.Reason, g.Rule, wantLeft, wantReason, o.Rule)
				}
			}
		})
	}
}
