package checkpoint

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/pipeline"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/state"
)

// TestCollectAsChanges holds collect's rows (their keys pieces of one
// string, their data in one buffer, both sized ahead) to a plain model:
// the states detector.Changes reports, each copied, from a twin detector
// fed the same charges. Over random rounds of IPv4, IPv6 and text keys of
// every length (a round of short ones before longer ones: more text than
// sized for), bans, evictions (tombstones) and checkpoints of 0 to 3,000
// states, every checkpoint's rows, the earlier ones included (their keys
// and data must not move or change under the later ones), are the model's;
// so too when the buffers were made ready ahead (Prepare, every other
// round), too small or larger than needed.
func TestCollectAsChanges(t *testing.T) {
	cfg, err := rules.Parse("c.yaml", []byte(`
max_keys: 1500
sources: [{name: web, paths: [/var/log/access.log], format: combined}]
rules:
  - name: flood
    limits: ["20 per 10s"]
    ban: {for: 1m}
  - name: agents
    key: user_agent
    limits: ["50 per 10s"]
`), rules.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 23))
		det, twin := pipeline.NewDetector(cfg), pipeline.NewDetector(cfg)
		w := NewWriter(nil)
		var got []*state.Checkpoint
		var want [][]state.KeyRow
		now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
		var out []detector.Decision
		for round := range 12 {
			n := rng.IntN(3000)
			if round%4 == 3 {
				n = 0
			}
			for range n {
				now = now.Add(time.Duration(rng.IntN(20)) * time.Millisecond)
				i := rng.IntN(900)
				if round%3 == 0 { // short keys: the next round's outgrow the text's size
					i = i / 120 * 120
				}
				var a netip.Addr
				switch i % 3 {
				case 0:
					a = netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})
				case 1:
					a = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(i)}).Unmap()
					if i%2 == 0 {
						a = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0x80, byte(i >> 8), 6: byte(i), 15: 1})
					}
				default:
					a = netip.AddrFrom4([4]byte{192, 0, 2, byte(i)})
				}
				for _, rule := range cfg.Rules {
					key := a.String()
					if rule.Name == "agents" {
						key = fmt.Sprintf("ua:%0*d", 1+i%40, i)
					}
					ch := rules.Charge{Rule: rule, Key: key, Addr: a}
					out = det.Charge(now, &ch, out[:0])
					ch = rules.Charge{Rule: rule, Key: key, Addr: a}
					out = twin.Charge(now, &ch, out[:0])
				}
			}
			prepared := 0
			if round%2 == 1 {
				// As a replay near its end (Prepare): room for fewer
				// states than the collect takes, or for more.
				prepared = det.Pending() * (1 + rng.IntN(3)) / 2
				w.Prepare(prepared)
			}
			c := w.collect(det, now)
			if p := prepared + prepared/8; cap(c.Keys) < p {
				t.Fatalf("seed %d round %d: Prepare(%d) made room for %d rows; the collect's has %d", seed, round, prepared, p, cap(c.Keys))
			}
			got = append(got, c)
			var rows []state.KeyRow
			twin.Changes(func(ks *detector.KeyState) {
				rows = append(rows, state.KeyRow{Rule: ks.Rule, Key: ks.Key, Data: slices.Clone(ks.Data), LastSeen: ks.LastSeen,
					Requests: ks.Requests, Blocked: ks.Blocked, CPU: ks.CPU, Phase: string(ks.Phase), Until: ks.Until})
			})
			want = append(want, rows)
			for k := range got {
				if err := sameRows(got[k].Keys, want[k]); err != nil {
					t.Fatalf("seed %d round %d: checkpoint %d: %v", seed, round, k, err)
				}
			}
		}
	}
}

func sameRows(got, want []state.KeyRow) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d rows, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := &got[i], &want[i]
		if g.Rule != w.Rule || g.Key != w.Key || !slices.Equal(g.Data, w.Data) || (g.Data == nil) != (w.Data == nil) ||
			!g.LastSeen.Equal(w.LastSeen) || g.Requests != w.Requests || g.Blocked != w.Blocked || g.CPU != w.CPU ||
			g.Phase != w.Phase || !g.Until.Equal(w.Until) {
			return fmt.Errorf("row %d: %+v, want %+v", i, *g, *w)
		}
	}
	return nil
}
