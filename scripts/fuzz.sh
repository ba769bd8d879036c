#!/usr/bin/env bash
# Runs every fuzz target for a while (FUZZTIME, default 30s each).
set -euo pipefail
cd "$(dirname "$0")/.."
for pkg in $(go list ./...); do
  for f in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
    echo "== $pkg $f"
    go test -run '^$' -fuzz "^$f\$" -fuzztime "${FUZZTIME:-30s}" "$pkg"
  done
done
