package replay

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestLastNPercentiles: ten clients each make 3 requests, client K over a
// span of 2K seconds, against "last 3 within 1s" (none is over) and "100
// per 1m": the shorter span is the more severe, so the last-N percentiles
// run from the longest towards the shortest, as they run from the smallest
// count towards the largest for a rate: p50 is 12s (half the keys span at
// least that), p90 4s, p99 and the most severe the shortest span of all,
// 2s. The text report heads that column MIN, and the rate's MAX.
func TestLastNPercentiles(t *testing.T) {
	cfg := parseConfig(t, `
sources: [{name: web, paths: [/var/log/access.log], format: combined, timezone: UTC}]
good_bots: {verify: off}
rules:
  - name: burst
    limits: ["100 per 1m", "last 3 within 1s"]
    ban: {for: 1m}
`)
	var ls []string
	for k := 1; k <= 10; k++ {
		for i := 0; i < 3; i++ {
			ls = append(ls, line(fmt.Sprintf("203.0.113.%d", k), float64(k*100+i*k), 200))
		}
	}
	rep := replayOne(t, cfg, writeLog(t, ls), Options{})
	want := []LimitReport{
		{Limit: "100 per 1m", Unit: "requests", Keys: 10, P50: 3, P90: 3, P99: 3, Max: 3},
		{Limit: "last 3 within 1s", Unit: "seconds", Keys: 10, P50: 12, P90: 4, P99: 2, Max: 2},
	}
	if diff := cmp.Diff(want, rep.Rules[0].Limits); diff != "" {
		t.Errorf("last-N percentiles (-want +got):\n%s", diff)
	}
	var b strings.Builder
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	var table []string
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(l, "  LIMIT") || strings.HasPrefix(l, "  100 per 1m") || strings.HasPrefix(l, "  last 3 within 1s") {
			table = append(table, strings.Join(strings.Fields(l), " "))
		}
	}
	wantTable := []string{
		"LIMIT KEYS p50 p90 p99 MAX (peak per key)",
		"100 per 1m 10 3 3 3 3",
		"LIMIT KEYS p50 p90 p99 MIN (shortest span of N per key: pNN is the span NN% of keys stay above)",
		"last 3 within 1s 10 12.00s 4.00s 2.00s 2.00s",
	}
	if diff := cmp.Diff(wantTable, table); diff != "" {
		t.Errorf("the report's limit table (-want +got):\n%s\n%s", diff, b.String())
	}
}
