#!/usr/bin/env bash
# `make bench`: every figure of issue 23 measured in one run and printed as
# one Markdown table (figure, measured, ratio, target, holds), with the
# machine it ran on under it. The two sides of each ratio are measured
# alternately, ROUNDS times (BENCH_ROUNDS, default 3), and the ratio is the
# median of the rounds' ratios (the sides shown are the medians of each
# side), so that a host that gets busier or quieter during the run moves
# both sides alike.
#
# The rows (docs/performance.md says what each measures and why so):
#  1. replay of 3M lines over 1,000,000 keys against the same 3M lines over
#     2,000 keys, under one rate rule that never trips ("100000 per 1h":
#     every key stays live to the end): wall time; and the peak RSS of the
#     1M-key replay divided by its keys (the whole process's, runtime and
#     SQLite included, as scripts/bench-memory.sh counts it).
#  2. live CPU per line: `logjail run` following a file that
#     bench_writer appends 50,000 lines/s to from 200,000 keys (500,000
#     lines), the daemon's user+system CPU (/proc) from before the first
#     line to when its lines_read counter has every line, over the lines;
#     against `logjail replay` of that same file with the same config,
#     user+system CPU (GNU time) over the lines.
#  3. /auth p99 while the daemon ingests 50,000 lines/s, against the idle
#     p50: scripts/bench-endpoint.sh's figure lines (1M keys, 100k bans,
#     the daemon on core 0, wrk on core 1, 10 s a side).
#  4. replay against fail2ban-regex, lines/s: ../shared/bench/vs-fail2ban.sh
#     on the 1M-line genlog with testdata/genlog.yaml.
#  5. checkpoint on against off: `replay --db` (a new database each time)
#     against the same replay without, on that 1M-line genlog: wall time.
#  6. `logjail list` of 100,000 active bans, read from the database the
#     endpoint benchmark seeded (no daemon): wall time.
#  7. replay lines/s on the 1M-line genlog (the "off" side of row 5).
#
# BENCH_QUICK=1 (make bench-smoke) runs every row at a small size, one
# round, in under a minute: a smoke run that proves every row can be
# measured (TestBenchSmoke runs it; its figures mean nothing). A row that
# cannot be measured says why in its measured column and makes the run
# exit 1, after the table; a target missed is only a "no" in holds.
#
# Environment: LOGJAIL_BIN=path measures that binary (default: a build of
# this tree without -race), BENCH_ROUNDS=n, BENCH_QUICK=1, BENCH_ONLY="2 5"
# (only those rows; 6 needs 3, 7 is 5's), LOGJAIL_SHARED
# (default ../shared), BENCH_DIR (where vs-fail2ban.sh keeps its generated
# logs, default ~/.cache/logjail-bench). Progress goes to stderr, the table
# to stdout. Needs python3, curl, GNU time, wrk, taskset, fail2ban-regex
# (scripts/deps.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-lib.sh
shared=${LOGJAIL_SHARED:-../shared}
export BENCH_DIR=${BENCH_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/logjail-bench}
if [ -n "${BENCH_QUICK:-}" ]; then
  rounds=${BENCH_ROUNDS:-1}
  key_lines=30000 big_keys=10000 small_keys=200
  live_lines=50000 live_clients=100000   # past 65,536: the writer's addresses past 2001:db8:8000::/48
  ep_keys=20000 ep_secs=2
  gen_lines=20000 ck_rounds=$rounds list_runs=1
else
  rounds=${BENCH_ROUNDS:-3}
  key_lines=3000000 big_keys=1000000 small_keys=2000
  live_lines=500000 live_clients=200000
  ep_keys=1000000 ep_secs=10
  gen_lines=1000000 ck_rounds=$((3 * rounds)) list_runs=5
fi
live_rate=50000

started=$(date -u '+%Y-%m-%d %H:%M UTC')
t_start=$SECONDS
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] || commit="$commit (with uncommitted changes)"
work=$(mktemp -d /tmp/logjail-table.XXXXXX)
daemon=
stop_daemon() {
  if [ -n "$daemon" ]; then kill "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; fi
  daemon=
}
cleanup() { stop_daemon; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$work/rows" "$BENCH_DIR"
bin=$work/logjail
bench_build "$bin"
say() { echo "bench-table: $*" >&2; }

# row N FIGURE MEASURED RATIO TARGET HOLDS: one row of the table, kept in
# $work/rows/N (a row that was not measured has no file).
row() { printf '| %s | %s | %s | %s | %s |\n' "$2" "$3" "$4" "$5" "$6" >>"$work/rows/$1"; }
# calc EXPR: the value of an awk expression.
calc() { awk "BEGIN { print $1 }"; }
# holds VALUE OP LIMIT: yes or no.
holds() { awk -v v="$1" -v l="$3" -v op="$2" 'BEGIN { print ((op == "<=" ? v <= l : v >= l) ? "yes" : "no") }'; }
# ratio R: R as a ratio (two decimals below 10).
ratio() { awk -v r="$1" 'BEGIN { printf (r >= 10 ? "%.0f×" : "%.2f×"), r }'; }
# spread FILE: " (min–max)" of the rounds' ratios in FILE, when there are
# several.
spread() { sort -g "$1" | awk '{v[NR] = $1} END { if (NR > 1) printf (v[NR] >= 10 ? " (%.0f–%.0f)" : " (%.2f–%.2f)"), v[1], v[NR] }'; }
# timed OUT CMD...: runs CMD with its output discarded, appending
# "wall user sys maxrss_kb" to OUT (wall from bash's clock, to the
# millisecond: GNU time's %e has hundredths); fails with CMD's stderr if
# it fails.
timed() {
  local out=$1 t0 t1; shift
  t0=$EPOCHREALTIME
  /usr/bin/time -f '%U %S %M' -o "$work/time" "$@" >/dev/null 2>"$work/stderr" ||
    { echo "failed: $* ($(tail -1 "$work/stderr"))" >&2; return 1; }
  t1=$EPOCHREALTIME
  tail -1 "$work/time" | awk -v a="$t0" -v b="$t1" '{printf "%.3f %s %s %s\n", b - a, $1, $2, $3}' >>"$out"
}
# cpu_ratio A B: the median of the rounds' user+system CPU ratios of two
# timed files (A over B), as "CPU r×": on a shared host CPU time moves
# far less than wall time, so the reader can tell a change from the noise.
cpu_ratio() { paste "$1" "$2" | awk '{print ($2 + $3) / ($6 + $7 > 0 ? $6 + $7 : 0.01)}' | bench_median | awk '{printf "CPU %.2f×", $1}'; }
# num N: N rounded, its thousands separated by commas.
num() { awk -v n="$1" 'BEGIN { s = sprintf("%.0f", n); while (s ~ /[0-9][0-9][0-9][0-9]/) sub(/[0-9][0-9][0-9]($|,)/, ",&", s); print s }'; }
# human N: 3000000 as 3M, 2000 as 2k.
human() { awk -v n="$1" 'BEGIN { if (n >= 1e6 && n % 1e6 == 0) printf "%dM", n / 1e6; else if (n >= 1000 && n % 1000 == 0) printf "%dk", n / 1000; else printf "%d", n }'; }

# 1. Keys: the same line count over many keys and over few.
row_keys() {
  local k
  for k in "$big_keys" "$small_keys"; do
    python3 - "$work/keys-$k.log" "$key_lines" "$k" <<'PY'
import sys, time
path, lines, keys = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
start = int(time.time()) - 7200
span = lines / 3000                      # 3,000 lines a second of log time
with open(path, "w") as f:
    for c in range(0, lines, 10000):
        out = []
        for j in range(c, min(lines, c + 10000)):
            i = j % keys
            ts = time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(start + int(j * span / lines)))
            out.append(f'2001:db8:{i >> 16:x}:{i & 0xffff:x}::1 - - [{ts}] "GET /k HTTP/1.1" 200 1 "-" "bench"\n')
        f.write("".join(out))
PY
  done
  cat >"$work/keys.yaml" <<YAML
state_dir: $work/state-keys
ipv6_prefix: 128
max_keys: $((big_keys * 13 / 10))
sources:
  - name: web
    paths: [$work/keys-*.log]
    format: combined
rules:
  - name: rate
    limits: ["100000 per 1h"]
    ban: {for: 1h}
YAML
  local r
  for r in $(seq "$rounds"); do
    say "keys: round $r/$rounds"
    timed "$work/keys-big" "$bin" replay --config "$work/keys.yaml" --source web "$work/keys-$big_keys.log"
    timed "$work/keys-small" "$bin" replay --config "$work/keys.yaml" --source web "$work/keys-$small_keys.log"
  done
  local big small rat rss bpk
  big=$(awk '{print $1}' "$work/keys-big" | bench_median)
  small=$(awk '{print $1}' "$work/keys-small" | bench_median)
  rat=$(paste "$work/keys-big" "$work/keys-small" | awk '{print $1 / ($5 > 0 ? $5 : 0.01)}' | tee "$work/ratios" | bench_median)
  rss=$(awk '{print $4}' "$work/keys-big" | bench_median)
  bpk=$(calc "$rss * 1024 / $big_keys")
  row 1 "replay of $(human "$key_lines") lines over $(human "$big_keys") keys vs $(human "$small_keys") keys: wall" \
    "$big s vs $small s ($(cpu_ratio "$work/keys-big" "$work/keys-small"))" "$(ratio "$rat")$(spread "$work/ratios")" "≤ 2.5×" "$(holds "$rat" '<=' 2.5)"
  row 1 "peak RSS per key, replay over $(human "$big_keys") keys" \
    "$(num "$bpk") B ($(num "$(calc "$rss / 1024")") MB)" "—" "≤ 400 B" "$(holds "$bpk" '<=' 400)"
  rm -f "$work"/keys-*.log
}

# 2. Live CPU per line against replay's, on the same file and config.
row_live() {
  local mport
  mport=$(bench_port)
  cat >"$work/live.yaml" <<YAML
state_dir: $work/state-live
control_socket: $work/control.sock   # not /run/logjail's: another daemon may run
ipv6_prefix: 128
max_keys: 1300000
metrics: 127.0.0.1:$mport
sources:
  - name: web
    paths: [$work/live.log]
    format: combined
    from: start
rules:
  - name: flood
    limits: ["3 per 10s"]
    ban: {for: 2h}
YAML
  local r c0 c1 deadline
  for r in $(seq "$rounds"); do
    say "live: round $r/$rounds ($live_lines lines at $live_rate lines/s from $live_clients keys)"
    rm -rf "$work/state-live" "$work/live.log"
    : >"$work/live.log"
    "$bin" run --config "$work/live.yaml" --log-level warn >"$work/daemon.log" 2>&1 &
    daemon=$!
    deadline=$((SECONDS + 60))
    until curl -sf "http://127.0.0.1:$mport/metrics" >/dev/null; do
      kill -0 "$daemon" 2>/dev/null || { cat "$work/daemon.log" >&2; return 1; }
      [ $SECONDS -lt $deadline ] || { echo "the daemon did not start in 60 s" >&2; return 1; }
      sleep 0.1
    done
    c0=$(bench_cpu "$daemon")
    bench_writer "$work/live.log" "$live_rate" "$live_lines" "$live_clients"
    deadline=$((SECONDS + 300))
    until [ "$(bench_lines_read "$mport")" -ge "$live_lines" ]; do
      [ $SECONDS -lt $deadline ] || { echo "the daemon did not read $live_lines lines in 300 s" >&2; return 1; }
      sleep 0.1
    done
    c1=$(bench_cpu "$daemon")
    kill -TERM "$daemon"; wait "$daemon" || true; daemon=
    calc "($c1 - $c0) / $live_lines * 1e6" >>"$work/live-run"
    timed "$work/live-replay-t" "$bin" replay --config "$work/live.yaml" --source web "$work/live.log"
    tail -1 "$work/live-replay-t" | awk -v n="$live_lines" '{print ($2 + $3) / n * 1e6}' >>"$work/live-replay"
  done
  local run rep rat
  run=$(bench_median <"$work/live-run")
  rep=$(bench_median <"$work/live-replay")
  rat=$(paste "$work/live-run" "$work/live-replay" | awk '{print $1 / ($2 > 0 ? $2 : 0.001)}' | tee "$work/ratios" | bench_median)
  row 2 "CPU per line: \`run\` following $(human "$live_rate") lines/s from $(human "$live_clients") keys vs \`replay\` of the same file" \
    "$(printf '%.2f µs vs %.2f µs' "$run" "$rep")" "$(ratio "$rat")$(spread "$work/ratios")" "≤ 1.5×" "$(holds "$rat" '<=' 1.5)"
  rm -f "$work/live.log"
}

# 3. /auth under ingest (scripts/bench-endpoint.sh), then 6. list of its
# bans, from the database it leaves.
row_endpoint() {
  say "endpoint: $rounds round(s), $ep_secs s a side, $ep_keys keys (scripts/bench-endpoint.sh)"
  KEYS=$ep_keys ROUNDS=$rounds ENDPOINT_WORK=$work/endpoint LOGJAIL_BIN=$bin LINES_PER_S=$live_rate \
    ./scripts/bench-endpoint.sh "$ep_secs" >"$work/endpoint.out" 2>&1 ||
    { tail -5 "$work/endpoint.out" >&2; return 1; }
  grep -q '^figure ' "$work/endpoint.out" || { echo "no figure line in the output of scripts/bench-endpoint.sh" >&2; return 1; }
  fig() { grep '^figure ' "$work/endpoint.out" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
  local p50 p99 lps rat
  p50=$(fig idle_p50_ms | bench_median)
  p99=$(fig ingest_p99_ms | bench_median)
  lps=$(fig lines_per_s | bench_median)
  rat=$(paste <(fig ingest_p99_ms) <(fig idle_p50_ms) | awk '{print $1 / $2}' | tee "$work/ratios" | bench_median)
  row 3 "/auth p99 while ingesting $(human "$live_rate") lines/s on one core vs idle p50 ($(human "$ep_keys") keys)" \
    "$(printf '%.3g ms vs %.3g ms (%s lines/s read)' "$p99" "$p50" "$(num "$lps")")" "$(ratio "$rat")$(spread "$work/ratios")" "≤ 25×" "$(holds "$rat" '<=' 25)"
}
row_list() {
  local cfg=$work/endpoint/logjail.yaml n r secs
  [ -f "$cfg" ] || { echo "no database: the endpoint benchmark did not leave one" >&2; return 1; }
  n=$("$bin" list --config "$cfg" --output json | python3 -c 'import json, sys; d = json.load(sys.stdin); print(len(d if isinstance(d, list) else d.get("bans", [])))')
  [ "$n" -gt 0 ] || { echo "list shows no ban" >&2; return 1; }
  for r in $(seq "$list_runs"); do timed "$work/list" "$bin" list --config "$cfg"; done
  secs=$(awk '{print $1}' "$work/list" | bench_median)
  row 6 "\`list\` of $(human "$n") active bans" "$secs s" "—" "≤ 0.2 s" "$(holds "$secs" '<=' 0.2)"
}

# 4. Replay against fail2ban-regex (../shared/bench/vs-fail2ban.sh, which
# also generates the genlog that rows 5 and 7 read).
row_fail2ban() {
  [ -x "$shared/bench/vs-fail2ban.sh" ] || { echo "$shared/bench/vs-fail2ban.sh not found (set LOGJAIL_SHARED)" >&2; return 1; }
  local r
  for r in $(seq "$rounds"); do
    say "fail2ban: round $r/$rounds ($gen_lines lines)"
    "$shared/bench/vs-fail2ban.sh" -n "$gen_lines" -- "$bin" replay --config testdata/genlog.yaml --source web >"$work/f2b.out" 2>&1 ||
      { tail -3 "$work/f2b.out" >&2; return 1; }
    awk '$1 == "logjail" {lj = $4} $1 == "fail2ban-regex" {fb = $4} END {if (!lj || !fb) exit 1; print lj, fb}' "$work/f2b.out" >>"$work/f2b" ||
      { cat "$work/f2b.out" >&2; return 1; }
  done
  local lj fb rat
  lj=$(awk '{print $1}' "$work/f2b" | bench_median)
  fb=$(awk '{print $2}' "$work/f2b" | bench_median)
  rat=$(awk '{print $1 / $2}' "$work/f2b" | tee "$work/ratios" | bench_median)
  row 4 "replay vs fail2ban-regex, $(human "$gen_lines")-line genlog: lines/s" \
    "$(num "$lj") vs $(num "$fb")" "$(ratio "$rat")$(spread "$work/ratios")" "≥ 50×" "$(holds "$rat" '>=' 50)"
}

# 5. Checkpoint on against off, and 7. replay lines/s (the "off" side).
row_checkpoint() {
  local log=$BENCH_DIR/access-$gen_lines-7.log r
  [ -s "$log" ] || { echo "$log missing (vs-fail2ban.sh writes it)" >&2; return 1; }
  for r in $(seq "$ck_rounds"); do
    say "checkpoint: round $r/$ck_rounds"
    timed "$work/ck-off" "$bin" replay --config testdata/genlog.yaml --source web "$log"
    rm -f "$work/ck.db"*
    timed "$work/ck-on" "$bin" replay --config testdata/genlog.yaml --source web --db "$work/ck.db" "$log"
    rm -f "$work/ck.db"*
  done
  local off on rat lps
  off=$(awk '{print $1}' "$work/ck-off" | bench_median)
  on=$(awk '{print $1}' "$work/ck-on" | bench_median)
  rat=$(paste "$work/ck-on" "$work/ck-off" | awk '{print $1 / ($5 > 0 ? $5 : 0.01)}' | tee "$work/ratios" | bench_median)
  row 5 "replay \`--db\` vs without, $(human "$gen_lines")-line genlog: wall" "$on s vs $off s ($(cpu_ratio "$work/ck-on" "$work/ck-off"))" "$(ratio "$rat")$(spread "$work/ratios")" "≤ 1.05×" "$(holds "$rat" '<=' 1.05)"
  lps=$(calc "$gen_lines / ($off > 0 ? $off : 0.01)")
  row 7 "replay, $(human "$gen_lines")-line genlog: lines/s" "$(num "$lps") ($off s)" "—" "≥ 3,000,000" "$(holds "$lps" '>=' 3000000)"
}

failed=0
measure() { # measure N FN: runs FN; a failure leaves row N unmeasured
  local n=$1 fn=$2 rc
  # BENCH_ONLY="2 5": only those rows (row 6 needs 3's bans, 7 is 5's).
  [ -z "${BENCH_ONLY:-}" ] || [[ " $BENCH_ONLY " == *" $n "* ]] || return 0
  set +e
  (set -e; trap stop_daemon EXIT; "$fn") 2>&1 >/dev/null | tee "$work/err-$n" >&2
  rc=${PIPESTATUS[0]}
  set -e
  if [ $rc -ne 0 ] || [ ! -s "$work/rows/$n" ]; then
    failed=1
    rm -f "$work/rows/$n"
    row "$n" "row $n ($fn)" "not measured: $(grep -v '^bench-table:' "$work/err-$n" | tail -1 | tr '|' '/')" "—" "—" "—"
  fi
}
measure 1 row_keys
measure 2 row_live
measure 3 row_endpoint
measure 6 row_list
measure 4 row_fail2ban
measure 5 row_checkpoint
if [ ! -s "$work/rows/7" ]; then row 7 "replay lines/s" "not measured: see row 5" "—" "—" "—"; fi

mode=full
[ -z "${BENCH_QUICK:-}" ] || mode="BENCH_QUICK=1 (smoke: the figures mean nothing)"
echo "| figure | measured | ratio | target | holds |"
echo "|---|---|---|---|---|"
for n in 1 2 3 4 5 6 7; do [ ! -f "$work/rows/$n" ] || cat "$work/rows/$n"; done # BENCH_ONLY leaves rows out
echo
echo "Each ratio is the median of $rounds rounds' ratios (row 5: $ck_rounds), each round measuring both sides one after the other; in brackets the lowest and the highest round; the sides shown are each side's median. Rows 1 and 5 are judged on wall time; beside it, the median ratio of their user+system CPU."
echo
echo "- run: $mode, $started, $((SECONDS - t_start)) s, \`${LOGJAIL_BIN:-logjail}\` at $commit"
echo "- CPU: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GB", $2 / 1048576}' /proc/meminfo)"
echo "- kernel: $(uname -sr); $(go version | sed 's/^go version //')"
echo "- load average (1, 5, 15 min): $load_start at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end"
exit "$failed"
