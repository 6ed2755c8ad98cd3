#!/usr/bin/env bash
# Instructions per perftest iteration on a team of one (the library's own
# path, no peer), counted by callgrind: (Ir at -n 20000 - Ir at -n 10000) /
# 10000. An iteration is one timed collective plus the perftest's 1.5
# untimed barriers. Repeatable for the same binary, whatever the load.
# Usage: ir-per-collective.sh [PERFTEST_BIN]
set -euo pipefail
bin=${1:-target/release/ferrocoll-perftest}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ir() {
  rm -f "$tmp"/cg.*
  UCC_TLS=shm valgrind --tool=callgrind --trace-children=yes --callgrind-out-file="$tmp/cg.%p" \
    "$bin" --np 1 "$@" -w 0 >/dev/null 2>&1
  # The rank's process is the one that ran the most instructions.
  grep -E "^(summary|totals):" "$(ls -S "$tmp"/cg.* | head -1)" | head -1 | awk '{print $2}'
}
for spec in "-c allreduce -b 2 -e 2" "-c allreduce -b 2 -e 2 -p" "-c barrier" "-c bcast -b 2 -e 2" "-c allgather -b 2 -e 2"; do
  # shellcheck disable=SC2086
  a=$(ir $spec -n 10000); b=$(ir $spec -n 20000)
  echo "$spec: $(((b - a) / 10000)) Ir/iteration"
done
