#!/bin/sh
# The AArch64 build: cross-compiles the library and the kernels' unit tests
# with Debian's gcc-aarch64-linux-gnu (cmake/aarch64-linux-gnu.cmake), then
# runs them under qemu-user: the NEON sgemm kernel against the reference, the
# portable kernels on an architecture with unsigned char and weaker memory
# ordering, and the stories260K golden ids end to end.
#   tests/cross/aarch64.sh SOURCE_DIR BUILD_DIR
# Exit 77 (skipped) when the cross compiler is not installed (scripts/deps.sh
# installs it).
set -eu
src=$(cd "$1" && pwd)
out=$2
if ! command -v aarch64-linux-gnu-gcc >/dev/null 2>&1; then
    echo "aarch64-linux-gnu-gcc is not installed: skipped"
    exit 77
fi
cmake -S "$src" -B "$out" -DCMAKE_TOOLCHAIN_FILE="$src/cmake/aarch64-linux-gnu.cmake" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
tests="test_gemm test_llm_kernels test_stories260k"
# shellcheck disable=SC2086
cmake --build "$out" -j2 --target snug $tests
file "$out/snug" | grep -q 'ARM aarch64' || { echo "snug is not an AArch64 binary"; exit 1; }
if ! command -v qemu-aarch64 >/dev/null 2>&1; then
    echo "built for AArch64; qemu-aarch64 is not installed, so not run"
    exit 0
fi
cd "$src" # the fixtures are found as ../shared/... from here
for t in $tests; do
    echo "== $t (qemu-aarch64)"
    qemu-aarch64 -L /usr/aarch64-linux-gnu "$out/tests/$t" | tail -3
done
