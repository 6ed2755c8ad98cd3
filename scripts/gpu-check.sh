#!/usr/bin/env bash
# Run ferrocoll's GPU tests on a machine with a GPU, from binaries built
# elsewhere (the GPU machine need not have a Rust toolchain).
#
# usage:
#   scripts/gpu-check.sh [build] [DIR]   build the release test binaries here and
#                                        collect the GPU-relevant ones into DIR
#                                        (default: target/gpu-check), at most 64 MiB
#                                        (packed into DIR/bundle.tar.gz when larger;
#                                        the other modes unpack it)
#   scripts/gpu-check.sh sanitize [DIR]  on the GPU machine: the kernel and memory tests
#                                        under compute-sanitizer memcheck and racecheck
#   scripts/gpu-check.sh exec DIR CMD... on the GPU machine: CMD with run's environment
#   scripts/gpu-check.sh run [DIR]       on the GPU machine: run every test binary
#                                        in DIR with REQUIRE_GPU=1 (a skipped GPU
#                                        test fails) and the nvidia wheels' library
#                                        folders on LD_LIBRARY_PATH; exit non-zero
#                                        if any binary fails. A binary still running
#                                        after GPU_CHECK_TIMEOUT s (300) has the
#                                        backtraces of all its processes' threads
#                                        printed (cuda-gdb, else gdb), then is stopped
#   scripts/gpu-check.sh all [DIR]       on the GPU machine, for one call of a lease:
#                                        run, the GPU benchmarks, then sanitize, within
#                                        GPU_CHECK_BUDGET s (540); full logs under $OUT
#                                        (else DIR/logs), a summary printed last
#
# What is collected: the test binaries named gpu_* (but gpu_fake_driver) and ee_* (tests/), every
# test binary of ferrocoll-kernels and the unit tests of ferrocoll-cuda,
# ferrocoll-mc and ferrocoll-ee, and the C API's c_api test with the libucc.so it
# loads (it compiles its C programs there, from capi/tests/c, with the machine's cc), into DIR/tests;
# ferrocoll-perftest, ferrocoll-run, ferrocoll-info and ferrocoll-reduce-bench (for benchmarks; not run here) and
# ferrocoll-ucc-install (c_api's installer) into DIR/tools.
#
# With the device tool: build here, then, in one call of the lease,
#   run(command="scripts/gpu-check.sh all target/gpu-check", carry=["target/gpu-check"])
# (or "run" for the tests alone).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
mode="build"
case "${1:-}" in
    build | run | sanitize | all) mode="$1"; shift ;;
    exec) mode="exec_in_env"; shift; gpu_exec=("${@:2}"); set -- "${1:-}" ;;
    -h | --help) sed -n '2,34p' "$0"; exit 0 ;;
esac
dir="${1:-$root/target/gpu-check}"
limit_bytes=$((64 * 1024 * 1024))
# What build leaves in DIR when the binaries exceed the limit unpacked.
bundle="bundle.tar.gz"

die() { echo "gpu-check: $*" >&2; exit 1; }

# Which test binaries matter on a GPU: (package, target name, target kind).
wanted() {
    local pkg="$1" name="$2" kind="$3"
    # gpu_fake_driver runs on the fake CUDA driver whatever the machine: not a GPU test.
    case "$name" in gpu_fake_driver) return 1 ;; gpu_* | ee_*) return 0 ;; esac
    case "$pkg" in ferrocoll-kernels) return 0 ;; esac
    # The C API's tests, whose CUDA stream case needs a GPU.
    case "$pkg:$name" in ferrocoll-capi:c_api) return 0 ;; esac
    if [ "$kind" = lib ]; then
        case "$pkg" in ferrocoll-cuda | ferrocoll-mc | ferrocoll-ee) return 0 ;; esac
    fi
    return 1
}

build() {
    command -v cargo >/dev/null || die "cargo is not installed here"
    command -v python3 >/dev/null || die "python3 is needed to read cargo's JSON output"
    cd "$root"
    rm -rf "$dir"
    mkdir -p "$dir/tests" "$dir/tools"
    local json="$dir/.cargo.json"
    # Release builds are ~1-2 MB a binary (debug ones ~30 MB): they fit the carry limit.
    # Without the release profile's whole-program optimisation: it would
    # link each of the ~40 test binaries as one unit (minutes each). Tests
    # built with --release use the bench profile, which inherits release.
    CARGO_PROFILE_RELEASE_LTO=off CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
        CARGO_PROFILE_BENCH_LTO=off CARGO_PROFILE_BENCH_CODEGEN_UNITS=16 \
        cargo test --release --no-run --workspace --message-format=json >"$json"
    cargo build --release -p ferrocoll-bench -p ferrocoll-capi --bins
    # One line per test executable: package, target name, kind, path.
    cargo metadata --no-deps --format-version 1 >"$json.meta"
    python3 - "$json" "$json.meta" >"$dir/.list" <<'PY'
import json, sys
# Package names by manifest (package ids are not meant to be parsed).
names = {p["manifest_path"]: p["name"] for p in json.load(open(sys.argv[2]))["packages"]}
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    if not m.get("profile", {}).get("test"):
        continue
    pkg = names.get(m.get("manifest_path"), "?")
    print(pkg, m["target"]["name"], m["target"]["kind"][0], m["executable"], sep="\t")
PY
    local n=0 pkg name kind exe out
    while IFS=$'\t' read -r pkg name kind exe; do
        if wanted "$pkg" "$name" "$kind"; then
            out="$name"
            [ "$kind" = lib ] && out="$pkg-unit"
            cp "$exe" "$dir/tests/$out"
            n=$((n + 1))
        fi
    done <"$dir/.list"
    rm -f "$dir/.list" "$json" "$json.meta"
    [ "$n" -gt 0 ] || die "no GPU test binary was found in cargo's output"
    # c_api loads the library beside itself (target/<profile>/deps when cargo runs it).
    if [ -f "$dir/tests/c_api" ]; then
        cp target/release/deps/libucc.so "$dir/tests/libucc.so" || die "c_api was built but not libucc.so"
        chmod -x "$dir/tests/libucc.so"
    fi
    for tool in ferrocoll-perftest ferrocoll-run ferrocoll-info ferrocoll-reduce-bench ferrocoll-ucc-install; do
        [ -x "target/release/$tool" ] && cp "target/release/$tool" "$dir/tools/"
    done
    local size
    size="$(du -sb "$dir" | cut -f1)"
    if [ "$size" -gt "$limit_bytes" ]; then
        # Line tables are the bulk; without them a binary still runs every
        # test, and its symbol table still names functions in backtraces
        # (cuda-gdb attached to a hung test needs them).
        command -v strip >/dev/null && strip --strip-debug "$dir"/tests/* "$dir"/tools/*
        size="$(du -sb "$dir" | cut -f1)"
    fi
    if [ "$size" -gt "$limit_bytes" ]; then
        # Still too large (each binary holds the whole library): carry them
        # packed; run, sanitize and exec unpack the bundle where it lands.
        tar -C "$dir" -czf "$dir/$bundle" tests tools
        ls -l "$dir/tests" "$dir/tools"
        rm -rf "$dir/tests" "$dir/tools"
        size="$(du -sb "$dir" | cut -f1)"
        [ "$size" -le "$limit_bytes" ] || die "$dir holds $size bytes packed, more than the 64 MiB a run can carry"
        echo "gpu-check: $n test binaries and the tools packed into $dir/$bundle ($((size / 1024)) KiB)"
        return
    fi
    echo "gpu-check: $n test binaries and the tools in $dir ($((size / 1024)) KiB):"
    ls -l "$dir/tests" "$dir/tools"
}

# The folders of the nvidia-* wheels that hold shared libraries, one per line.
wheel_lib_dirs() {
    python3 - <<'PY' 2>/dev/null || true
import os
try:
    import nvidia
except ImportError:
    raise SystemExit(0)
seen = set()
for base in list(nvidia.__path__):
    for here, _dirs, files in os.walk(base):
        if any(f.startswith("lib") and ".so" in f for f in files) and here not in seen:
            seen.add(here)
            print(here)
PY
}

# Point LD_LIBRARY_PATH at the nvidia wheels' libraries (and a libnccl.so link).
gpu_env() {
    if [ ! -d "$dir/tests" ] && [ -f "$dir/$bundle" ]; then
        tar -C "$dir" -xzf "$dir/$bundle" || die "cannot unpack $dir/$bundle"
    fi
    [ -d "$dir/tests" ] || die "$dir/tests does not exist: build first (scripts/gpu-check.sh build $dir)"
    # c_api installs the library it tests with this (cargo's path to it is not carried).
    export FERROCOLL_UCC_INSTALL="$dir/tools/ferrocoll-ucc-install"
    local libs="" d
    while IFS= read -r d; do
        [ -n "$d" ] && libs="${libs:+$libs:}$d"
    done < <(wheel_lib_dirs)
    # cudarc asks for libnccl.so, the nvidia-nccl wheel ships only libnccl.so.2: link it.
    local shim
    shim="$(mktemp -d)"  # left behind: a few bytes in /tmp
    local dirs=()
    [ -n "$libs" ] && IFS=':' read -ra dirs <<<"$libs"
    for d in "${dirs[@]}"; do
        if [ -e "$d/libnccl.so.2" ]; then
            ln -sf "$d/libnccl.so.2" "$shim/libnccl.so"
            break
        fi
    done
    export LD_LIBRARY_PATH="$shim${libs:+:$libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export REQUIRE_GPU=1
    # Tests run several ranks of one process on the one GPU, each with
    # streams held by triggered collectives; CUDA maps a process's streams
    # onto CUDA_DEVICE_MAX_CONNECTIONS hardware queues (8 by default), and a
    # copy one rank needs can queue behind another rank's stream wait. On the
    # H100 gpu_stream's 3-rank ordering test hung at 8 and passed at 32.
    export CUDA_DEVICE_MAX_CONNECTIONS="${CUDA_DEVICE_MAX_CONNECTIONS:-32}"
    echo "gpu-check: LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    if command -v nvidia-smi >/dev/null; then nvidia-smi -L || true; fi
}

# The kernel tests under compute-sanitizer (memcheck, then racecheck).
sanitize() {
    gpu_env
    command -v compute-sanitizer >/dev/null || die "compute-sanitizer is not on PATH"
    local failed=0 t tool
    # The tests that launch ferrocoll's kernels (ferrocoll-kernels' unit
    # tests launch nothing, which the sanitizer refuses; gpu_colls only
    # copies, and ran past 120 s under either tool on the H100).
    for t in nvrtc gpu_mc; do
        [ -x "$dir/tests/$t" ] || continue
        for tool in memcheck racecheck; do
            echo "=== compute-sanitizer --tool $tool $t"
            compute-sanitizer --tool "$tool" --error-exitcode 99 "$dir/tests/$t" --test-threads=1 \
                || { echo "gpu-check: $tool found errors in $t"; failed=1; }
        done
    done
    return "$failed"
}

exec_in_env() {
    gpu_env
    "${gpu_exec[@]}"
}

# The process `pid` and its descendants, one per line.
tree_of() {
    local c
    echo "$1"
    for c in $(pgrep -P "$1" 2>/dev/null); do tree_of "$c"; done
}

# Where every thread of `pid` and of its descendants is (cuda-gdb, else gdb):
# a hung GPU test says where it hangs before it is stopped.
backtraces() {
    local dbg p n=0
    dbg="$(command -v cuda-gdb || command -v gdb || true)"
    [ -n "$dbg" ] || { echo "gpu-check: no cuda-gdb or gdb here to show where it hangs"; return 0; }
    for p in $(tree_of "$1"); do
        n=$((n + 1))
        [ "$n" -le 6 ] || break
        echo "--- threads of pid $p: $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-160)"
        timeout 60 "$dbg" -batch -p "$p" -ex "set pagination off" -ex "thread apply all bt 30" 2>&1 \
            | grep -E '^(Thread|#)' | head -400 || true
    done
}

# Run "$@" for at most `limit` seconds; past it, show where it is and stop it
# and its children. Its exit status (124 when stopped).
run_limited() {
    local limit="$1" pid waited=0
    shift
    "$@" &
    pid=$!
    while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt "$limit" ]; do
        sleep 1
        waited=$((waited + 1))
    done
    if kill -0 "$pid" 2>/dev/null; then
        echo "gpu-check: $(basename "$1") still running after $limit s: where its threads are"
        backtraces "$pid"
        local all
        all="$(tree_of "$pid")"
        # shellcheck disable=SC2086 # one pid per word
        kill -TERM $all 2>/dev/null || true
        sleep 2
        # shellcheck disable=SC2086
        kill -KILL $all 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        return 124
    fi
    wait "$pid"
}

run() {
    gpu_env
    local failed=() passed=0 t status
    for t in "$dir"/tests/*; do
        [ -x "$t" ] || continue
        echo "=== $(basename "$t")"
        set +e
        # A hung test must not eat the lease: each binary gets a limit
        # (GPU_CHECK_TIMEOUT seconds, default 300); libtest has named the
        # tests running for over 60 s by then.
        # gpu_stream's tests hold streams: one at a time, so that the streams
        # of one test never share a hardware queue with another test's.
        local threads=4
        case "$(basename "$t")" in gpu_stream) threads=1 ;; esac
        run_limited "${GPU_CHECK_TIMEOUT:-300}" "$t" --test-threads="$threads"
        status=$?
        [ "$status" -eq 124 ] && echo "gpu-check: $(basename "$t") stopped after ${GPU_CHECK_TIMEOUT:-300} s (hung?)"
        set -e
        if [ "$status" -eq 0 ]; then
            passed=$((passed + 1))
        else
            failed+=("$(basename "$t") (exit $status)")
        fi
    done
    echo "gpu-check: $passed binaries passed, ${#failed[@]} failed"
    if [ "${#failed[@]}" -gt 0 ]; then
        printf 'gpu-check: FAILED: %s\n' "${failed[@]}"
        exit 1
    fi
}

# run, the benchmarks the GPU issues ask for, and sanitize, in one budget.
all() {
    local budget="${GPU_CHECK_BUDGET:-540}" out="${OUT:-$dir/logs}" status=0
    mkdir -p "$out"
    left() { echo $((budget - SECONDS)); }
    SECONDS=0
    # In a subshell: run exits the shell when a binary failed.
    (GPU_CHECK_TIMEOUT="${GPU_CHECK_TIMEOUT:-120}" run) >"$out/run.log" 2>&1 || status=1
    gpu_env >/dev/null
    local t="$dir/tests" tools="$dir/tools"
    {
        echo "=== reduce kernels against the copy"
        run_limited 90 "$tools/ferrocoll-reduce-bench" -m cuda -s 256m -n 20 || true
        echo "=== triggered post"
        run_limited 60 "$t/gpu_stream" the_time_a_triggered_post_adds_to_a_stream --exact --nocapture || true
        echo "=== TL/NCCL overhead"
        run_limited 60 "$t/gpu_nccl" nccl_overhead_benchmark_one_rank --exact --nocapture || true
        # A team of one stages without a transport: whether the small
        # sizes' time (170-240 us on an H200, more than 64 KiB's 50) is the
        # staging copies' or the two processes'.
        echo "=== perftest allreduce -m cuda, team of one"
        run_limited 60 "$tools/ferrocoll-perftest" --np 1 -c allreduce -m cuda -b 4 -e 64k -f 16 -n 200 -w 20 || true
        local coll mem
        for coll in allreduce allgather reduce_scatter; do
            for mem in cuda host; do
                [ "$(left)" -gt 120 ] || break 2
                echo "=== perftest $coll -m $mem, 2 processes"
                run_limited 60 "$tools/ferrocoll-perftest" --np 2 -c "$coll" -m "$mem" -b 4 -e 64m -f 16 -n 20 -w 3 || true
            done
        done
    } >"$out/bench.log" 2>&1
    if [ "$(left)" -gt 60 ]; then
        (run_limited "$(left)" sanitize) >"$out/sanitize.log" 2>&1 || status=1
    else
        echo "gpu-check: no time left for sanitize" >"$out/sanitize.log"
    fi
    echo "=== summary ($SECONDS s; logs in $out)"
    grep -E "^=== |test result|FAILED|stopped|still running" "$out/run.log" || true
    grep -E "SUMMARY|found errors" "$out/sanitize.log" || true
    grep -vE "^gpu-check: LD_LIBRARY_PATH|^GPU 0|^running|^$|^test result" "$out/bench.log" | tail -60
    return "$status"
}

"$mode"
