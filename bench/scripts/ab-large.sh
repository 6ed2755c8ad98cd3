#!/usr/bin/env bash
# Interleaved A/B of two perftest binaries on large messages: for each round
# and collective, run A then B over the sweep (B then A in even rounds: use
# an even number of rounds, so each goes first as often); print per size the median
# (over rounds) of each, and B/A. Each run waits until no compiler, linker or
# cargo test binary is running (a build on one of two cores makes a rank
# 3-15x slower: BENCHMARKS.md "Large messages"), and holds /tmp/bench.lock so
# that two people never measure at once. A run during which a build started
# is dropped and reported.
# Usage: ab-large.sh A_BIN B_BIN [ROUNDS]   (env NP=2, COLLS="bcast allgather allreduce",
#        B=256k E=16m (counts of float32), ITERS=20, WARMUPS=3)
set -euo pipefail
a=${1:?before binary}; b=${2:?after binary}
rounds=${3:-3}
np=${NP:-2}; colls=${COLLS:-bcast allgather allreduce}
lo=${B:-256k}; hi=${E:-16m}; iters=${ITERS:-20}; warm=${WARMUPS:-3}
out=$(mktemp)
busy() {
  for n in rustc cargo cc1 ld cc ld.lld mold; do pgrep -x "$n" >/dev/null && return 0; done
  pgrep -f 'target/(debug|release)/deps/' >/dev/null
}
for r in $(seq "$rounds"); do
  # The order alternates between rounds: the binary run second in a pair
  # came out slower in both orders at 256 KiB on the family-25 VM (1.12
  # one way, 1.02 the other; BENCHMARKS.md, twenty-sixth round).
  order="A B"; [ $((r % 2)) -eq 0 ] && order="B A"
  for c in $colls; do
    for bin in $order; do
      exe=$a; [ "$bin" = B ] && exe=$b
      for _ in $(seq 600); do busy || break; sleep 0.5; done
      res=$(flock /tmp/bench.lock "$exe" --np "$np" -c "$c" -b "$lo" -e "$hi" -n "$iters" -w "$warm" 2>&1)
      if busy; then echo "round $r $c $bin: a build ran meanwhile, dropped" >&2; continue; fi
      # Rows: count, bytes, avg, min, max, busbw, algorithm.
      awk -v c="$c" -v bin="$bin" '$1 ~ /^[0-9]+$/ && $7 ~ /\// {print c, bin, $2, $3, $7}' <<<"$res" >>"$out"
    done
  done
done
python3 - "$out" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
algs = {}
for line in open(sys.argv[1]):
    c, b, size, us, alg = line.split()
    runs[(c, int(size), b)].append(float(us))
    algs[(c, int(size))] = alg
print("| collective | bytes | A median µs | B median µs | B/A | rounds | algorithm |")
print("|---|---|---|---|---|---|---|")
for c, size in sorted(algs, key=lambda k: (k[0], k[1])):
    a, b = runs.get((c, size, "A"), []), runs.get((c, size, "B"), [])
    if a and b:
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"| {c} | {size} | {ma:.1f} | {mb:.1f} | {mb / ma:.2f} | {min(len(a), len(b))} | {algs[(c, size)]} |")
PY
rm -f "$out"
