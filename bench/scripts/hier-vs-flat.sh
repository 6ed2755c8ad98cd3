#!/usr/bin/env bash
# Flat vs hierarchical p2p collectives on an emulated cluster (issue 12):
# NP ranks on HOSTS emulated hosts under SWITCHES emulated switches, with
# and without link emulation. For each round, each link setting, each
# collective: the default selection ("flat": whatever the score map picks,
# named in the table) then the hierarchical algorithm pinned by name
# (UCC_TL_P2P_TUNE=<coll>:@$HIER:inf, HIER=hier by default; HIER=split_rail
# with COLLS=allreduce for the split-rail allreduce), interleaved so that
# drift hits both.
# Prints one markdown table per collective and link setting: per size the
# median over rounds of each one's avg time (µs) and hier/flat (< 1: the
# hierarchy wins).
#
# Usage: hier-vs-flat.sh [PERFTEST_BIN]   (default target/release/ferrocoll-perftest)
# Env: NP=8 HOSTS=4 SWITCHES=2 ROUNDS=3
#      LINK="host:5us:10GB/s,switch:20us:2GB/s" (the emulated setting; the
#      other run has none)
#      COLLS="allreduce bcast reduce gather scatter alltoallv"
#      MAX=16m (largest message in bytes: the vector for allreduce, bcast
#      and reduce; a rank's whole buffer for gather, scatter and alltoallv,
#      whose perftest count is per block, so their counts stop at MAX/NP)
#      EXTRA="" (more perftest options, e.g. "-n 200 -w 20")
# Run it on a quiet machine with at least NP cores: an oversubscribed one
# measures the scheduler. Datatype int8, so counts are bytes; 8 B up, x4.
set -euo pipefail
bin=${1:-target/release/ferrocoll-perftest}
np=${NP:-8}; hosts=${HOSTS:-4}; switches=${SWITCHES:-2}; rounds=${ROUNDS:-3}
link=${LINK:-host:5us:10GB/s,switch:20us:2GB/s}
colls=${COLLS:-allreduce bcast reduce gather scatter alltoallv}
max=${MAX:-16m}
extra=${EXTRA:-}
hier=${HIER:-hier}
[ -x "$bin" ] || { echo "no perftest at $bin (cargo build --release -p ferrocoll-bench?)" >&2; exit 1; }
bytes() { numfmt --from=iec "${1^^}"; }
max_b=$(bytes "$max")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for r in $(seq "$rounds"); do
  for l in none emulated; do
    for c in $colls; do
      case $c in gather|gatherv|scatter|scatterv|alltoall|alltoallv|allgather|allgatherv) e=$((max_b / np));; *) e=$max_b;; esac
      for v in flat hier; do
        envs=()
        [ "$l" = emulated ] && envs+=("FERROCOLL_EMULATE_LINK=$link")
        [ "$v" = hier ] && envs+=("UCC_TL_P2P_TUNE=$c:@$hier:inf")
        # shellcheck disable=SC2086
        env "${envs[@]}" "$bin" --np "$np" --emulate-hosts "$hosts" --emulate-switches "$switches" \
          -c "$c" -d int8 -b 8 -e "$e" -f 4 $extra --json "$out/$l-$c-$v-$r.json" >/dev/null
      done
    done
  done
done
python3 - "$out" "$rounds" "$colls" "$np" "$hosts" "$switches" "$link" <<'PY'
import json, statistics, sys
out, rounds, colls, np, hosts, switches, link = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), *sys.argv[4:]
def rows(l, c, v, r):
    return json.load(open(f"{out}/{l}-{c}-{v}-{r}.json"))["results"]
def size(b):
    for unit, k in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= k and b % k == 0:
            return f"{b // k} {unit}"
    return f"{b} B"
for l in ("none", "emulated"):
    for c in colls:
        print(f"\n{c}, {np} ranks on {hosts} hosts under {switches} switches, link emulation: "
              + (link if l == "emulated" else "none") + f" (median of {rounds} rounds, avg µs)\n")
        print("| size | flat | flat algorithm | hier | hier algorithm | hier/flat |")
        print("|---|---|---|---|---|---|")
        flat = [rows(l, c, "flat", r) for r in range(1, rounds + 1)]
        hier = [rows(l, c, "hier", r) for r in range(1, rounds + 1)]
        for i, row in enumerate(flat[0]):
            f = statistics.median(x[i]["time_avg_us"] for x in flat)
            h = statistics.median(x[i]["time_avg_us"] for x in hier)
            b = row["size_bytes"] if row["size_bytes"] is not None else row["count"]
            print(f"| {size(b)} | {f:.2f} | {row['algorithm']} | {h:.2f} | {hier[0][i]['algorithm']} | {h / f:.2f} |")
PY
