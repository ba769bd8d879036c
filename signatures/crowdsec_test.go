package signatures

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/logjail/logjail/internal/testenv"
)

// probeTest names the CrowdSec hub test folders whose logs are probes
// (vulnerability, sensitive-file, traversal and technology probes), as
// opposed to brute force, floods, bad user agents and the parsers' own
// tests. notProbe leaves out, of those, the ones whose lines are not
// probes by their request line: SQL injection and XSS probing (parameter
// values, no family's business), and CVE tests whose exploit is in the
// body or the headers, the logged lines being ordinary requests
// (ZoneMinder's, Ghost's login brute force, CWP's login, Apache's
// CVE-2024-38475 with made-up paths).
var (
	probeTest = regexp.MustCompile(`(?i)cve|sensitive|traversal|probing|backdoor|wordpress_wpconfig|log4j|thinkphp|spring4shell|rce|w00twoot|vmsa|f5-big-ip`)
	notProbe  = regexp.MustCompile(`(?i)sqli|xss|zoneminder|CVE-2022-41697|CVE-2022-44877|CVE-2024-38475`)
)

// TestCrowdSecProbes runs the probe logs of the CrowdSec hub's scenario
// tests (../shared/corpus/crowdsec, lines the combined parser reads)
// through every family, and their whitelist tests (ordinary traffic of
// self-hosted apps: Nextcloud, Jellyfin, ...) too. It reports how many
// probe lines each family catches and asserts the floor measured when
// the families were written; no whitelist line may match.
func TestCrowdSecProbes(t *testing.T) {
	dir := filepath.Join(testenv.Shared(t), "corpus", "crowdsec")
	p := combined(t)
	var fams []*Family
	sets := map[string]*Set{}
	for _, name := range Builtin() {
		f, err := Load(name)
		if err != nil {
			t.Fatal(err)
		}
		fams = append(fams, f)
		if sets[name], err = Compile(f); err != nil {
			t.Fatal(err)
		}
	}
	all, err := Compile(fams...)
	if err != nil {
		t.Fatal(err)
	}
	logs, err := filepath.Glob(filepath.Join(dir, "*", "*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no logs in %s: %v", dir, err)
	}
	probes, caught := 0, 0
	byFamily := map[string]int{}
	var missed []string
	for _, log := range logs {
		test := filepath.Base(filepath.Dir(log))
		whitelist := strings.HasSuffix(test, "-whitelist")
		if !whitelist && (!probeTest.MatchString(test) || notProbe.MatchString(test)) {
			continue
		}
		f, err := os.Open(log)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			e, err := p.ParseString(sc.Text(), n)
			if err != nil {
				continue
			}
			pat := all.First(&e)
			if whitelist {
				if pat != nil {
					t.Errorf("%s/%s:%d: ordinary line matched by %s/%s: %s", test, filepath.Base(log), n, pat.Family, pat.Name, sc.Text())
				}
				continue
			}
			probes++
			if pat == nil {
				missed = append(missed, test+": "+e.Method+" "+e.Path+"?"+e.Query)
				continue
			}
			caught++
			for name, s := range sets {
				if s.Match(&e) {
					byFamily[name]++
				}
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	names := make([]string, 0, len(byFamily))
	for n := range byFamily {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t.Logf("%-10s %d", n, byFamily[n])
	}
	t.Logf("caught %d of %d probe lines (%.1f%%)", caught, probes, 100*float64(caught)/float64(max(probes, 1)))
	for _, m := range missed {
		t.Logf("missed %s", m)
	}
	// Measured on the hub commit in ../shared/corpus/SOURCES.md.
	const floorProbes, floorCaught = 191, 175
	if probes < floorProbes || caught < floorCaught {
		t.Errorf("caught %d of %d probe lines, want at least %d of at least %d", caught, probes, floorCaught, floorProbes)
	}
}
