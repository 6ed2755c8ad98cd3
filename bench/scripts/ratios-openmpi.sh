#!/usr/bin/env bash
# Open MPI's time over ferrocoll's, per collective and size, back to back
# on this host: one line per size, for finding where ferrocoll is behind.
#
# Usage: bench/scripts/ratios-openmpi.sh RANKS [small|large|all]
#   small: blocks from 8 B, up to 64 KiB (-f 4 on 2 ranks, -f 8 otherwise; 2 000 iterations)
#   large: 256 KiB - 64 MiB blocks (-f 4; 20 iterations, 5 warm-ups)
#   COLLS="..." picks the collectives (default: all 13 data collectives).
# Sizes are per-rank blocks of float32, as the peer benchmark counts them.
# A ratio above 1 means ferrocoll was faster. One run: compare runs, not lines.
set -euo pipefail
np=${1:?ranks}
which=${2:-all}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
perftest=${PERFTEST:-$root/target/release/ferrocoll-perftest}
peer=$root/bench/peers/run-openmpi.sh
colls=${COLLS:-"allreduce bcast reduce allgather alltoall reduce_scatter gather scatter allgatherv alltoallv gatherv scatterv reduce_scatterv"}
f=4
[ "$np" -gt 2 ] && f=8
ranges=()
[ "$which" != large ] && ranges+=("2 16384 $f 2000 50")
[ "$which" != small ] && ranges+=("65536 16777216 4 20 5")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for c in $colls; do
  for r in "${ranges[@]}"; do
    read -r b e fac n w <<<"$r"
    "$perftest" --np "$np" -c "$c" -b "$b" -e "$e" -f "$fac" -n "$n" -w "$w" | awk '/^ *[0-9]/ {print $3, $NF}' >"$tmp/ours"
    bash "$peer" "$c" "$np" -b $((b * 4)) -e $((e * 4)) -f "$fac" -n "$n" -w "$w" | awk '/^ *[0-9]/ {print $1, $2}' >"$tmp/ompi"
    paste "$tmp/ompi" "$tmp/ours" |
      awk -v c="$c" '{printf "%-15s %9s B  ompi %10.2f  ours %10.2f  ratio %5.2f  %s\n", c, $1, $2, $3, $2 / $3, $4}'
  done
done
