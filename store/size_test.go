package store

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The traffic of the size test (package documentation, "Size"): a day of
// log time at about 20 requests a second from a changing population. A
// client comes for one page (a burst of requests, the page and its
// assets); one in four comes back once for another a few minutes later;
// then it is gone. About 1.6 clients arrive a second, and a key stays
// tracked for twice the longest window after its last request, so some
// 2,000 keys are tracked at any time.
const (
	sizeDay          = 24 * time.Hour
	sizeInterval     = 5 * time.Second  // checkpoints
	sizeArrivals     = 8                // new clients per interval: 1.6/s
	sizeBurst        = 10               // requests of a visit
	sizeReturnBurst  = 8                // requests of a return, for one in four: 1.6 × 12 ≈ 20 requests/s
	sizeReturnAfter  = time.Minute      // to 10 minutes
	sizeWindow       = 10 * time.Minute // the longest window
	sizeBanEvery     = 97 * time.Second // a throttle, then a ban, of some client
	sizeBanFor       = 10 * time.Minute
	sizePruneEvery   = time.Minute
	sizeVacuumPages  = 1000
	sizeRetention    = 24 * time.Hour
	sizeKeyBytes     = blobSize + 40 // a key state's entry in a run (doc.go)
	sizeEventBytes   = 190           // an event's row and its two index entries
	sizeFixedBytes   = 256 << 10
	sizeBTreeSlack   = 2
	sizeWALTxnMargin = 1 << 20
)

// TestSize runs a steady day of traffic through checkpoints and prunes, as
// the daemon would, and checks that the database stays within the bound
// the package documentation derives from the row sizes: the keys tracked
// and a day of history, twice over for B-tree slack. The WAL, which
// SQLite resets after each automatic checkpoint, stays within its
// automatic checkpoint size plus one transaction.
//
// It makes the daemon's 17,280 checkpoints of a day and takes some five
// seconds (the WAL writes of the commits: a checkpoint of ten scattered
// keys writes some twenty pages), so it runs beside the other tests.
func TestSize(t *testing.T) {
	if testing.Short() {
		t.Skip("a day of checkpoints")
	}
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "logjail.db")
	db := mustOpen(t, path, Options{})
	r := rand.New(rand.NewPCG(7, 11))
	start := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

	type client struct {
		key      string
		next     time.Time // its visit
		returns  bool      // comes back once after its first visit
		requests int64
	}
	var (
		active     []*client
		tracked    = map[string]time.Time{} // key → last seen, what the database should hold
		nextID     int
		banned     = map[string]time.Time{} // key → until
		events     int
		maxKeys    int
		maxWAL     int64
		maxDB      int64
		ckpts      int
		changed    int
		maxChanged int
	)
	blob := make([]byte, blobSize)
	nextBan := start.Add(sizeBanEvery)
	nextPrune := start.Add(sizePruneEvery)
	for now := start.Add(sizeInterval); !now.After(start.Add(sizeDay)); now = now.Add(sizeInterval) {
		c := &Checkpoint{Time: now, Global: blob[:64],
			Positions: []Position{{Path: "/var/log/nginx/access.log", Offset: now.Unix() * 2000, Line: now.Unix() * 20}}}
		for range sizeArrivals {
			nextID++
			active = append(active, &client{key: keyName(nextID), returns: r.IntN(4) == 0,
				next: now.Add(-time.Duration(r.Int64N(int64(sizeInterval))))})
		}
		// The visits of this interval.
		kept := active[:0]
		for _, cl := range active {
			if cl.next.After(now) {
				kept = append(kept, cl)
				continue
			}
			if cl.requests == 0 {
				cl.requests = sizeBurst
			} else {
				cl.requests += sizeReturnBurst
			}
			tracked[cl.key] = cl.next
			blob[0]++
			c.Keys = append(c.Keys, KeyRow{Rule: "flood", Key: cl.key, Data: blob, LastSeen: cl.next,
				Requests: cl.requests, CPU: float64(cl.requests) / 50})
			if cl.returns {
				cl.returns = false
				cl.next = cl.next.Add(sizeReturnAfter + time.Duration(r.Int64N(int64(9*sizeReturnAfter))))
				kept = append(kept, cl)
			}
		}
		active = kept
		changed += len(c.Keys)
		maxChanged = max(maxChanged, len(c.Keys))
		// Now and then a client is throttled, then banned; bans end.
		if !now.Before(nextBan) && len(active) > 0 {
			nextBan = nextBan.Add(sizeBanEvery)
			key := active[r.IntN(len(active))].key
			until := now.Add(sizeBanFor)
			c.Events = append(c.Events,
				Event{Time: now, Rule: "flood", Key: key, Kind: KindThrottle, Until: now.Add(10 * time.Second),
					Reason: "rate 21 per 1s > 20 (rule flood)", Origin: OriginDetector},
				Event{Time: now, Rule: "flood", Key: key, Kind: KindBan, Until: until, Violations: 5,
					Reason: "5 violations of rate 21 per 1s > 20 (rule flood)", Origin: OriginDetector})
			c.SetBans = append(c.SetBans, Ban{Rule: "flood", Key: key, Kind: PhaseBan, Since: now, Until: until,
				Reason: "5 violations of rate 21 per 1s > 20 (rule flood)", Violations: 5, Origin: OriginDetector})
			banned[key] = until
		}
		for key, until := range banned {
			if !until.After(now) {
				c.Events = append(c.Events, Event{Time: now, Rule: "flood", Key: key, Kind: KindUnban, Reason: "ban expired", Origin: OriginDetector})
				c.DelBans = append(c.DelBans, BanKey{Rule: "flood", Key: key})
				delete(banned, key)
			}
		}
		events += len(c.Events)
		if err := db.Checkpoint(c); err != nil {
			t.Fatal(err)
		}
		ckpts++

		if !now.Before(nextPrune) {
			nextPrune = nextPrune.Add(sizePruneEvery)
			before := now.Add(-2 * sizeWindow)
			if _, err := db.Prune(now, PruneOptions{KeysBefore: before, HistoryBefore: now.Add(-sizeRetention), VacuumPages: sizeVacuumPages}); err != nil {
				t.Fatal(err)
			}
			for key, seen := range tracked {
				if seen.Before(before) && banned[key].IsZero() {
					delete(tracked, key)
				}
			}
			maxKeys = max(maxKeys, len(tracked))
			wal, dbSize := fileSize(t, path+"-wal"), fileSize(t, path)
			maxWAL, maxDB = max(maxWAL, wal), max(maxDB, dbSize)
		}
		if now.Sub(start)%(6*time.Hour) == 0 {
			t.Logf("%v: %d keys tracked, db %d KB, WAL %d KB", now.Sub(start), len(tracked), fileSize(t, path)>>10, fileSize(t, path+"-wal")>>10)
		}
	}
	if done, err := db.TruncateWAL(); err != nil || !done {
		t.Fatalf("TruncateWAL: %v, %v", done, err)
	}
	dbSize, wal := fileSize(t, path), fileSize(t, path+"-wal")

	// What the database holds at the end is what the simulation tracked.
	var n int
	if err := db.Keys(func(*KeyRow) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	hist, err := db.History(HistoryQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if n != len(tracked) {
		t.Errorf("the database holds %d keys, the simulation tracks %d", n, len(tracked))
	}

	// The bound (doc.go, "Size"), from the largest key count seen and a
	// day of events.
	runs := (2+baseRatio)*maxKeys + (1+baseRatio)*maxKeys/stepFactor // the runs, a merge's output, the runs written while it runs
	bound := int64(runs*sizeKeyBytes + maxChanged*sizeKeyBytes + sizeBTreeSlack*len(hist)*sizeEventBytes + sizeFixedBytes)
	walBound := int64(walCheckpointBytes + sizeWALTxnMargin)
	t.Logf("a day: %d checkpoints, %d changed keys (%.1f a checkpoint), %d events; at most %d keys tracked, %d events kept",
		ckpts, changed, float64(changed)/float64(ckpts), events, maxKeys, len(hist))
	t.Logf("database %d KB at the end (largest %d KB), WAL at most %d KB; bound %d KB, WAL bound %d KB",
		dbSize>>10, maxDB>>10, maxWAL>>10, bound>>10, walBound>>10)
	if maxDB > bound || dbSize > bound {
		t.Errorf("the database grew to %d bytes (%d at the end), over its bound of %d", maxDB, dbSize, bound)
	}
	if maxWAL > walBound {
		t.Errorf("the WAL grew to %d bytes, over its bound of %d", maxWAL, walBound)
	}
	if wal != 0 {
		t.Errorf("after TruncateWAL the WAL holds %d bytes", wal)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(fmt.Errorf("size of %s: %w", path, err))
	}
	return fi.Size()
}
