#!/usr/bin/env bash
# Runs every libFuzzer target of a -DSNUG_FUZZ=ON build for a bounded time
# and reports executions, executions per second and coverage per target.
#   tests/fuzz/run.sh [--build DIR] [--seconds N | --minutes N] [--seed N]
# --seed N (CI: 1) makes the mutations one fixed sequence from fresh seeds,
# so a shorter run tries a prefix of what a longer one tried (0, the
# default: libFuzzer picks a seed, a new campaign each time).
# Seeds are generated into DIR/fuzz-corpus from the fixtures (../shared,
# ~/.cache/snug/models) and the findings, then grown by the campaign; a
# crash (reproducer under DIR/fuzz-crashes) fails the run: exit status 1.
set -uo pipefail
cd "$(dirname "$0")/../.."
build=build-fuzz
secs=60
seed=0
while [ $# -gt 0 ]; do
    case $1 in
    --build) build=$2; shift 2 ;;
    --seconds) secs=$2; shift 2 ;;
    --minutes) secs=$(($2 * 60)); shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--seconds N | --minutes N] [--seed N]" >&2; exit 2 ;;
    esac
done
here=tests/fuzz
corpus=$build/fuzz-corpus
crashes=$build/fuzz-crashes
mkdir -p "$crashes"
models=${SNUG_MODELS:-$HOME/.cache/snug/models}

# seed NAME FILES...: copies each (small) file into the target's corpus
seed() {
    local d=$corpus/$1
    shift
    mkdir -p "$d"
    for f in "$@"; do
        [ -f "$f" ] && [ "$(stat -c %s "$f")" -le 65536 ] && cp "$f" "$d/$(echo "$f" | md5sum | cut -c1-16)"
    done
    return 0
}
shopt -s nullglob globstar
onnx=($here/seeds/model/*.onnx ../shared/fixtures/fuzz-findings/*.onnx ../shared/**/*.onnx "$models"/**/*.onnx tests/conformance/**/*.onnx)
for t in load plan run; do seed $t "${onnx[@]}"; done
seed config $here/seeds/config/*
seed stats $here/seeds/stats/* ../shared/**/*stats*.txt "$models"/**/*stats*.txt
seed tokenizer ../shared/**/tokenizer.json "$models"/**/tokenizer.json
seed template $here/seeds/template/* ../shared/**/*.jinja "$models"/**/*.jinja

fails=0
printf '%-16s %12s %10s %8s %8s\n' target execs exec/s cov ft
for t in load plan run config stats tokenizer template; do
    bin=$build/tests/fuzz/fuzz_$t
    [ -x "$bin" ] || continue
    dict=()
    case $t in load | plan | run) dict=(-dict=$here/onnx.dict) ;; esac
    log=$build/fuzz-$t.log
    # rss_limit: a mutant that gets past the budget is a finding too
    ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        "$bin" "${dict[@]}" -max_total_time="$secs" -seed="$seed" -timeout=20 -rss_limit_mb=3072 -max_len=65536 \
        -artifact_prefix="$crashes/$t-" -print_final_stats=1 "$corpus/$t" >"$log" 2>&1
    rc=$?
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
    eps=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$')
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*')
    ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*')
    printf '%-16s %12s %10s %8s %8s\n' "$t" "${execs:-?}" "${eps:-?}" "${cov:-?}" "${ft:-?}"
    if [ $rc -ne 0 ]; then
        echo "FAIL fuzz_$t (exit $rc), $log:"
        grep -A30 "ERROR\|runtime error\|Sanitizer" "$log" | head -40
        fails=$((fails + 1))
    fi
done
[ $fails -eq 0 ] || { echo "$fails target(s) found a bug; reproducers in $crashes"; exit 1; }
