package checkpoint_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/logjail/logjail/internal/feedtest"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/state"
	"github.com/logjail/logjail/store"
)

// crashConfig has a CPU-share rule, a rate rule with the whole ladder and a
// 4xx rule, over the log format genLog writes.
const crashConfig = `
sources:
  - name: web
    paths: [/var/log/nginx/access.log]
    log_format: '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" rt=$request_time cpu=$upstream_http_x_cpu_time'
    cpu_field: upstream_http_x_cpu_time
    timezone: UTC
deny: [198.51.100.250]
rules:
  - name: cpu
    limits: ["20% cpu over 15s"]
    ban: {for: 2m}
  - name: flood
    limits: ["30 per 10s"]
    throttle: {initial_delay: 2s, max_delay: 16s, quiet: 10s}
    ban: {after: 3, for: 1m, factor: 2, max: 10m}
  - name: scanners
    key: prefix
    match: {status: '^4'}
    limits: ["20 per 60s", "last 5 within 2s"]
    combine: any
    ban: {for: 5m}
`

// genLog writes a deterministic log of n lines: 200 ordinary clients (IPv4
// and IPv6), two flooders in bursts, two CPU hogs and a scanner walking 404s
// from several addresses of one /24.
func genLog(t *testing.T, n int) string {
	t.Helper()
	r := rand.New(rand.NewPCG(7, 11))
	t0 := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	var b strings.Builder
	clients := make([]string, 200)
	for i := range clients {
		if i%5 == 0 {
			clients[i] = fmt.Sprintf("2001:db8:%x:%x::%x", i, i%7, i+1)
		} else {
			clients[i] = fmt.Sprintf("203.0.113.%d", i)
		}
	}
	at := t0
	for i := 0; i < n; i++ {
		at = at.Add(time.Duration(r.IntN(40)) * time.Millisecond)
		ip, path, status, cpu := clients[r.IntN(len(clients))], "/page", 200, 0.002+r.Float64()*0.01
		switch phase := (i / 2000) % 6; {
		case phase == 1 && r.IntN(3) == 0:
			ip = "198.51.100.10" // flooder
		case phase == 3 && r.IntN(4) == 0:
			ip, cpu = "198.51.100.20", 0.4 // CPU hog
		case phase == 4 && r.IntN(5) == 0:
			ip, path, status = fmt.Sprintf("198.51.100.%d", 100+r.IntN(4)), fmt.Sprintf("/wp-%d.php", r.IntN(1000)), 404
		case phase == 5 && r.IntN(3) == 0:
			ip = "2001:db8:ffff:1::1" // an IPv6 flooder
		}
		if i == n/2 {
			ip = "198.51.100.250" // on the deny list
		}
		fmt.Fprintf(&b, "%s - - [%s] \"GET %s HTTP/1.1\" %d 512 \"-\" \"test/1.0\" rt=%.3f cpu=%.3f\n",
			ip, at.Format("02/Jan/2006:15:04:05 -0700"), path, status, cpu*1.2, cpu)
	}
	p := filepath.Join(t.TempDir(), "access.log")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func crashRules(t testing.TB) *rules.Config {
	t.Helper()
	cfg, err := rules.Parse("crash.yaml", []byte(crashConfig), rules.Options{HostAddrs: []netip.Addr{netip.MustParseAddr("192.0.2.1")}, Cores: 2})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestCrashFeeder is the process the crash test kills: it feeds
// $LOGJAIL_CRASH_LOG into $LOGJAIL_CRASH_DB and exits. Without those it
// does nothing.
func TestCrashFeeder(t *testing.T) {
	dbPath, logPath := os.Getenv("LOGJAIL_CRASH_DB"), os.Getenv("LOGJAIL_CRASH_LOG")
	if dbPath == "" || logPath == "" {
		return // run by TestCrashRecovery only: alone, nothing to do (not a skip)
	}
	db, err := store.Open(dbPath, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cfg := crashRules(t)
	if _, err := feedtest.Feed(context.Background(), cfg, db, logPath, feedtest.Options{Source: cfg.Sources[0], Every: 700}); err != nil {
		t.Fatal(err)
	}
}

// savedOffset is the position a database holds for the log, 0 if none.
func savedOffset(t *testing.T, path string) int64 {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		return 0
	}
	db, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		return 0 // killed before the first checkpoint created the schema
	}
	defer db.Close()
	ps, err := db.Positions()
	if err != nil || len(ps) == 0 {
		return 0
	}
	return ps[0].Offset
}

// snapshot is everything a database says about the state, for comparing.
type snapshot struct {
	Bans      []state.Ban
	History   []state.Event
	Keys      []state.KeyRow
	Positions []state.Position
}

func read(t *testing.T, path string) snapshot {
	t.Helper()
	db, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var s snapshot
	if s.Bans, err = db.ActiveBans(); err != nil {
		t.Fatal(err)
	}
	if s.History, err = db.History(state.HistoryQuery{Limit: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	if err := db.Keys(func(r *state.KeyRow) error {
		c := *r
		c.Data = append([]byte(nil), r.Data...)
		s.Keys = append(s.Keys, c)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if s.Positions, err = db.Positions(); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCrashRecovery feeds a log into a database in a child process, kills it
// with SIGKILL at several points, restarts it on the same database and
// file, and checks that the end state is the one of an uninterrupted run:
// the same active bans, the same history (not one decision twice or
// missing), the same key states byte for byte (windows, ladders, totals)
// and positions at the end of the file.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("the crash test runs child processes")
	}
	logPath := genLog(t, 60_000)
	cfg := crashRules(t)

	// The uninterrupted run, in-process.
	ref := filepath.Join(t.TempDir(), "ref", "logjail.db")
	db, err := store.Open(ref, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := feedtest.Feed(context.Background(), cfg, db, logPath, feedtest.Options{Source: cfg.Sources[0], Every: 700}); err != nil {
		t.Fatal(err)
	}
	whole := time.Since(start)
	db.Close()
	t.Logf("uninterrupted run: %v", whole)
	want := read(t, ref)
	if len(want.Bans) == 0 || len(want.History) < 10 || len(want.Keys) < 100 {
		t.Fatalf("the log decides too little to prove anything: %d bans, %d events, %d keys", len(want.Bans), len(want.History), len(want.Keys))
	}

	// The crashed runs: child processes killed at random points, each
	// going on from where the last checkpoint of the one before left off.
	crashed := filepath.Join(t.TempDir(), "crashed", "logjail.db")
	r := rand.New(rand.NewPCG(1, 2))
	kills, moved := 0, 0
	var offset int64
	for attempt := 0; attempt < 30 && kills < 8; attempt++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashFeeder$", "-test.count=1")
		cmd.Env = append(os.Environ(), "LOGJAIL_CRASH_DB="+crashed, "LOGJAIL_CRASH_LOG="+logPath)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		// From the child's start-up (opening, restoring) to a third of an
		// uninterrupted run, so that several kills fall before the end.
		wait := 30*time.Millisecond + time.Duration(r.Float64()*float64(whole)/3)
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("feeder failed: %v\n%s", err, out.String())
			}
			t.Logf("attempt %d: the feeder finished before the kill at %v", attempt, wait)
			break
		case <-time.After(wait):
			syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
			<-done
			kills++
			if o := savedOffset(t, crashed); o > offset {
				moved++
				offset = o
			}
			t.Logf("attempt %d: killed after %v; the database says byte %d was reached", attempt, wait, offset)
			continue
		}
		break
	}
	if moved < 2 {
		t.Fatalf("%d kills, %d of them after some progress: the test proved too little", kills, moved)
	}
	db, err = store.Open(crashed, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := feedtest.Feed(context.Background(), cfg, db, logPath, feedtest.Options{Source: cfg.Sources[0], Every: 700})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d kills; the last run restored %d keys and read on from byte %d", kills, res.Restored.Keys, res.From)
	got := read(t, crashed)
	for _, d := range []struct {
		what      string
		want, got any
	}{
		{"active bans", want.Bans, got.Bans},
		{"history", want.History, got.History},
		{"key states", want.Keys, got.Keys},
		{"positions", want.Positions, got.Positions},
	} {
		if diff := cmp.Diff(d.want, d.got, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
			t.Errorf("%s differ from the uninterrupted run (-want +got):\n%s", d.what, diff)
		}
	}
}
