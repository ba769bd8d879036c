#!/bin/sh
# scripts/eval.sh: the labelled evaluation of the default configuration
# (package eval): per log (the real logs of ../shared/corpus/real, the
# generated scenarios, genlog), attackers banned, good clients banned,
# attackers missed and requests before the ban, then a total row and the
# goals' status. testdata/eval/figures.txt holds the committed figures
# (`go test ./eval -run TestFigures -update` rewrites them).
#
# Usage: scripts/eval.sh [-v] [-config FILE] [-shared DIR]
#   -v: every attacker banned (rule, requests before the ban) or missed
#   -config FILE: evaluate FILE (relative to the repository) instead of the embedded example
#   -shared: default ../shared beside the repository
set -eu
cd "$(dirname "$0")/.."
exec go run ./eval/cmd/logjail-eval -shared "$(cd .. && pwd)/shared" "$@"
