#!/bin/sh
# The AArch64 build: cross-compiles the library and the kernels' unit tests
# with Debian's gcc-aarch64-linux-gnu (cmake/aarch64-linux-gnu.cmake), then
# runs them under qemu-user: the NEON sgemm kernel against the reference, the
# portable kernels on an architecture with unsigned char and weaker memory
# ordering, and the stories260K golden ids end to end.
#   tests/cross/aarch64.sh SOURCE_DIR BUILD_DIR
# SNUG_QEMU_AARCH64 names the emulator (default qemu-aarch64; tests/cross/harness.sh
# puts stubs there to check that this script's verdicts can fail).
# SNUG_QEMU_TIMEOUT: seconds a test may run under it (default 300; each takes
# under 30 alone). A test killed at that limit runs once more and fails only
# if it hangs again: test_gemm hung once under qemu-aarch64 in a local CI run
# (2026-12-06, 900 s, where five earlier runs of this script took 71-85 s)
# and not in 14 runs since, alone or beside a busy snug bench; the hang and
# the test's output so far are printed either way.
# Exit 77 (skipped, as CTest's SKIP_RETURN_CODE) when the cross compiler or
# qemu-aarch64 is missing (scripts/deps.sh installs both): a build that is not
# run checks nothing, so it must not read as a pass. Otherwise the exit status
# is 1 when any test under qemu exits non-zero: each test's own status counts
# (dash has no pipefail, so no test's status goes through a pipe here).
set -eu
src=$(cd "$1" && pwd)
out=$2
if ! command -v aarch64-linux-gnu-gcc >/dev/null 2>&1; then
    echo "aarch64-linux-gnu-gcc is not installed: skipped"
    exit 77
fi
qemu=${SNUG_QEMU_AARCH64:-qemu-aarch64}
if ! command -v "$qemu" >/dev/null 2>&1; then
    echo "$qemu is not installed: the AArch64 tests cannot run, skipped"
    exit 77
fi
cmake -S "$src" -B "$out" -DCMAKE_TOOLCHAIN_FILE="$src/cmake/aarch64-linux-gnu.cmake" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
tests="test_gemm test_llm_kernels test_stories260k"
# shellcheck disable=SC2086
cmake --build "$out" -j2 --target snug $tests
file "$out/snug" | grep -q 'ARM aarch64' || { echo "snug is not an AArch64 binary"; exit 1; }
cd "$src" # the fixtures are found as ../shared/... from here
log=$(mktemp)
trap 'rm -f "$log"' EXIT
failed=""
limit=${SNUG_QEMU_TIMEOUT:-300}
for t in $tests; do
    echo "== $t (qemu-aarch64)"
    for try in 1 2; do
        rc=0
        timeout "$limit" "$qemu" -L /usr/aarch64-linux-gnu "$out/tests/$t" >"$log" 2>&1 || rc=$?
        [ "$rc" -eq 124 ] && [ "$try" -eq 1 ] || break
        echo "== $t did not finish in $limit s under qemu-aarch64 (killed); its output so far:"
        tail -5 "$log"
        echo "== $t once more: a second hang fails it"
    done
    if [ "$rc" -eq 0 ]; then
        tail -3 "$log"
    else
        cat "$log"
        echo "== $t FAILED under qemu-aarch64 (exit $rc)"
        failed="$failed $t"
    fi
done
if [ -n "$failed" ]; then
    echo "AArch64 tests failed:$failed"
    exit 1
fi
echo "AArch64: all of $tests passed under qemu-aarch64"
