package follow

import (
	"compress/gzip"
	"context"
	"fmt"
	"github.com/logjail/logjail/state"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCopyTruncateReadsTheCopy: the follower is behind (its channel not
// read) when copytruncate copies and truncates the log: the lines it had
// not read yet are read from the copy (plain, or gzip-compressed at once),
// each once and in order, then the log from its start.
func TestCopyTruncateReadsTheCopy(t *testing.T) {
	for _, compress := range []bool{false, true} {
		t.Run(fmt.Sprintf("compress=%v", compress), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			name := filepath.Join(dir, "access.log")
			const before, after = 3000, 50 // 3000 lines: well past one 64 KiB read
			var b strings.Builder
			for i := range before {
				fmt.Fprintf(&b, "n=%d %s\n", i, strings.Repeat("x", 60))
			}
			appendFile(t, name, b.String())
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			out := make(chan Batch)
			done := make(chan error, 1)
			go func() {
				done <- Follow(ctx, Options{Paths: []string{name}, FromStart: true, Poll: true, MaxBatch: 10}, out)
			}()
			var got []string
			recv := func() {
				select {
				case bt := <-out:
					for _, l := range bt.Lines {
						got = append(got, l.Text)
					}
				case <-time.After(wait):
					t.Fatalf("no batch in %v; got %d lines", wait, len(got))
				}
			}
			recv() // the follower has read a chunk and waits to send the rest
			if err := os.WriteFile(name+".1", readFile(t, name), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(name, 0); err != nil {
				t.Fatal(err)
			}
			if compress {
				if err := compressFile(name + ".1"); err != nil {
					t.Fatal(err)
				}
			}
			b.Reset()
			for i := range after {
				fmt.Fprintf(&b, "after=%d\n", i)
			}
			appendFile(t, name, b.String())
			for len(got) < before+after {
				recv()
			}
			for i, l := range got {
				want := fmt.Sprintf("after=%d", i-before)
				if i < before {
					want = fmt.Sprintf("n=%d %s", i, strings.Repeat("x", 60))
				}
				if l != want {
					t.Fatalf("line %d: %q, want %q", i, l, want)
				}
			}
			cancel()
			<-done
			select {
			case bt := <-out:
				t.Errorf("more lines: %v", bt.Lines)
			default:
			}
		})
	}
}

// compressFile gzips name to name.gz and removes name, as logrotate's
// compress does.
func compressFile(name string) error {
	data, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	f, err := os.Create(name + ".gz")
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(f)
	if _, err := zw.Write(data); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Remove(name)
}

// TestWorkersReopenOneByOne: after a rename, one worker of the server has
// reopened the log and writes to the new file while another still writes
// to the renamed one for a moment: no line of either is lost or repeated;
// the late lines come with the new file's identity and position, so that
// saving it changes nothing.
func TestWorkersReopenOneByOne(t *testing.T) {
	modes(t, func(t *testing.T, poll bool) {
		dir := t.TempDir()
		name := filepath.Join(dir, "access.log")
		appendFile(t, name, "a0\n")
		r := start(t, Options{Paths: []string{name}, FromStart: true, Poll: poll})
		r.waitLines(1)
		slow, err := os.OpenFile(name, os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer slow.Close()
		if err := os.Rename(name, name+".1"); err != nil {
			t.Fatal(err)
		}
		appendFile(t, name, "b0\nb1\n") // the first worker has reopened
		r.waitLog("following path=" + name + " inode=")
		for _, l := range []string{"a1\n", "a2\n"} { // the second has not yet
			if _, err := slow.WriteString(l); err != nil {
				t.Fatal(err)
			}
		}
		r.waitLines(5)
		r.stop()
		var texts []string
		newInode := inode(t, name)
		afterNew := false
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, l := range r.lines {
			texts = append(texts, l.Text)
			afterNew = afterNew || strings.HasPrefix(l.Text, "b")
			// Read after the new file's lines: a late line.
			if afterNew && strings.HasPrefix(l.Text, "a") && (l.Inode != newInode || l.Offset != int64(len("b0\nb1\n")) || l.Line.Line != 2) {
				t.Errorf("late line %+v: want the new file's inode %d, offset 6, line 2", l, newInode)
			}
		}
		slices.Sort(texts)
		if got, want := strings.Join(texts, " "), "a0 a1 a2 b0 b1"; got != want {
			t.Errorf("lines %q, want %q, each once", got, want)
		}
	})
}

// TestCatchUpAcrossRotations: positions saved, then while stopped the log
// is rotated three times (numbered, compressed at once and with
// delaycompress, or dateext in an olddir, or copytruncate), and, for a
// globbed log, rotated without a new file: every line after the saved
// position is read once, oldest file first.
func TestCatchUpAcrossRotations(t *testing.T) {
	type rot func(t *testing.T, name string, i int)
	rename := func(to func(name string, i int) string, compress func(t *testing.T, name string, i int)) rot {
		return func(t *testing.T, name string, i int) {
			if err := os.Rename(name, to(name, i)); err != nil {
				t.Fatal(err)
			}
			if compress != nil {
				compress(t, name, i)
			}
		}
	}
	numbered := func(name string, i int) string { return name + ".1" }
	shift := func(t *testing.T, name, ext string, i int) {
		for j := i; j >= 1; j-- {
			os.Rename(fmt.Sprintf("%s.%d%s", name, j, ext), fmt.Sprintf("%s.%d%s", name, j+1, ext))
		}
	}
	for _, tc := range []struct {
		name   string
		olddir string
		glob   bool // followed through a glob, and no new file after the last rotation
		rotate rot
	}{
		{name: "numbered", rotate: func(t *testing.T, name string, i int) {
			shift(t, name, "", i)
			rename(numbered, nil)(t, name, i)
		}},
		{name: "gz", rotate: func(t *testing.T, name string, i int) {
			shift(t, name, ".gz", i)
			rename(numbered, func(t *testing.T, name string, i int) {
				if err := compressFile(name + ".1"); err != nil {
					t.Fatal(err)
				}
			})(t, name, i)
		}},
		{name: "gz-delaycompress", rotate: func(t *testing.T, name string, i int) {
			shift(t, name, ".gz", i)
			if _, err := os.Stat(name + ".1"); err == nil {
				os.Rename(name+".1", name+".2")
				if err := compressFile(name + ".2"); err != nil {
					t.Fatal(err)
				}
			}
			rename(numbered, nil)(t, name, i)
		}},
		{name: "dateext-olddir", olddir: "archive", rotate: rename(func(name string, i int) string {
			return filepath.Join(filepath.Dir(name), "archive", fmt.Sprintf("%s-202611%02d", filepath.Base(name), 20+i))
		}, nil)},
		{name: "copytruncate", rotate: func(t *testing.T, name string, i int) {
			shift(t, name, "", i)
			if err := os.WriteFile(name+".1", readFile(t, name), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(name, 0); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "glob, no new file", glob: true, rotate: func(t *testing.T, name string, i int) {
			rename(func(name string, i int) string { return fmt.Sprintf("%s-202611%02d", name, 20+i) }, nil)(t, name, i)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if tc.olddir != "" {
				if err := os.Mkdir(filepath.Join(dir, tc.olddir), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			name := filepath.Join(dir, "access.log")
			n := 0
			write := func(k int) {
				var b strings.Builder
				for range k {
					n++
					fmt.Fprintf(&b, "n=%d\n", n)
				}
				appendFile(t, name, b.String())
			}
			write(10)
			pos := position(t, name, 4)
			for i := range 3 {
				write(5)
				tc.rotate(t, name, i)
				if !tc.glob || i < 2 {
					write(5)
				}
			}
			path := name
			if tc.glob {
				path = filepath.Join(dir, "*.log")
			}
			r := start(t, Options{Paths: []string{path}, Poll: true, OldDir: tc.olddir,
				Positions: map[string]state.Position{name: pos}})
			lines := r.waitLines(n - 4)
			r.stop()
			r.mu.Lock()
			if len(r.lines) != n-4 {
				t.Errorf("%d lines, want %d", len(r.lines), n-4)
			}
			r.mu.Unlock()
			for i, l := range lines {
				if want := fmt.Sprintf("n=%d", i+5); l.Text != want || l.Path != name {
					t.Fatalf("line %d: %q of %s, want %q", i, l.Text, l.Path, want)
				}
			}
		})
	}
}
