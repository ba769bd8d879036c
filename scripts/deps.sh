#!/usr/bin/env bash
# Installs what the tests (TestBenchSmoke runs the benchmarks too) need on
# a Debian machine, and nothing that is already there. Run as root to install
# (CI does); as another user it only says what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
need() { # need COMMAND DEBIAN-PACKAGE
  # /usr/sbin and /sbin too: a normal user's PATH on Debian lacks them, and
  # the tests look there (internal/testenv.LookPath).
  command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/sbin/$1" ] || missing+=("$2")
}
need python3 python3          # runs ../shared/tools/genlog.py in the detection tests
need git git                  # scripts/newcomer.sh (TestNewcomer) clones the repository
need make make                # ... and runs the README's first command, make try
need sqlite3 sqlite3          # the store tests read the database with it, as an operator would
need gcc gcc                  # cgo, for github.com/mattn/go-sqlite3
need unshare util-linux       # the firewall tests run in network namespaces of their own
need ip iproute2              # ... joined by veth pairs
need iptables iptables        # the iptables action's tests (iptables and ip6tables)
need ipset ipset              # mode: ipset
need nft nftables             # the nftables action's tests
need nginx nginx-light        # the nginx list and decision endpoint tests run a real nginx
need caddy caddy              # ... and a real Caddy (forward_auth)
need haproxy haproxy          # the HAProxy list file is checked by a real haproxy
need setpriv util-linux       # the permission tests run commands as nobody
need systemd-analyze systemd  # the unit and drop-in tests verify them with systemd-analyze
need systemd-sysusers systemd # ... and apply logjail.sysusers to an empty root
need bzip2 bzip2              # the rotation tests write logrotate's bz2 archives
need logrotate logrotate      # the rotation matrix runs the real logrotate
need xz xz-utils              # ... compressing with xz
need zstd zstd                # ... and zstd
need dnsmasq dnsmasq-base      # the good bots' reverse DNS tests run a real DNS server
need redis-server redis-server  # the fleet tests run a real Redis
need chromium chromium        # the HTML report is checked in a real headless browser
[ -x /lib/systemd/systemd-journal-remote ] || [ -x /usr/lib/systemd/systemd-journal-remote ] || missing+=(systemd-journal-remote) # the journald source's tests write real journal files with it
need crowdsec-firewall-bouncer crowdsec-firewall-bouncer  # the crowdsec action's tests run the real bouncers (in a network namespace)
need crowdsec-custom-bouncer crowdsec-custom-bouncer      # ... and the custom bouncer, each with its own config file
# The benchmarks (make bench), which TestBenchSmoke runs at a small size;
# LOGJAIL_BENCH=1, which older scripts passed for them, changes nothing.
need fail2ban-regex fail2ban  # the baseline of scripts/bench.sh and bench-table.sh
[ -x /usr/bin/time ] || missing+=(time)
need wrk wrk                  # scripts/bench-endpoint.sh
need curl curl                # ... reads the daemon's metrics with it

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "deps: missing Debian packages: ${missing[*]} (run as root to install them)" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  # The bouncers' packages start their services on install, and the
  # firewall bouncer would make its table in this machine's firewall: no
  # service starts during the install (policy-rc.d, which
  # deb-systemd-invoke obeys), and theirs are disabled after it. The tests
  # run the bouncers themselves, with their own config files.
  policy=/usr/sbin/policy-rc.d
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    trap 'rm -f "$policy"' EXIT
  fi
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  if command -v systemctl >/dev/null 2>&1; then
    for unit in crowdsec-firewall-bouncer crowdsec-custom-bouncer; do
      systemctl disable --now "$unit.service" >/dev/null 2>&1 || true
    done
  fi
fi

command -v go >/dev/null || { echo "deps: Go is not on PATH (want Go 1.26 or newer)" >&2; exit 1; }
go mod download
