#!/usr/bin/env bash
# The README's first command (`make try`): checks what building logjail
# needs, builds ./logjail (saying so: the first build compiles SQLite and the
# other dependencies, about a minute), then replays the bundled nginx log
# with the embedded example configuration (logjail out of the box) and the
# generated PHP-FPM log, whose lines carry their CPU seconds, with
# testdata/logs/sample/try.yaml (the example's rules and a CPU rule).
# scripts/newcomer.sh runs it from a fresh clone.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "try: $*" >&2; exit 2; }
command -v go >/dev/null 2>&1 ||
  die "Go is not on PATH: install Go 1.26 or newer (https://go.dev/dl/) and add its bin directory to PATH"
v=$(go env GOVERSION)             # go1.26.8
v=${v#go}; major=${v%%.*}; rest=${v#*.}; minor=${rest%%[!0-9]*}
if [ "$major" -lt 1 ] || { [ "$major" -eq 1 ] && [ "${minor:-0}" -lt 26 ]; }; then
  die "Go $v is too old: logjail needs Go 1.26 or newer"
fi
[ "$(go env CGO_ENABLED)" = 1 ] ||
  die "cgo is off (CGO_ENABLED=0): the SQLite driver (github.com/mattn/go-sqlite3) needs it"
cc=$(go env CC); cc=${cc%% *}
command -v "${cc:-gcc}" >/dev/null 2>&1 ||
  die "no C compiler (${cc:-gcc}): the SQLite driver (github.com/mattn/go-sqlite3) is C, built with cgo; on Debian: apt-get install gcc"

echo "building logjail (first run: about a minute, compiling SQLite)…" >&2
go build -o logjail ./cmd/logjail
echo "1/2: replaying testdata/logs/sample/bots.log.gz (a real nginx log) with the embedded example configuration" >&2
echo >&2
# The embedded example exactly (a /etc/logjail/logjail.yaml is not read).
example=$(mktemp /tmp/logjail-try.XXXXXX.yaml)
trap 'rm -f "$example"' EXIT
./logjail example-config > "$example"
./logjail replay --config "$example" testdata/logs/sample/bots.log.gz
echo
echo "2/2: replaying testdata/logs/sample/shop.fpm.log (PHP-FPM, with CPU seconds) with testdata/logs/sample/try.yaml (the example's rules and a CPU rule)" >&2
echo >&2
./logjail replay --config testdata/logs/sample/try.yaml testdata/logs/sample/shop.fpm.log
