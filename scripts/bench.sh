#!/usr/bin/env bash
# Replay throughput: logjail against fail2ban-regex on the same generated
# 1M-line log (../shared/bench/vs-fail2ban.sh), then the Go benchmarks of the
# parser and the detector. Usage: scripts/bench.sh [-n LINES] [-s SEED]
set -euo pipefail
cd "$(dirname "$0")/.."
shared=${LOGJAIL_SHARED:-../shared}
[ -x "$shared/bench/vs-fail2ban.sh" ] || { echo "bench: $shared/bench/vs-fail2ban.sh not found (set LOGJAIL_SHARED)" >&2; exit 2; }
LOGJAIL_BENCH=1 ./scripts/deps.sh
go build -o logjail ./cmd/logjail
"$shared/bench/vs-fail2ban.sh" "$@" -- ./logjail replay --config testdata/genlog.yaml --source web
go test -run '^$' -bench . -benchmem ./parser/ ./detector/
