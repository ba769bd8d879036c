package main

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logjail/logjail/state"
	"github.com/logjail/logjail/store"
)

// opTestConfig is a configuration in dir whose socket no daemon serves.
func opTestConfig(t testing.TB, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "logjail.yaml")
	// No metrics listener: a test that runs the daemon on this config must
	// not depend on the default port (127.0.0.1:9390) being free.
	cfg := fmt.Sprintf(`state_dir: %[1]s/state
control_socket: %[1]s/control.sock
metrics: ""
sources:
  - name: web
    paths: [%[1]s/access.log]
    format: combined
rules:
  - name: flood
    limits: ["5 per 10s"]
    ban: {for: 1h}
`, dir)
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOperatorUsage: the arguments are checked before anything is
// opened: a usage error is exit 2 and writes nothing.
func TestOperatorUsage(t *testing.T) {
	dir := t.TempDir()
	cfg := opTestConfig(t, dir)
	tests := []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"ban without --for", []string{"ban", "203.0.113.7"}, "give --for"},
		{"ban bad duration", []string{"ban", "203.0.113.7", "--for", "soon"}, "--for soon"},
		{"ban zero duration", []string{"ban", "203.0.113.7", "--for", "0s"}, "more than 0"},
		{"ban negative duration", []string{"ban", "203.0.113.7", "--for", "-1h"}, "--for -1h"},
		{"ban bad address", []string{"ban", "300.1.1.1", "--for", "1h"}, "not an address or CIDR"},
		{"ban CIDR with host bits", []string{"ban", "10.1.2.3/8", "--for", "1h"}, "did you mean 10.0.0.0/8"},
		{"ban not a key", []string{"ban", "bob", "--for", "1h"}, "not an address, a CIDR or a key"},
		{"ban two keys", []string{"ban", "203.0.113.7", "203.0.113.8", "--for", "1h"}, "one address"},
		{"ban no key", []string{"ban", "--for", "1h"}, "one address"},
		{"unban --all with a key", []string{"unban", "--all", "203.0.113.7"}, "--all lifts every ban"},
		{"unban --all with --rule", []string{"unban", "--all", "--rule", "flood"}, "--all lifts every ban"},
		{"unban nothing", []string{"unban"}, "give an address"},
		{"unban bad CIDR", []string{"unban", "203.0.113.0/33"}, "not an address or CIDR"},
		{"list bad kind", []string{"list", "--kind", "jail"}, "--kind"},
		{"list bad sort", []string{"list", "--sort", "key"}, "--sort"},
		{"list bad key", []string{"list", "--key", "bob"}, "not an address"},
		{"list bad output", []string{"list", "--output", "yaml"}, "--output"},
		{"top bad by", []string{"top", "--by", "bytes"}, "--by"},
		{"top unknown rule", []string{"top", "--rule", "nope"}, "not in the configuration"},
		{"history no key", []string{"history"}, "one address"},
		{"history bad key", []string{"history", "1.2.3"}, "not an address or CIDR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, stderr := run(t, "", append(tt.args, "--config", cfg)...)
			if code != exitUsage || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q (stdout %q)", code, stderr, exitUsage, tt.want, out)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "state")); err == nil {
		t.Errorf("a usage error made the state directory")
	}
}

// TestOfflineBanKeyForms: with no daemon, each form of key is banned into
// the database and listed; an address lists the keys containing it.
func TestOfflineBanKeyForms(t *testing.T) {
	dir := t.TempDir()
	cfg := opTestConfig(t, dir)
	for _, k := range []string{"203.0.113.7", "198.51.100.0/24", "2001:db8::/64", "user:bob"} {
		if code, out, stderr := run(t, "", "ban", k, "--for", "1h", "--config", cfg); code != 0 || !strings.Contains(out, "applied when the daemon starts") {
			t.Fatalf("ban %s: exit %d: %s %s", k, code, out, stderr)
		}
	}
	code, out, _ := run(t, "", "list", "--key", "2001:db8::5", "--config", cfg)
	if code != 0 || !strings.HasPrefix(out, "2001:db8::/64\toperator\tban\t") {
		t.Errorf("list --key 2001:db8::5: exit %d:\n%s", code, out)
	}
	code, out, _ = run(t, "", "list", "--sort", "rule", "--config", cfg)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 4 {
		t.Errorf("list: exit %d:\n%s", code, out)
	}
	code, out, _ = run(t, "", "unban", "--rule", "operator", "--config", cfg)
	if code != 0 || strings.Count(out, "unbanned") != 4 {
		t.Errorf("unban --rule operator: exit %d:\n%s", code, out)
	}
	code, out, _ = run(t, "", "list", "--expired", "--config", cfg)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 4 || !strings.Contains(lines[0], "lifted by an operator") {
		t.Errorf("list --expired: exit %d:\n%s", code, out)
	}
	if code, _, _ := run(t, "", "unban", "203.0.113.7", "--config", cfg); code != exitNegative {
		t.Errorf("unban of nothing: exit %d, want 1", code)
	}
}

func TestFmtLeft(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 42 * time.Second: "42s", 330 * time.Second: "5m30s", time.Hour + 2*time.Minute + 3*time.Second: "1h2m",
		3*24*time.Hour + 4*time.Hour + 5*time.Minute: "3d4h", time.Hour + 5*time.Second: "1h", 59*time.Minute + 59*time.Second + 600*time.Millisecond: "1h",
	} {
		if got := fmtLeft(d); got != want {
			t.Errorf("fmtLeft(%v) = %q, want %q", d, got, want)
		}
	}
}

// BenchmarkList100k times `logjail list` (text, and JSON) on a database of
// 100,000 active bans, without a daemon: open, read, sort, format.
func BenchmarkList100k(b *testing.B) {
	dir := b.TempDir()
	cfg := opTestConfig(b, dir)
	db, err := store.Open(filepath.Join(dir, "state", "logjail.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	c := &state.Checkpoint{Time: now}
	for i := range 100_000 {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		c.SetBans = append(c.SetBans, state.Ban{Rule: "flood", Key: a.String(), Kind: state.PhaseBan, Since: now,
			Until: now.Add(time.Duration(i) * time.Second), Reason: "rate 31 per 10s > 30 (rule flood)", Origin: state.OriginDetector})
	}
	if err := db.Checkpoint(c); err != nil {
		b.Fatal(err)
	}
	db.Close()
	for _, output := range []string{"text", "json"} {
		b.Run(output, func(b *testing.B) {
			o := &listOptions{cfg: configFlag{path: cfg}, out: outputFlag{format: output}}
			s := streams{out: io.Discard, err: io.Discard}
			b.ReportAllocs()
			for b.Loop() {
				if err := runList(o, s, time.Now()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
