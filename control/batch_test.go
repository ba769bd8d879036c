package control

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/state"
)

// TestBanBatch: a batch is made whole or not at all; its error names
// every refused ban by index.
func TestBanBatch(t *testing.T) {
	cfg, err := rules.Parse("test.yaml", []byte(testConfig+"allow: [192.0.2.0/24]\n"), rules.Options{HostAddrs: []netip.Addr{}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	det := detector.New(detector.Options{})
	rec := &recorder{bans: map[state.BanKey]state.Ban{}}
	eng := &Engine{Cfg: cfg, Det: det, W: rec, Now: now}

	tests := []struct {
		name string
		bans []BanRequest
		base error
		want []string // in the error
	}{
		{"empty", nil, ErrBadRequest, []string{"empty batch"}},
		{"one bad of three", []BanRequest{{Key: "203.0.113.7", For: "1h"}, {Key: "300.1.1.1", For: "1h"}, {Key: "198.51.100.0/24", For: "1h"}},
			ErrBadRequest, []string{"1 of 3 bans refused, none made", `bans[1]: "300.1.1.1"`}},
		{"allowed only", []BanRequest{{Key: "203.0.113.7", For: "1h"}, {Key: "192.0.2.9", For: "1h"}},
			ErrAllowed, []string{"bans[1]: 192.0.2.9 is on the allow list"}},
		{"twice", []BanRequest{{Key: "203.0.113.7", For: "1h"}, {Key: "::ffff:203.0.113.7", For: "2h"}},
			ErrBadRequest, []string{"bans[1]: 203.0.113.7: banned by bans[0] already"}},
		{"bad duration and unknown rule", []BanRequest{{Key: "203.0.113.7", For: "soon"}, {Key: "203.0.113.8", For: "1h", Rule: "nope"}},
			ErrBadRequest, []string{"2 of 2", "bans[0]: --for soon", `bans[1]: rule "nope"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ds, err := eng.BanBatch(BatchBanRequest{Bans: tt.bans}, "uid 0 (root)")
			if !errors.Is(err, tt.base) {
				t.Fatalf("err = %v, want %v", err, tt.base)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %q, want %q in it", err, w)
				}
			}
			if len(ds) != 0 || len(rec.ds) != 0 {
				t.Errorf("a refused batch made %d decisions, recorded %d", len(ds), len(rec.ds))
			}
		})
	}

	res, ds, err := eng.BanBatch(BatchBanRequest{Bans: []BanRequest{
		{Key: "203.0.113.7", For: "1h", Reason: "list"},
		{Key: "192.0.2.0/28", For: "2h", Force: true},
		{Key: "203.0.113.9", For: "3h", Rule: "flood"},
	}}, "uid 0 (root)")
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 3 || len(rec.ds) != 3 || len(res.Bans) != 3 {
		t.Fatalf("made %d decisions, recorded %d, answered %d; want 3", len(ds), len(rec.ds), len(res.Bans))
	}
	for i, want := range []struct {
		rule, key, reason, allowed string
		d                          time.Duration
	}{
		{OperatorRule, "203.0.113.7", "list", "", time.Hour},
		{OperatorRule, "192.0.2.0/28", "banned by an operator", "192.0.2.0/24", 2 * time.Hour},
		{"flood", "203.0.113.9", "banned by an operator", "", 3 * time.Hour},
	} {
		b := res.Bans[i]
		if b.Ban.Rule != want.rule || b.Ban.Key != want.key || b.Ban.Reason != want.reason || b.Allowed != want.allowed ||
			!b.Ban.Until.Equal(now.Add(want.d)) || b.Ban.Who != "uid 0 (root)" || b.Ban.Origin != state.OriginOperator {
			t.Errorf("bans[%d] = %+v, want %+v", i, b, want)
		}
	}
	if !det.Banned(now, &rules.Charge{Rule: cfg.Rule("flood"), Key: "203.0.113.9"}) {
		t.Errorf("the ban under flood is not the detector's")
	}
}

// batchDaemon is a fakeDaemon that makes batches: it records their size.
type batchDaemon struct {
	fakeDaemon
	batches []int
}

func (d *batchDaemon) BanBatch(_ context.Context, req BatchBanRequest, who string) (*BatchBanResult, error) {
	if _, err := CheckBatch(d.cfg, req); err != nil {
		return nil, err
	}
	d.batches = append(d.batches, len(req.Bans))
	return &BatchBanResult{Version: SchemaVersion, Bans: make([]BanResult, len(req.Bans)), Live: true}, nil
}

// TestServerBatch: POST /v1/bans/batch takes a body far past a single
// ban's 64 KiB in one request; its refusal comes back as the API's error;
// a daemon that makes no batch answers 404.
func TestServerBatch(t *testing.T) {
	d := &batchDaemon{fakeDaemon: fakeDaemon{cfg: testCfg(t)}}
	_, c := serve(t, d)
	ctx := context.Background()
	var req BatchBanRequest
	for i := range 10_000 {
		a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 14: byte(i >> 8), 15: byte(i)})
		req.Bans = append(req.Bans, BanRequest{Key: a.String(), For: "1h", Reason: "from a feed"})
	}
	res, err := c.BanBatch(ctx, req)
	if err != nil || !res.Live || len(res.Bans) != 10_000 || len(d.batches) != 1 || d.batches[0] != 10_000 {
		t.Fatalf("BanBatch: %v; the daemon made batches of %v, want one of 10000", err, d.batches)
	}
	req.Bans[17].Key = "2001:db8::/200"
	if _, err := c.BanBatch(ctx, req); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "bans[17]") || len(d.batches) != 1 {
		t.Errorf("a batch with a bad ban: %v (batches %v)", err, d.batches)
	}
	_, c = serve(t, &fakeDaemon{cfg: testCfg(t)})
	if _, err := c.BanBatch(ctx, BatchBanRequest{Bans: req.Bans[:1]}); !errors.Is(err, ErrNotFound) {
		t.Errorf("a daemon without batches: %v, want ErrNotFound", err)
	}
}
