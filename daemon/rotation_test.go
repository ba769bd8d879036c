package daemon_test

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/logjail/logjail/store"
	"github.com/ulikunitz/xz"

	"github.com/logjail/logjail/internal/testenv"
)

// The rotation matrix: for every way logrotate (and nginx's and Apache's
// mv + reopen) rotates a log, and for every moment a rotation can meet
// logjail (running at 5k lines/s, stopped across 1, 2 and 3 rotations,
// killed with SIGKILL in the middle of one), numbered lines are written and
// each number must be charged exactly once: every line is a request of its
// own user (u<N>), the rule `count` keys by user, and the store's key state
// of user:u<N> must have counted exactly one request (what `logjail top`
// shows an operator). Lines that logrotate's copytruncate writes between
// its copy and its truncation are in neither file: they are counted apart
// (lost by logrotate itself), and must not be charged twice either.
//
// The modes named logrotate-* run the real logrotate binary with a
// generated configuration (create, copytruncate, compress with gzip, xz,
// zstd and bzip2, delaycompress, olddir). The others do logrotate's steps
// with Go file operations, in logrotate's order (rename + create, or copy
// then truncate; the shift of older numbered files; compression of the
// just-rotated file, or of the one before with delaycompress), for what a
// test cannot have the binary do at will: several dateext rotations in one
// second, lines written between copytruncate's copy and its truncation, a
// server that writes on to the renamed file until it reopens. The daemon
// is the real binary (TestMain builds it), stopped with SIGTERM or SIGKILL.

const rotationConfig = `state_dir: %[1]s
control_socket: %[1]s/control.sock
checkpoint: 1s
metrics: ""
sources:
  - name: web
    paths: [%[2]s]
    format: combined
    timezone: UTC
    from: start
%[3]s
rules:
  - name: count
    key: user
    limits: ["1000000 per day"]
    ban: {for: 1m}
`

// rotWorld is one case: a log, the web server writing it, and the numbers
// written.
type rotWorld struct {
	dir, log, olddir string
	w                *os.File // the server's open log
	next             int      // the next number
	gap              map[int]bool
	rot              int // rotations done
}

func newRotWorld(dir string, olddir bool) (*rotWorld, error) {
	w := &rotWorld{dir: dir, log: filepath.Join(dir, "access.log"), gap: map[int]bool{}}
	if olddir {
		w.olddir = filepath.Join(dir, "old")
		if err := os.Mkdir(w.olddir, 0o755); err != nil {
			return nil, err
		}
	}
	return w, w.reopen()
}

// write appends n numbered lines through the server's descriptor.
func (w *rotWorld) write(n int) error {
	var b strings.Builder
	now := time.Now().UTC().Format("02/Jan/2006:15:04:05 -0700")
	for range n {
		w.next++
		fmt.Fprintf(&b, "203.0.113.%d - u%d [%s] \"GET /%d HTTP/1.1\" 200 1 \"-\" \"t\"\n", w.next%250+1, w.next, now, w.next)
	}
	_, err := w.w.WriteString(b.String())
	return err
}

// reopen is the server reopening its log (nginx USR1, a reload).
func (w *rotWorld) reopen() error {
	if w.w != nil {
		w.w.Close()
	}
	f, err := os.OpenFile(w.log, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	w.w = f
	return err
}

// create is logrotate's `create`: a new empty log.
func (w *rotWorld) create() error {
	f, err := os.OpenFile(w.log, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// numbered is the rotated file access.log.i+ext in dir.
func (w *rotWorld) numbered(dir string, i int, ext string) string {
	return filepath.Join(dir, "access.log."+strconv.Itoa(i)+ext)
}

// shift renames access.log.i+ext to .i+1 for i from the highest down to
// from, as logrotate makes room for the new .1.
func (w *rotWorld) shift(dir string, from int, ext string) error {
	for i := w.rot + 1; i >= from; i-- {
		if err := os.Rename(w.numbered(dir, i, ext), w.numbered(dir, i+1, ext)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// compress is logrotate's compress: name+"."+ext written, then name removed.
func compressFile(name, ext string) error {
	data, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	out, err := os.OpenFile(name+"."+ext, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	var zw io.WriteCloser
	switch ext {
	case "gz":
		zw = gzip.NewWriter(out)
	case "zst":
		zw, err = zstd.NewWriter(out)
	case "xz":
		zw, err = xz.NewWriter(out)
	case "bz2":
		cmd := exec.Command("bzip2", "-c")
		cmd.Stdin, cmd.Stdout = strings.NewReader(string(data)), out
		if err := cmd.Run(); err != nil {
			out.Close()
			return fmt.Errorf("bzip2: %w", err)
		}
	}
	if err != nil {
		out.Close()
		return err
	}
	if zw != nil {
		if _, err := zw.Write(data); err != nil {
			return err
		}
		if err := zw.Close(); err != nil {
			return err
		}
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Remove(name)
}

// copyFile is copytruncate's copy.
func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o644)
}

// rotMode is one way of rotating: the steps of one rotation, in order.
type rotMode struct {
	name      string
	olddir    bool
	logrotate bool // runs the real logrotate
	steps     func(w *rotWorld) []func() error
}

// lateLines is how many lines the server writes to the renamed file
// before it reopens its log (or between copytruncate's copy and truncate).
const lateLines = 5

func renameSteps(ext string, delay bool) func(w *rotWorld) []func() error {
	return func(w *rotWorld) []func() error {
		from := 1
		if delay {
			from = 2
		}
		steps := []func() error{
			func() error {
				if ext != "" {
					if err := w.shift(w.dir, from, "."+ext); err != nil {
						return err
					}
				}
				if delay || ext == "" {
					return w.shift(w.dir, 1, "")
				}
				return nil
			},
			func() error { return os.Rename(w.log, w.numbered(w.dir, 1, "")) },
			w.create,
			func() error { return w.write(lateLines) }, // to the renamed file, until the reopen
			w.reopen,
		}
		switch {
		case ext != "" && delay:
			steps = append(steps, func() error {
				if _, err := os.Stat(w.numbered(w.dir, 2, "")); err != nil {
					return nil // the first rotation: nothing to compress yet
				}
				return compressFile(w.numbered(w.dir, 2, ""), ext)
			})
		case ext != "":
			steps = append(steps, func() error { return compressFile(w.numbered(w.dir, 1, ""), ext) })
		}
		return steps
	}
}

var rotModes = []rotMode{
	{name: "create", steps: renameSteps("", false)},
	{name: "mv-reopen", steps: func(w *rotWorld) []func() error {
		// nginx and Apache by hand: mv, the server writes on, then reopens.
		return []func() error{
			func() error { return w.shift(w.dir, 1, "") },
			func() error { return os.Rename(w.log, w.numbered(w.dir, 1, "")) },
			func() error { return w.write(lateLines) },
			w.reopen,
		}
	}},
	{name: "copytruncate", steps: copyTruncateSteps("")},
	{name: "copytruncate-gz", steps: copyTruncateSteps("gz")},
	{name: "dateext", steps: func(w *rotWorld) []func() error {
		name := fmt.Sprintf("%s-202611%02d", w.log, 10+w.rot)
		return []func() error{
			func() error { return os.Rename(w.log, name) },
			w.create,
			func() error { return w.write(lateLines) },
			w.reopen,
		}
	}},
	{name: "dateformat-gz", steps: func(w *rotWorld) []func() error {
		// dateext + dateformat -%Y%m%d-%s + compress.
		name := fmt.Sprintf("%s-20261124-%d", w.log, 1764000000+w.rot)
		return []func() error{
			func() error { return os.Rename(w.log, name) },
			w.create,
			w.reopen,
			func() error { return compressFile(name, "gz") },
		}
	}},
	{name: "gz", steps: renameSteps("gz", false)},
	{name: "gz-delaycompress", steps: renameSteps("gz", true)},
	{name: "bz2", steps: renameSteps("bz2", false)},
	{name: "xz", steps: renameSteps("xz", false)},
	{name: "zst", steps: renameSteps("zst", false)},
	// The real logrotate, where it is installed (scripts/deps.sh).
	{name: "logrotate-create-gz", logrotate: true, steps: logrotateSteps("    create 0644\n    compress\n")},
	{name: "logrotate-delaycompress-xz", logrotate: true, steps: logrotateSteps("    create 0644\n    compress\n    delaycompress\n    compresscmd /usr/bin/xz\n    uncompresscmd /usr/bin/unxz\n    compressext .xz\n")},
	{name: "logrotate-copytruncate", logrotate: true, steps: logrotateSteps("    copytruncate\n")},
	{name: "logrotate-copytruncate-zst", logrotate: true, steps: logrotateSteps("    copytruncate\n    compress\n    compresscmd /usr/bin/zstd\n    uncompresscmd /usr/bin/unzstd\n    compressext .zst\n    compressoptions -q\n")},
	{name: "logrotate-olddir-bz2", logrotate: true, olddir: true, steps: logrotateSteps("    create 0644\n    olddir old\n    compress\n    compresscmd /usr/bin/bzip2\n    uncompresscmd /usr/bin/bunzip2\n    compressext .bz2\n")},
	{name: "olddir", olddir: true, steps: func(w *rotWorld) []func() error {
		return []func() error{
			func() error { return w.shift(w.olddir, 1, "") },
			func() error { return os.Rename(w.log, w.numbered(w.olddir, 1, "")) },
			w.create,
			func() error { return w.write(lateLines) },
			w.reopen,
		}
	}},
}

// logrotateSteps rotate with the real logrotate binary (forced, its own
// state file) and the directives given; the server reopens its log after
// logrotate returns, as a postrotate script would have it do. The first
// step starts logrotate and the second waits for it, so that a kill
// between them lands while logrotate works.
func logrotateSteps(directives string) func(w *rotWorld) []func() error {
	return func(w *rotWorld) []func() error {
		conf := filepath.Join(w.dir, "logrotate.conf")
		var cmd *exec.Cmd
		var out strings.Builder
		return []func() error{
			func() error {
				text := fmt.Sprintf("%s {\n    rotate 10\n    missingok\n    nomail\n%s}\n", w.log, directives)
				if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
					return err
				}
				cmd = exec.Command("logrotate", "--force", "--state", filepath.Join(w.dir, "logrotate.state"), conf)
				cmd.Stdout, cmd.Stderr = &out, &out
				return cmd.Start()
			},
			func() error {
				if err := cmd.Wait(); err != nil {
					return fmt.Errorf("logrotate: %v: %s", err, out.String())
				}
				return nil
			},
			w.reopen,
		}
	}
}

func copyTruncateSteps(ext string) func(w *rotWorld) []func() error {
	return func(w *rotWorld) []func() error {
		steps := []func() error{
			func() error {
				if ext == "" {
					return w.shift(w.dir, 1, "")
				}
				return w.shift(w.dir, 1, "."+ext)
			},
			func() error { return copyFile(w.log, w.numbered(w.dir, 1, "")) },
			func() error { // between the copy and the truncation: lost by logrotate
				for range lateLines {
					if err := w.write(1); err != nil {
						return err
					}
					w.gap[w.next] = true
				}
				return nil
			},
			func() error { return os.Truncate(w.log, 0) },
		}
		if ext != "" {
			steps = append(steps, func() error { return compressFile(w.numbered(w.dir, 1, ""), ext) })
		}
		return steps
	}
}

// rotate does one whole rotation.
func (w *rotWorld) rotate(m rotMode) error {
	for _, s := range m.steps(w) {
		if err := s(); err != nil {
			return err
		}
	}
	w.rot++
	return nil
}

// daemonProc is a running `logjail run`.
type daemonProc struct {
	cmd *exec.Cmd
	out *syncBuffer
}

func startDaemon(cfg string, out *syncBuffer) (*daemonProc, error) {
	cmd := exec.Command(binary, "run", "--config", cfg, "--log-level", "debug", "--poll")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &daemonProc{cmd, out}, nil
}

// stop signals the process and waits for it, by its own PID.
func (p *daemonProc) stop(sig syscall.Signal) error {
	p.cmd.Process.Signal(sig)
	err := p.cmd.Wait()
	if sig == syscall.SIGTERM && err != nil {
		return fmt.Errorf("exit after SIGTERM: %v", err)
	}
	return nil
}

// waitUntil polls cond every 20 ms until it holds, ctx ends, or the process exits.
func waitUntil(ctx context.Context, what string, p *daemonProc, cond func() bool) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if p != nil && p.cmd.ProcessState != nil {
			return fmt.Errorf("the daemon exited while waiting for %s", what)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

// readToEnd reports whether the saved position is at the end of the file
// now at the log's path.
func readToEnd(state, log string) bool {
	fi, err := os.Stat(log)
	if err != nil {
		return false
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	db, err := store.Open(filepath.Join(state, "logjail.db"), store.Options{ReadOnly: true})
	if err != nil {
		return false
	}
	defer db.Close()
	ps, err := db.Positions()
	if err != nil {
		return false
	}
	for _, p := range ps {
		if p.Path == log && st != nil && p.Inode == st.Ino && p.Offset == fi.Size() {
			return true
		}
	}
	return false
}

// rotResult is what a case found.
type rotResult struct {
	written, gapLost, gapRead, lost, dup int
	took                                 time.Duration
	detail                               string
}

// charged counts the requests the store holds per number.
func charged(state string) (map[int]int64, error) {
	db, err := store.Open(filepath.Join(state, "logjail.db"), store.Options{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	out := map[int]int64{}
	err = db.Keys(func(k *store.KeyRow) error {
		if k.Rule != "count" {
			return nil
		}
		n, err := strconv.Atoi(strings.TrimPrefix(k.Key, "user:u"))
		if err != nil {
			return fmt.Errorf("key %q", k.Key)
		}
		out[n] += k.Requests
		return nil
	})
	return out, err
}

// runRotationCase runs one mode in one scenario: "running", "stopped-N" or
// "kill9".
func runRotationCase(ctx context.Context, dir string, m rotMode, scenario string) (res rotResult, err error) {
	start := time.Now()
	w, err := newRotWorld(dir, m.olddir)
	if err != nil {
		return res, err
	}
	defer w.w.Close()
	state := filepath.Join(dir, "state")
	cfg := filepath.Join(dir, "logjail.yaml")
	old := ""
	if m.olddir {
		old = "    olddir: old"
	}
	if err := os.WriteFile(cfg, fmt.Appendf(nil, rotationConfig, state, w.log, old), 0o600); err != nil {
		return res, err
	}
	out := &syncBuffer{}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w\ndaemon output (tail):\n%s", err, tailString(out.String(), 4000))
		}
	}()
	p, err := startDaemon(cfg, out)
	if err != nil {
		return res, err
	}
	defer func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
	}()
	if err := waitUntil(ctx, "the daemon to follow", p, func() bool { return strings.Contains(out.String(), `"following"`) }); err != nil {
		return res, err
	}
	switch {
	case scenario == "running":
		// 2000 lines at 5k lines/s, three rotations among them.
		tick := time.NewTicker(10 * time.Millisecond)
		for i := range 40 {
			<-tick.C
			if err := w.write(50); err != nil {
				return res, err
			}
			if i%10 == 9 && i < 39 {
				if err := w.rotate(m); err != nil {
					return res, err
				}
			}
		}
		tick.Stop()
	case strings.HasPrefix(scenario, "stopped-"):
		n, _ := strconv.Atoi(strings.TrimPrefix(scenario, "stopped-"))
		if err := w.write(300); err != nil {
			return res, err
		}
		if err := waitUntil(ctx, "the first lines to be saved", p, func() bool { return readToEnd(state, w.log) }); err != nil {
			return res, err
		}
		if err := p.stop(syscall.SIGTERM); err != nil {
			return res, err
		}
		for range n {
			if err := w.write(150); err != nil {
				return res, err
			}
			if err := w.rotate(m); err != nil {
				return res, err
			}
			if err := w.write(150); err != nil {
				return res, err
			}
		}
		if p, err = startDaemon(cfg, out); err != nil {
			return res, err
		}
	case scenario == "kill9":
		if err := w.write(400); err != nil {
			return res, err
		}
		if err := waitUntil(ctx, "the first lines to be saved", p, func() bool { return readToEnd(state, w.log) }); err != nil {
			return res, err
		}
		// Killed while reading, in the middle of a rotation.
		if err := w.write(300); err != nil {
			return res, err
		}
		steps := m.steps(w)
		for _, s := range steps[:len(steps)/2] {
			if err := s(); err != nil {
				return res, err
			}
		}
		if err := p.stop(syscall.SIGKILL); err != nil {
			return res, err
		}
		for _, s := range steps[len(steps)/2:] {
			if err := s(); err != nil {
				return res, err
			}
		}
		w.rot++
		if err := w.write(300); err != nil {
			return res, err
		}
		if p, err = startDaemon(cfg, out); err != nil {
			return res, err
		}
	default:
		return res, fmt.Errorf("scenario %q", scenario)
	}
	if err := waitUntil(ctx, "every line to be read", p, func() bool { return readToEnd(state, w.log) }); err != nil {
		return res, err
	}
	if err := p.stop(syscall.SIGTERM); err != nil {
		return res, err
	}
	got, err := charged(state)
	if err != nil {
		return res, err
	}
	res.written = w.next
	var lost, dup []int
	for n := 1; n <= w.next; n++ {
		c := got[n]
		switch {
		case c > 1:
			dup = append(dup, n)
		case w.gap[n] && c == 0:
			res.gapLost++
		case w.gap[n]:
			res.gapRead++
		case c == 0:
			lost = append(lost, n)
		}
	}
	for n := range got {
		if n < 1 || n > w.next {
			dup = append(dup, n)
		}
	}
	res.lost, res.dup = len(lost), len(dup)
	if len(lost) > 0 || len(dup) > 0 {
		res.detail = fmt.Sprintf("lost %v, charged more than once %v", head(lost), head(dup))
	}
	res.took = time.Since(start)
	return res, nil
}

func head(ns []int) []int { return ns[:min(len(ns), 20)] }

func tailString(s string, n int) string { return s[max(0, len(s)-n):] }

// TestRotationMatrix: no line lost and none charged twice in any rotation
// mode, live at 5k lines/s, across 1, 2 and 3 rotations while stopped, and
// across a SIGKILL in the middle of a rotation. The cases run side by side
// (each its own daemon process), then are reported one subtest each.
func TestRotationMatrix(t *testing.T) {
	testenv.Need(t, "bzip2", "logrotate", "xz", "zstd")
	scenarios := []string{"running", "stopped-1", "stopped-2", "stopped-3", "kill9"}
	type outcome struct {
		res rotResult
		err error
	}
	results := map[string]*outcome{}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute) // a safety net: the matrix takes about 30 s
	defer cancel()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 12)
	var mu sync.Mutex
	began := time.Now()
	for _, m := range rotModes {
		for _, sc := range scenarios {
			name := m.name + "/" + sc
			dir := t.TempDir()
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				res, err := runRotationCase(ctx, dir, m, sc)
				mu.Lock()
				results[name] = &outcome{res, err}
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	var total, gapLost, gapRead int
	for _, m := range rotModes {
		for _, sc := range scenarios {
			name := m.name + "/" + sc
			o := results[name]
			t.Run(name, func(t *testing.T) {
				if o.err != nil {
					t.Fatal(o.err)
				}
				r := o.res
				t.Logf("%d lines, %d lost, %d charged twice; lost by logrotate %d, read before its truncation %d; %v",
					r.written, r.lost, r.dup, r.gapLost, r.gapRead, r.took.Round(10*time.Millisecond))
				if r.lost > 0 || r.dup > 0 {
					t.Errorf("%s", r.detail)
				}
			})
			total += o.res.written
			gapLost += o.res.gapLost
			gapRead += o.res.gapRead
		}
	}
	t.Logf("matrix: %d cases, %d lines, lost by logrotate's copytruncate %d (read before its truncation %d), %v",
		len(results), total, gapLost, gapRead, time.Since(began).Round(100*time.Millisecond))
}
