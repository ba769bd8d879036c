//go:build unix

// The exec action runs a command for each ban and, optionally, another for
// each lift:
//
//	actions:
//	  - type: exec
//	    ban: [/usr/local/bin/block, "{address}", --until, "{until}", --why, "{reason}"]
//	    unban: [/usr/local/bin/unblock, "{address}"]
//	    timeout: 10s
//
// What an operator should know:
//
//   - The command is an argv list run directly (exec, never a shell). Each
//     element may hold placeholders, replaced in place: {address} (the
//     blocked prefix, an address alone for a single address), {prefix}
//     (always CIDR), {family} (inet or inet6), {key}, {rule}, {reason},
//     {kind} (ban or throttle), {until} (RFC 3339, UTC; empty for a ban
//     until lifted) and {timeout} (whole seconds left; 0 for none). Any
//     other {word} is a configuration error; other braces are literal. A
//     key or a reason can hold any text (`; rm -rf /`, `$(x)`): it arrives
//     as (part of) one argument, verbatim, and no shell ever reads it.
//   - `ban` runs when a prefix is blocked and again when its entry changes
//     (a longer ban, another reason): the command must be idempotent. It
//     does not run again for an entry it already succeeded on. `unban` runs
//     when the prefix is lifted, with the entry it was banned with.
//   - A command that exits non-zero or outlives `timeout` (its process
//     group is killed) is an error naming the action, the command, its exit
//     status and the start of its stderr; Apply goes on with the other
//     changes and reports every failure, so that the manager retries.
//   - exec cannot ask the outside world what is blocked, so it keeps its own
//     record: state_dir/exec-NAME.json (NAME is the action's name), written
//     atomically after every Apply and Sync, lists the prefixes whose ban
//     command succeeded, with their entries. Sync compares the record with
//     what should be blocked: it runs unban for what is recorded and no
//     longer wanted, and ban for what is wanted and not recorded (or
//     recorded with another entry). Without a record (the first run, or
//     after it was deleted) ban runs for every blocked prefix.
//   - Flush (`logjail clean --flush`) runs unban for every recorded prefix
//     and removes the record.
package actions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// execStderrMax is how much of a failed command's stderr its error quotes.
const execStderrMax = 200

var (
	execPlaceholderRe = regexp.MustCompile(`\{([A-Za-z0-9_]+)\}`)
	execNameRe        = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$`)
)

// The placeholders of an argv template.
const (
	execAddress = iota
	execPrefix
	execFamily
	execKey
	execRule
	execReason
	execUntil
	execTimeout
	execKind
	execNumPlaceholders
)

// execPlaceholder returns the placeholder called name ({name} in a
// template); false for a name that is none.
func execPlaceholder(name string) (int, bool) {
	switch name {
	case "address":
		return execAddress, true
	case "prefix":
		return execPrefix, true
	case "family":
		return execFamily, true
	case "key":
		return execKey, true
	case "rule":
		return execRule, true
	case "reason":
		return execReason, true
	case "until":
		return execUntil, true
	case "timeout":
		return execTimeout, true
	case "kind":
		return execKind, true
	}
	return 0, false
}

// execPart is a piece of an argv element: literal text, or a placeholder
// (ph >= 0).
type execPart struct {
	lit string
	ph  int
}

// execTemplate is a parsed argv template: one list of parts per element.
type execTemplate [][]execPart

// parseExecTemplate parses argv, recording an error on the option key for
// each unknown placeholder.
func parseExecTemplate(o *Options, key string, argv []string) execTemplate {
	t := make(execTemplate, len(argv))
	for i, s := range argv {
		var parts []execPart
		last := 0
		for _, m := range execPlaceholderRe.FindAllStringSubmatchIndex(s, -1) {
			name := s[m[2]:m[3]]
			ph, ok := execPlaceholder(name)
			if !ok {
				o.Errorf(key, "{%s} in %q is no placeholder (there are {address}, {prefix}, {family}, {key}, {rule}, {reason}, {until}, {timeout}, {kind})", name, s)
				continue
			}
			if m[0] > last {
				parts = append(parts, execPart{lit: s[last:m[0]], ph: -1})
			}
			parts = append(parts, execPart{ph: ph})
			last = m[1]
		}
		if last < len(s) || len(parts) == 0 {
			parts = append(parts, execPart{lit: s[last:], ph: -1})
		}
		t[i] = parts
	}
	if len(t) > 0 && slices.ContainsFunc(t[0], func(p execPart) bool { return p.ph >= 0 }) {
		o.Errorf(key, "%q: the command itself cannot hold a placeholder", argv[0])
	}
	return t
}

// argv fills the template in.
func (t execTemplate) argv(vals *[execNumPlaceholders]string) []string {
	out := make([]string, len(t))
	for i, parts := range t {
		if len(parts) == 1 {
			if parts[0].ph < 0 {
				out[i] = parts[0].lit
			} else {
				out[i] = vals[parts[0].ph]
			}
			continue
		}
		var sb strings.Builder
		for _, p := range parts {
			if p.ph < 0 {
				sb.WriteString(p.lit)
			} else {
				sb.WriteString(vals[p.ph])
			}
		}
		out[i] = sb.String()
	}
	return out
}

// execValues are the placeholders' values for an entry at now.
func execValues(e *Entry, now time.Time) *[execNumPlaceholders]string {
	var v [execNumPlaceholders]string
	v[execAddress] = PrefixString(e.Prefix)
	v[execPrefix] = e.Prefix.String()
	v[execFamily] = "inet6"
	if e.Prefix.Addr().Is4() {
		v[execFamily] = "inet"
	}
	v[execKey] = e.Key
	v[execRule] = e.Rule
	v[execReason] = e.Reason
	if !e.Until.IsZero() {
		v[execUntil] = e.Until.UTC().Format(time.RFC3339)
	}
	v[execTimeout] = strconv.Itoa(int(e.Timeout(now, 0) / time.Second))
	v[execKind] = string(e.Kind)
	return &v
}

// Exec is the exec action; see the top of exec.go.
type Exec struct {
	name    string
	ban     execTemplate
	unban   execTemplate // nil: none
	timeout time.Duration
	record  string // the record file; "" when there is no state_dir
	now     func() time.Time

	loaded bool
	done   map[netip.Prefix]Entry // the prefixes whose ban command succeeded
}

var (
	_ Backend = (*Exec)(nil)
	_ Flusher = (*Exec)(nil)
)

func buildExec(o *Options, env Env) (Backend, error) {
	b := &Exec{
		name:    o.String("name", "exec"),
		timeout: o.Duration("timeout", 10*time.Second, time.Second, 5*time.Minute),
		now:     env.Now,
		done:    map[netip.Prefix]Entry{},
	}
	if b.now == nil {
		b.now = time.Now
	}
	if !execNameRe.MatchString(b.name) {
		o.Errorf("name", "%q: the exec action's name names its record file: want letters, digits, _, - and . (not first), at most 64", b.name)
	}
	if argv := o.Argv("ban"); argv != nil {
		b.ban = parseExecTemplate(o, "ban", argv)
	} else if !o.hasErr("ban") {
		o.Errorf("ban", "is required: the command that blocks an address, e.g. [/usr/local/bin/block, \"{address}\"]")
	}
	if argv := o.Argv("unban"); argv != nil {
		b.unban = parseExecTemplate(o, "unban", argv)
	}
	if env.StateDir != "" {
		b.record = filepath.Join(env.StateDir, "exec-"+b.name+".json")
	}
	return b, o.Err()
}

// Name is the action's name.
func (b *Exec) Name() string { return b.name }

// Sync runs unban for the recorded prefixes no longer wanted and ban for the
// wanted ones not recorded, or recorded with another entry. allow is not
// used: the manager never blocks an allowed prefix, and a command cannot be
// told about exemptions.
func (b *Exec) Sync(ctx context.Context, entries []Entry, _ []netip.Prefix) error {
	if err := b.load(); err != nil {
		return err
	}
	want := make(map[netip.Prefix]Entry, len(entries))
	for _, e := range entries {
		want[e.Prefix] = e
	}
	var changes []Change
	for _, e := range b.recorded() {
		if _, ok := want[e.Prefix]; !ok {
			changes = append(changes, Change{Entry: e, Delete: true})
		}
	}
	entries = slices.Clone(entries)
	SortEntries(entries)
	for _, e := range entries {
		changes = append(changes, Change{Entry: e})
	}
	return b.run(ctx, changes)
}

// Apply runs the commands for the changes, in order.
func (b *Exec) Apply(ctx context.Context, changes []Change) error {
	if err := b.load(); err != nil {
		return err
	}
	return b.run(ctx, changes)
}

// Flush runs unban for every recorded prefix and removes the record.
func (b *Exec) Flush(ctx context.Context) error {
	if err := b.load(); err != nil {
		return err
	}
	var changes []Change
	for _, e := range b.recorded() {
		changes = append(changes, Change{Entry: e, Delete: true})
	}
	if err := b.run(ctx, changes); err != nil {
		return err
	}
	if b.record != "" {
		if err := os.Remove(b.record); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return b.errorf("%w", err)
		}
	}
	return nil
}

// Close does nothing: the record is written after every call.
func (b *Exec) Close() error { return nil }

func (b *Exec) errorf(format string, a ...any) error {
	return fmt.Errorf("exec action %q: "+format, append([]any{b.name}, a...)...)
}

// run runs the changes' commands, goes on past failures and returns them
// all; the record is written afterwards.
func (b *Exec) run(ctx context.Context, changes []Change) error {
	var errs []error
	changed := false
	for _, c := range changes {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		if c.Delete {
			old, ok := b.done[c.Prefix]
			if !ok {
				continue // never banned, or lifted already
			}
			if b.unban != nil {
				if err := b.exec(ctx, "unban", b.unban, &old); err != nil {
					errs = append(errs, err)
					continue
				}
			}
			delete(b.done, c.Prefix)
			changed = true
			continue
		}
		if old, ok := b.done[c.Prefix]; ok && execSame(&old, &c.Entry) {
			continue // applied already (a retry)
		}
		if err := b.exec(ctx, "ban", b.ban, &c.Entry); err != nil {
			errs = append(errs, err)
			continue
		}
		b.done[c.Prefix] = c.Entry
		changed = true
	}
	if changed {
		if err := b.save(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// execSame reports whether the ban command would say the same of two
// entries (their time left aside).
func execSame(a, b *Entry) bool {
	return a.Until.Equal(b.Until) && a.Kind == b.Kind && a.Key == b.Key && a.Rule == b.Rule && a.Reason == b.Reason
}

// exec runs one command of the template for e.
func (b *Exec) exec(ctx context.Context, what string, t execTemplate, e *Entry) error {
	argv := t.argv(execValues(e, b.now()))
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// The whole process group: a script's children too.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = time.Second
	var stderr execHead
	cmd.Stderr = &stderr
	err := cmd.Run()
	if err == nil {
		return nil
	}
	msg := err.Error()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		msg = fmt.Sprintf("killed after the timeout of %s", b.timeout)
	}
	if s := strings.TrimSpace(string(stderr.b)); s != "" {
		msg += ": " + strconv.Quote(s)
	}
	return b.errorf("%s %s: %s: %s", what, PrefixString(e.Prefix), argv[0], msg)
}

// execHead keeps the first execStderrMax bytes written to it.
type execHead struct{ b []byte }

func (h *execHead) Write(p []byte) (int, error) {
	if n := execStderrMax - len(h.b); n > 0 {
		h.b = append(h.b, p[:min(n, len(p))]...)
	}
	return len(p), nil
}

// execRecord is the record file.
type execRecord struct {
	Version int               `json:"version"`
	Entries []execRecordEntry `json:"entries"`
}

type execRecordEntry struct {
	Prefix string    `json:"prefix"`
	Kind   Kind      `json:"kind"`
	Until  time.Time `json:"until,omitzero"`
	Rule   string    `json:"rule,omitempty"`
	Key    string    `json:"key,omitempty"`
	Reason string    `json:"reason,omitempty"`
}

// load reads the record once; none is an empty record.
func (b *Exec) load() error {
	if b.loaded {
		return nil
	}
	if b.record == "" {
		return b.errorf("no state_dir to keep the record of what it banned in")
	}
	data, err := os.ReadFile(b.record)
	if errors.Is(err, fs.ErrNotExist) {
		b.loaded = true
		return nil
	}
	if err != nil {
		return b.errorf("%w", err)
	}
	var r execRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return b.errorf("%s: %v (delete it to run ban for every blocked address again)", b.record, err)
	}
	for _, re := range r.Entries {
		p, err := netip.ParsePrefix(re.Prefix)
		if err != nil {
			return b.errorf("%s: %q: %v", b.record, re.Prefix, err)
		}
		b.done[p] = Entry{Prefix: p, Kind: re.Kind, Until: re.Until, Rule: re.Rule, Key: re.Key, Reason: re.Reason}
	}
	b.loaded = true
	return nil
}

// recorded is the record's entries, sorted.
func (b *Exec) recorded() []Entry {
	es := make([]Entry, 0, len(b.done))
	for _, e := range b.done {
		es = append(es, e)
	}
	SortEntries(es)
	return es
}

// save writes the record atomically: a temporary file in the same
// directory, synced, renamed over the record, and the directory synced.
func (b *Exec) save() error {
	es := b.recorded()
	r := execRecord{Version: 1, Entries: make([]execRecordEntry, len(es))}
	for i, e := range es {
		r.Entries[i] = execRecordEntry{Prefix: e.Prefix.String(), Kind: e.Kind, Until: e.Until, Rule: e.Rule, Key: e.Key, Reason: e.Reason}
		if !e.Until.IsZero() {
			r.Entries[i].Until = e.Until.UTC()
		}
	}
	data, err := json.MarshalIndent(r, "", "\t")
	if err != nil {
		return b.errorf("record: %w", err)
	}
	data = append(data, '\n')
	// The record is logjail's: owner only (the same mode CreateTemp gave it).
	if err := replaceFileAtomic(b.record, data, 0o600, false, -1); err != nil {
		return b.errorf("record: %w", err)
	}
	return nil
}
