package actions

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/logjail/logjail/rules"
)

// runtimeDir is the unit's RuntimeDirectory=: writable without a line of
// its own.
const runtimeDir = "/run/logjail"

// SystemdDropIn returns the systemd drop-in that gives contrib/systemd's
// logjail.service exactly what cfg's actions need beyond its sandbox (no
// capabilities, a read-only file system but for /var/lib/logjail and
// /run/logjail): `logjail check --systemd` prints it, for
// /etc/systemd/system/logjail.service.d/actions.conf. Every line has a
// comment that says which action needs it and why. It assumes cfg is valid
// (Registry.Check).
func SystemdDropIn(cfg *rules.Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# /etc/systemd/system/logjail.service.d/actions.conf\n")
	fmt.Fprintf(&b, "# What the actions of %s need beyond logjail.service's sandbox,\n", cfg.File)
	fmt.Fprintf(&b, "# written by `logjail check --systemd`. After a change of actions:\n")
	fmt.Fprintf(&b, "#   logjail check --systemd > /etc/systemd/system/logjail.service.d/actions.conf\n")
	fmt.Fprintf(&b, "#   systemctl daemon-reload && systemctl restart logjail\n")
	b.WriteString("[Service]\n")
	var caps []string
	paths := map[string]bool{}
	line := func(comment, directive string) {
		fmt.Fprintf(&b, "# %s\n%s\n", comment, directive)
	}
	rw := func(who, why string, ps ...string) {
		var fresh []string
		for _, p := range ps {
			clean := strings.TrimPrefix(p, "-")
			if p == "" || paths[clean] || within(clean, runtimeDir) || within(clean, cfg.StateDir) {
				continue
			}
			paths[clean] = true
			fresh = append(fresh, p)
		}
		if len(fresh) > 0 {
			line(who+": "+why, "ReadWritePaths="+strings.Join(fresh, " "))
		}
	}
	needCaps := func(who, why string, cs ...string) {
		var fresh []string
		for _, c := range cs {
			if !slices.Contains(caps, c) {
				caps = append(caps, c)
				fresh = append(fresh, c)
			}
		}
		if len(fresh) > 0 {
			line(who+": "+why, "CapabilityBoundingSet="+strings.Join(fresh, " "))
		}
	}
	str := func(a rules.Action, k, def string) string {
		if s, ok := a.Options[k].(string); ok && s != "" {
			return s
		}
		return def
	}
	abs := func(p string) string {
		if p != "" && !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(cfg.File), p)
		}
		return filepath.Clean(p)
	}
	groups := 0
	for i, s := range cfg.Sources { // what the sources of package stream need
		who := fmt.Sprintf("sources[%d] (%s)", i, s.Type)
		switch s.Type {
		case rules.SourceJournald:
			if s.Stream.JournalDirectory == "" && len(s.Stream.JournalFiles) == 0 && groups == 0 {
				groups++
				line(who+": journalctl reads the whole system journal as a member of systemd-journal", "SupplementaryGroups=systemd-journal")
			}
		case rules.SourceSyslog:
			if sock, ok := strings.CutPrefix(s.Stream.Listen, "unix://"); ok {
				rw(who, "the socket is made (and an old one removed) in its directory", filepath.Dir(sock))
			}
		}
	}
	for i, a := range cfg.Actions {
		who := fmt.Sprintf("actions[%d] (%s)", i, a.Type)
		switch a.Type {
		case "iptables":
			needCaps(who, "changing netfilter rules takes CAP_NET_ADMIN; iptables-legacy also opens a raw socket (CAP_NET_RAW)", "CAP_NET_ADMIN", "CAP_NET_RAW")
			rw(who, "iptables --wait takes the xtables lock (the '-': it may not exist yet)", "-/run/xtables.lock")
		case "nftables":
			needCaps(who, "changing the nftables ruleset over netlink takes CAP_NET_ADMIN", "CAP_NET_ADMIN")
		case "crowdsec":
			if p := crowdsecPort(str(a, "listen", CrowdsecDefaultListen)); p > 0 && p < 1024 {
				needCaps(who, "the decisions API listens on a port below 1024", "CAP_NET_BIND_SERVICE")
			}
		case "blockfile":
			rw(who, "the block files are created and renamed in their directory, which must exist (or lie under /run/logjail)", abs(str(a, "dir", "")))
		case "nginx", "apache", "haproxy", "list":
			file := abs(str(a, "file", ""))
			rw(who, "the list file is replaced by a rename in its directory: give it a directory of its own", filepath.Dir(file))
			if af := str(a, "allow_file", ""); af != "" {
				rw(who, "the exemptions file, the same way", filepath.Dir(abs(af)))
			}
			for _, k := range []string{"check", "reload"} {
				argv, _ := a.Options[k].([]any)
				if len(argv) == 0 {
					continue
				}
				cmd, _ := argv[0].(string)
				switch filepath.Base(cmd) {
				case "nginx":
					if k == "check" {
						rw(who, "`nginx -t` opens nginx's logs and pid file for writing", "-/var/log/nginx", "-/run/nginx.pid")
					}
				case "apache2ctl", "apachectl":
					if k == "check" {
						rw(who, "`apache2ctl configtest` opens Apache's logs", "-/var/log/apache2", "-/run/apache2")
					}
				case "systemctl":
					line(who+": systemctl reaches systemd over D-Bus (AF_UNIX, allowed): nothing to add", "# (none)")
				}
			}
		case "exec":
			line(who+": logjail runs its commands inside this sandbox: add what they need (capabilities, ReadWritePaths=) here", "# (by hand)")
		}
	}
	if len(caps) == 0 && len(paths) == 0 && groups == 0 {
		b.WriteString("# The configured actions need nothing beyond the sandbox.\n")
	}
	return b.String()
}

// within reports whether path is dir or lies under it.
func within(path, dir string) bool {
	if dir == "" {
		return false
	}
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
