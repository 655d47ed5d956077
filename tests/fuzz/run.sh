#!/usr/bin/env bash
# Runs every libFuzzer target of a -DSNUG_FUZZ=ON build and reports
# executions, executions per second and coverage per target.
#   tests/fuzz/run.sh [--build DIR] [--seconds N | --minutes N | --runs N | --ci] [--seed N]
# --seconds / --minutes: each target for that long (default 60 s).
# --runs N: each target for N executions.
# --ci (scripts/test.sh): each target for its fixed number of executions
# (ci_runs below, about 30 s each on this project's 2-core machine), from
# fresh seeds in name order, with seed 1: a faster machine does not try
# more mutants than this one did, nor a slower fewer, unless it needs over
# 120 s a target. (libFuzzer does not promise the very same mutants twice:
# coverage feedback differs a little between runs.)
# --seed N (default 0: libFuzzer picks one, a new campaign each time) fixes
# the mutation sequence.
# Seeds are copied into DIR/fuzz-seeds from the fixtures (../shared,
# ~/.cache/snug/models), tests/fuzz/seeds and the findings; the campaign
# grows DIR/fuzz-corpus. A crash (reproducer under DIR/fuzz-crashes) fails
# the run: exit status 1.
set -uo pipefail
cd "$(dirname "$0")/../.."
build=build-fuzz
secs=60
runs=
ci=0
seed=0
while [ $# -gt 0 ]; do
    case $1 in
    --build) build=$2; shift 2 ;;
    --seconds) secs=$2; shift 2 ;;
    --minutes) case $2 in '' | *[!0-9]*) secs=$2 ;; *) secs=$(($2 * 60)) ;; esac; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --ci) ci=1; seed=1; secs=120; shift ;;
    --seed) seed=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--seconds N | --minutes N | --runs N | --ci] [--seed N]" >&2; exit 2 ;;
    esac
done
for v in "$secs" "${runs:-0}" "$seed"; do
    case $v in '' | *[!0-9]*) echo "$0: --seconds, --minutes, --runs and --seed take a number, not '$v'" >&2; exit 2 ;; esac
done
# executions per target in --ci (measured: docs/robustness.md)
declare -A ci_runs=([load]=2000000 [plan]=1500000 [run]=1500000 [config]=2000000 [stats]=1000000
    [tokenizer]=150000 [template]=500000 [request]=1000000)
here=tests/fuzz
seeds=$build/fuzz-seeds
corpus=$build/fuzz-corpus
crashes=$build/fuzz-crashes
[ $ci -eq 1 ] && rm -rf "$corpus"
rm -rf "$seeds"
mkdir -p "$crashes" "$seeds"
models=${SNUG_MODELS:-$HOME/.cache/snug/models}

# seed NAME FILES...: copies each (small) file into the target's seeds,
# named by its path's hash, and lists them in name order (NAME.list, given
# as -seed_inputs: the same order on every file system, which a
# directory's is not)
seed() {
    local d=$seeds/$1
    shift
    mkdir -p "$d" "$corpus/$(basename "$d")"
    for f in "$@"; do
        [ -f "$f" ] && [ "$(stat -c %s "$f")" -le 65536 ] && cp "$f" "$d/$(echo "$f" | md5sum | cut -c1-16)"
    done
    (cd "$d" && ls | LC_ALL=C sort | sed "s|^|$PWD/|") >"$d.list"
    return 0
}
shopt -s nullglob globstar
onnx=($here/seeds/model/*.onnx ../shared/fixtures/fuzz-findings/*.onnx ../shared/**/*.onnx "$models"/**/*.onnx tests/conformance/**/*.onnx)
for t in load plan run; do seed $t "${onnx[@]}"; done
seed config $here/seeds/config/*
seed stats $here/seeds/stats/* ../shared/**/*stats*.txt "$models"/**/*stats*.txt
seed tokenizer $here/seeds/tokenizer/* ../shared/**/tokenizer.json "$models"/**/tokenizer.json
seed template $here/seeds/template/* ../shared/**/*.jinja "$models"/**/*.jinja
seed request $here/seeds/request/*

fails=0
printf '%-16s %12s %10s %8s %8s\n' target execs exec/s cov ft
for t in load plan run config stats tokenizer template request; do
    bin=$build/tests/fuzz/fuzz_$t
    [ -x "$bin" ] || continue
    dict=()
    case $t in load | plan | run) dict=(-dict=$here/onnx.dict) ;; esac
    log=$build/fuzz-$t.log
    limit=(-max_total_time="$secs")
    [ -n "$runs" ] && limit=(-runs="$runs")
    [ $ci -eq 1 ] && limit=(-runs="${ci_runs[$t]}" -max_total_time="$secs")
    # rss_limit: a mutant that gets past the budget is a finding too
    ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        "$bin" "${dict[@]}" "${limit[@]}" -seed="$seed" -seed_inputs="$(paste -sd, "$seeds/$t.list")" -timeout=20 -rss_limit_mb=3072 -max_len=65536 \
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
