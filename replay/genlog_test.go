package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"

	"github.com/logjail/logjail/checkpoint"
	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/store"

	"github.com/logjail/logjail/internal/testenv"
)

// truth is the part of genlog.py's truth file the test reads.
type truth struct {
	Attackers []struct {
		Key  string   `json:"key"`
		IPs  []string `json:"ips"`
		Kind string   `json:"kind"`
	} `json:"attackers"`
}

// genlog writes a log and its truth file with ../shared/tools/genlog.py.
func genlog(t testing.TB, lines, seed int) (log string, tr truth) {
	t.Helper()
	// Without ../shared or python3 the test skips (fails under CI=true).
	tool := filepath.Join(testenv.Shared(t), "tools", "genlog.py")
	if _, err := os.Stat(tool); err != nil {
		testenv.Skip(t, "%s not found: the detection test needs ../shared (CI has it)", tool)
	}
	py := testenv.Need(t, "python3")[0]
	dir := t.TempDir()
	log, tf := filepath.Join(dir, "access.log"), filepath.Join(dir, "truth.json")
	cmd := exec.Command(py, tool, "--lines", itoa(lines), "--seed", itoa(seed), "--format", "combined_cpu",
		"--attackers", "12", "--truth", tf, "-o", log)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("genlog.py: %v\n%s", err, out)
	}
	b, err := os.ReadFile(tf)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &tr); err != nil {
		t.Fatal(err)
	}
	return log, tr
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// keyOf is the key a rule with `key: ip` and the default ipv6_prefix 64
// charges the truth file's key to: IPv4 as is, IPv6 by its /64.
func keyOf(t *testing.T, k string) string {
	t.Helper()
	if p, err := netip.ParsePrefix(k); err == nil {
		return p.Masked().String()
	}
	a, err := netip.ParseAddr(k)
	if err != nil {
		t.Fatalf("truth key %q is neither an address nor a prefix", k)
	}
	if a.Is4() {
		return a.String()
	}
	return netip.PrefixFrom(a, 64).Masked().String()
}

// TestGenlogTruth replays generated logs with testdata/genlog.yaml and checks
// the decisions against the generator's truth: every attacker is banned, and
// no normal client is throttled or banned.
func TestGenlogTruth(t *testing.T) {
	cfg, err := rules.Load("../testdata/genlog.yaml", rules.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, seed := range []int{1, 2} {
		t.Run("seed="+itoa(seed), func(t *testing.T) {
			log, tr := genlog(t, 150000, seed)
			rep, err := Run(context.Background(), cfg, []Input{{Name: log, Source: cfg.Sources[0]}}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Input.Rejected != 0 {
				t.Errorf("%d lines rejected, want 0: %v", rep.Input.Rejected, rep.Input.Samples)
			}
			attackers := map[string]string{}
			for _, a := range tr.Attackers {
				attackers[keyOf(t, a.Key)] = a.Kind
			}
			banned := map[string][]string{}
			for _, d := range rep.Decisions {
				if d.Kind == string(detector.Unban) {
					continue
				}
				if _, ok := attackers[d.Key]; !ok {
					t.Errorf("normal client %s: %s by rule %s at %s: %s", d.Key, d.Kind, d.Rule, d.Time, d.Reason)
					continue
				}
				if d.Kind == string(detector.Ban) {
					banned[d.Key] = append(banned[d.Key], d.Rule)
				}
			}
			var keys []string
			for k := range attackers {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if len(banned[k]) == 0 {
					t.Errorf("attacker %s (%s) was not banned", k, attackers[k])
				} else {
					t.Logf("attacker %-24s %-5s banned by %v", k, attackers[k], banned[k])
				}
			}
		})
	}
}

// BenchmarkReplay replays a generated 200k-line log with testdata/genlog.yaml:
// the whole replay (read, parse, merge, classify, detect, report), reported as
// ns per line and lines/s; db=sqlite also writes the decisions and the final
// state into a new database, as `replay --db` does; config=example replays
// it with the embedded example configuration instead (its signature rules,
// good_bots, a token bucket), as `logjail replay` does without --config
// (issue 18: at least 1.2M lines/s on 1M lines). scripts/bench.sh measures
// the binary on 1M lines against fail2ban-regex.
func BenchmarkReplay(b *testing.B) {
	const lines = 200000
	log, _ := genlog(b, lines, 7)
	cfg, err := rules.Load("../testdata/genlog.yaml", rules.Options{})
	if err != nil {
		b.Fatal(err)
	}
	fi, err := os.Stat(log)
	if err != nil {
		b.Fatal(err)
	}
	example, err := rules.Parse("example.yaml", rules.Example(), rules.Options{})
	if err != nil {
		b.Fatal(err)
	}
	for _, run := range []struct {
		name   string
		cfg    *rules.Config
		withDB bool
	}{{"db=none", cfg, false}, {"db=sqlite", cfg, true}, {"config=example", example, false}} {
		cfg, withDB := run.cfg, run.withDB
		b.Run(run.name, func(b *testing.B) {
			b.SetBytes(fi.Size())
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				var o Options
				var db *store.DB
				if withDB {
					i++
					if db, err = store.Open(filepath.Join(b.TempDir(), fmt.Sprintf("run%d.db", i)), store.Options{}); err != nil {
						b.Fatal(err)
					}
					o.Recorder = checkpoint.NewWriter(db)
				}
				rep, err := Run(context.Background(), cfg, []Input{{Name: log, Source: cfg.Sources[0]}}, o)
				if err != nil {
					b.Fatal(err)
				}
				if db != nil {
					db.Close()
				}
				if rep.Input.Parsed != lines {
					b.Fatalf("parsed %d lines, want %d", rep.Input.Parsed, lines)
				}
			}
			perLine := float64(b.Elapsed().Nanoseconds()) / float64(b.N) / lines
			b.ReportMetric(perLine, "ns/line")
			b.ReportMetric(1e9/perLine, "lines/s")
		})
	}
}
