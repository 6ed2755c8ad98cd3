#!/usr/bin/env bash
# Side-by-side sweeps of ferrocoll and Open MPI on this host, for BENCHMARKS.md.
#
# Usage: bench/scripts/compare-openmpi.sh OUTDIR [RANKS...]
#   Runs, for each collective and rank count, three sweeps of float32 from
#   8 B to 64 MiB (per-rank block, as ucc_perftest and the peer benchmark
#   count it), back to back:
#     ferrocoll   - default selection (shm TL on one host);
#     p2p         - ferrocoll with UCC_TLS=^shm (p2p algorithms over the
#                   shared-memory transport: rings + CMA single copy);
#     openmpi     - bench/peers/run-openmpi.sh (btl self,vader, tuned).
#   Then prints markdown tables (bench/scripts/tables.py).
set -euo pipefail
out=${1:?output directory}
shift
ranks=("$@")
[ ${#ranks[@]} -gt 0 ] || ranks=(2 4)
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
peer=${FERROCOLL_PEER_BENCH:-$root/bench/peers/run-openmpi.sh}
mkdir -p "$out"
cargo build --release -q -p ferrocoll-bench --manifest-path "$root/Cargo.toml"
perftest="$root/target/release/ferrocoll-perftest"
colls=${COLLS:-"allreduce bcast reduce allgather alltoall reduce_scatter barrier"}
for np in "${ranks[@]}"; do
  for c in $colls; do
    range=(-b 2 -e 16M -f 2)
    [ "$c" = barrier ] && range=()
    echo "== $c $np ranks" >&2
    "$perftest" --np "$np" -c "$c" "${range[@]}" --csv "$out/ferrocoll-$c-$np.csv" >/dev/null
    UCC_TLS=^shm "$perftest" --np "$np" -c "$c" "${range[@]}" --csv "$out/p2p-$c-$np.csv" >/dev/null
    mpi_range=(-b 8 -e 67108864)
    [ "$c" = barrier ] && mpi_range=()
    bash "$peer" "$c" "$np" "${mpi_range[@]}" >"$out/openmpi-$c-$np.txt" 2>/dev/null
  done
done
python3 "$here/tables.py" "$out"
