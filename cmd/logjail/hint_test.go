package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHostFirstHint: a host-first log (Apache's other_vhosts_access.log,
// nginx's "$host $remote_addr ...") under the example config, whose source
// reads combined, is rejected line by line, the host never charged; parse
// says why on each line, and the hint names the host-first presets, the one
// --format auto picks first: vhost_combined when the hosts carry a port,
// host_combined when they do not. With --format auto every line with a
// client is read.
func TestHostFirstHint(t *testing.T) {
	cfg := exampleConfig(t)
	const vhost = "../../testdata/logs/vhost_combined/input.log"
	code, out, stderr := run(t, "", "replay", "--config", cfg, vhost)
	const hint = "hint: 9 of 9 lines of " + vhost + " were rejected under format combined; of its first 9 lines, vhost_combined reads 8, host_combined reads 8: try --format vhost_combined (or --format auto)"
	if code != exitNegative || !strings.Contains(stderr, hint) || !strings.Contains(out, "9 read, 0 parsed, 9 rejected") {
		t.Errorf("replay of a vhost_combined log as combined: exit %d, want %d, 9 rejected and the hint %q:\n%s%s", code, exitNegative, hint, out, stderr)
	}
	code, out, stderr = run(t, "", "parse", "--config", cfg, vhost)
	const why = `remote_addr: "www.example.com:443" is a host name, not an address: the log puts the virtual host first; try format vhost_combined / host_combined or auto`
	if code != exitNegative || !strings.Contains(out+stderr, why) || !strings.Contains(stderr, hint) {
		t.Errorf("parse of a vhost_combined log as combined: exit %d, want %d with the reason %q and the hint:\n%s%s", code, exitNegative, why, out, stderr)
	}
	code, out, stderr = run(t, "", "replay", "--config", cfg, "--format", "auto", vhost)
	if !strings.Contains(out, "9 read, 8 parsed, 1 rejected") || !strings.Contains(out, "format vhost_combined") || strings.Contains(stderr, "hint:") {
		t.Errorf("replay --format auto of a vhost_combined log: exit %d, want 8 lines read as vhost_combined and no hint:\n%s%s", code, out, stderr)
	}

	nginx := filepath.Join(t.TempDir(), "access.log")
	lines := strings.Repeat(`www.example.com 203.0.113.5 - - [22/Nov/2026:07:09:34 +0100] "GET / HTTP/1.1" 200 612 "-" "curl/8.5.0"`+"\n", 3) +
		`example.org 2001:db8:5::7 - - [22/Nov/2026:07:09:35 +0100] "GET /.env HTTP/1.1" 404 153 "-" "Mozilla/5.0"` + "\n"
	if err := os.WriteFile(nginx, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = run(t, "", "replay", "--config", cfg, nginx)
	if want := "of its first 4 lines, host_combined reads 4, vhost_combined reads 4: try --format host_combined (or --format auto)"; code != exitNegative || !strings.Contains(stderr, want) {
		t.Errorf("replay of an nginx host-first log as combined: exit %d, want %d with %q:\n%s", code, exitNegative, want, stderr)
	}
}
