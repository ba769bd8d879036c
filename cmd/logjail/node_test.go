package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logjail/logjail/control"
	"github.com/logjail/logjail/state"
	"github.com/logjail/logjail/store"
)

// TestListAndHistoryShowNode: in a fleet, list and history name the node
// that decided each ban and event: a last column NODE ("-" for none) and
// "node" in JSON; without a fleet, neither (the columns and documents of
// a daemon without one).
func TestListAndHistoryShowNode(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	bans := []state.Ban{
		{Rule: "flood", Key: "203.0.113.7", Kind: state.PhaseBan, Since: now, Until: now.Add(time.Hour),
			Reason: "rate 6 per 10s > 5 (rule flood)", Origin: state.OriginDetector, Node: "web2"},
		{Rule: "operator", Key: "198.51.100.0/24", Kind: state.PhaseBan, Since: now, Until: now.Add(2 * time.Hour),
			Reason: "by hand", Origin: state.OriginOperator, Who: "uid 0 (root)"},
	}
	events := []state.Event{
		{Time: now.Add(-time.Minute), Rule: "flood", Key: "203.0.113.7", Kind: state.KindThrottle, Until: now, Origin: state.OriginDetector},
		{Time: now, Rule: "flood", Key: "203.0.113.7", Kind: state.KindBan, Until: now.Add(time.Hour),
			Reason: "rate 6 per 10s > 5 (rule flood)", Origin: state.OriginDetector, Node: "web2"},
		{Time: now.Add(-2 * time.Hour), Rule: "flood", Key: "198.51.100.9", Kind: state.KindBan, Until: now.Add(-time.Hour),
			Reason: "rate", Origin: state.OriginDetector, Node: "web3"},
	}
	for _, fleet := range []bool{true, false} {
		name, nodes := "fleet", 1 // how many "node" fields each document has
		if !fleet {
			name, nodes = "no fleet", 0
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := opTestConfig(t, dir)
			db, err := store.Open(filepath.Join(dir, "state", "logjail.db"), store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			c := &state.Checkpoint{Time: now}
			for _, b := range bans {
				if !fleet {
					b.Node = ""
				}
				c.SetBans = append(c.SetBans, b)
			}
			for _, e := range events {
				if !fleet {
					e.Node = ""
				}
				c.Events = append(c.Events, e)
			}
			if err := db.Checkpoint(c); err != nil {
				t.Fatal(err)
			}
			db.Close()

			// For scripts: the node last, "-" for a ban of none.
			code, out, stderr := run(t, "", "list", "--sort", "rule", "--config", cfg)
			if code != 0 {
				t.Fatalf("list: exit %d: %s", code, stderr)
			}
			var last []string
			for line := range strings.Lines(out) {
				f := strings.Split(strings.TrimSuffix(line, "\n"), "\t")
				last = append(last, f[0]+" "+f[len(f)-1]+" "+strings.Repeat("|", len(f)))
			}
			want := []string{"203.0.113.7 web2 ||||||||||", "198.51.100.0/24 - ||||||||||"}
			if !fleet {
				want = []string{"203.0.113.7 rate 6 per 10s > 5 (rule flood) |||||||||", "198.51.100.0/24 by hand (by uid 0 (root)) |||||||||"}
			}
			if strings.Join(last, "\n") != strings.Join(want, "\n") {
				t.Errorf("list: key, last field and field count a row %q, want %q:\n%s", last, want, out)
			}

			// An ended ban: its node, after the end's reason.
			code, out, stderr = run(t, "", "list", "--expired", "--key", "198.51.100.9", "--config", cfg)
			f := strings.Split(strings.TrimSuffix(out, "\n"), "\t")
			wantLast := map[bool]string{true: "web3", false: "ended"}[fleet]
			if code != 0 || f[0] != "198.51.100.9" || f[len(f)-1] != wantLast {
				t.Errorf("list --expired: exit %d, %q (%s); want the row of 198.51.100.9 ending in %s", code, out, stderr, wantLast)
			}

			// On a terminal: the header says NODE.
			var term bytes.Buffer
			if err := runList(&listOptions{cfg: configFlag{path: cfg}, header: true}, streams{out: &term, err: &term}, now); err != nil {
				t.Fatal(err)
			}
			header, _, _ := strings.Cut(term.String(), "\n")
			wantLast = map[bool]string{true: "NODE", false: "REASON"}[fleet]
			if f := strings.Fields(header); f[len(f)-1] != wantLast {
				t.Errorf("list on a terminal: header %q, want %s last", header, wantLast)
			}

			// JSON: "node" where there is one, absent elsewhere.
			code, out, stderr = run(t, "", "list", "--sort", "rule", "--output", "json", "--config", cfg)
			if code != 0 {
				t.Fatalf("list --output json: exit %d: %s", code, stderr)
			}
			var l control.BanList
			if err := json.Unmarshal([]byte(out), &l); err != nil {
				t.Fatal(err)
			}
			wantNodes := map[bool]string{true: "web2 ", false: " "}[fleet]
			if len(l.Bans) != 2 || l.Bans[0].Node+" "+l.Bans[1].Node != wantNodes || strings.Count(out, `"node":`) != nodes {
				t.Errorf("list --output json: %s", out)
			}

			code, out, stderr = run(t, "", "history", "203.0.113.7", "--config", cfg)
			if code != 0 {
				t.Fatalf("history: exit %d: %s", code, stderr)
			}
			last = nil
			for line := range strings.Lines(out) {
				f := strings.Split(strings.TrimSuffix(line, "\n"), "\t")
				last = append(last, f[1]+" "+f[len(f)-1]+" "+strings.Repeat("|", len(f)))
			}
			want = []string{"throttle - ||||||||", "ban web2 ||||||||"}
			if !fleet {
				want = []string{"throttle - |||||||", "ban rate 6 per 10s > 5 (rule flood) |||||||"}
			}
			if strings.Join(last, "\n") != strings.Join(want, "\n") {
				t.Errorf("history: kind, last field and field count a row %q, want %q:\n%s", last, want, out)
			}
			code, out, _ = run(t, "", "history", "203.0.113.7", "--output", "json", "--config", cfg)
			var h control.History
			if err := json.Unmarshal([]byte(out), &h); code != 0 || err != nil {
				t.Fatalf("history --output json: exit %d, %v: %s", code, err, out)
			}
			wantNodes = map[bool]string{true: " web2", false: " "}[fleet]
			if len(h.Events) != 2 || h.Events[0].Node+" "+h.Events[1].Node != wantNodes || strings.Count(out, `"node":`) != nodes {
				t.Errorf("history --output json: %s", out)
			}
		})
	}
}
