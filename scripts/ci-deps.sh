#!/usr/bin/env bash
# The system tools the test suite builds and runs with, installed through
# apt when missing (CI starts from a clean Debian/Ubuntu machine):
#   cc, c++      the C tests of libucc.so.1, the fake CUDA driver, the kernel shim
#   nm, readelf  the symbol and soname checks of libucc.so.1
#   pkg-config   the installed ucc.pc
#   mpicc/mpirun the Open MPI run of capi/tests/c/ompi_like.c
# .ci/run then sets REQUIRE_CC=1 and REQUIRE_MPI=1, so a test that would
# skip for want of one of them fails instead.
set -euo pipefail

declare -A package=(
    [cc]=gcc [c++]=g++ [nm]=binutils [readelf]=binutils [pkg-config]=pkg-config
    [mpicc]=libopenmpi-dev [mpirun]=openmpi-bin
)
missing=()
for tool in cc c++ nm readelf pkg-config mpicc mpirun; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("${package[$tool]}")
done
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
wanted=$(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ')
if ! command -v apt-get >/dev/null 2>&1; then
    echo "ci-deps: missing $wanted and no apt-get to install them" >&2
    exit 1
fi
sudo=()
if [ "$(id -u)" -ne 0 ]; then
    sudo=(sudo)
fi
echo "ci-deps: installing $wanted" >&2
"${sudo[@]}" apt-get update -q
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q --no-install-recommends $wanted
