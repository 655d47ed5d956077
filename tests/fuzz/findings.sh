#!/usr/bin/env bash
# Every model of ../shared/fixtures/fuzz-findings (issue #20) run as its
# README says: each must end in a clean error (exit status 1, a message
# naming what is wrong) within the time limit, never a sanitizer report, a
# crash or a hang. Usage: findings.sh SNUG [FINDINGS_DIR]
set -u
snug=$(realpath "$1")
dir=${2:-../shared/fixtures/fuzz-findings}
[ -d "$dir" ] || { echo "skip: $dir not found"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$dir"/*.onnx "$tmp"/
mkfifo "$tmp/fifo" # 08: the external data is a FIFO beside the model
fails=0
# file, what the message must say, then the command's arguments
check() {
    local f=$1 want=$2
    shift 2
    local out rc
    out=$(cd "$tmp" && timeout 60 "$snug" "$@" 2>&1)
    rc=$?
    if [ "$rc" -ne 1 ] || ! grep -q -- "$want" <<<"$out" || grep -q "Sanitizer\|runtime error" <<<"$out"; then
        echo "FAIL $f (exit $rc, want 1 and '$want'):"
        echo "$out" | tail -20
        fails=$((fails + 1))
    else
        echo "ok   $f: $(head -1 <<<"$out")"
    fi
}
check 01 "block_size -1 must be a power of two" plan 01_uaf_gqa_geom_of_plan.onnx --ctx 16
check 02 "Reshape" run 02_hbo_run_copy0_reshape.onnx --threads 1 --dim p=0
check 03 "position_ids" run 03_hbo_gqa_position_ids_dtype.onnx --threads 1
check 04 "without its value" info 04_null_build_graph_attr_graph.onnx
check 05 "is required" info 05_null_mnb_geom_of.onnx
check 06 "more elements than fit" info 06_overflow_reshape_infer_out.onnx
check 07 "more elements than fit" info 07_overflow_reshape_infer_in.onnx
check 08 "not a regular file" info 08_hang_fifo_external_data.onnx
check 09 "trip count" run 09_hang_loop_negative_M.onnx --threads 1
check 10 "memory budget" run 10_rss_onehot_2e31.onnx --config snug.memory_budget=1G
check 10 "memory budget" run 10_rss_range_2e31.onnx --config snug.memory_budget=1G
echo "$fails failure(s)"
[ "$fails" -eq 0 ]
