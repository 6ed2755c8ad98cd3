#!/usr/bin/env bash
# Instructions per perftest iteration on a team of one (the library's own
# path, no peer), counted by callgrind: (Ir at -n 60000 - Ir at -n 10000) /
# 50000. An iteration is one timed collective plus the perftest's 1.5
# untimed barriers. The start-up (bootstrap, team creation) polls for as
# long as it takes, so a run's total moves by up to ~1 M instructions:
# over 10 000 iterations that was ±100 an iteration, over 50 000 it is ±20.
# Usage: [UCC_TLS=self] ir-per-collective.sh [PERFTEST_BIN] [SPEC...]  (default UCC_TLS=shm: the shm TL's path)
#   SPEC: the perftest's arguments for one line, e.g. "-c gatherv -b 2 -e 2"
#   (default: allreduce, persistent allreduce, barrier, bcast, allgather).
set -euo pipefail
bin=${1:-target/release/ferrocoll-perftest}
shift || true
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ir() {
  rm -f "$tmp"/cg.*
  UCC_TLS=${UCC_TLS:-shm} valgrind --tool=callgrind --trace-children=yes --callgrind-out-file="$tmp/cg.%p" \
    "$bin" --np 1 "$@" -w 0 >/dev/null 2>&1
  # The rank's process is the one that ran the most instructions.
  grep -E "^(summary|totals):" "$(ls -S "$tmp"/cg.* | head -1)" | head -1 | awk '{print $2}'
}
specs=("$@")
[ ${#specs[@]} -gt 0 ] || specs=("-c allreduce -b 2 -e 2" "-c allreduce -b 2 -e 2 -p" "-c barrier" "-c bcast -b 2 -e 2" "-c allgather -b 2 -e 2")
for spec in "${specs[@]}"; do
  # shellcheck disable=SC2086
  a=$(ir $spec -n 10000); b=$(ir $spec -n 60000)
  echo "$spec: $(((b - a) / 50000)) Ir/iteration"
done
