#!/usr/bin/env bash
# The decision endpoint under load: logjail pinned to core 0 with 1,000,000
# tracked keys and 100,000 active bans, and an open-loop load generator
# (internal/cmd/openload) pinned to core 1 asking /auth RATE times a second
# (default 2,000, far below what the one core answers) for a rotating set
# of clients (half banned), each request timed from its due time (no
# coordinated omission: a stall of the daemon is charged to every request
# that fell due in it); then the same while the daemon ingests LINES_PER_S
# log lines a second (default 50,000; the writer also on core 1), ROUNDS
# times (default 1), idle and under ingest alternately, in one daemon.
# Each round ends with machine-readable lines (scripts/bench-table.sh
# reads them):
#   figure round=N idle_p50_ms=X idle_p99_ms=X ingest_p50_ms=X ingest_p99_ms=X lines_per_s=X rate=R idle_answered=A/D ingest_answered=A/D ingest_p999_ms=X ingest_max_ms=X idle_cpu_pct=X ingest_cpu_pct=X
# and, once at the end when wrk is installed, the closed-loop throughput
# of the idle daemon (wrk, 16 connections, each sending when answered: it
# saturates the core, so its latencies are its own queue's, not shown):
#   throughput closed_loop_rps=X
# Usage: scripts/bench-endpoint.sh [SECONDS]
# LOGJAIL_BIN=path runs that binary instead of one built from this tree
# (to compare two builds alternately on a noisy host). KEYS=n seeds n keys
# (a tenth of them banned) instead of 1,000,000. RATE=n asks /auth n
# times a second. NICE=n: the daemon's and the writer's niceness (below).
# ENDPOINT_WORK=dir works
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
arate=${RATE:-2000}
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
go build -o "$work/openload" ./internal/cmd/openload
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

# NICE=n runs the daemon and the writer at that niceness (all the
# daemon's threads alike, so what they do to each other is unchanged): on
# a host shared with other work, a negative one keeps that work's share
# of the cores out of the figures (and the writer at its rate) when two
# builds are compared.
nice -n "${NICE:-0}" taskset -c 0 "$work/logjail" run --config "$work/logjail.yaml" >"$work/daemon.log" 2>&1 &
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

# Keep banned (i % 10 == 0) and allowed clients in equal numbers.
awk 'NR % 10 == 1 || NR % 10 == 2' "$work/clients.txt" > "$work/mix.txt"

# openload runs at real-time priority where it may (root: chrt -f 1), so
# that its own wake-ups on a shared core 1 do not add to what it measures
# of the daemon (its lag_ figures say how late it was); the daemon runs
# as it would anywhere. A real-time task that stops sleeping takes its
# core from everything else, and outlives this script if the script is
# killed, so it is bounded twice: RLIMIT_RTTIME kills it after 0.5 s of
# CPU without a blocking call (openload sleeps between sends), and
# timeout kills it 30 s after its run should have ended.
rt=()
if chrt -f 1 true 2>/dev/null; then rt=(prlimit --rttime=250000:500000 chrt -f 1); fi
echo "openload: ${rt[*]:-no real-time priority (not root)} taskset -c 1, $arate requests/s"
load() { # load OUT: openload on core 1 for secs seconds, its output shown and kept in OUT
  timeout -s KILL "$((secs + 30))" "${rt[@]}" taskset -c 1 "$work/openload" -url "http://127.0.0.1:$port/auth" -rate "$arate" -duration "${secs}s" \
    -header X-Forwarded-For -values "$work/mix.txt" 2>&1 | tee "$1" || true
  grep -q '^openload ' "$1" || { echo "bench-endpoint: openload measured nothing" >&2; exit 1; }
}
# val KEY FILE: KEY's value on openload's line in FILE.
val() { sed -n 's/^openload .*/&/p' "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
for round in $(seq "$rounds"); do
  echo "== round $round: /auth, idle daemon: openload at $arate/s for ${secs}s"
  c0=$(bench_cpu $daemon); s0=$EPOCHREALTIME
  load "$work/idle.txt"
  idle_cpu=$(awk -v a="$c0" -v b="$(bench_cpu $daemon)" -v s="$s0" -v e="$EPOCHREALTIME" 'BEGIN {printf "%.0f", 100 * (b - a) / (e - s)}')

  echo "== round $round: /auth at $arate/s while the daemon ingests $rate lines/s"
  # 200,000 other clients, each 2.5 times in 10 s: charged, not banned.
  # The writer runs on core 1 with openload: core 0 is the daemon's.
  (taskset -pc 1 $BASHPID >/dev/null; renice -n "${NICE:-0}" -p $BASHPID >/dev/null; bench_writer "$work/live.log" "$rate" "$((rate * (secs + 2)))" 200000) &
  writer=$!
  read0=$(bench_lines_read "$mport")
  c0=$(bench_cpu $daemon)
  t0=$(date +%s.%N)
  sleep 1
  load "$work/ingest.txt"
  wait $writer
  read1=$(bench_lines_read "$mport")
  c1=$(bench_cpu $daemon)
  t1=$(date +%s.%N)
  lps=$(awk -v n="$((read1 - read0))" -v a="$t0" -v b="$t1" 'BEGIN {printf "%.0f", n / (b - a)}')
  # The daemon's CPU (user+system, all threads) in each phase, in percent
  # of its one core: near 100 under ingest, a request waits for a core
  # that ingest keeps busy, whatever the scheduler does.
  ingest_cpu=$(awk -v a="$c0" -v b="$c1" -v s="$t0" -v e="$t1" 'BEGIN {printf "%.0f", 100 * (b - a) / (e - s)}')
  echo "daemon ingested $((read1 - read0)) lines in $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}') s: $lps lines/s, CPU $ingest_cpu% of a core (idle: $idle_cpu%)"
  ps -o rss= -p $daemon | awk '{printf "daemon RSS %.0f MB\n", $1/1024}'
  echo "figure round=$round idle_p50_ms=$(val p50_ms "$work/idle.txt") idle_p99_ms=$(val p99_ms "$work/idle.txt")" \
    "ingest_p50_ms=$(val p50_ms "$work/ingest.txt") ingest_p99_ms=$(val p99_ms "$work/ingest.txt") lines_per_s=$lps rate=$arate" \
    "idle_answered=$(val answered "$work/idle.txt")/$(val due "$work/idle.txt") ingest_answered=$(val answered "$work/ingest.txt")/$(val due "$work/ingest.txt")" \
    "ingest_p999_ms=$(val p999_ms "$work/ingest.txt") ingest_max_ms=$(val max_ms "$work/ingest.txt") idle_cpu_pct=$idle_cpu ingest_cpu_pct=$ingest_cpu"
done
if command -v wrk >/dev/null; then
  # Closed loop, idle: how many answers a second the one core gives.
  cat > "$work/auth.lua" <<'LUA'
local clients = {}
for line in io.lines(os.getenv("CLIENTS")) do clients[#clients + 1] = line end
local i = 0
request = function()
  i = i % #clients + 1
  return wrk.format("GET", "/auth", { ["X-Forwarded-For"] = clients[i] })
end
LUA
  CLIENTS="$work/mix.txt" taskset -c 1 wrk -t1 -c16 -d3s -s "$work/auth.lua" "http://127.0.0.1:$port/auth" >"$work/wrk.txt"
  echo "throughput closed_loop_rps=$(awk '/^Requests\/sec:/ {printf "%.0f", $2}' "$work/wrk.txt")"
fi
kill $daemon; wait $daemon || true
