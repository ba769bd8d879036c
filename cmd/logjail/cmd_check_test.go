package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckWarnsAndRefuses: `logjail check` passes (exit 0) a configuration
// with metrics on every address and a public endpoint, and prints a warning
// for each on stderr, with how to silence it; silenced, it prints none; a
// deny of a whole address family is refused (exit 1).
func TestCheckWarnsAndRefuses(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const base = "sources: [{name: web, paths: [/var/log/nginx/access.log]}]\n"
	risky := write("risky.yaml", base+"metrics: 0.0.0.0:9390\nactions:\n  - {type: endpoint, listen: '0.0.0.0:7390', allow_remote: true}\n")
	code, out, stderr := run(t, "", "check", "--config", risky)
	if code != exitOK || !strings.Contains(out, "valid") {
		t.Fatalf("check: exit %d, want 0\n%s%s", code, out, stderr)
	}
	for _, want := range []string{
		"warning: " + risky + `:2: metrics: "0.0.0.0:9390" is not a loopback address`,
		"add metrics_remote to silence:",
		"warning: " + risky + `:4: actions[0].listen: "0.0.0.0:7390" is a public address`,
		"add endpoint_public to silence:",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	quiet := write("quiet.yaml", base+"metrics: 0.0.0.0:9390\nsilence: [metrics_remote, endpoint_public]\nactions:\n  - {type: endpoint, listen: '0.0.0.0:7390', allow_remote: true}\n")
	if code, out, stderr := run(t, "", "check", "--config", quiet); code != exitOK || strings.Contains(stderr, "warning") {
		t.Errorf("check of the silenced config: exit %d, stderr %q (want 0, no warning)\n%s", code, stderr, out)
	}
	deny := write("deny.yaml", base+"deny: [0.0.0.0/0]\n")
	code, _, stderr = run(t, "", "check", "--config", deny)
	if code != exitNegative || !strings.Contains(stderr, "deny[0]: 0.0.0.0/0: every IPv4 address") {
		t.Errorf("check of deny 0.0.0.0/0: exit %d, want 1; stderr:\n%s", code, stderr)
	}
}

// TestBannedRangeOfEveryAddressRefused: a `banned` range of a whole
// address family, inline or from a file, is refused by check (exit 1) and
// by the daemon's start-up (exit 2, a config that cannot be loaded), as a
// deny of it is.
func TestBannedRangeOfEveryAddressRefused(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const base = "sources: [{name: web, paths: [/var/log/nginx/access.log]}]\nstate_dir: %s\n"
	write("everything.txt", "# all of IPv6 by mistake\n::/0\n")
	for _, c := range []struct{ name, cidrs, want string }{
		{"inline", "[203.0.113.0/24, 0.0.0.0/0]", "ranges.bad.cidrs[1]: 0.0.0.0/0: every IPv4 address: a banned range of it bans every client"},
		{"file", `["file:everything.txt"]`, "everything.txt:2: ranges.bad.cidrs[0]: ::/0: every IPv6 address: a banned range of it bans every client"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := write(c.name+".yaml", strings.ReplaceAll(base, "%s", filepath.Join(dir, "state"))+
				"ranges:\n  bad:\n    cidrs: "+c.cidrs+"\n    limits: banned\n")
			if code, out, stderr := run(t, "", "check", "--config", cfg); code != exitNegative || !strings.Contains(stderr, c.want) {
				t.Errorf("check: exit %d, want 1 and %q\n%s%s", code, c.want, out, stderr)
			}
			if code, out, stderr := run(t, "", "run", "--config", cfg); code != exitUsage || !strings.Contains(stderr, c.want) {
				t.Errorf("run: exit %d, want 2 and %q\n%s%s", code, c.want, out, stderr)
			}
			if _, err := os.Stat(filepath.Join(dir, "state")); err == nil {
				t.Errorf("run made its state directory before refusing the configuration")
			}
		})
	}
}
