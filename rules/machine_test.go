package rules_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/rules"
)

// TestOfMachineTrips runs "50% cpu over 10s of machine" through a detector
// on machines of 1, 2 and 4 cores (rules.Options.Cores): half the machine
// is 0.5 CPU seconds a second per core, so 5 CPU seconds per core in the
// 10s window. Just under it nothing happens; just over it the key is
// banned. A share "of machine" wrongly divided by the cores would ban at
// the first charge on 2 and 4 cores; one read as of one core would never
// ban on 2 and 4.
func TestOfMachineTrips(t *testing.T) {
	const text = `
sources: [{name: web, paths: [/x], cpu_field: cpu}]
rules:
  - name: heavy
    limits: ["50% cpu over 10s of machine"]
    ban: {for: 1m}
`
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	for _, cores := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("%d cores", cores), func(t *testing.T) {
			cfg, err := rules.Parse("test.yaml", []byte(text), rules.Options{HostAddrs: []netip.Addr{}, Cores: cores})
			if err != nil {
				t.Fatal(err)
			}
			r := cfg.Rule("heavy")
			if got, want := r.Limits[0].N, 0.5*float64(cores); got != want {
				t.Errorf("N = %v CPU seconds a second, want %v", got, want)
			}
			threshold := 5 * float64(cores) // CPU seconds in the 10s window
			det := detector.New(detector.Options{})
			c := rules.Charge{Rule: r, Key: "203.0.113.7", Addr: netip.MustParseAddr("203.0.113.7")}

			// Just under: threshold − 1ms in two requests a second apart.
			c.CPU = threshold - 1.001
			if ds := det.Charge(t0, &c, nil); len(ds) != 0 {
				t.Fatalf("first charge (%.3f CPU s): %+v, want nothing", c.CPU, ds)
			}
			c.CPU = 1
			if ds := det.Charge(t0.Add(time.Second), &c, nil); len(ds) != 0 {
				t.Fatalf("%.3f CPU s in 10s on %d cores: %+v, want nothing (under %v)", threshold-0.001, cores, ds, threshold)
			}
			// Just over: 2ms more, still in the window.
			c.CPU = 0.002
			ds := det.Charge(t0.Add(2*time.Second), &c, nil)
			if len(ds) != 1 || ds[0].Kind != detector.Ban {
				t.Fatalf("%.3f CPU s in 10s on %d cores: %+v, want a ban (over %v)", threshold+0.001, cores, ds, threshold)
			}
			// The reason reads as the limit is written: a share of the
			// machine, not of one core.
			if want := "cpu 50.0% over 10s of machine > 50% (rule heavy)"; ds[0].Reason != want {
				t.Errorf("reason %q, want %q", ds[0].Reason, want)
			}
		})
	}
}
