#!/usr/bin/env bash
# Fetch NVRTC (CUDA 13.0) from PyPI's nvidia-cuda-nvrtc wheel, so that a
# machine with no CUDA toolkit and no GPU can compile ferrocoll's kernels
# (tests only: at run time ferrocoll uses whatever libnvrtc.so.13 the
# loader finds). Idempotent: quick when the library is already there.
#
# usage: scripts/fetch-nvrtc.sh [DIR]     (default: <workspace>/target/nvrtc)
# prints: the folder holding libnvrtc.so.13 (put it on LD_LIBRARY_PATH;
#         ferrocoll-kernels' NVRTC test finds it there by itself)
set -euo pipefail
export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${1:-$root/target/nvrtc}"
version="13.0.88" # NVRTC 13.0: its PTX (ISA 9.0) is accepted by driver 580 (CUDA 13.0)

find_lib() { find "$dir/site" -name 'libnvrtc.so.13' -print -quit 2>/dev/null | xargs -r dirname; }

lib="$(find_lib || true)"
if [ -n "$lib" ] && [ -f "$dir/.version-$version" ]; then
    echo "$lib"
    exit 0
fi

mkdir -p "$dir"
rm -rf "$dir/site" "$dir/wheels"
python3 -m pip download -q --no-deps --only-binary=:all: \
    -d "$dir/wheels" "nvidia-cuda-nvrtc==$version" >&2
# One install call for all wheels: a second --target call would wipe the first.
python3 -m pip install -q --no-index --no-deps \
    --target "$dir/site" "$dir"/wheels/*.whl >&2
lib="$(find_lib || true)"
if [ -z "$lib" ]; then
    echo "fetch-nvrtc: no libnvrtc.so.13 in the nvidia-cuda-nvrtc==$version wheel under $dir/site" >&2
    exit 1
fi
rm -rf "$dir/wheels"
touch "$dir/.version-$version"
echo "$lib"
