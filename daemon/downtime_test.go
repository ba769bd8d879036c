package daemon_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/logjail/logjail/checkpoint"
	"github.com/logjail/logjail/control"
	"github.com/logjail/logjail/daemon"
	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/pipeline"
	"github.com/logjail/logjail/replay"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/store"
)

const downtimeConfig = `state_dir: %[1]s
control_socket: %[1]s/control.sock
checkpoint: 1s
cleaner: "@every 1s"
metrics: ""
sources:
  - name: web
    paths: [%[2]s]
    format: combined
    timezone: UTC
    from: start
rules:
  - name: flood
    limits: ["5 per 10s"]
    ban: {for: 10m, factor: 2, max: 24h}
`

// logLine is one request of ip at t.
type logLine struct {
	t  time.Time
	ip string
}

// burst is n requests of ip from t, 100 ms apart.
func burst(ip string, t time.Time, n int) []logLine {
	var out []logLine
	for i := range n {
		out = append(out, logLine{t.Add(time.Duration(i) * 100 * time.Millisecond), ip})
	}
	return out
}

// appendLines appends ls to path, in time order.
func appendLines(t *testing.T, path string, ls []logLine) {
	t.Helper()
	sort.SliceStable(ls, func(i, j int) bool { return ls[i].t.Before(ls[j].t) })
	var b strings.Builder
	for i, l := range ls {
		fmt.Fprintf(&b, "%s - - [%s] \"GET /%d HTTP/1.1\" 200 1 \"-\" \"t\"\n", l.ip, l.t.Format("02/Jan/2006:15:04:05 -0700"), i)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(b.String()); err != nil {
		t.Fatal(err)
	}
}

// runUntilRead runs the daemon in this process with the wall clock fixed
// at now until it has read and checkpointed the whole log, then stops it;
// it returns the daemon's status taken just before.
func runUntilRead(t *testing.T, cfgPath, state, log string, now time.Time) *control.Status {
	t.Helper()
	var clock atomic.Pointer[time.Time]
	clock.Store(&now)
	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ctl := daemon.NewControl()
	go func() {
		done <- daemon.Run(ctx, daemon.Options{ConfigPath: cfgPath, Poll: true, Now: func() time.Time { return *clock.Load() }, Control: ctl,
			Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	}()
	fi, err := os.Stat(log)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if off := savedOffset(t, state, log); off == fi.Size() {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("Run returned early: %v\n%s", err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("the daemon did not read %s to its end in 30 s:\n%s", log, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	st, err := ctl.Status(sctx)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v\n%s", err, logs.String())
	}
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	return st
}

// savedOffset is the offset saved for path, -1 if none yet.
func savedOffset(t *testing.T, state, path string) int64 {
	t.Helper()
	if _, err := os.Stat(filepath.Join(state, "logjail.db")); err != nil {
		return -1
	}
	db, err := store.Open(filepath.Join(state, "logjail.db"), store.Options{ReadOnly: true})
	if err != nil {
		return -1
	}
	defer db.Close()
	ps, err := db.Positions()
	if err != nil {
		return -1
	}
	for _, p := range ps {
		if p.Path == path {
			return p.Offset
		}
	}
	return -1
}

// TestDowntimeDecidesAsReplay: the daemon bans a key, stops, and stays down
// past the ban's end; lines are appended meanwhile (the banned key goes on
// while its ban lasts in log time, another key floods, then both offend
// again); the daemon restarts with the wall clock 20 minutes on. Its
// decisions (rule, key, kind, log-time since and until, bans per key, one
// unban per ended ban) are those of `logjail replay` of the same file: the
// key's lines while banned are not charged, so no second, escalated ban
// comes early.
func TestDowntimeDecidesAsReplay(t *testing.T) {
	dir := t.TempDir()
	log, state, cfgPath := filepath.Join(dir, "access.log"), filepath.Join(dir, "state"), filepath.Join(dir, "logjail.yaml")
	if err := os.WriteFile(cfgPath, fmt.Appendf(nil, downtimeConfig, state, log), 0o600); err != nil {
		t.Fatal(err)
	}
	w0 := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC) // the wall clock of the first run
	w1 := w0.Add(20 * time.Minute)                       // of the second
	t0 := w0.Add(-time.Minute)                           // log time of the first line
	const a, b, c = "203.0.113.10", "203.0.113.20", "198.51.100.30"

	// First run: a floods and is banned for 10 min (log time t0+0.5s).
	first := append(burst(a, t0, 6), burst(c, t0.Add(time.Second), 3)...)
	appendLines(t, log, first)
	runUntilRead(t, cfgPath, state, log, w0)
	db, err := store.Open(filepath.Join(state, "logjail.db"), store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	before, err := db.History(store.HistoryQuery{})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(before) != 1 || before[0].Kind != "ban" || before[0].Key != a {
		t.Fatalf("history after the first run: %+v, want the ban of %s", before, a)
	}

	// Down: a goes on while banned (t0+2m), b floods (t0+4m), then a
	// (t0+12m, its log-time ban over) and b (t0+15m) offend again.
	var backlog []logLine
	for m := 2 * time.Minute; m <= 15*time.Minute; m += 20 * time.Second {
		backlog = append(backlog, logLine{t0.Add(m), c})
	}
	backlog = append(backlog, burst(a, t0.Add(2*time.Minute+time.Second), 6)...)
	backlog = append(backlog, burst(b, t0.Add(4*time.Minute+time.Second), 6)...)
	backlog = append(backlog, burst(a, t0.Add(12*time.Minute+time.Second), 6)...)
	backlog = append(backlog, burst(b, t0.Add(15*time.Minute+time.Second), 6)...)
	appendLines(t, log, backlog)
	runUntilRead(t, cfgPath, state, log, w1)

	// What replay decides on the same file.
	cfg, err := rules.Load(cfgPath, rules.Options{HostAddrs: []netip.Addr{}})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := replay.Run(context.Background(), cfg, []replay.Input{{Name: log, Source: cfg.Sources[0]}}, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	wantUnbans := map[string]int{}
	for _, d := range rep.Decisions {
		if d.Kind == "unban" {
			wantUnbans[d.Key]++
			continue
		}
		want = append(want, fmt.Sprintf("%s %s %s since=%s until=%s", d.Kind, d.Rule, d.Key, d.Time.UTC().Format(time.TimeOnly+".0"), d.Until.UTC().Format(time.TimeOnly+".0")))
	}

	// What the daemon recorded. A ban's until in the history is on the
	// wall clock: now + its duration, or its log-time until when it was
	// already over when read (not applied).
	db, err = store.Open(filepath.Join(state, "logjail.db"), store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	hist, err := db.History(store.HistoryQuery{})
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(hist) // oldest first
	var got []string
	gotUnbans := map[string]int{}
	for i, e := range hist {
		if e.Kind == "unban" {
			gotUnbans[e.Key]++
			continue
		}
		now := w1
		if i < len(before) {
			now = w0
		}
		until := e.Until
		if !strings.Contains(e.Reason, "not applied") {
			until = e.Time.Add(e.Until.Sub(now))
		}
		got = append(got, fmt.Sprintf("%s %s %s since=%s until=%s", e.Kind, e.Rule, e.Key, e.Time.UTC().Format(time.TimeOnly+".0"), until.UTC().Format(time.TimeOnly+".0")))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decisions after downtime (-replay +daemon):\n%s", diff)
	}
	if diff := cmp.Diff(wantUnbans, gotUnbans); diff != "" {
		t.Errorf("unbans per key (-replay +daemon):\n%s", diff)
	}
	t.Logf("compared %d bans and %d unbans with replay's", len(want), len(hist)-len(got))
	for _, e := range hist {
		t.Logf("history: %s %s %s %s until %s log_only=%v %s", e.Time.UTC().Format(time.TimeOnly+".0"), e.Kind, e.Rule, e.Key, e.Until.UTC().Format(time.TimeOnly+".0"), e.LogOnly, e.Reason)
	}
}

// TestOneLineCannotMoveTheFollowedClock: in a followed log, one line dated
// 2099 and one line 60 s ahead of the others change no ban and no until
// (the history equals that of the same log without them, in a state of
// its own); status counts the first as ahead of the clock and the second
// as an outlier. Without the rules, the +60 s line bunched the next lines
// into one bucket and banned a client under its limit.
func TestOneLineCannotMoveTheFollowedClock(t *testing.T) {
	now := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	t0 := now.Add(-2 * time.Minute)
	const a, d = "203.0.113.10", "198.51.100.40"
	var lines []logLine
	for s := time.Duration(0); s < 40*time.Second; s += 2 * time.Second {
		lines = append(lines, logLine{t0.Add(s), d}) // 5 per 10 s: at the limit, not over
	}
	lines = append(lines, burst(a, t0.Add(20*time.Second), 6)...) // over: banned
	history := func(bad []string) ([]string, *control.Status) {
		dir := t.TempDir()
		log, state, cfgPath := filepath.Join(dir, "access.log"), filepath.Join(dir, "state"), filepath.Join(dir, "logjail.yaml")
		if err := os.WriteFile(cfgPath, fmt.Appendf(nil, downtimeConfig, state, log), 0o600); err != nil {
			t.Fatal(err)
		}
		appendLines(t, log, slices.Clone(lines))
		if len(bad) > 0 {
			// Inserted after the line of t0+10s.
			raw, err := os.ReadFile(log)
			if err != nil {
				t.Fatal(err)
			}
			ls := strings.SplitAfter(string(raw), "\n")
			at := 0
			for i, l := range ls {
				if strings.Contains(l, t0.Add(10*time.Second).Format("15:04:05")) {
					at = i + 1
				}
			}
			ls = slices.Insert(ls, at, bad...)
			if err := os.WriteFile(log, []byte(strings.Join(ls, "")), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		st := runUntilRead(t, cfgPath, state, log, now)
		db, err := store.Open(filepath.Join(state, "logjail.db"), store.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		hist, err := db.History(store.HistoryQuery{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range hist {
			out = append(out, fmt.Sprintf("%s %s %s %s until=%s %s", e.Time.UTC().Format(time.TimeOnly), e.Kind, e.Rule, e.Key, e.Until.UTC().Format(time.TimeOnly), e.Reason))
		}
		return out, st
	}
	want, st := history(nil)
	// status shows the memory the keys take (detector.Memory).
	if st.TrackedKeys == 0 || st.BytesPerKey < 50 || st.TrackedKeyBytes < st.BytesPerKey*int64(st.TrackedKeys) {
		t.Errorf("status: %d keys tracked, %d bytes, %d a key", st.TrackedKeys, st.TrackedKeyBytes, st.BytesPerKey)
	}
	if len(want) == 0 {
		t.Fatal("the log without bad lines makes no decision: nothing to compare")
	}
	bad := func(ip string, at time.Time) string {
		return fmt.Sprintf("%s - - [%s] \"GET /bad HTTP/1.1\" 200 1 \"-\" \"t\"\n", ip, at.Format("02/Jan/2006:15:04:05 -0700"))
	}
	got, st := history([]string{
		bad(d, time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)),
		bad(d, t0.Add(10*time.Second+time.Minute)),
	})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("history with a 2099 line and a +60 s line (-without +with):\n%s", diff)
	}
	if len(st.Sources) != 1 || st.Sources[0].Future != 1 || st.Sources[0].Outliers != 1 {
		t.Errorf("status sources: %+v, want 1 line ahead of the clock and 1 outlier", st.Sources)
	}
	t.Logf("%d decisions unchanged", len(want))
}

const catchUpConfig = `state_dir: %[1]s
control_socket: %[1]s/control.sock
checkpoint: 1s
cleaner: "@every 1s"
metrics: ""
ipv6_prefix: 128
sources:
  - name: web
    paths: [%[2]s]
    format: combined
    timezone: UTC
    from: start
rules:
  - name: flood
    limits: ["5 per 10s"]
    ban: {for: 10m}
  - name: hourly
    limits: ["300 per hour"]
    ban: {for: 1h}
`

// catchUpLog writes a backlog of n lines over 20 minutes of log time from
// t0: 1,000 keys send during the first 5 minutes, 1,000 others during the
// rest, each under the limits; a few keys flood and are banned.
func catchUpLog(t *testing.T, path string, t0 time.Time, n int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b strings.Builder
	step := 20 * time.Minute / time.Duration(n)
	line := func(ip string, at time.Time, i int) {
		fmt.Fprintf(&b, "%s - - [%s] \"GET /%d HTTP/1.1\" 200 1 \"-\" \"t\"\n", ip, at.Format("02/Jan/2006:15:04:05 -0700"), i)
	}
	for i := range n {
		at := t0.Add(time.Duration(i) * step)
		k := i % 1000
		if at.Sub(t0) >= 5*time.Minute {
			k += 1000
		}
		line(fmt.Sprintf("2001:db8::%x:%x", k/256, k%256), at, i)
		if i%20000 == 0 {
			for j := range 8 {
				line(fmt.Sprintf("2001:db8::f:%x", i/20000), at, j)
			}
		}
		if b.Len() > 1<<20 {
			if _, err := f.WriteString(b.String()); err != nil {
				t.Fatal(err)
			}
			b.Reset()
		}
	}
	if _, err := f.WriteString(b.String()); err != nil {
		t.Fatal(err)
	}
}

// capture is a replay.Recorder that keeps the replay's detector.
type capture struct{ det *detector.Detector }

func (c *capture) Decisions([]detector.Decision) {}
func (c *capture) Flush(det *detector.Detector, _ time.Time) error {
	c.det = det
	return nil
}

// windows writes every tracked (rule, key) of det as read at log time t:
// phase, until, totals, last entry and every limit's value.
func windows(det *detector.Detector, t time.Time) []string {
	var out []string
	det.Current(t, func(k *detector.KeyNow) {
		s := fmt.Sprintf("%s %s %q until=%s requests=%d cpu=%g last=%s", k.Rule.Name, k.Key, k.Phase,
			k.Until.UTC().Format(time.RFC3339Nano), k.Requests, k.CPU, k.LastSeen.UTC().Format(time.RFC3339Nano))
		for _, l := range k.Limits {
			s += fmt.Sprintf(" %g", l.Value)
		}
		out = append(out, s)
	})
	sort.Strings(out)
	return out
}

// TestKillDuringCatchUpRestoresReplaysWindows: a daemon (a real process)
// reads a backlog three hours old while its cleaner runs every second; it
// is killed with SIGKILL in the middle, after a cleaner pass and a
// checkpoint, past the point where a thousand keys went quiet. The state a
// restart restores (checkpoint.Restore into a fresh detector) holds the
// same windows, ladders and totals, key for key, as a replay of the file
// up to the saved offset: the cleaner pruned nothing under the backlog (it
// prunes on log time; on the wall clock it pruned every key, and the quiet
// thousand were lost).
func TestKillDuringCatchUpRestoresReplaysWindows(t *testing.T) {
	dir := t.TempDir()
	log, state, cfgPath := filepath.Join(dir, "access.log"), filepath.Join(dir, "state"), filepath.Join(dir, "logjail.yaml")
	if err := os.WriteFile(cfgPath, fmt.Appendf(nil, catchUpConfig, state, log), 0o600); err != nil {
		t.Fatal(err)
	}
	// The backlog is written at a pace (feed), not whole before the
	// start: the daemon reads 300,000 lines in well under the second
	// between two cleaner passes, and was killed after the catch-up had
	// ended. Its first 40% is there at the start; the rest comes in 64 KiB
	// slices every 50 ms (about 20 s), and whatever is left once the
	// daemon is killed is appended then, so that the file is the whole
	// backlog.
	full := filepath.Join(dir, "full.log")
	catchUpLog(t, full, time.Now().UTC().Add(-3*time.Hour).Truncate(time.Second), 300000)
	fi, err := os.Stat(full)
	if err != nil {
		t.Fatal(err)
	}
	backlog, err := os.ReadFile(full)
	if err != nil {
		t.Fatal(err)
	}
	fed := lineEnd(backlog, len(backlog)*2/5)
	if err := os.WriteFile(log, backlog[:fed], 0o644); err != nil {
		t.Fatal(err)
	}
	stopFeed, fedDone := make(chan struct{}), make(chan int)
	go func() { fedDone <- feed(log, backlog, fed, stopFeed) }()
	out := &syncBuffer{}
	cmd := exec.Command(binary, "run", "--config", cfgPath, "--log-level", "debug", "--poll")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	wait := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; daemon output:\n%s", what, out.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// Past the first third (the first 1,000 keys have gone quiet), then a
	// cleaner pass, then a checkpoint.
	wait("a third of the backlog read", func() bool { return savedOffset(t, state, log) > fi.Size()/3 })
	passes := strings.Count(out.String(), `"msg":"cleaner"`)
	wait("a cleaner pass", func() bool { return strings.Count(out.String(), `"msg":"cleaner"`) > passes })
	after := savedOffset(t, state, log)
	wait("a checkpoint after the cleaner pass", func() bool { return savedOffset(t, state, log) > after })
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	close(stopFeed)
	fed = <-fedDone
	f, err := os.OpenFile(log, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(backlog[fed:]); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, `"msg":"cleaner"`) {
			t.Logf("daemon: %s", l)
		}
	}

	cfg, err := rules.Load(cfgPath, rules.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(filepath.Join(state, "logjail.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	restored := pipeline.NewDetector(cfg)
	positions, rst, err := checkpoint.Restore(db, cfg, restored)
	if err != nil {
		t.Fatal(err)
	}
	offset := positions[log].Offset
	if offset <= 0 || offset >= fi.Size() {
		t.Fatalf("killed at offset %d of %d: not during the catch-up", offset, fi.Size())
	}

	// The replay of the same lines: the file up to the saved offset.
	raw, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	prefix := filepath.Join(dir, "prefix.log")
	if err := os.WriteFile(prefix, raw[:offset], 0o644); err != nil {
		t.Fatal(err)
	}
	var rec capture
	if _, err := replay.Run(context.Background(), cfg, []replay.Input{{Name: prefix, Source: cfg.Sources[0]}}, replay.Options{Recorder: &rec}); err != nil {
		t.Fatal(err)
	}
	at := rec.det.Newest()
	if got := restored.Newest(); !got.Equal(at) {
		t.Errorf("restored clock %s, replay's %s", got, at)
	}
	want, got := windows(rec.det, at), windows(restored, at)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("restored windows (-replay +restored):\n%s", diff)
	}
	ws, gs := rec.det.Stats(), restored.Stats()
	if ws != gs {
		t.Errorf("restored stats %+v, replay's %+v", gs, ws)
	}
	t.Logf("killed at offset %d of %d (%d keys restored); compared %d (rule, key) windows with replay's at the same offset (%d banned)",
		offset, fi.Size(), rst.Keys, len(want), ws.Banned)
}

// lineEnd is the end of the line of b that holds byte i (past its '\n'),
// or len(b).
func lineEnd(b []byte, i int) int {
	if k := bytes.IndexByte(b[i:], '\n'); k >= 0 {
		return i + k + 1
	}
	return len(b)
}

// feed appends backlog[from:] to path in slices of about 64 KiB (whole
// lines) every 50 ms until it is all there or stop is closed, and returns
// how much of backlog the file then holds.
func feed(path string, backlog []byte, from int, stop <-chan struct{}) int {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return from
	}
	defer f.Close()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for from < len(backlog) {
		select {
		case <-stop:
			return from
		case <-tick.C:
		}
		to := lineEnd(backlog, min(from+64<<10, len(backlog)-1))
		n, err := f.Write(backlog[from:to])
		from += n
		if err != nil {
			return from // the test's own append writes the rest
		}
	}
	return from
}

// TestHeldLineIsReadAgain: a line a minute ahead of the rest of its file,
// the last one written, with the wall clock not yet at its time, is held:
// the position saved is the one before it, so a restart reads it again;
// the lines appended after it show the jump is real, and it is charged
// with them (its key is banned only if it counts).
func TestHeldLineIsReadAgain(t *testing.T) {
	dir := t.TempDir()
	log, state, cfgPath := filepath.Join(dir, "access.log"), filepath.Join(dir, "state"), filepath.Join(dir, "logjail.yaml")
	if err := os.WriteFile(cfgPath, fmt.Appendf(nil, downtimeConfig, state, log), 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	const c, x = "198.51.100.30", "203.0.113.50"
	appendLines(t, log, burst(c, now.Add(-2*time.Minute), 3))
	fi, _ := os.Stat(log)
	before := fi.Size()
	appendLines(t, log, []logLine{{now.Add(20 * time.Second), x}}) // held: the wall clock is at 12:00:00

	var clock atomic.Pointer[time.Time]
	clock.Store(&now)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(ctx, daemon.Options{ConfigPath: cfgPath, Poll: true, Now: func() time.Time { return *clock.Load() }})
	}()
	deadline := time.Now().Add(30 * time.Second)
	for savedOffset(t, state, log) != before {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("saved offset %d, want %d (before the held line)", savedOffset(t, state, log), before)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if off := savedOffset(t, state, log); off != before {
		t.Fatalf("after the stop: saved offset %d, want %d (before the held line)", off, before)
	}

	// Five more lines of x right after it: the jump was real.
	appendLines(t, log, burst(x, now.Add(20*time.Second), 5))
	later := now.Add(30 * time.Second)
	runUntilRead(t, cfgPath, state, log, later)
	db, err := store.Open(filepath.Join(state, "logjail.db"), store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	hist, err := db.History(store.HistoryQuery{Key: x})
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 1 || hist[0].Kind != "ban" || !hist[0].Time.Equal(now.Add(20*time.Second)) {
		t.Errorf("history of %s: %+v; want one ban at 12:00:20, its sixth line the held one", x, hist)
	}
}

// TestHeldLineReleasedByTheWallClock: the last line written, a minute
// ahead of the one before it, is held while the wall clock is behind it
// and charged once the clock reaches it, with no line after it: a quiet
// site's real resumption is not delayed until its next request.
func TestHeldLineReleasedByTheWallClock(t *testing.T) {
	dir := t.TempDir()
	log, state, cfgPath := filepath.Join(dir, "access.log"), filepath.Join(dir, "state"), filepath.Join(dir, "logjail.yaml")
	if err := os.WriteFile(cfgPath, fmt.Appendf(nil, downtimeConfig, state, log), 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	const c, x = "198.51.100.30", "203.0.113.50"
	appendLines(t, log, append(burst(c, now.Add(-2*time.Minute), 3), burst(x, now.Add(-90*time.Second), 5)...))
	fi, _ := os.Stat(log)
	before := fi.Size()
	appendLines(t, log, []logLine{{now.Add(20 * time.Second), x}}) // held: 12:00:20, the clock at 12:00:00
	fi, _ = os.Stat(log)

	var clock atomic.Pointer[time.Time]
	clock.Store(&now)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(ctx, daemon.Options{ConfigPath: cfgPath, Poll: true, Now: func() time.Time { return *clock.Load() }})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	waitOffset := func(want int64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for savedOffset(t, state, log) != want {
			if time.Now().After(deadline) {
				t.Fatalf("saved offset %d, want %d", savedOffset(t, state, log), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitOffset(before) // held
	later := now.Add(20 * time.Second)
	clock.Store(&later)
	waitOffset(fi.Size()) // charged: the position goes past it
	db, err := store.Open(filepath.Join(state, "logjail.db"), store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows := 0
	if err := db.Keys(func(r *store.KeyRow) error {
		if r.Key == x {
			rows++
			if !r.LastSeen.Equal(now.Add(20 * time.Second)) {
				t.Errorf("%s last seen %s, want 12:00:20 (the held line, charged)", x, r.LastSeen.UTC())
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if rows != 1 {
		t.Errorf("%d key rows of %s, want 1", rows, x)
	}
}
