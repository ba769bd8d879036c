# What the benchmark scripts share (sourced by scripts/bench-endpoint.sh,
# bench-memory.sh and bench-table.sh; not run on its own): building the
# binary measured, free loopback ports, the live writer, reading wrk's
# percentiles and a process's CPU, medians.

# bench_build OUT: the logjail binary measured, at OUT: a copy of
# $LOGJAIL_BIN when set (to compare two builds on a noisy host), else a
# build of this tree, without -race (timings of a race-instrumented
# binary would mean nothing).
bench_build() {
  if [ -n "${LOGJAIL_BIN:-}" ]; then cp "$LOGJAIL_BIN" "$1"; else go build -o "$1" ./cmd/logjail; fi
}

# bench_port [N]: N (default 1) free TCP ports on 127.0.0.1, distinct,
# one a line (held open together while chosen, so that two differ).
bench_port() {
  python3 -c 'import socket, sys
ss = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss: s.bind(("127.0.0.1", 0))
for s in ss: print(s.getsockname()[1])' "${1:-1}"
}

# bench_writer PATH RATE LINES CLIENTS: appends LINES combined-format lines
# to PATH at RATE lines a second (in writes of RATE/20 lines, stamped with
# the time of writing), from CLIENTS clients of 2001:db8:8000::/33 taken in
# turn (so each client comes back every CLIENTS/RATE seconds), then says on
# stderr how many it wrote in how long. Client i is
# 2001:db8:<8000 + i/65536>:<i%65536>::1 (hex), a valid address for up to
# 2^31 clients (bench-endpoint.sh wrote 2001:db8:8000:<i>::1 before,
# which is no address for i >= 65,536: two thirds of its 200,000 clients'
# lines were rejected by the parser, not charged). Runs in the foreground: start it
# with & to write beside something else.
bench_writer() {
  python3 - "$@" <<'PY'
import sys, time
path, rate, total, clients = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
batch = max(1, rate // 20)
with open(path, "a") as f:
    start = time.time(); n = 0
    while n < total:
        ts = time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime())
        k = min(batch, total - n)
        f.write("".join(f'2001:db8:{0x8000 + (n + i) % clients // 65536:x}:{(n + i) % clients % 65536:x}::1 - - [{ts}] "GET /y HTTP/1.1" 200 1 "-" "bench"\n' for i in range(k)))
        f.flush(); n += k
        time.sleep(max(0, start + n / rate - time.time()))
    print(f"writer: {n} lines in {time.time() - start:.1f} s", file=sys.stderr)
PY
}

# bench_lines_read PORT: the daemon's logjail_lines_read_total (all
# sources) from its metrics listener on PORT.
bench_lines_read() {
  curl -s "http://127.0.0.1:$1/metrics" | awk '/^logjail_lines_read_total/ {s+=$2} END {printf "%d\n", s}'
}

# bench_cpu PID: the process's user+system CPU so far, all its threads, in
# seconds (/proc/PID/stat fields 14 and 15, in clock ticks).
bench_cpu() {
  awk -v hz="$(getconf CLK_TCK)" '{sub(/^.*\) /, ""); printf "%.3f\n", ($12 + $13) / hz}' "/proc/$1/stat"
}

# bench_median: the median of the numbers on stdin, one a line (the mean
# of the middle two for an even count); fails on none.
bench_median() {
  sort -g | awk '{v[NR] = $1} END {
    if (NR == 0) exit 1
    if (NR % 2) printf "%.6g\n", v[(NR + 1) / 2]; else printf "%.6g\n", (v[NR / 2] + v[NR / 2 + 1]) / 2
  }'
}
