#!/usr/bin/env bash
# Open MPI's time over ferrocoll's, per collective and size, back to back
# on this host: one line per size, for finding where ferrocoll is behind.
#
# Usage: bench/scripts/ratios-openmpi.sh RANKS [small|large|all]
#   small: blocks from 8 B, up to 64 KiB (-f 4 on 2 ranks, -f 8 otherwise; 2 000 iterations)
#   large: 256 KiB - 64 MiB blocks (-f 4; 20 iterations, 5 warm-ups)
#   COLLS="..." picks the collectives (default: all 13 data collectives).
#   ROUNDS=N runs each pair N times, interleaved (ours, Open MPI, ours, ...),
#   and prints each side's median per size: one run of 2 000 small calls
#   swings by up to ±40 % on a 2-core VM (default 1).
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
rounds=${ROUNDS:-1}
# The median of each line's field `f` over the files given (same sizes, same order).
median() {
  local f=$1
  shift
  paste "$@" | awk -v f="$f" -v k="$#" -v w="$(awk '{print NF; exit}' "$1")" '{
    n = 0
    for (i = 0; i < k; i++) v[n++] = $(i * w + f)
    for (i = 1; i < n; i++) for (j = i; j > 0 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
    print (n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2)
  }'
}
for c in $colls; do
  for r in "${ranges[@]}"; do
    read -r b e fac n w <<<"$r"
    for ((i = 0; i < rounds; i++)); do
      "$perftest" --np "$np" -c "$c" -b "$b" -e "$e" -f "$fac" -n "$n" -w "$w" | awk '/^ *([0-9]|N\/A)/ {print $3, $NF}' >"$tmp/ours.$i"
      bash "$peer" "$c" "$np" -b $((b * 4)) -e $((e * 4)) -f "$fac" -n "$n" -w "$w" | awk '/^ *[0-9]/ {print $1, $2}' >"$tmp/ompi.$i"
    done
    awk '{print $1}' "$tmp/ompi.0" >"$tmp/sizes"
    awk '{print $2}' "$tmp/ours.0" >"$tmp/algs"
    median 2 "$tmp"/ompi.* >"$tmp/ompi"
    median 1 "$tmp"/ours.* >"$tmp/ours"
    paste "$tmp/sizes" "$tmp/ompi" "$tmp/ours" "$tmp/algs" |
      awk -v c="$c" '{printf "%-15s %9s B  ompi %10.2f  ours %10.2f  ratio %5.2f  %s\n", c, $1, $2, $3, $2 / $3, $4}'
    rm -f "$tmp"/ours.* "$tmp"/ompi.*
  done
done
