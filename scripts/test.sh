#!/usr/bin/env bash
# The whole test suite: installs dependencies, builds snug three times
# (optimized with debug info, Release, and with AddressSanitizer +
# UndefinedBehaviorSanitizer), runs every CTest test on the first build, the
# unit tests on the second and all but the Python model-fixture tests on the
# third; then the fuzz targets for a bounded time (tests/fuzz/run.sh).
# Exit status 0 only if everything passed.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
bash scripts/deps.sh

echo "== build (RelWithDebInfo)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$jobs"
echo "== tests"
(cd build && ctest --output-on-failure -j"$jobs")

# A user's first build is often a plain Release one (-O3 brings warnings -O2
# does not, and warnings are errors): it must build, and its unit tests pass.
echo "== build (Release) and its unit tests"
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-release -j"$jobs"
(cd build-release && ctest --output-on-failure -j"$jobs" -L unit)

echo "== build (ASan + UBSan)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSNUG_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$jobs"
echo "== tests under ASan + UBSan"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
export LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
(cd build-asan && ctest --output-on-failure -j"$jobs" -LE 'models|cross')

# Hostile input (docs/robustness.md): the libFuzzer targets built with clang
# and run for a fixed number of executions each (about 30 s a target, 7
# targets: tests/fuzz/run.sh --ci); any finding fails.
echo "== fuzz (clang, libFuzzer + ASan + UBSan)"
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSNUG_FUZZ=ON >/dev/null
cmake --build build-fuzz -j"$jobs" --target fuzz
bash tests/fuzz/run.sh --build build-fuzz --ci
