package actions

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/logjail/logjail/detector"
)

// TestNginxBlockfile runs the README's block file snippet in a real nginx:
// a banned address gets 503 with Retry-After, and 200 again once its file
// is gone; a prefix ban is not seen by the file check (the README says so
// and points to the geo map).
func TestNginxBlockfile(t *testing.T) {
	ctx := context.Background()
	prefix := t.TempDir() + "/"
	for _, o := range []map[string]any{{"file": prefix + "deny.conf"}, {"file": prefix + "geo.conf", "style": "geo"}} {
		if err := lfBuild(t, "nginx", o).Sync(ctx, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	s := ngStart(t, prefix)
	bf := bfBuild(t, prefix+"blocked")
	e := lfEntry("198.51.100.7")
	e.Kind, e.Until, e.Rule, e.Key, e.Reason = KindBan, time.Now().Add(time.Hour), "flood", "198.51.100.7", "rate 31 per 10s > 30"
	if err := bf.Sync(ctx, []Entry{e, lfEntry("203.0.113.0/24")}, nil); err != nil {
		t.Fatal(err)
	}
	for client, want := range map[string]int{"198.51.100.7": 503, "198.51.100.8": 200, "203.0.113.5": 200} {
		code, retry, err := s.getHeader("/blockfile", client, "Retry-After")
		if err != nil || code != want {
			t.Errorf("%s: %d %v, want %d", client, code, err, want)
		}
		if want == 503 && retry != "60" {
			t.Errorf("%s: Retry-After %q, want 60", client, retry)
		}
	}
	if err := bf.Apply(ctx, []Change{{Entry: Entry{Prefix: e.Prefix}, Delete: true}}); err != nil {
		t.Fatal(err)
	}
	if code, err := s.get("/blockfile", "198.51.100.7"); err != nil || code != 200 {
		t.Errorf("after the unban: %d %v, want 200 (nginx checks the file on every request)", code, err)
	}
}

// TestNginxBurstOneReload: 1,000 bans decided one by one reach a real
// nginx through the manager as one file write and one reload.
func TestNginxBurstOneReload(t *testing.T) {
	ctx := context.Background()
	prefix := t.TempDir() + "/"
	deny := prefix + "deny.conf"
	for _, o := range []map[string]any{{"file": deny}, {"file": prefix + "geo.conf", "style": "geo"}} {
		if err := lfBuild(t, "nginx", o).Sync(ctx, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	s := ngStart(t, prefix)
	runs := prefix + "reloads"
	l := lfBuild(t, "nginx", map[string]any{"file": deny, "check": s.checkArgv(), "reload": s.reloadArgv(runs)})
	m := NewManager([]Configured{{Backend: l, Type: "nginx", Kinds: []Kind{KindBan}}}, ManagerOptions{})
	m.Start(ctx)
	defer m.Close()
	wait(t, m)
	if n := ngCount(t, runs); n != 0 {
		t.Fatalf("the start's sync of an unchanged file reloaded nginx %d times", n)
	}
	until := time.Now().Add(time.Hour)
	for i := range 1000 {
		a := netip.AddrFrom4([4]byte{203, 0, 113, byte(i % 256)})
		if i >= 256 {
			a = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 14: byte(i >> 8), 15: byte(i)})
		}
		m.Decisions([]detector.Decision{banDecision("flood", a.String(), until)})
	}
	wait(t, m)
	if n := ngCount(t, runs); n != 1 {
		t.Errorf("1,000 bans cost %d reloads, want 1", n)
	}
	// nginx reloads asynchronously after the signal: wait for the new
	// workers.
	deadline := time.Now().Add(10 * time.Second)
	for client, want := range map[string]int{"203.0.113.77": 403, "2001:db8::3e7": 403, "198.51.100.1": 200} {
		for {
			code, err := s.get("/", client)
			if err == nil && code == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d %v, want %d", client, code, err, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
