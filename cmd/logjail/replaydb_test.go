package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/logjail/logjail/checkpoint"
	"github.com/logjail/logjail/detector"
	"github.com/logjail/logjail/pipeline"
	"github.com/logjail/logjail/replay"
	"github.com/logjail/logjail/rules"
	"github.com/logjail/logjail/state/statetest"
	"github.com/logjail/logjail/store"
)

// genlogConfig is testdata/genlog.yaml with its state_dir in dir, so that
// `list` reads dir/logjail.db.
func genlogConfig(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile("../../testdata/genlog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), "state_dir: /var/lib/logjail", "state_dir: "+dir, 1)
	if s == string(b) {
		t.Fatal("testdata/genlog.yaml has no state_dir line to replace")
	}
	p := filepath.Join(dir, "genlog.yaml")
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// randomGenlog writes n lines in genlog.yaml's format: clients from a small
// pool, a few of them floods, scanners or CPU hogs, so that every rule
// throttles, bans and unbans some.
func randomGenlog(t *testing.T, path string, seed uint64, n int) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 7))
	clients := make([]string, 40+r.IntN(200))
	for i := range clients {
		if r.IntN(4) == 0 {
			clients[i] = fmt.Sprintf("2001:db8:%x::%x", r.IntN(8), r.IntN(1<<16))
		} else {
			clients[i] = fmt.Sprintf("198.51.%d.%d", r.IntN(4), r.IntN(256))
		}
	}
	kind := make([]int, len(clients)) // 0 normal, 1 flood, 2 scanner, 3 cpu hog
	for i := range kind {
		if r.IntN(8) == 0 {
			kind[i] = 1 + r.IntN(3)
		}
	}
	var b strings.Builder
	// Some bans are still active when the test lists them (list reads the
	// wall clock).
	at := time.Now().UTC().Add(-20 * time.Minute).Truncate(time.Second)
	for range n {
		at = at.Add(time.Duration(r.IntN(40)) * time.Millisecond)
		c := r.IntN(len(clients))
		if r.IntN(3) == 0 { // the attackers are busier
			for range 4 {
				if c2 := r.IntN(len(clients)); kind[c2] != 0 {
					c = c2
					break
				}
			}
		}
		status, cpu, path := 200, 0.002+r.Float64()*0.01, fmt.Sprintf("/page/%d", r.IntN(50))
		switch kind[c] {
		case 2:
			status, path = 404, fmt.Sprintf("/wp-%d.php", r.IntN(1000))
		case 3:
			cpu = 0.2 + r.Float64()*0.5
		}
		fmt.Fprintf(&b, "%s - - [%s] \"GET %s HTTP/1.1\" %d %d \"-\" \"agent/%d\" rt=%.3f cpu=%.3f\n",
			clients[c], at.Format("02/Jan/2006:15:04:05 -0700"), path, status, 100+r.IntN(5000), c%7, cpu*1.2, cpu)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// replayDBModel is `replay --db` as it was before the database was made
// beside the replay and written beside its report: the database opened
// first, the checkpoint written on the replay's goroutine, then closed.
func replayDBModel(t *testing.T, cfgPath, dbPath, log string) {
	t.Helper()
	cfg, err := rules.Load(cfgPath, loadOptions())
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(dbPath, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	src, err := sourceFor(cfg, log, "web")
	if err != nil {
		t.Fatal(err)
	}
	ro := replay.Options{AgentKind: agentKind, Recorder: checkpoint.NewWriter(db)}
	if _, err := replay.Run(context.Background(), cfg, []replay.Input{{Name: log, Source: src}}, ro); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// dbDump is what a database reads back as: every table a reader sees
// (statetest.Read), and what a detector restored from it holds.
type dbDump struct {
	statetest.Contents
	Restored any
	Peaks    []detector.KeyPeak
}

func dumpDB(t *testing.T, cfgPath, dbPath string) dbDump {
	t.Helper()
	cfg, err := rules.Load(cfgPath, loadOptions())
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(dbPath, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	d := dbDump{Contents: statetest.Read(t, db)}
	det := pipeline.NewDetector(cfg)
	_, st, err := checkpoint.Restore(db, cfg, det)
	if err != nil {
		t.Fatal(err)
	}
	d.Restored = st
	det.Peaks(func(p detector.KeyPeak) { d.Peaks = append(d.Peaks, p) })
	return d
}

// nowRE matches the time of a list's JSON document.
var nowRE = regexp.MustCompile(`"now":"[^"]*"`)

// TestReplayDBReadsBackAsBefore: the database `replay --db` makes beside
// the replay reads back (every key state, ban, event and position; a
// detector restored from it; `list`) exactly as the one the replay made
// before it did (replayDBModel), on random logs that every rule bans in,
// and the reports are the same with and without --db.
func TestReplayDBReadsBackAsBefore(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			dir := t.TempDir()
			cfg := genlogConfig(t, dir)
			log := filepath.Join(dir, "access.log")
			randomGenlog(t, log, seed, 3000+int(seed)*4000)
			_, want, _ := run(t, "", "replay", "--config", cfg, "--source", "web", log)
			code, got, stderr := run(t, "", "replay", "--config", cfg, "--source", "web", "--db", filepath.Join(dir, "logjail.db"), log)
			if code != exitOK {
				t.Fatalf("replay --db: exit %d, stderr %s", code, stderr)
			}
			if got != want {
				t.Errorf("the report with --db differs from the one without:\n%s\nwant\n%s", got, want)
			}
			modelDir := filepath.Join(dir, "model")
			replayDBModel(t, cfg, filepath.Join(modelDir, "logjail.db"), log)
			gotDump, wantDump := dumpDB(t, cfg, filepath.Join(dir, "logjail.db")), dumpDB(t, cfg, filepath.Join(modelDir, "logjail.db"))
			if len(wantDump.Keys) == 0 || len(wantDump.History) == 0 {
				t.Fatalf("the model's database holds %d key states and %d events: the log decides nothing", len(wantDump.Keys), len(wantDump.History))
			}
			if !reflect.DeepEqual(gotDump, wantDump) {
				t.Errorf("replay --db's database reads back differently from the model's:\n got %+v\nwant %+v", gotDump, wantDump)
			}
			modelCfg := genlogConfig(t, modelDir)
			for _, expired := range []bool{false, true} {
				args := []string{"list", "--output", "json"}
				if expired {
					args = append(args, "--expired")
				}
				_, gotList, stderr := run(t, "", append(args, "--config", cfg)...)
				_, wantList, _ := run(t, "", append(args, "--config", modelCfg)...)
				gotList, wantList = nowRE.ReplaceAllString(gotList, ""), nowRE.ReplaceAllString(wantList, "")
				if gotList != wantList || !expired && !strings.Contains(wantList, `"rule"`) {
					t.Errorf("%s differs (or lists nothing):\n%s\nwant\n%s\nstderr: %s", strings.Join(args, " "), gotList, wantList, stderr)
				}
			}
		})
	}
}

// TestReplayDBOpenFails: a database that cannot be made stops the replay
// with an error that names it, and no report; one that holds a state is a
// usage error, as before.
func TestReplayDBOpenFails(t *testing.T) {
	dir := t.TempDir()
	cfg := genlogConfig(t, dir)
	log := filepath.Join(dir, "access.log")
	randomGenlog(t, log, 1, 20000)
	notDir := filepath.Join(dir, "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(notDir, "replay.db")
	code, out, stderr := run(t, "", "replay", "--config", cfg, "--source", "web", "--db", bad, log)
	if code == exitOK || out != "" || !strings.Contains(stderr, bad) || strings.Contains(stderr, "context canceled") {
		t.Errorf("replay --db under a file: exit %d, stdout %q, stderr %q; want a failure naming %s and no report", code, out, stderr, bad)
	}
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = run(t, "", "replay", "--config", cfg, "--source", "web", "--db", empty, log)
	if code == exitOK || out != "" || !strings.Contains(stderr, "empty") {
		t.Errorf("replay --db on an empty file: exit %d, stdout %q, stderr %q; want store's ErrEmpty and no report", code, out, stderr)
	}
	db := filepath.Join(dir, "logjail.db")
	if code, _, stderr := run(t, "", "replay", "--config", cfg, "--source", "web", "--db", db, log); code != exitOK {
		t.Fatalf("replay --db: exit %d, stderr %s", code, stderr)
	}
	code, out, stderr = run(t, "", "replay", "--config", cfg, "--source", "web", "--db", db, log)
	if code != exitUsage || out != "" || !strings.Contains(stderr, "already holds a state") {
		t.Errorf("a second replay into the same database: exit %d, stdout %q, stderr %q; want 2, no report and a reason", code, out, stderr)
	}
}

// TestReplayDBOpenFailsStdin: with stdin among the inputs, a database that
// cannot be made fails the replay before stdin is read (a read of stdin is
// not cancelled: a quiet pipe would hold the error back).
func TestReplayDBOpenFailsStdin(t *testing.T) {
	dir := t.TempDir()
	cfg := genlogConfig(t, dir)
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe() // never written
	defer pw.Close()
	done := make(chan int, 1)
	var out, errb bytes.Buffer
	go func() {
		done <- execute(context.Background(), []string{"replay", "--config", cfg, "--source", "web", "--db", empty, "-"}, streams{in: pr, out: &out, err: &errb})
	}()
	select {
	case code := <-done:
		if code == exitOK || out.Len() != 0 || !strings.Contains(errb.String(), "empty") {
			t.Errorf("exit %d, stdout %q, stderr %q; want store's ErrEmpty and no report", code, out.String(), errb.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("replay --db of a quiet stdin did not fail on a database that cannot be made")
	}
}
