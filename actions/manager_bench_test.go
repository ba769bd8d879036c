package actions

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/state"
)

// nopBackend takes every call; the manager benchmarks measure the
// manager, not a backend.
type nopBackend struct{}

func (nopBackend) Name() string                                        { return "nop" }
func (nopBackend) Sync(context.Context, []Entry, []netip.Prefix) error { return nil }
func (nopBackend) Apply(context.Context, []Change) error               { return nil }
func (nopBackend) Close() error                                        { return nil }

// managerWithBans is a manager of one action holding n single-address
// bans of 2001:db8::/32, each string its own as the store's rows give
// them (endpoint's BenchmarkCollectBans' bans).
func managerWithBans(n int) *Manager {
	m := NewManager([]Configured{{Backend: nopBackend{}, Type: "nop", Kinds: []Kind{KindBan, KindThrottle}}}, ManagerOptions{})
	until := time.Now().Add(2 * time.Hour)
	bans := make([]state.Ban, n)
	for i := range bans {
		a := netip.MustParseAddr(fmt.Sprintf("2001:db8:%x:%x::1", i>>16, i&0xffff))
		bans[i] = state.Ban{Rule: strings.Clone("flood"), Key: a.String(), Kind: strings.Clone(string(KindBan)), Until: until,
			Reason: strings.Clone("flood: 4 > 3 per 10s"), Origin: state.OriginDetector}
	}
	m.Load(bans, nil)
	return m
}

// BenchmarkManagerLoad: loading 100,000 bans at start.
func BenchmarkManagerLoad(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		managerWithBans(100_000)
	}
}

// BenchmarkManagerDecisions: one ban and its unban among 100,000 active
// ones, the detector's way in.
func BenchmarkManagerDecisions(b *testing.B) {
	m := managerWithBans(100_000)
	until := time.Now().Add(time.Hour)
	ban := []detector.Decision{{Rule: "flood", Key: "198.51.100.1", Kind: detector.Ban, Until: until, Reason: "flood: 4 > 3 per 10s"}}
	unban := []detector.Decision{{Rule: "flood", Key: "198.51.100.1", Kind: detector.Unban}}
	b.ReportAllocs()
	for b.Loop() {
		m.Decisions(ban)
		m.Decisions(unban)
	}
}

// BenchmarkManagerEntries: the entries of an action holding 100,000, what
// a whole Sync starts from.
func BenchmarkManagerEntries(b *testing.B) {
	m := managerWithBans(100_000)
	b.ReportAllocs()
	for b.Loop() {
		if n := len(m.Entries("nop")); n != 100_000 {
			b.Fatalf("%d entries", n)
		}
	}
}
