package replay

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestLastNPercentiles: ten clients each make 3 requests, client K over a
// span of 2K seconds, against "last 3 within 1s" (none is over): the
// shorter span is the more severe, so the percentiles run from the longest
// towards the shortest, as they run from the smallest count towards the
// largest for a rate: p50 is 12s (half the keys span at least that), p90
// 4s, p99 and Max the shortest span of all, 2s.
func TestLastNPercentiles(t *testing.T) {
	cfg := parseConfig(t, `
sources: [{name: web, paths: [/var/log/access.log], format: combined, timezone: UTC}]
rules:
  - name: burst
    limits: ["last 3 within 1s"]
    ban: {for: 1m}
`)
	var ls []string
	for k := 1; k <= 10; k++ {
		for i := 0; i < 3; i++ {
			ls = append(ls, line(fmt.Sprintf("203.0.113.%d", k), float64(k*100+i*k), 200))
		}
	}
	rep := replayOne(t, cfg, writeLog(t, ls), Options{})
	want := []LimitReport{{Limit: "last 3 within 1s", Unit: "seconds", Keys: 10, P50: 12, P90: 4, P99: 2, Max: 2}}
	if diff := cmp.Diff(want, rep.Rules[0].Limits); diff != "" {
		t.Errorf("last-N percentiles (-want +got):\n%s", diff)
	}
}
