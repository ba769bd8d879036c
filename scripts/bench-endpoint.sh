#!/usr/bin/env bash
# The decision endpoint under load: logjail pinned to core 0 with 1,000,000
# tracked keys and 100,000 active bans, wrk pinned to core 1 asking /auth
# for a rotating set of clients (half banned); then the same while the
# daemon ingests LINES_PER_S log lines a second (default 50,000), ROUNDS
# times (default 1), idle and under ingest alternately, in one daemon.
# Each round ends with machine-readable lines (scripts/bench-table.sh
# reads them):
#   figure round=N idle_p50_ms=X idle_p99_ms=X ingest_p50_ms=X ingest_p99_ms=X lines_per_s=X
# Usage: scripts/bench-endpoint.sh [SECONDS]
# LOGJAIL_BIN=path runs that binary instead of one built from this tree
# (to compare two builds alternately on a noisy host). KEYS=n seeds n keys
# (a tenth of them banned) instead of 1,000,000. ENDPOINT_WORK=dir works
# in dir (which must be empty) and leaves it, its database (KEYS keys,
# KEYS/10 bans) and config (logjail.yaml) included, for another
# measurement.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-lib.sh
secs=${1:-20}
rate=${LINES_PER_S:-50000}
keys=${KEYS:-1000000}
rounds=${ROUNDS:-1}
command -v wrk >/dev/null || { echo "bench-endpoint: wrk is not installed (apt-get install wrk)" >&2; exit 2; }
command -v taskset >/dev/null || { echo "bench-endpoint: taskset (util-linux) is not installed" >&2; exit 2; }
if [ -n "${ENDPOINT_WORK:-}" ]; then
  work=$ENDPOINT_WORK
  mkdir -p "$work"
  trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true' EXIT
else
  work=$(mktemp -d /tmp/logjail-endpoint.XXXXXX)
  trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
fi
bench_build "$work/logjail"
{ read -r port; read -r mport; } < <(bench_port 2)

cat > "$work/logjail.yaml" <<YAML
state_dir: $work/state
control_socket: $work/control.sock   # not /run/logjail's: another daemon may run
ipv6_prefix: 128
max_keys: 1300000
max_bans_per_minute: 1000000   # the seed bans 100,000 keys in one second of log
checkpoint: 10s
metrics: 127.0.0.1:$mport
sources:
  - name: web
    paths: [$work/live.log]
    format: combined
rules:
  - name: flood
    limits: ["3 per 10s"]
    ban: {for: 2h}
actions:
  - type: endpoint
    listen: 127.0.0.1:$port
YAML

# KEYS clients (2001:db8::/32, one key each): nine tenths with one request,
# a tenth with four, over the limit: banned for two hours from now.
python3 - "$work" "$keys" <<'PY'
import sys, time
work = sys.argv[1]
now = time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime())
with open(f"{work}/seed.log", "w") as f, open(f"{work}/clients.txt", "w") as c:
    for i in range(int(sys.argv[2])):
        ip = f"2001:db8:{i >> 16:x}:{i & 0xffff:x}::1"
        n = 4 if i % 10 == 0 else 1
        for _ in range(n):
            f.write(f'{ip} - - [{now}] "GET /x HTTP/1.1" 200 1 "-" "bench"\n')
        if i < 2000:
            c.write(ip + "\n")
PY
touch "$work/live.log"
/usr/bin/time -f "seeding: replay --db %e s" "$work/logjail" replay --config "$work/logjail.yaml" --db "$work/state/logjail.db" "$work/seed.log" >/dev/null
sqlite3 "$work/state/logjail.db" "select 'seeded: ' || (select sum(n) from key_runs) || ' key states, ' || (select count(*) from bans) || ' active bans'"

taskset -c 0 "$work/logjail" run --config "$work/logjail.yaml" >"$work/daemon.log" 2>&1 &
daemon=$!
for i in $(seq 601); do
  # A daemon that died (a port taken meanwhile by another process) or never
  # got ready is no benchmark: say why and stop.
  kill -0 $daemon 2>/dev/null || { echo "bench-endpoint: the daemon exited: $(tail -1 "$work/daemon.log")" >&2; exit 1; }
  [ "$i" -le 600 ] || { echo "bench-endpoint: the daemon did not answer /auth in 60 s: $(tail -1 "$work/daemon.log")" >&2; exit 1; }
  d=$(curl -s -o /dev/null -D - -H 'X-Forwarded-For: 2001:db8::1' "http://127.0.0.1:$port/auth" | tr -d '\r' | sed -n 's/^X-Logjail-Decision: //p' || true)
  [ -n "$d" ] && [ "$d" != unready ] && break
  sleep 0.1
done
echo "daemon ready: $(grep -o '"state restored"[^}]*' "$work/daemon.log" | head -1)"
ps -o rss=,vsz= -p $daemon | awk '{printf "daemon RSS %.0f MB\n", $1/1024}'

# Half the clients asked about are banned (every tenth seeded client is).
cat > "$work/auth.lua" <<'LUA'
local clients = {}
for line in io.lines(os.getenv("CLIENTS")) do clients[#clients + 1] = line end
local i = 0
request = function()
  i = i % #clients + 1
  return wrk.format("GET", "/auth", { ["X-Forwarded-For"] = clients[i] })
end
LUA
# Keep banned (i % 10 == 0) and allowed clients in equal numbers.
awk 'NR % 10 == 1 || NR % 10 == 2' "$work/clients.txt" > "$work/mix.txt"

wrk_auth() { # wrk_auth OUT: wrk on core 1 for secs seconds, its output shown and kept in OUT
  CLIENTS="$work/mix.txt" taskset -c 1 wrk -t1 -c16 -d"${secs}s" --latency -s "$work/auth.lua" "http://127.0.0.1:$port/auth" | tee "$1"
}
for round in $(seq "$rounds"); do
  echo "== round $round: /auth, idle daemon: taskset -c 1 wrk -t1 -c16 -d${secs}s --latency"
  wrk_auth "$work/idle.txt"

  echo "== round $round: /auth while the daemon ingests $rate lines/s"
  # 200,000 other clients, each 2.5 times in 10 s: charged, not banned.
  bench_writer "$work/live.log" "$rate" "$((rate * (secs + 2)))" 200000 &
  writer=$!
  read0=$(bench_lines_read "$mport")
  t0=$(date +%s.%N)
  sleep 1
  wrk_auth "$work/ingest.txt"
  wait $writer
  read1=$(bench_lines_read "$mport")
  t1=$(date +%s.%N)
  lps=$(awk -v n="$((read1 - read0))" -v a="$t0" -v b="$t1" 'BEGIN {printf "%.0f", n / (b - a)}')
  echo "daemon ingested $((read1 - read0)) lines in $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}') s: $lps lines/s"
  ps -o rss= -p $daemon | awk '{printf "daemon RSS %.0f MB\n", $1/1024}'
  echo "figure round=$round idle_p50_ms=$(bench_wrk_ms 50 <"$work/idle.txt") idle_p99_ms=$(bench_wrk_ms 99 <"$work/idle.txt")" \
    "ingest_p50_ms=$(bench_wrk_ms 50 <"$work/ingest.txt") ingest_p99_ms=$(bench_wrk_ms 99 <"$work/ingest.txt") lines_per_s=$lps"
done
kill $daemon; wait $daemon || true
