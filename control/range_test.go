package control

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/state"
)

// TestBanRange: an operator's ban of range:NAME is one of a configured
// group range (a ban of another, unknown or without group: true, would
// block nothing, and is refused); it
// reports the allowed prefixes inside the range's CIDRs, which the actions
// let through, and needs --force when the range lies inside an allowed
// prefix. An unban by a CIDR overlapping the range finds its ban.
func TestBanRange(t *testing.T) {
	cfg, err := rules.Parse("test.yaml", []byte(`sources:
  - name: web
    paths: [/x.log]
    format: combined
allow: [198.51.100.7, 203.0.113.0/24]
ranges:
  office:
    cidrs: [198.51.100.0/24]
    group: true
    limits: ["100 per second"]
  lab:
    cidrs: [203.0.113.64/26]
    group: true
    limits: ["100 per second"]
  partners:
    cidrs: [198.51.101.0/24]
    limits: none
rules:
  - name: flood
    limits: ["5 per 10s"]
    ban: {for: 1h}
`), rules.Options{HostAddrs: []netip.Addr{}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	rec := &recorder{bans: map[state.BanKey]state.Ban{}}
	eng := func() *Engine {
		return &Engine{Cfg: cfg, Det: detector.New(detector.Options{}), W: rec, Bans: rec.active(), Now: now, LogTime: now}
	}
	for _, key := range []string{"range:nope", "range:partners"} {
		if _, _, err := eng().Ban(BanRequest{Key: key, For: "1h"}, "x"); !errors.Is(err, ErrBadRequest) {
			t.Errorf("ban of %q: %v, want a bad request", key, err)
		}
	}
	res, ds, err := eng().Ban(BanRequest{Key: "range:office", For: "1h"}, "x")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"198.51.100.7/32"}, res.Exempt); diff != "" {
		t.Errorf("exempt (-want +got):\n%s", diff)
	}
	if len(ds) != 1 || ds[0].Key != "range:office" || ds[0].Kind != detector.Ban {
		t.Errorf("decisions %+v", ds)
	}
	if _, _, err := eng().Ban(BanRequest{Key: "range:lab", For: "1h"}, "x"); !errors.Is(err, ErrAllowed) {
		t.Errorf("ban of a range inside an allowed prefix: %v, want ErrAllowed", err)
	}
	if res, _, err := eng().Ban(BanRequest{Key: "range:lab", For: "1h", Force: true}, "x"); err != nil || res.Allowed != "203.0.113.0/24" {
		t.Errorf("forced ban of range:lab: %+v %v", res, err)
	}
	for _, c := range []struct {
		target string
		want   bool
	}{
		{"198.51.0.0/16", true}, // around the range
		{"198.51.100.128/25", true},
		{"198.51.101.0/24", false},
		{"198.51.100.77", true}, // an address never seen
	} {
		tg, err := ParseTarget(c.target)
		if err != nil {
			t.Fatal(err)
		}
		if got := tg.Matches(cfg, "range:office", nil); got != c.want {
			t.Errorf("%s matches range:office: %v, want %v", c.target, got, c.want)
		}
	}
	ures, _, err := eng().Unban(UnbanRequest{Key: "198.51.100.128/25"}, "x")
	if err != nil || len(ures.Removed) != 1 || ures.Removed[0].Key != "range:office" {
		t.Errorf("unban by a CIDR in the range: %+v %v", ures, err)
	}
}
