package actions

import (
	"context"
	"testing"
	"time"
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
