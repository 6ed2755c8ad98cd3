#!/usr/bin/env bash
# Build the workspace's tests for aarch64 Linux and run them under qemu-user.
#
# What this checks: that everything compiles and links for
# aarch64-unknown-linux-gnu (no x86-only intrinsics without a fallback,
# c_char/u8 differences, cfg(target_arch) gaps), and that the test suite
# passes on an emulated aarch64 CPU: the portable (non-AVX2/F16C/SSE2)
# paths of the reduction kernels and streaming copies, the C interface
# (libucc.so.1) with C/C++ test programs built by the aarch64 cross
# compiler, the fake CUDA driver and fake SHARP built for aarch64, and
# NVRTC from the aarch64 wheel.  Rank processes that tests start by
# re-executing themselves (or the launcher binaries) run through a
# binfmt_misc registration of qemu-aarch64 (flag F), made here if missing.
#
# What it cannot check:
#  - Weak memory ordering.  qemu-user translates aarch64 loads and stores
#    into x86 ones and runs them on x86's TSO memory model: a missing
#    Release/Acquire between processes or threads will NOT show up here.
#    That needs reading the code (tl/src/shm, transport/src/shm) or a run
#    on real ARM hardware.
#  - Timing: qemu is 5-50x slower than native; a test that fails on a
#    deadline here may pass natively (re-run it alone to tell).
#  - 64 KiB pages, 128-byte cache lines, missing sysfs cache files: qemu
#    reports the host's page size and the host's /sys.
#  - The Open MPI half of capi's C tests (MPICC is pointed at nothing, so
#    it prints "skipped"): the host's mpicc/mpirun are x86 builds.
#  - GPUs (none here; the fake-driver tests do run).
#
# What qemu-user (7.2) does differently, and how the code copes (no
# workaround here any more):
#  - it fakes a process's own /proc/<pid>/stat (start time, pgrp): the
#    library reads /proc/<pid>/task/<pid>/stat (the same fields from the
#    kernel);
#  - it refuses prctl(PR_SET_CHILD_SUBREAPER) with EINVAL: ferrocoll-run
#    says it cannot adopt escaped processes and goes on, and the launcher
#    test of left-behind processes checks only the ranks' groups;
#  - it has no process_vm_readv (ENOSYS): the shm transport runs without
#    CMA (large messages stream through the ring), and the transport tests
#    of the rendezvous by CMA say they skip.
#
# usage: scripts/aarch64-check.sh [extra args for the test binaries]
#   env: TARGET_DIR (default /tmp/arm-target), TEST_THREADS (default 1),
#        SELECT (cargo's selection of what to test; default --workspace;
#        e.g. SELECT="-p ferrocoll-tl --lib" or
#        SELECT="-p ferrocoll-tests --test shm_inline --test small_path"),
#        BUILD_ONLY=1 (build the tests, run none),
#        SKIP_INSTALL=1 (do not apt-get anything)
# Needs root for apt-get and for registering binfmt_misc.
set -euo pipefail
cd "$(dirname "$0")/.."
target=aarch64-unknown-linux-gnu
target_dir=${TARGET_DIR:-/tmp/arm-target}
tools=$target_dir/aarch64-tools

# 1. Cross toolchain, emulator, and the aarch64 C runtime (multiarch) that
#    qemu's children find without QEMU_LD_PREFIX (tests start their rank
#    processes with env_clear()).
if [ "${SKIP_INSTALL:-0}" != 1 ]; then
    need=()
    command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
    command -v aarch64-linux-gnu-g++ >/dev/null || need+=(g++-aarch64-linux-gnu)
    command -v qemu-aarch64 >/dev/null || need+=(qemu-user)
    dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
    [ -e /lib/ld-linux-aarch64.so.1 ] || need+=(libc6:arm64 libgcc-s1:arm64 libstdc++6:arm64)
    if [ ${#need[@]} -gt 0 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
    fi
    rustup target list --installed | grep -qx $target || rustup target add $target
fi

# 2. binfmt_misc: exec of an aarch64 ELF goes to qemu-aarch64 (F: the
#    interpreter is opened now, so it works in any mount namespace).
qemu=$(command -v qemu-aarch64)
binfmt=/proc/sys/fs/binfmt_misc
[ -e $binfmt/register ] || mount -t binfmt_misc binfmt_misc $binfmt
if [ ! -e $binfmt/qemu-aarch64 ]; then
    printf '%s' ":qemu-aarch64:M::\\x7fELF\\x02\\x01\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x02\\x00\\xb7\\x00:\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\x00\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\xfe\\xff\\xff\\xff:$qemu:F" \
        > $binfmt/register
fi

# 3. What the tests call by name at run time must build aarch64 code:
#    gcc/g++ (fake CUDA driver, fake SHARP, CPU kernels), cc/c++ and nm
#    and readelf (capi's C tests).  Only the runner puts these first on
#    PATH, so cargo's own build scripts keep the host compilers.
mkdir -p "$tools"
for t in gcc cc; do printf '#!/bin/sh\nexec aarch64-linux-gnu-gcc "$@"\n' > "$tools/$t"; done
for t in g++ c++; do printf '#!/bin/sh\nexec aarch64-linux-gnu-g++ "$@"\n' > "$tools/$t"; done
for t in nm readelf; do printf '#!/bin/sh\nexec aarch64-linux-gnu-%s "$@"\n' $t > "$tools/$t"; done
# No -L/QEMU_LD_PREFIX: with libc6:arm64 installed, the cross sysroot's
# ld.so would be paired with /lib/aarch64-linux-gnu's libc (another build),
# and every pthread_create then hangs.
cat > "$tools/runner" <<EOF
#!/bin/sh
export PATH="$tools:\$PATH" CC=aarch64-linux-gnu-gcc CXX=aarch64-linux-gnu-g++ MPICC=/nonexistent/mpicc
exec $qemu "\$@"
EOF
chmod +x "$tools"/*

# NVRTC for aarch64 (the ARM wheel of the same version scripts/fetch-nvrtc.sh takes).
nvrtc=$target_dir/nvrtc-aarch64
version=$(sed -n 's/^version="\([^"]*\)".*/\1/p' scripts/fetch-nvrtc.sh)
if [ ! -f "$nvrtc/.version-$version" ]; then
    rm -rf "$nvrtc" && mkdir -p "$nvrtc"
    PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 python3 -m pip download -q --no-deps \
        --only-binary=:all: --platform manylinux2014_aarch64 -d "$nvrtc/wheels" "nvidia-cuda-nvrtc==$version"
    python3 -m zipfile -e "$nvrtc"/wheels/*.whl "$nvrtc/site"
    rm -rf "$nvrtc/wheels"
    touch "$nvrtc/.version-$version"
fi

export CARGO_TARGET_DIR=$target_dir CARGO_INCREMENTAL=0
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc CXX_aarch64_unknown_linux_gnu=aarch64-linux-gnu-g++
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER=$tools/runner
export FERROCOLL_NVRTC_DIR=$nvrtc/site/nvidia/cu13/lib
# As .ci/run, less REQUIRE_MPI (see the header).
export REQUIRE_NVRTC=1 REQUIRE_FAKE_CUDA=1 REQUIRE_FAKE_SHARP=1 REQUIRE_CC=1

echo "aarch64-check: building in $target_dir" >&2
read -r -a select <<<"${SELECT:---workspace}"
cargo test "${select[@]}" --target $target --no-run
[ "${BUILD_ONLY:-0}" = 1 ] && exit 0
echo "aarch64-check: running under $qemu" >&2
cargo test "${select[@]}" --target $target --no-fail-fast -- --test-threads="${TEST_THREADS:-1}" "$@"
