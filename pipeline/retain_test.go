package pipeline

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/rules"
)

// TestProcessRetainsNoEntry: Process keeps no pointer to the entry it is
// given once it returns (the daemon uses a batch's entries again for a
// later batch: daemon/spare.go). Every scenario under testdata/scenarios
// is run twice through a pipeline: once with each entry in memory of its
// own, kept to the end; once with one entry, overwritten by a poison
// entry right after each Process and by the next line's before the next.
// The decisions and the counts must be the same: an entry kept and read
// later would show the poison's address, time or status.
func TestProcessRetainsNoEntry(t *testing.T) {
	dirs, _ := filepath.Glob("../testdata/scenarios/*/config.yaml")
	if len(dirs) == 0 {
		t.Fatal("no scenarios under testdata/scenarios")
	}
	poison := parser.Entry{IP: netip.MustParseAddr("2001:db8:dead::1"), Time: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC),
		Method: "POISON", Path: "/poison", Status: 599, UserAgent: "poison"}
	for _, cf := range dirs {
		dir := filepath.Dir(cf)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			cfg, err := rules.Load(cf, rules.Options{HostAddrs: []netip.Addr{netip.MustParseAddr("203.0.113.250")}, Cores: 2})
			if err != nil {
				t.Fatal(err)
			}
			logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
			for _, l := range logs {
				src := cfg.SourceFor(l)
				if src == nil {
					t.Fatalf("%s: no source reads it", l)
				}
				kept, n := run(t, cfg, src, l, nil)
				reused, _ := run(t, cfg, src, l, &poison)
				if n == 0 {
					t.Fatalf("%s: no line parsed", l)
				}
				if diff := cmp.Diff(kept, reused); diff != "" {
					t.Errorf("%s: decisions with the entries overwritten after Process (-kept +overwritten):\n%s", l, diff)
				}
			}
		})
	}
}

// run processes the lines of name through a new pipeline and returns its
// decisions and counts as text, and how many entries it processed. With
// poison nil every entry has its own memory; else one entry is used for
// all, set to *poison after each Process.
func run(t *testing.T, cfg *rules.Config, src *rules.Source, name string, poison *parser.Entry) ([]string, int) {
	t.Helper()
	pr, err := parser.New(src.Parser)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := New(cfg)
	var out []detector.Decision
	var keep []*parser.Entry
	var one parser.Entry
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		e, err := pr.ParseString(sc.Text(), n)
		if err != nil {
			continue
		}
		ep := &e
		if poison != nil {
			one = e
			ep = &one
		} else {
			keep = append(keep, ep)
		}
		out = p.Process(src, ep, out)
		if poison != nil {
			one = *poison
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range out {
		got = append(got, fmt.Sprintf("%s %s %s %s until=%s %v %q", d.Time.UTC().Format(time.RFC3339Nano), d.Kind, d.Rule, d.Key,
			d.Until.UTC().Format(time.RFC3339Nano), d.Addresses, d.Reason))
	}
	got = append(got, fmt.Sprintf("%+v", p.Counts()))
	return got, int(p.Counts().Entries)
}
