#!/usr/bin/env bash
# The decision endpoint under load: logjail pinned to core 0 with 1,000,000
# tracked keys and 100,000 active bans, wrk pinned to core 1 asking /auth
# for a rotating set of clients (half banned); then the same while the
# daemon ingests LINES_PER_S log lines a second (default 50,000).
# Usage: scripts/bench-endpoint.sh [SECONDS]
# LOGJAIL_BIN=path runs that binary instead of one built from this tree
# (to compare two builds alternately on a noisy host).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-20}
rate=${LINES_PER_S:-50000}
command -v wrk >/dev/null || { echo "bench-endpoint: wrk is not installed (apt-get install wrk)" >&2; exit 2; }
command -v taskset >/dev/null || { echo "bench-endpoint: taskset (util-linux) is not installed" >&2; exit 2; }
work=$(mktemp -d /tmp/logjail-endpoint.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
if [ -n "${LOGJAIL_BIN:-}" ]; then cp "$LOGJAIL_BIN" "$work/logjail"; else go build -o "$work/logjail" ./cmd/logjail; fi
free() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free)
mport=$(free)

cat > "$work/logjail.yaml" <<YAML
state_dir: $work/state
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

# 1,000,000 clients (2001:db8::/32, one key each): 900,000 with one request,
# 100,000 with four, over the limit: banned for two hours from now.
python3 - "$work" <<'PY'
import sys, time
work = sys.argv[1]
now = time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime())
with open(f"{work}/seed.log", "w") as f, open(f"{work}/clients.txt", "w") as c:
    for i in range(1_000_000):
        ip = f"2001:db8:{i >> 16:x}:{i & 0xffff:x}::1"
        n = 4 if i % 10 == 0 else 1
        for _ in range(n):
            f.write(f'{ip} - - [{now}] "GET /x HTTP/1.1" 200 1 "-" "bench"\n')
        if i < 2000:
            c.write(ip + "\n")
PY
touch "$work/live.log"
/usr/bin/time -f "seeding: replay --db %e s" "$work/logjail" replay --config "$work/logjail.yaml" --db "$work/state/logjail.db" "$work/seed.log" >/dev/null
sqlite3 "$work/state/logjail.db" "select 'seeded: ' || (select count(*) from keys) || ' keys, ' || (select count(*) from bans) || ' active bans'"

taskset -c 0 "$work/logjail" run --config "$work/logjail.yaml" >"$work/daemon.log" 2>&1 &
daemon=$!
for _ in $(seq 600); do
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

echo "== /auth, idle daemon: taskset -c 1 wrk -t1 -c16 -d${secs}s --latency"
CLIENTS="$work/mix.txt" taskset -c 1 wrk -t1 -c16 -d"${secs}s" --latency -s "$work/auth.lua" "http://127.0.0.1:$port/auth"

echo "== /auth while the daemon ingests $rate lines/s"
python3 - "$work/live.log" "$rate" "$((secs + 2))" <<'PY' &
import sys, time
path, rate, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
batch = rate // 20
with open(path, "a") as f:
    start = time.time(); n = 0
    while time.time() - start < secs:
        ts = time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime())
        # 200,000 other clients, each 2.5 times in 10 s: charged, not banned.
        f.write("".join(f'2001:db8:8000:{(n + i) % 200000:x}::1 - - [{ts}] "GET /y HTTP/1.1" 200 1 "-" "bench"\n' for i in range(batch)))
        f.flush(); n += batch
        time.sleep(max(0, start + n / rate - time.time()))
    print(f"writer: {n} lines in {time.time() - start:.1f} s", file=sys.stderr)
PY
writer=$!
read0=$(curl -s "http://127.0.0.1:$mport/metrics" | awk '/^logjail_lines_read_total/ {s+=$2} END {print s+0}')
t0=$(date +%s.%N)
sleep 1
CLIENTS="$work/mix.txt" taskset -c 1 wrk -t1 -c16 -d"${secs}s" --latency -s "$work/auth.lua" "http://127.0.0.1:$port/auth"
wait $writer
read1=$(curl -s "http://127.0.0.1:$mport/metrics" | awk '/^logjail_lines_read_total/ {s+=$2} END {print s+0}')
t1=$(date +%s.%N)
python3 -c "import sys; print(f'daemon ingested {($read1 - $read0):.0f} lines in {($t1 - $t0):.1f} s: {($read1 - $read0)/($t1 - $t0):.0f} lines/s')"
ps -o rss= -p $daemon | awk '{printf "daemon RSS %.0f MB\n", $1/1024}'
kill $daemon; wait $daemon || true
