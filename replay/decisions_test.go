package replay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/logjail/logjail/rules"
)

// TestGenlogDecisions replays the generated logs of TestGenlogTruth and
// compares every decision, and a digest of the whole JSON report (top
// lists, percentiles, counters; file names left out), with
// testdata/genlog-decisions/seed*.txt, written by a reviewed -update run.
// A change of the detector's memory layout, of eviction or of the report's
// bookkeeping must leave them as they are.
func TestGenlogDecisions(t *testing.T) {
	cfg, err := rules.Load("../testdata/genlog.yaml", rules.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, seed := range []int{1, 2} {
		t.Run("seed="+itoa(seed), func(t *testing.T) {
			log, _ := genlog(t, 150000, seed)
			rep, err := Run(context.Background(), cfg, []Input{{Name: log, Source: cfg.Sources[0]}}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range rep.Decisions {
				got = append(got, formatDecision(d))
			}
			for i := range rep.Files {
				rep.Files[i].Name = filepath.Base(rep.Files[i].Name)
			}
			var js strings.Builder
			if err := rep.WriteJSON(&js); err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256([]byte(js.String()))
			got = append(got, "report sha256 "+hex.EncodeToString(sum[:]))
			file := filepath.Join("../testdata/genlog-decisions", "seed"+itoa(seed)+".txt")
			if *update {
				if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			want := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("decisions (-want +got):\n%s", diff)
			}
		})
	}
}
