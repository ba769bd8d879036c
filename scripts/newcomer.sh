#!/usr/bin/env bash
# A newcomer's first minutes, checked: clones this repository (what is
# committed) into a temporary directory, runs the README's first command
# there with an empty GOCACHE (so it compiles everything, as on a fresh
# machine; the module cache is reused, so it needs no network once the
# modules are downloaded), prints its whole output, and checks it for the
# report's summary, at least one ban with its reason and a non-zero CPU
# column, and that `./logjail version` names the commit. newcomer_test.go
# runs it (CI does).
#
# Exit codes: 0 as promised; 1 the output lacks something (said on stderr);
# 2 the command failed; 77 the modules are not cached and cannot be
# downloaded (offline): nothing was checked.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
command -v go >/dev/null || { echo "newcomer: Go is not on PATH" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
git clone -q "$repo" "$tmp/logjail"
cd "$tmp/logjail"

# The README's first command: the first line of its first ```sh block.
first=$(awk '/^```sh$/ { getline; print; exit }' README.md)
[ -n "$first" ] || { echo "newcomer: README.md has no \`\`\`sh block" >&2; exit 1; }

export GOCACHE="$tmp/gocache"       # fresh: the first build compiles everything
export GOMODCACHE="$(go env GOMODCACHE)"
export GOFLAGS=-mod=readonly
if ! go mod download >/dev/null 2>&1; then
  echo "newcomer: the Go modules are not cached and cannot be downloaded (offline?): nothing checked" >&2
  exit 77
fi

echo "newcomer: \$ $first   (in a fresh clone, empty GOCACHE)" >&2
start=$(date +%s)
set +e
# The command as a newcomer types it: split on spaces, no shell.
read -r -a argv <<<"$first"
out=$("${argv[@]}" 2>&1)
rc=$?
set -e
printf '%s\n' "$out"
echo "newcomer: exit $rc after $(( $(date +%s) - start ))s" >&2
[ "$rc" = 0 ] || { echo "newcomer: '$first' failed" >&2; exit 2; }

fail=0
check() { # check DESCRIPTION EXTENDED-REGEX
  grep -Eq "$2" <<<"$out" || { echo "newcomer: the output lacks $1 (/$2/)" >&2; fail=1; }
}
check "the building notice" '^building logjail \(first run'
check "the summary" '^SUMMARY$'
check "the summary's line counts" '^  lines: +[0-9]+ read, [0-9]+ parsed, [0-9]+ rejected'
check "a ban with its reason" ' until [0-9T:Z-]+ +.*\(rule [^)]+\)$'
# The CPU column: the first row under a COSTLIEST KEYS header (the PHP-FPM
# replay's) has CPU seconds > 0.
cpu=$(awk '/^  COSTLIEST KEYS /{ getline; if ($3 + 0 > c) c = $3 + 0 } END { print c + 0 }' <<<"$out")
awk -v c="${cpu:-0}" 'BEGIN { exit !(c + 0 > 0) }' ||
  { echo "newcomer: the CPU column is not above zero (costliest key: '${cpu:-none}')" >&2; fail=1; }
# The binary the first command built says which commit it is.
head=$(git rev-parse HEAD)
version=$(./logjail version 2>&1) || true
printf '%s\n' "$version"
grep -q "^commit $head " <<<"$version" ||
  { echo "newcomer: './logjail version' does not name the commit $head" >&2; fail=1; }
exit $fail
