// The blockfile action: one file per blocked prefix in a directory, in the
// style of Stonehenge, for a web server to test with a file lookup:
//
//	if (-f /run/logjail/blocked/$remote_addr) { return 403; }
//
// What the operator should know:
//
//   - A file is named by its prefix: a single address alone
//     (`198.51.100.7`, `2001:db8::1`), a prefix with its `/` written as `_`
//     (`198.51.100.0_24`, `2001:db8:1::_64`). A lookup of $remote_addr finds
//     single-address bans only: for prefix bans use an nginx list file
//     (style geo or deny) or the decision endpoint. Allowed addresses inside
//     a blocked prefix need nothing here: no file bears their name.
//
//   - The files name client addresses (personal data): a file is 0640;
//     the directory, when logjail makes it, is 0711, so that the web
//     server's user can test a name (`-f` needs only a stat, and search on
//     the directory) but no other user can list the names. `group: NAME`
//     (or a gid) gives the files, and a directory logjail makes (then
//     0750), that group: for a reader that opens the files, or lists the
//     directory. A directory already there is left as it is.
//
//   - A file holds one `key: value` a line, for people and scripts:
//
//     reason: 20 requests per 10s to /login
//     rule: login
//     key: 198.51.100.7
//     kind: ban
//     until: 2025-01-02T15:04:05Z
//     retry_after: 600
//
//     until is RFC 3339 in UTC, or `never` for a ban until lifted.
//     retry_after is the seconds left when the file was written (a throttle's
//     delay for a throttle; 0 with until: never): a file is not rewritten as
//     time passes, so a reader that needs it exact computes it from until.
//     Control characters in values are written as spaces.
//
//   - A file is written atomically (a temporary `.NAME.tmp-123` in the same
//     directory, fsync, rename): a reader sees the old file or the new one,
//     never a part. It is removed when the block ends. A call writing more
//     than a few files flushes them with one syncfs before the renames
//     rather than one fsync each. A tmpfs (/run) is the place for the
//     directory: nothing there needs to outlive a reboot, since logjail
//     writes every file again at start.
//
//   - Sync (at start, after a failure) reads the directory: it removes the
//     files named like a prefix that are not blocked (and temporary files a
//     crash left), writes the missing and rewrites the changed. Any other
//     file (a README, an operator's note) is left alone; a symlink or a
//     directory is never followed and never removed.
//
//   - `logjail clean --flush` removes the prefix files and leaves the
//     directory.
package actions

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"

	"golang.org/x/sys/unix"
)

var (
	_ Backend = (*blockfile)(nil)
	_ Flusher = (*blockfile)(nil)
)

// blockfile is a blockfile action.
type blockfile struct {
	name string
	dir  string
	now  func() time.Time
	gid  int // the files' group (`group`), or -1: the process's
}

func buildBlockfile(o *Options, env Env) (Backend, error) {
	b := &blockfile{name: o.String("name", o.Type()), dir: o.Path("dir", ""), now: env.Now, gid: fileGroup(o)}
	if b.now == nil {
		b.now = time.Now
	}
	if err := o.Err(); err != nil {
		return nil, err
	}
	return b, nil
}

// Name is the action's name.
func (b *blockfile) Name() string { return b.name }

// mkdir makes the directory when it is missing: 0750 and the action's
// group when it has one, else 0711, which lets the web server test a name
// (`-f`) but no one list the names (they are client addresses). A
// directory already there is left as it is.
func (b *blockfile) mkdir() error {
	if _, err := os.Stat(b.dir); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	mode := fs.FileMode(0o711)
	if b.gid >= 0 {
		mode = 0o750
	}
	if err := os.MkdirAll(b.dir, mode); err != nil {
		return err
	}
	if b.gid >= 0 {
		if err := os.Chown(b.dir, -1, b.gid); err != nil {
			return err
		}
	}
	return os.Chmod(b.dir, mode) // past the umask
}

// Close does nothing: the files stay.
func (b *blockfile) Close() error { return nil }

// blockName is the file name of a prefix.
func blockName(p netip.Prefix) string {
	return strings.Replace(PrefixString(p), "/", "_", 1)
}

// parseBlockName is the prefix a file name stands for: only names that
// blockName writes exactly (no other spelling of an address) are ours.
func parseBlockName(name string) (netip.Prefix, bool) {
	var p netip.Prefix
	if strings.Contains(name, "_") {
		var err error
		if p, err = netip.ParsePrefix(strings.Replace(name, "_", "/", 1)); err != nil {
			return p, false
		}
	} else {
		a, err := netip.ParseAddr(name)
		if err != nil || a.Zone() != "" {
			return p, false
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if p != p.Masked() || blockName(p) != name {
		return p, false
	}
	return p, true
}

// blockTempName reports whether name is a temporary file of ours that a
// crash left behind.
func blockTempName(name string) bool {
	rest, ok := strings.CutPrefix(name, ".")
	if !ok {
		return false
	}
	i := strings.LastIndex(rest, ".tmp-")
	if i < 0 {
		return false
	}
	_, ok = parseBlockName(rest[:i])
	return ok
}

// blockBody is what a file says of e, but for its last line, retry_after.
func blockBody(e *Entry) []byte {
	until := "never"
	if !e.Until.IsZero() {
		until = e.Until.UTC().Format(time.RFC3339)
	}
	var b bytes.Buffer
	for _, kv := range [...][2]string{
		{"reason", e.Reason}, {"rule", e.Rule}, {"key", e.Key}, {"kind", string(e.Kind)}, {"until", until},
	} {
		b.WriteString(kv[0])
		b.WriteString(": ")
		b.WriteString(strings.Map(blockClean, kv[1]))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func blockClean(r rune) rune {
	if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
		return ' '
	}
	return r
}

// blockContent is a file's whole content at now.
func blockContent(e *Entry, now time.Time) []byte {
	b := append(blockBody(e), "retry_after: "...)
	return append(strconv.AppendInt(b, int64(e.RetryAfter(now)), 10), '\n')
}

// blockCurrent reports whether old says what a file for e would say, but
// for retry_after, which changes as time passes.
func blockCurrent(old []byte, e *Entry) bool {
	rest, ok := bytes.CutPrefix(old, blockBody(e))
	if !ok {
		return false
	}
	n, ok := bytes.CutPrefix(rest, []byte("retry_after: "))
	n, _ = bytes.CutSuffix(n, []byte("\n"))
	_, err := strconv.ParseUint(string(n), 10, 32)
	return ok && err == nil
}

// blockSyncEach is the most files a call fsyncs one by one; a larger batch
// is written unsynced, flushed with one syncfs, then renamed into place.
const blockSyncEach = 16

// writeAll writes the files of es, without the fsync of the directory.
// Each file's data is on disk before its rename, so that a crash leaves
// the old file or the new one.
func (b *blockfile) writeAll(es []*Entry) []error {
	var errs []error
	now := b.now()
	if len(es) <= blockSyncEach {
		for _, e := range es {
			if err := writeFileRename(filepath.Join(b.dir, blockName(e.Prefix)), blockContent(e, now), fileMode, false, b.gid); err != nil {
				errs = append(errs, err)
			}
		}
		return errs
	}
	// One journal commit for the batch, not one per file: 10,000 fsyncs
	// take seconds on a disk.
	tmps := make([]string, len(es))
	for i, e := range es {
		tmp, err := atomicTemp(filepath.Join(b.dir, blockName(e.Prefix)), blockContent(e, now), fileMode, false, b.gid, false)
		if err != nil {
			errs = append(errs, err)
		}
		tmps[i] = tmp
	}
	if err := syncFS(b.dir); err != nil {
		for _, tmp := range tmps {
			if tmp != "" {
				os.Remove(tmp)
			}
		}
		return append(errs, err)
	}
	for i, tmp := range tmps {
		if tmp == "" {
			continue
		}
		if err := os.Rename(tmp, filepath.Join(b.dir, blockName(es[i].Prefix))); err != nil {
			os.Remove(tmp)
			errs = append(errs, err)
		}
	}
	return errs
}

// syncFS flushes the filesystem that holds dir (syncfs(2)).
func syncFS(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return fmt.Errorf("syncfs %s: %w", dir, err)
	}
	return nil
}

// remove removes p's file when it is a regular file.
func (b *blockfile) remove(p netip.Prefix) (bool, error) {
	path := filepath.Join(b.dir, blockName(p))
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !fi.Mode().IsRegular() {
		return false, nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	return true, nil
}

// ours lists the directory: the regular files named after a prefix, and
// the temporary files a crash left.
func (b *blockfile) ours() (files map[netip.Prefix]bool, temps []string, err error) {
	des, err := os.ReadDir(b.dir)
	if err != nil {
		return nil, nil, err
	}
	files = map[netip.Prefix]bool{}
	for _, de := range des {
		name := de.Name()
		if !de.Type().IsRegular() {
			continue
		}
		if p, ok := parseBlockName(name); ok {
			files[p] = true
		} else if blockTempName(name) {
			temps = append(temps, name)
		}
	}
	return files, temps, nil
}

// Sync makes the directory hold exactly one file per entry. allow needs
// nothing here: an allowed address never has a file of its own.
func (b *blockfile) Sync(ctx context.Context, entries []Entry, allow []netip.Prefix) error {
	if err := b.mkdir(); err != nil {
		return err
	}
	have, temps, err := b.ours()
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range temps {
		if err := os.Remove(filepath.Join(b.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	want := make(map[netip.Prefix]bool, len(entries))
	var writes []*Entry
	for i := range entries {
		e := &entries[i]
		want[e.Prefix] = true
		if have[e.Prefix] {
			old, err := blockRead(filepath.Join(b.dir, blockName(e.Prefix)))
			if err == nil && blockCurrent(old, e) {
				continue
			}
		}
		writes = append(writes, e)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	errs = append(errs, b.writeAll(writes)...)
	for p := range have {
		if !want[p] {
			if _, err := b.remove(p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := fsyncDir(b.dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// blockRead reads a file without following a symlink.
func blockRead(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	return io.ReadAll(io.LimitReader(f, 64<<10))
}

// Apply writes the files of the entries set and removes those of the
// entries deleted.
func (b *blockfile) Apply(ctx context.Context, changes []Change) error {
	if err := b.mkdir(); err != nil {
		return err
	}
	var errs []error
	var writes []*Entry
	for i := range changes {
		if err := ctx.Err(); err != nil {
			return err
		}
		c := &changes[i]
		if !c.Delete {
			writes = append(writes, &c.Entry)
		} else if _, err := b.remove(c.Prefix); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, b.writeAll(writes)...)
	if err := fsyncDir(b.dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Flush removes every prefix file (and temporary file) of the directory.
func (b *blockfile) Flush(ctx context.Context) error {
	have, temps, err := b.ours()
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for p := range have {
		if _, err := b.remove(p); err != nil {
			errs = append(errs, err)
		}
	}
	for _, name := range temps {
		if err := os.Remove(filepath.Join(b.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := fsyncDir(b.dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
