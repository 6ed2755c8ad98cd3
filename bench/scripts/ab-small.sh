#!/usr/bin/env bash
# Interleaved A/B of two perftest binaries on small collectives (8 B, or
# none for barrier): for each round, each rank count and each collective,
# run A then B; print every run's avg/min/max (µs, from --json) and the
# medians over rounds. Timings on a shared machine drift from minute to
# minute: only interleaved runs of both binaries compare.
# Usage: ab-small.sh A_BIN B_BIN [ROUNDS] [ITERS]   (env NPS="2 4", COLLS="...", EXTRA="-p")
set -euo pipefail
a=${1:?before binary}; b=${2:?after binary}
rounds=${3:-3}; iters=${4:-20000}
nps=${NPS:-2 4}
colls=${COLLS:-allreduce bcast barrier reduce allgather}
extra=${EXTRA:-}
out=$(mktemp -d)
for r in $(seq "$rounds"); do
  for np in $nps; do
    for c in $colls; do
      for bin in A B; do
        exe=$a; [ "$bin" = B ] && exe=$b
        j="$out/$bin-$np-$c-$r.json"
        # shellcheck disable=SC2086
        "$exe" --np "$np" -c "$c" -b 2 -e 2 -n "$iters" $extra --json "$j" >/dev/null
      done
    done
  done
done
python3 - "$out" "$rounds" "$nps" "$colls" <<'PY'
import json, statistics, sys
out, rounds, nps, colls = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4].split()
def row(bin, np, c, r):
    x = json.load(open(f"{out}/{bin}-{np}-{c}-{r}.json"))["results"][0]
    return x["time_avg_us"], x["time_min_us"], x["time_max_us"], x["algorithm"]
print("| ranks | collective | A avg (min/max over ranks), each round | B avg (min/max), each round | A median | B median | B/A | algorithm |")
print("|---|---|---|---|---|---|---|---|")
for np in nps:
    for c in colls:
        ra = [row("A", np, c, r) for r in range(1, rounds + 1)]
        rb = [row("B", np, c, r) for r in range(1, rounds + 1)]
        fmt = lambda rs: ", ".join(f"{a:.2f} ({lo:.2f}/{hi:.2f})" for a, lo, hi, _ in rs)
        ma, mb = statistics.median(x[0] for x in ra), statistics.median(x[0] for x in rb)
        print(f"| {np} | {c} | {fmt(ra)} | {fmt(rb)} | {ma:.2f} | {mb:.2f} | {mb/ma:.2f} | {rb[0][3]} |")
PY
rm -rf "$out"
