package control

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/state"
)

// recorder keeps the decisions an Engine records, and the active bans
// they leave, as checkpoint.Writer and the store would.
type recorder struct {
	ds   []detector.Decision
	bans map[state.BanKey]state.Ban
}

func (r *recorder) Decisions(ds []detector.Decision) {
	for _, d := range ds {
		r.ds = append(r.ds, d)
		k := state.BanKey{Rule: d.Rule, Key: d.Key}
		switch d.Kind {
		case detector.Ban, detector.Throttle:
			r.bans[k] = state.Ban{Rule: d.Rule, Key: d.Key, Kind: string(d.Kind), Since: d.Time, Until: d.Until,
				Reason: d.Reason, Addresses: d.Addresses, Origin: d.Origin, Who: d.Who}
		case detector.Unban:
			delete(r.bans, k)
		}
	}
}

func (r *recorder) active() []state.Ban {
	var out []state.Ban
	for _, b := range r.bans {
		out = append(out, b)
	}
	return out
}

func TestEngine(t *testing.T) {
	cfg, err := rules.Parse("test.yaml", []byte(testConfig+"allow: [192.0.2.0/24]\ndeny: [198.18.0.0/15]\n"), rules.Options{HostAddrs: []netip.Addr{}})
	if err != nil {
		t.Fatal(err)
	}
	flood := cfg.Rule("flood")
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	det := detector.New(detector.Options{})
	rec := &recorder{bans: map[state.BanKey]state.Ban{}}
	eng := func() *Engine {
		return &Engine{Cfg: cfg, Det: det, W: rec, Bans: rec.active(), Now: now, LogTime: now.Add(-time.Hour)}
	}
	// The detector bans 203.0.113.7 under flood.
	var out []detector.Decision
	for range 6 {
		out = det.Charge(now.Add(-time.Hour), &rules.Charge{Rule: flood, Key: "203.0.113.7"}, out)
	}
	rec.Decisions(out)
	out = det.Static(now, cfg.StaticBans(), nil)
	rec.Decisions(out)

	// An operator's ban; an allowed one refused, then forced.
	res, _, err := eng().Ban(BanRequest{Key: "203.0.113.0/24", For: "2h", Reason: "net"}, "uid 0 (root)")
	if err != nil || res.Ban.Rule != OperatorRule || res.Ban.Who != "uid 0 (root)" || !res.Ban.Until.Equal(now.Add(2*time.Hour)) {
		t.Fatalf("Ban = %+v, %v", res, err)
	}
	if _, _, err := eng().Ban(BanRequest{Key: "192.0.2.9", For: "1h"}, "x"); !errors.Is(err, ErrAllowed) {
		t.Errorf("ban of an allowed address: %v", err)
	}
	if res, _, err := eng().Ban(BanRequest{Key: "192.0.2.0/23", For: "1h"}, "x"); err != nil || len(res.Exempt) != 1 || res.Exempt[0] != "192.0.2.0/24" {
		t.Errorf("ban of a CIDR around an allowed one: %+v, %v", res, err)
	}
	if res, _, err := eng().Ban(BanRequest{Key: "192.0.2.9", For: "1h", Force: true}, "x"); err != nil || res.Allowed != "192.0.2.0/24" {
		t.Errorf("forced ban: %+v, %v", res, err)
	}
	if _, _, err := eng().Ban(BanRequest{Key: "203.0.113.8", For: "1h", Rule: "nope"}, "x"); !errors.Is(err, ErrBadRequest) {
		t.Errorf("ban under an unknown rule: %v", err)
	}
	// Under a configured rule: the detector holds it.
	if _, _, err := eng().Ban(BanRequest{Key: "user:bob", For: "1h", Rule: "flood"}, "x"); err != nil {
		t.Fatal(err)
	}
	if k, until := det.Status(flood, "user:bob", now.Add(time.Minute)); k != detector.Ban || !until.Equal(now.Add(time.Hour)) {
		t.Errorf("imposed ban in the detector: %v %v", k, until)
	}

	// An address finds its own ban and the CIDR's; the deny list is kept.
	ures, _, err := eng().Unban(UnbanRequest{Key: "203.0.113.7", Reason: "customer"}, "uid 0 (root)")
	if err != nil {
		t.Fatal(err)
	}
	if len(ures.Removed) != 2 {
		t.Errorf("removed %+v, want the flood ban and the CIDR", ures.Removed)
	}
	if k, _ := det.Status(flood, "203.0.113.7", now); k != "" {
		t.Errorf("the detector still holds it: %v", k)
	}
	last := rec.ds[len(rec.ds)-1]
	if last.Kind != detector.Unban || last.Who != "uid 0 (root)" || last.Reason != "customer" || last.Origin != state.OriginOperator {
		t.Errorf("the unban recorded: %+v", last)
	}
	if _, _, err := eng().Unban(UnbanRequest{Key: "198.18.0.1"}, "x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unban of a deny entry: %v", err)
	}
	if _, _, err := eng().Unban(UnbanRequest{Key: "203.0.113.7"}, "x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a second unban: %v", err)
	}
	// --forget: the escalation memory of a key no longer banned goes.
	ures, _, err = eng().Unban(UnbanRequest{Key: "203.0.113.7", Forget: true}, "x")
	if err != nil || len(ures.Forgotten) != 1 || ures.Forgotten[0] != (Forgotten{"flood", "203.0.113.7"}) {
		t.Errorf("forget: %+v, %v", ures, err)
	}
	// --all lifts the rest but the deny list; with a key it is a usage error.
	if _, _, err := eng().Unban(UnbanRequest{All: true, Key: "1.2.3.4"}, "x"); !errors.Is(err, ErrBadRequest) {
		t.Errorf("--all with a key: %v", err)
	}
	ures, _, err = eng().Unban(UnbanRequest{All: true}, "x")
	if err != nil || len(ures.Removed) != 3 || len(ures.Kept) != 1 {
		t.Errorf("--all: removed %d kept %d, %v", len(ures.Removed), len(ures.Kept), err)
	}
}
