// The list-file actions: nginx, apache, haproxy and list. Each writes the
// whole set of blocked prefixes to one file that a server reads, checks the
// server's configuration, and reloads the server.
//
// What the operator should know:
//
//   - The file is rewritten whole from the set the action holds in memory,
//     sorted by prefix, atomically: a temporary file beside it (a dot file,
//     `.NAME.tmp-123`, which no `include *.conf` matches), fsync, rename over
//     the file, fsync of the directory. A server reading it sees the old list
//     or the new one, never half of one. It lists client addresses
//     (personal data): a new file is 0640, logjail's owner; a file there
//     keeps its owner and its mode without the others' bits (0644 becomes
//     0640, 0600 stays). `group: NAME` (or a gid) gives the files that
//     group, for a server that reads them as an unprivileged user; nginx,
//     Apache and HAProxy read their configuration as root and need none.
//     An unknown group is a config error. A symlink at the path is
//     replaced by a file: configure the real path. Its directory must exist.
//   - A write that changes nothing (the bytes on disk are the same) does
//     nothing: no check, no reload. A changed file is checked with `check`
//     (e.g. [nginx, -t]); when the check fails the previous file is put back
//     and the call fails, naming the file, the command and its output; the
//     manager retries later. Then `reload` runs (e.g. [nginx, -s, reload] or
//     [systemctl, reload, nginx]); a failed reload is retried at the next
//     call even when the file has not changed since. Commands run without a
//     shell, each bounded by `timeout`.
//   - The manager gathers changes for `settle` after the first one and
//     leaves `min_interval` between two writes, so a burst of a thousand bans
//     costs one write and one reload.
//   - The set lives in memory: the manager's Sync at start fills it (from the
//     store's active bans, whatever the file held), Apply changes it. An
//     Apply before the first Sync fails, and the manager's retry is a Sync.
//   - `logjail clean --flush` writes the list empty (its header alone) and
//     reloads: the file is not deleted, since the server's configuration
//     includes it and would no longer load without it.
//   - A blocked prefix may contain allowed prefixes (the allow list, the
//     host's addresses, trusted proxies). The nginx styles let them through
//     (deny: `allow` lines before the `deny` lines, nginx takes the first
//     rule that matches; geo: they map to 0, geo takes the longest prefix
//     that matches). Apache's `Require not ip` inside `<RequireAll>` cannot
//     say "except", so the apache file has no exemptions: an allowed address
//     is never banned alone, only a prefix ban containing it also blocks it.
//     HAProxy: `allow_file` writes the exemptions to a second ACL file, for
//     `http-request deny if banned !allowed`.
//
// The formats, and how a server uses them:
//
//	nginx, style deny (default): include inside http, server or location
//	    (a location that serves content: `return` runs before access checks)
//	        location / { include /etc/nginx/logjail-deny.conf; ... }
//	    the file:  allow 198.51.100.7;  deny 198.51.100.0/24;  deny 2001:db8::/64;
//	nginx, style geo: include at http level, test the variable where needed
//	        include /etc/nginx/logjail-geo.conf;
//	        server { if ($logjail_banned) { return 403; } ... }
//	    the file:  geo $remote_addr $logjail_banned { default 0; 198.51.100.0/24 1; 198.51.100.7 0; }
//	    Behind a proxy, set_real_ip_from and real_ip_header make
//	    $remote_addr the client's (the geo block reads it when used); or
//	    name another variable in `source`.
//	apache: inside a <RequireAll> beside a positive Require
//	        <Location />
//	          <RequireAll>
//	            Require all granted
//	            Include /etc/apache2/logjail.conf
//	          </RequireAll>
//	        </Location>
//	    the file:  Require not ip 198.51.100.0/24
//	haproxy: an ACL pattern file
//	        acl banned src -f /etc/haproxy/logjail.acl
//	        acl allowed src -f /etc/haproxy/logjail-allow.acl   (allow_file)
//	        http-request deny if banned !allowed
//	    the file:  198.51.100.0/24
//	list: one prefix per line, `#` comments; for anything else.
package actions

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The list-file styles: an nginx action has deny or geo, the others one
// each.
const (
	listNginxDeny = "nginx deny"
	listNginxGeo  = "nginx geo"
	listApache    = "apache"
	listHAProxy   = "haproxy"
	listPlain     = "list"
)

// Option defaults and bounds of the list-file actions.
const (
	listDefaultSettle      = 200 * time.Millisecond
	listDefaultMinInterval = 2 * time.Second
	listDefaultTimeout     = 30 * time.Second
	listOutputMax          = 500 // bytes of a failed command's output in its error
)

var listVariableRE = regexp.MustCompile(`^\$[a-z_][a-z0-9_]*$`)

var (
	_ Backend = (*listFile)(nil)
	_ Flusher = (*listFile)(nil)
	_ Pacer   = (*listFile)(nil)
)

// listFile is a list-file action: the entries it holds, and where and how
// it writes them.
type listFile struct {
	name      string
	style     string
	file      string
	allowFile string // haproxy: the exemptions' ACL file, or ""
	check     []string
	reload    []string
	settle    time.Duration
	interval  time.Duration
	timeout   time.Duration
	source    string // geo: the address variable read
	variable  string // geo: the variable set
	value     string // geo: its value for a blocked address

	entries       map[netip.Prefix]Entry
	allow         []netip.Prefix
	synced        bool // Sync ran: entries is the whole set
	reloadPending bool // a file changed since the last successful reload
	gid           int  // the files' group (`group`), or -1: the process's
}

// fileMode is the mode of the files that list client addresses (list
// files, block files): personal data, so not for every local user. The
// web server reads them through their group (the action's `group`), or as
// root (nginx, Apache and HAProxy read their configuration before they drop
// privileges).
const fileMode fs.FileMode = 0o640

// fileGroup reads the action's `group` option: a group name or a numeric
// id; -1 when absent.
func fileGroup(o *Options) int {
	name := o.String("group", "")
	if name == "" {
		return -1
	}
	if id, err := strconv.Atoi(name); err == nil && id >= 0 {
		return id
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		o.Errorf("group", "%q: %v", name, err)
		return -1
	}
	id, err := strconv.Atoi(g.Gid)
	if err != nil {
		o.Errorf("group", "%q: gid %q is not a number", name, g.Gid)
		return -1
	}
	return id
}

func buildListFile(o *Options, env Env) (Backend, error) {
	l := &listFile{
		name:     o.String("name", o.Type()),
		style:    o.Type(),
		file:     o.Path("file", ""),
		check:    o.Argv("check"),
		reload:   o.Argv("reload"),
		settle:   o.Duration("settle", listDefaultSettle, 0, 10*time.Second),
		interval: o.Duration("min_interval", listDefaultMinInterval, 0, 10*time.Minute),
		timeout:  o.Duration("timeout", listDefaultTimeout, time.Second, time.Minute),
		entries:  map[netip.Prefix]Entry{},
		gid:      fileGroup(o),
	}
	if o.Type() == "nginx" {
		l.style = "nginx " + o.OneOf("style", "deny", "deny", "geo")
	}
	if l.style == listNginxGeo {
		l.source = o.String("source", "$remote_addr")
		if !listVariableRE.MatchString(l.source) {
			o.Errorf("source", "%q: want an nginx variable such as $remote_addr", l.source)
		}
		l.variable = o.String("variable", "$logjail_banned")
		if !listVariableRE.MatchString(l.variable) {
			o.Errorf("variable", "%q: want an nginx variable name such as $logjail_banned ($, then a-z, 0-9 and _)", l.variable)
		}
		l.value = "1"
		if v, ok := o.get("value"); ok {
			if n, isInt := v.(int); isInt {
				l.value = strconv.Itoa(n)
			} else {
				l.value = o.String("value", "1")
			}
			if l.value == "0" || l.value == "" || strings.ContainsFunc(l.value, func(r rune) bool {
				return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.')
			}) {
				o.Errorf("value", "%q: want a word of letters, digits, _, - or . other than 0 (0 is the value of an address not blocked)", l.value)
			}
		}
	} else {
		for _, k := range []string{"source", "variable", "value"} {
			if o.Has(k) {
				o.Errorf(k, "is an option of style: geo (nginx) only")
			}
		}
	}
	if o.Type() == "haproxy" {
		if o.Has("allow_file") {
			l.allowFile = o.Path("allow_file", "")
			if l.allowFile != "" && l.allowFile == l.file {
				o.Errorf("allow_file", "is the same file as file")
			}
		}
	} else if o.Has("allow_file") {
		o.Errorf("allow_file", "is an option of haproxy actions only")
	}
	if err := o.Err(); err != nil {
		return nil, err
	}
	return l, nil
}

// Name is the action's name.
func (l *listFile) Name() string { return l.name }

// Pace asks the manager to gather changes for settle and to leave
// min_interval between two writes.
func (l *listFile) Pace() (settle, minInterval time.Duration) { return l.settle, l.interval }

// Sync makes the file list exactly entries, with allow's exemptions.
func (l *listFile) Sync(ctx context.Context, entries []Entry, allow []netip.Prefix) error {
	clear(l.entries)
	for _, e := range entries {
		l.entries[e.Prefix] = e
	}
	l.allow = slices.Clone(allow)
	l.synced = true
	return l.write(ctx, false)
}

// Apply makes the changes in the set held and writes the file once.
func (l *listFile) Apply(ctx context.Context, changes []Change) error {
	if !l.synced {
		// The file is written whole from the set held: without a Sync
		// first the changes alone would replace it.
		return fmt.Errorf("%s: changes before the first sync", l.file)
	}
	for _, c := range changes {
		if c.Delete {
			delete(l.entries, c.Prefix)
		} else {
			l.entries[c.Prefix] = c.Entry
		}
	}
	return l.write(ctx, false)
}

// Flush writes the list empty and reloads; the file stays, since the
// server's configuration includes it.
func (l *listFile) Flush(ctx context.Context) error {
	clear(l.entries)
	l.allow = nil
	l.synced = false
	return l.write(ctx, true)
}

// Close does nothing: the file stays as it is.
func (l *listFile) Close() error { return nil }

// listTarget is one file to write and what was there before.
type listTarget struct {
	path    string
	data    []byte
	old     []byte
	existed bool
	mode    fs.FileMode
}

// write writes the files whose bytes differ from what the set renders,
// checks, and reloads; a failed check puts the previous files back.
// existingOnly writes only files already there (Flush).
func (l *listFile) write(ctx context.Context, existingOnly bool) error {
	main, allowed := l.render()
	targets := []*listTarget{{path: l.file, data: main}}
	if l.allowFile != "" {
		targets = append(targets, &listTarget{path: l.allowFile, data: allowed})
	}
	var written []*listTarget
	for _, t := range targets {
		if err := t.read(); err != nil {
			l.restore(written)
			return err
		}
		if (t.existed && bytes.Equal(t.old, t.data)) || (existingOnly && !t.existed) {
			continue
		}
		// A file there keeps its mode but for the others' bits: 0600
		// stays, 0644 becomes 0640.
		if err := replaceFileAtomic(t.path, t.data, t.mode&^0o007, t.existed, l.gid); err != nil {
			l.restore(written)
			return err
		}
		written = append(written, t)
	}
	if len(written) > 0 {
		if l.check != nil {
			if out, err := listRun(ctx, l.check, l.timeout); err != nil {
				rerr := l.restore(written)
				return errors.Join(fmt.Errorf("%s: check %s failed, the previous file is back: %w%s", written[0].path, listArgv(l.check), err, out), rerr)
			}
		}
		l.reloadPending = true
	}
	if l.reloadPending && l.reload != nil {
		if out, err := listRun(ctx, l.reload, l.timeout); err != nil {
			return fmt.Errorf("%s: reload %s failed (retried at the next change): %w%s", l.file, listArgv(l.reload), err, out)
		}
	}
	l.reloadPending = false
	return nil
}

// read reads what is at t.path now.
func (t *listTarget) read() error {
	t.mode = fileMode
	fi, err := os.Stat(t.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file", t.path)
	}
	t.old, err = os.ReadFile(t.path)
	if err != nil {
		return err
	}
	t.existed, t.mode = true, fi.Mode().Perm()
	return nil
}

// restore puts back what was at the targets before they were written.
func (l *listFile) restore(written []*listTarget) error {
	var errs []error
	for _, t := range written {
		var err error
		if t.existed {
			err = replaceFileAtomic(t.path, t.old, t.mode, true, -1)
		} else if err = os.Remove(t.path); err == nil {
			err = fsyncDir(filepath.Dir(t.path))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: putting the previous file back: %w", t.path, err))
		}
	}
	return errors.Join(errs...)
}

// render formats the set held: the main file and, for haproxy, the
// exemptions' file.
func (l *listFile) render() (main, allowed []byte) {
	es := make([]Entry, 0, len(l.entries))
	for _, e := range l.entries {
		es = append(es, e)
	}
	SortEntries(es)
	var exempt []netip.Prefix
	if len(l.allow) > 0 {
		for _, e := range es {
			for _, a := range Exempt(e.Prefix, l.allow) {
				if _, blocked := l.entries[a]; !blocked {
					exempt = append(exempt, a)
				}
			}
		}
		slices.SortFunc(exempt, comparePrefix)
		exempt = slices.Compact(exempt)
	}
	var b bytes.Buffer
	b.Grow(64*len(es) + 512)
	head := func(b *bytes.Buffer, what, use string) {
		fmt.Fprintf(b, "# Generated by logjail (action %q), rewritten on every change: do not edit.\n", l.name)
		fmt.Fprintf(b, "# %s.\n", what)
		b.WriteString(use)
	}
	count := listPlural(len(es), "blocked prefix", "blocked prefixes")
	switch l.style {
	case listNginxDeny:
		head(&b, count+", "+listPlural(len(exempt), "allowed exemption", "allowed exemptions"),
			"# Include it in an http, server or location block; nginx takes the first allow or deny that matches.\n")
		for _, p := range exempt {
			fmt.Fprintf(&b, "allow %s;\n", PrefixString(p))
		}
		for _, e := range es {
			fmt.Fprintf(&b, "deny %s;\n", PrefixString(e.Prefix))
		}
	case listNginxGeo:
		head(&b, count+", "+listPlural(len(exempt), "allowed exemption", "allowed exemptions"),
			"# Include it at http level; geo takes the longest prefix that matches.\n")
		fmt.Fprintf(&b, "geo %s %s {\n    default 0;\n", l.source, l.variable)
		for _, e := range es {
			fmt.Fprintf(&b, "    %s %s;\n", PrefixString(e.Prefix), l.value)
		}
		for _, p := range exempt {
			fmt.Fprintf(&b, "    %s 0;\n", PrefixString(p))
		}
		b.WriteString("}\n")
	case listApache:
		head(&b, count, "# Include it inside <RequireAll> beside `Require all granted`.\n")
		for _, e := range es {
			fmt.Fprintf(&b, "Require not ip %s\n", PrefixString(e.Prefix))
		}
	case listHAProxy:
		head(&b, count, "# An ACL file: acl banned src -f FILE\n")
		for _, e := range es {
			b.WriteString(PrefixString(e.Prefix))
			b.WriteByte('\n')
		}
		if l.allowFile != "" {
			var a bytes.Buffer
			head(&a, listPlural(len(exempt), "allowed exemption", "allowed exemptions"),
				"# An ACL file of the allowed addresses inside blocked prefixes: acl allowed src -f FILE\n")
			for _, p := range exempt {
				a.WriteString(PrefixString(p))
				a.WriteByte('\n')
			}
			allowed = a.Bytes()
		}
	default:
		head(&b, count, "")
		for _, e := range es {
			b.WriteString(PrefixString(e.Prefix))
			b.WriteByte('\n')
		}
	}
	return b.Bytes(), allowed
}

func listPlural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// listArgv formats a command for an error.
func listArgv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = strconv.Quote(a)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// listRun runs argv without a shell, bounded by timeout; on failure it
// returns the head of its output, formatted for an error.
func listRun(ctx context.Context, argv []string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if err == nil {
		return "", nil
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (%w)", err, ctx.Err())
	}
	if len(out) > listOutputMax {
		out = append(out[:listOutputMax:listOutputMax], "…"...)
	}
	s := strings.TrimSpace(strings.ToValidUTF8(string(out), "?"))
	if s != "" {
		s = ": " + s
	}
	return s, err
}

// replaceFileAtomic replaces path with data: a temporary file in the same
// directory, fsync, rename, fsync of the directory. A reader sees the old
// file or the new one, never part of one. keepOwner gives the new file the
// owner of the one it replaces (when the process may).
func replaceFileAtomic(path string, data []byte, mode fs.FileMode, keepOwner bool, gid int) error {
	if err := writeFileRename(path, data, mode, keepOwner, gid); err != nil {
		return err
	}
	return fsyncDir(filepath.Dir(path))
}

// writeFileRename is replaceFileAtomic but for the fsync of the directory,
// for a caller that renames many files into one directory.
func writeFileRename(path string, data []byte, mode fs.FileMode, keepOwner bool, gid int) error {
	tmp, err := atomicTemp(path, data, mode, keepOwner, gid, true)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// atomicTemp writes data to a new temporary file beside path, to be
// renamed over it: `.NAME.tmp-123`, with mode (and path's owner when
// keepOwner and the process may), fsynced when fsync. gid >= 0 is the
// group the file is given (the action's `group`); failing to is an error.
func atomicTemp(path string, data []byte, mode fs.FileMode, keepOwner bool, gid int, fsync bool) (tmp string, err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	uid, ogid := -1, -1
	if keepOwner {
		if fi, err := os.Lstat(path); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && (int(st.Uid) != os.Geteuid() || int(st.Gid) != os.Getegid()) {
				uid, ogid = int(st.Uid), int(st.Gid)
			}
		}
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return "", err
	}
	tmp = f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return "", err
	}
	if err = f.Chmod(mode); err != nil {
		return "", err
	}
	if uid >= 0 {
		f.Chown(uid, ogid) // best effort: only root may give a file away
	}
	if gid >= 0 {
		if err = f.Chown(-1, gid); err != nil {
			return "", err
		}
	}
	if fsync {
		if err = f.Sync(); err != nil {
			return "", err
		}
	}
	if err = f.Close(); err != nil {
		return "", err
	}
	return tmp, nil
}

// fsyncDir makes a rename or removal in dir durable.
func fsyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
