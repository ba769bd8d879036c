package daemon

import (
	"testing"
	"time"

	"github.com/logjail/logjail/detector"
)

// TestLive: a ban decided on a live line lasts its duration from now; one
// decided on backlog whose end has already passed is recorded, not applied;
// unbans and static bans are left alone.
func TestLive(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	live1 := detector.Decision{Kind: detector.Ban, Time: now.Add(-2 * time.Second), Until: now.Add(58 * time.Second), Reason: "r"}
	liveD := live1
	live(&liveD, now)
	if !liveD.Until.Equal(now.Add(time.Minute)) || liveD.LogOnly {
		t.Errorf("a ban on a line 2 s old: until %v log_only %v; want now+1m, applied", liveD.Until, liveD.LogOnly)
	}
	old := detector.Decision{Kind: detector.Ban, Time: now.Add(-2 * time.Hour), Until: now.Add(-time.Hour), Reason: "r"}
	live(&old, now)
	if !old.LogOnly || old.Reason == "r" || !old.Until.Equal(now.Add(-time.Hour)) {
		t.Errorf("a ban on backlog already over: %+v; want recorded as not applied", old)
	}
	for _, d := range []detector.Decision{
		{Kind: detector.Unban, Time: now.Add(-time.Hour)},
		{Kind: detector.Ban, Time: now.Add(-time.Hour), Reason: "deny list"}, // static: no end
	} {
		c := d
		live(&c, now)
		if c.LogOnly != d.LogOnly || !c.Until.Equal(d.Until) || c.Reason != d.Reason {
			t.Errorf("%+v changed to %+v", d, c)
		}
	}
}
