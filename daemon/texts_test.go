package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logjail/logjail/internal/testenv"
)

// Every daemon of the package's tests overwrites its text buffers as they
// come back (poisonTexts), so that each test checks too that nothing reads
// a line's text after its batch was recycled.
func init() { poisonTexts = true }

// TestTextReuseChangesNothing: reading the lines into buffers used again
// once their batches are decided (follow.Texts) changes no decision, even
// with every buffer overwritten with garbage as it comes back
// (Options.poison): nothing reads a line's text after its batch unless the
// batch was pinned. Two sources are written in six rounds, each read to
// its end before the next is written:
//   - an access log whose keys are texts as well as addresses (rules on
//     user_agent and user), where each round ends with a line a minute
//     ahead of the rest (the guard holds it past its batch, until the next
//     round's first lines show the jump is real), whose user agent and
//     user are those of the three lines after it: the held line's text
//     decides whether they are banned;
//   - an IIS log whose #Fields: (not IIS's default order) is its first
//     line, the rest read with those columns rounds later, with a flood
//     from one address.
//
// The history and the key states must be those of a run that reads each
// read's lines into a string of their own (Options.noTexts, as before).
func TestTextReuseChangesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("two daemons, six rounds each")
	}
	// Round r's lines are at T_r and the 4 s after it, its held line at
	// H_r = T_r + 65 s, and the next round begins at T_{r+1} = H_r. The
	// daemon's wall clock is T_r + 30 s while round r is read: the held
	// line is ahead of it (neither released by the clock nor too far
	// ahead to be charged) and a minute ahead of the file.
	base := time.Now().UTC().Truncate(time.Second).Add(-time.Hour)
	var web, iis []string
	var nows []time.Time
	clock := base
	stamp := func(at time.Time) string { return at.Format("02/Jan/2006:15:04:05 -0700") }
	n := 0
	for round := range 6 {
		var w, s strings.Builder
		if round == 0 {
			s.WriteString("#Software: Microsoft Internet Information Services 10.0\n" +
				"#Fields: date time cs-method cs-uri-stem sc-status sc-bytes c-ip cs(User-Agent) time-taken\n")
		} else { // the held line's jump is real: three more of its agent and user
			for j := range 3 {
				fmt.Fprintf(&w, "2001:db8:1:%x::1 - held%d [%s] \"GET /j HTTP/1.1\" 200 1 \"-\" \"held agent %d\"\n", j, round-1, stamp(clock), round-1)
			}
		}
		nows = append(nows, clock.Add(30*time.Second))
		for i := range 4000 {
			n++
			at := clock.Add(time.Duration(i) * time.Millisecond)
			fmt.Fprintf(&w, "2001:db8:%x:%x::1 - user%d [%s] \"GET /p%d HTTP/1.1\" 200 %d \"-\" \"agent %d\"\n",
				n>>16, n&0xffff, n%3000, stamp(at), n%97, n, n%3000)
			ip := fmt.Sprintf("198.51.100.%d", n%200+1)
			if round == 3 && i%4 == 0 {
				ip = "203.0.113.9" // floods in round 3
			}
			fmt.Fprintf(&s, "%s GET /i%d 200 %d %s Mozilla/5.0+(iis+%d) %d\n", at.Format("2006-01-02 15:04:05"), n%31, n, ip, n%50, n%100)
		}
		clock = clock.Add(65 * time.Second) // held until the next round
		fmt.Fprintf(&w, "2001:db8:1:ff::1 - held%d [%s] \"GET /j HTTP/1.1\" 200 1 \"-\" \"held agent %d\"\n", round, stamp(clock), round)
		web = append(web, w.String())
		iis = append(iis, s.String())
	}
	plain := textsRun(t, web, iis, nows, false)
	reused := textsRun(t, web, iis, nows, true)
	if len(plain.history) < 10 {
		t.Fatalf("%d decisions, want the held agents' and users' bans and the IIS flood's", len(plain.history))
	}
	for _, want := range []string{"ua:held agent 2", "user:held4", "203.0.113.9"} {
		if !slices.ContainsFunc(plain.history, func(h string) bool { return strings.Contains(h, " "+want+" ") }) {
			t.Fatalf("no decision on %q: the test reads nothing held or flooded\n%v", want, plain.history)
		}
	}
	if !slices.Equal(plain.history, reused.history) {
		t.Fatalf("the history differs: %d events with strings of their own, %d in buffers used again\nown:    %v\nreused: %v", len(plain.history), len(reused.history), plain.history, reused.history)
	}
	if !slices.Equal(plain.keys, reused.keys) {
		i := 0
		for i < min(len(plain.keys), len(reused.keys)) && plain.keys[i] == reused.keys[i] {
			i++
		}
		t.Fatalf("the key states differ: %d with strings of their own, %d in buffers used again; the first that differs: %q, %q", len(plain.keys), len(reused.keys), first(plain.keys[i:]), first(reused.keys[i:]))
	}
	t.Logf("%d decisions, %d key states", len(plain.history), len(plain.keys))
}

// textsRun has the daemon follow the two logs, written round by round
// (each round read to its end before the next is written, the wall
// clock at nows[round]), reused: with
// the texts in buffers used again and overwritten as they come back; else
// in strings of their own. It returns what the daemon recorded.
func textsRun(t *testing.T, web, iis []string, nows []time.Time, reused bool) hintsResult {
	t.Helper()
	dir := t.TempDir()
	stateDir := filepath.Join(dir, "state")
	webPath, iisPath := filepath.Join(dir, "access.log"), filepath.Join(dir, "u_ex.log")
	for _, p := range []string{webPath, iisPath} {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfgPath := filepath.Join(dir, "logjail.yaml")
	cfg := fmt.Sprintf(`state_dir: %[1]s
control_socket: %[1]s/control.sock
metrics: ""
ipv6_prefix: 64
sources:
  - {name: web, paths: [%[2]s], format: combined, from: start}
  - {name: iis, paths: [%[3]s], format: iis, from: start}
rules:
  - {name: flood, limits: ["40 per 10s"], ban: {for: 2h}}
  - {name: agents, key: user_agent, limits: ["3 per 10s"], ban: {for: 2h}}
  - {name: users, key: user, limits: ["3 per 10s"], ban: {for: 2h}}
`, stateDir, webPath, iisPath)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	var now atomic.Int64 // the wall clock: nows[round] while the round is read
	now.Store(nows[0].UnixNano())
	var logs testenv.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	ctl := NewControl()
	go func() {
		done <- Run(ctx, Options{ConfigPath: cfgPath, Poll: true, Control: ctl, poison: reused, noTexts: !reused,
			Now:    func() time.Time { return time.Unix(0, now.Load()).UTC() },
			Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	}()
	var webLen, iisLen int64
	for round := range web {
		now.Store(nows[round].UnixNano())
		for _, w := range []struct {
			path, text string
			size       *int64
		}{{webPath, web[round], &webLen}, {iisPath, iis[round], &iisLen}} {
			f, err := os.OpenFile(w.path, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteString(w.text); err != nil {
				t.Fatal(err)
			}
			f.Close()
			*w.size += int64(len(w.text))
		}
		deadline := time.Now().Add(60 * time.Second)
		for {
			var webOff, iisOff int64
			err := ctl.run(ctx, func(d *decider) error {
				if fg := d.guards[webPath]; fg != nil {
					webOff = fg.after.Offset
				}
				if fg := d.guards[iisPath]; fg != nil {
					iisOff = fg.after.Offset
				}
				return nil
			})
			if err != nil {
				t.Fatalf("reused=%v: %v\n%s", reused, err, logs.String())
			}
			if webOff == webLen && iisOff == iisLen {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("reused=%v, round %d: %d of %d and %d of %d bytes read after 60 s\n%s", reused, round, webOff, webLen, iisOff, iisLen, logs.String())
			}
			select {
			case err := <-done:
				t.Fatalf("reused=%v: Run returned early: %v\n%s", reused, err, logs.String())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("reused=%v: Run: %v\n%s", reused, err, logs.String())
	}
	var res hintsResult
	res.history, res.keys = daemonResult(t, stateDir)
	return res
}
