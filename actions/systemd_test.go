package actions

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logjail/logjail/rules"

	"github.com/logjail/logjail/internal/testenv"
)

const systemdConfig = `state_dir: /var/lib/logjail
sources:
  - name: web
    paths: [/var/log/nginx/access.log]
  - name: journal
    type: journald
    match: [_SYSTEMD_UNIT=nginx.service]
  - name: sock
    type: syslog
    listen: unix:///run/nginx-syslog/logjail.sock
  - name: udp
    type: syslog
actions:
  - type: blockfile
    dir: /run/logjail/blocked
  - type: blockfile
    name: elsewhere
    dir: /srv/www/blocked
  - type: nginx
    file: /etc/nginx/logjail/deny.conf
    check: [nginx, -t, -q]
    reload: [nginx, -s, reload]
  - type: nginx
    name: geo
    style: geo
    file: /etc/nginx/logjail/geo.conf
    check: [nginx, -t, -q]
    reload: [systemctl, reload, nginx]
  - type: iptables
    mode: ipset
  - type: nftables
  - type: exec
    ban: [/usr/local/bin/notify, "{address}"]
`

// TestSystemdDropIn: the drop-in names what each action needs, once, with
// a comment above every directive, and systemd accepts it on top of the
// shipped unit.
func TestSystemdDropIn(t *testing.T) {
	cfg, err := rules.Parse("/etc/logjail/logjail.yaml", []byte(systemdConfig), rules.Options{HostAddrs: []netip.Addr{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := Builtin(nil).Check(cfg); err != nil {
		t.Fatal(err)
	}
	d := SystemdDropIn(cfg)
	for _, want := range []string{
		"CapabilityBoundingSet=CAP_NET_ADMIN CAP_NET_RAW\n",
		"ReadWritePaths=-/run/xtables.lock\n",
		"ReadWritePaths=/srv/www/blocked\n",
		"ReadWritePaths=/etc/nginx/logjail\n",
		"ReadWritePaths=-/var/log/nginx -/run/nginx.pid\n",
		"actions[6] (exec): logjail runs its commands inside this sandbox",
		"# sources[1] (journald): journalctl reads the whole system journal as a member of systemd-journal\nSupplementaryGroups=systemd-journal\n",
		"ReadWritePaths=/run/nginx-syslog\n",
	} {
		if !strings.Contains(d, want) {
			t.Errorf("the drop-in lacks %q:\n%s", want, d)
		}
	}
	for _, once := range []string{"/etc/nginx/logjail\n", "CapabilityBoundingSet="} {
		if n := strings.Count(d, once); n != 1 {
			t.Errorf("%q appears %d times:\n%s", once, n, d)
		}
	}
	if strings.Contains(d, "/run/logjail/blocked") {
		t.Errorf("the drop-in opens the unit's own runtime directory:\n%s", d)
	}
	lines := strings.Split(d, "\n")
	for i, l := range lines {
		if l != "" && !strings.HasPrefix(l, "#") && !strings.HasPrefix(l, "[") && (i == 0 || !strings.HasPrefix(lines[i-1], "#")) {
			t.Errorf("line %d %q has no comment above it", i+1, l)
		}
	}

	analyze := testenv.Need(t, "systemd-analyze")[0]
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	unit, err := os.ReadFile(filepath.Join("..", "contrib", "systemd", "logjail.service"))
	if err != nil {
		t.Fatal(err)
	}
	// A drop-in's [Service] section adds to the unit's: verify the two as
	// one file.
	text := strings.ReplaceAll(string(unit), "/usr/local/bin/logjail", self) + "\n" + d
	p := filepath.Join(t.TempDir(), "logjail.service")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", "--man=no", "--recursive-errors=no", p).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
