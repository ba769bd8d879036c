#!/usr/bin/env bash
# Memory per key: peak RSS of `logjail replay` and of `logjail run`
# following a log, for KEYS distinct keys (default 100000 and 1000000)
# under three rules (testdata/genlog.yaml's: a CPU share, a rate with the
# throttle ladder, a rate of 4xx), then BenchmarkMemory (the detector's
# heap per key, after a GC).
#
# The log: KEYS clients, one per /64 of 2001:db8::/32, each seen twice, 10 s
# apart, 1000 new keys a second, every line a 404 with CPU, so that every
# key is charged under all three rules (3 states a key); max_keys is
# 3 x KEYS, so that nothing is evicted, unless MAX_KEYS says otherwise
# (MAX_KEYS=1000000, the default max_keys: a flood of new keys at the
# cap, evicting). B/key is per client key. KIND=ip (default) keys each client
# by its address (ipv6_prefix: 128); KIND=p64 by its /64 (the default
# ipv6_prefix, which also remembers the addresses seen); KIND=ua gives each
# client its own 7.5 KB user agent and keys the three rules by it
# (`key: user_agent`: logjail keeps at most 512 bytes of it).
#
# Live: the daemon follows the log (from: start, times ending now) until
# it has checkpointed its end, then stops on SIGTERM; its peak RSS is
# VmHWM. Peak RSS is the process's, the Go runtime and SQLite included.
#
# Usage: scripts/bench-memory.sh [KEYS...]
# Environment: LOGJAIL=path to a built binary (default: build this tree),
# KIND=ip|p64|ua, RUNS=replay runs per size (default 1), NOBENCH=1 skips the
# Go benchmark, STARVE=1 runs two busy loops beside the daemon (not the
# replay) while it reads, so that it lacks CPU on a 2-core machine (they are
# killed, by PID, before its peak is read), DAEMON_LOG=file keeps the
# daemon's stderr (with GODEBUG=gctrace=1: its heap at every collection).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-lib.sh
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(100000 1000000)
kind=${KIND:-ip}
runs=${RUNS:-1}
work=$(mktemp -d /tmp/logjail-memory.XXXXXX)
daemon=
busy=()
unbusy() {
  for p in "${busy[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  busy=()
}
cleanup() {
  unbusy
  if [ -n "$daemon" ]; then kill "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
bin=${LOGJAIL:-}
if [ -z "$bin" ]; then
  LOGJAIL_BIN= bench_build "$work/logjail"
  bin=$work/logjail
fi
prefix=128
[ "$kind" = p64 ] && prefix=64

for n in "${sizes[@]}"; do
  log=$work/keys-$n.log
  python3 - "$n" "$log" "$kind" <<'PY'
import sys, time
n, path, kind = int(sys.argv[1]), sys.argv[2], sys.argv[3]
pad = "x" * 7500
secs = (n + 999) // 1000
start = int(time.time()) - secs - 12   # the last line a little before now
with open(path, "w") as f:
    w = f.write
    for s in range(secs + 10):
        t = time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(start + s))
        for first in (s - 10, s):          # seen again, then new
            if first < 0 or first >= secs:
                continue
            for i in range(first * 1000, min(n, (first + 1) * 1000)):
                ua = f"bench-{i}-{pad}" if kind == "ua" else "bench"
                w(f'2001:db8:{i >> 16:x}:{i & 0xffff:x}::1 - - [{t}] "GET /x HTTP/1.1" 404 12 "-" "{ua}" rt=0.010 cpu=0.010\n')
PY
  mkdir -p "$work/state-$n"
  cfg=$work/logjail-$n.yaml
  sed -e "s|^state_dir:.*|state_dir: $work/state-$n\nipv6_prefix: $prefix\nmax_keys: ${MAX_KEYS:-$((3 * n))}\ncontrol_socket: $work/control-$n.sock|" \
      -e "s|paths: \[/var/log/nginx/access.log\]|paths: [$log]\n    from: start|" testdata/genlog.yaml > "$cfg"
  if [ "$kind" = ua ]; then sed -i '/^rules:/,$ s|^  - name: .*|&\n    key: user_agent|' "$cfg"; fi

  for _ in $(seq "$runs"); do
    /usr/bin/time -f "%M %e" -o "$work/time" "$bin" replay --config "$cfg" --source web "$log" >/dev/null
    read -r kb secs < "$work/time"
    echo "replay $n keys ($kind): peak RSS $((kb / 1024)) MB, $((kb * 1024 / n)) B/key, ${secs} s"
  done

  size=$(stat -c %s "$log")
  "$bin" run --config "$cfg" >"$work/daemon-$n.log" 2>&1 &
  daemon=$!
  if [ -n "${STARVE:-}" ]; then
    for _ in 1 2; do (while :; do :; done) & busy+=($!); done
  fi
  deadline=$((SECONDS + 600))
  until "$bin" status --config "$cfg" --output json 2>/dev/null |
        python3 -c 'import json,sys; s=json.load(sys.stdin); f=[f for src in s["sources"] for f in src["files"]]; sys.exit(0 if f and f[0]["offset"]>='"$size"' and s["database"]["checkpoint"] else 1)' 2>/dev/null; do
    if ! kill -0 "$daemon" 2>/dev/null; then echo "bench-memory: the daemon died:" >&2; cat "$work/daemon-$n.log" >&2; exit 1; fi
    [ $SECONDS -lt $deadline ] || { echo "bench-memory: the daemon did not read the log in 600 s" >&2; exit 1; }
    sleep 1
  done
  line=$("$bin" status --config "$cfg" | grep '^keys:' || true)
  unbusy
  hwm=$(awk '/VmHWM/ {print $2}' "/proc/$daemon/status")
  kill -TERM "$daemon"; wait "$daemon" || true; daemon=
  [ -z "${DAEMON_LOG:-}" ] || cp "$work/daemon-$n.log" "$DAEMON_LOG"
  starved=
  [ -z "${STARVE:-}" ] || starved=", starved"
  echo "run    $n keys ($kind$starved): peak RSS $((hwm / 1024)) MB, $((hwm * 1024 / n)) B/key; status: ${line#keys: }"
  rm -rf "$work/state-$n" "$log"
done

[ -n "${NOBENCH:-}" ] || go test -run '^$' -bench 'BenchmarkMemory' -benchtime 1x ./detector/
