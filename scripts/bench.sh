#!/usr/bin/env bash
# Replay throughput: logjail against fail2ban-regex on the same generated
# 1M-line log (../shared/bench/vs-fail2ban.sh), then the Go benchmarks of the
# parser and the detector. Usage: scripts/bench.sh [-n LINES] [-s SEED]
set -euo pipefail
cd "$(dirname "$0")/.."
shared=${LOGJAIL_SHARED:-../shared}
[ -x "$shared/bench/vs-fail2ban.sh" ] || { echo "bench: $shared/bench/vs-fail2ban.sh not found (set LOGJAIL_SHARED)" >&2; exit 2; }
./scripts/deps.sh
go build -o logjail ./cmd/logjail
"$shared/bench/vs-fail2ban.sh" "$@" -- ./logjail replay --config testdata/genlog.yaml --source web

# The reference loop (address and time only) on the same log, then logjail
# again, so that the figures read as a ratio on a busy machine.
work=${BENCH_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/logjail-bench}
log=$(ls -t "$work"/access-*.log | head -1)
go build -o baseline ./scripts/baseline
for i in 1 2 3; do
  /usr/bin/time -f "reference loop %e s" ./baseline "$log" >/dev/null
  /usr/bin/time -f "logjail replay %e s, %M KB" ./logjail replay --config testdata/genlog.yaml --source web "$log" >/dev/null
done
go test -run '^$' -bench . -benchmem ./parser/ ./detector/
