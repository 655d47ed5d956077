#!/usr/bin/env bash
# End-to-end checks of the snug CLI: help texts, info and run on the
# stories260K fixture, and clear errors (exit status 1 or 2 with a message,
# never a crash) on bad input.
set -uo pipefail
snug=$1
fix=../shared/fixtures/stories260K/stories260K_kv.onnx
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0; passes=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect STATUS PATTERN -- command...: runs it, checks exit status and that
# stdout+stderr match the pattern.
expect() {
  local want=$1 pat=$2; shift 3
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" != "$want" ]; then bad "$* -> exit $rc, want $want: $(echo "$out" | head -3)"; return; fi
  if ! grep -qE -- "$pat" <<<"$out"; then bad "$* -> output lacks /$pat/: $(echo "$out" | head -3)"; return; fi
  ok
}

expect 0 "usage: snug COMMAND" -- "$snug" --help
expect 2 "usage: snug COMMAND" -- "$snug"
expect 2 "unknown command" -- "$snug" frobnicate
expect 0 "usage: snug info" -- "$snug" info --help
expect 0 "usage: snug run" -- "$snug" run --help
expect 0 "usage: snug ops" -- "$snug" ops --help
expect 0 "MatMul" -- "$snug" ops
expect 0 "parameters 297170" -- "$snug" info "$fix"
expect 0 "past_sequence_length" -- "$snug" info "$fix"
expect 1 "No such file|cannot open" -- "$snug" info "$tmp/missing.onnx"
expect 2 "missing MODEL" -- "$snug" run
expect 2 "unknown option" -- "$snug" run "$fix" --bogus
expect 2 "NAME=FILE" -- "$snug" run "$fix" --input foo
expect 1 "no input of that name" -- "$snug" run "$fix" --input nope=x.npy
expect 1 "no symbolic dim of that name" -- "$snug" run "$fix" --dim nope=3
expect 2 "non-negative integer" -- "$snug" run "$fix" --dim sequence_length=-3
expect 0 "logits +float32 +\[1,4,512\]" -- "$snug" run "$fix" --dim sequence_length=4 --dim past_sequence_length=0
expect 0 "present.4.value +float32 +\[1,4,7,8\]" -- "$snug" run "$fix" --dim sequence_length=2 --dim past_sequence_length=5
# Outputs round-trip: written .pb files feed the next run as inputs.
expect 0 "wrote 11 outputs" -- "$snug" run "$fix" --dim sequence_length=3 --dim past_sequence_length=0 --output-dir "$tmp/out"
args=()
for l in 0 1 2 3 4; do
  args+=(--input "past_key_values.$l.key=$tmp/out/output_$((1 + 2 * l)).pb")
  args+=(--input "past_key_values.$l.value=$tmp/out/output_$((2 + 2 * l)).pb")
done
expect 0 "present.0.key +float32 +\[1,4,4,8\]" -- "$snug" run "$fix" --dim sequence_length=1 "${args[@]}"
# Wrong input file type or shape: a clear error.
expect 1 "input 'past_key_values.0.key'" -- "$snug" run "$fix" --input "past_key_values.0.key=$tmp/out/output_0.pb"
printf 'garbage' > "$tmp/bad.pb"
expect 1 "input 'input_ids' from" -- "$snug" run "$fix" --input "input_ids=$tmp/bad.pb"
# Broken model files: an error naming the problem, never a crash.
head -c 5000 "$fix" > "$tmp/trunc.onnx"
expect 1 "^snug info: [^:]*trunc.onnx: [^/]*$" -- "$snug" info "$tmp/trunc.onnx"   # the path once
expect 1 "^snug bench: [^:]*trunc.onnx: [^/]*$" -- "$snug" bench "$tmp/trunc.onnx"
expect 1 "^snug plan: [^:]*trunc.onnx: [^/]*$" -- "$snug" plan "$tmp/trunc.onnx"
: > "$tmp/empty.onnx"
expect 1 "snug info: " -- "$snug" info "$tmp/empty.onnx"
# ORT-style config keys: node stats written after the run, unknown keys refused.
expect 0 "logits" -- "$snug" run "$fix" --dim sequence_length=2 --dim past_sequence_length=0 \
  --config "session.collect_node_memory_stats_to_file=$tmp/stats.csv"
if [ "$(grep -c . "$tmp/stats.csv" 2>/dev/null)" = 395 ] &&
   head -1 "$tmp/stats.csv" | grep -q '^#name,input_sizes,initializers_sizes,total_dynamic_sizes,total_temp_allocations'; then ok
else bad "stats file: want a header and 394 node rows"; fi
expect 1 "unknown config key 'session.bogus'" -- "$snug" run "$fix" --config session.bogus=1
# ONNX Runtime's spinning switch: accepted, and checked
expect 0 "logits +float32" -- "$snug" run "$fix" --threads 2 --config session.intra_op.allow_spinning=0
expect 1 "session.intra_op.allow_spinning: 'yes' is not 0 or 1" -- "$snug" run "$fix" --config session.intra_op.allow_spinning=yes
# Level 2 over Level 1 is an error under ONNX Runtime 1.31's strict key (docs/plan.md); no kernel here exceeds it.
expect 0 "logits +float32" -- "$snug" run "$fix" --config session.strict_workspace_verification=1
expect 1 "session.strict_workspace_verification: '2' is not 0 or 1" -- "$snug" run "$fix" --config session.strict_workspace_verification=2
# Planning at bounds: one plan for any shape within them; beyond is an error.
# (the output shape and the plan count are two checks: one pattern with | passed on either)
expect 0 "present.0.key +float32 +\[1,4,13,8\]" -- "$snug" run "$fix" --bound sequence_length=16 \
  --bound past_sequence_length=32 --dim sequence_length=3 --dim past_sequence_length=10 -v
expect 0 "^plan .*; 1 plan\(s\) made$" -- "$snug" run "$fix" --bound sequence_length=16 \
  --bound past_sequence_length=32 --dim sequence_length=3 --dim past_sequence_length=10 -v
expect 1 "input 'input_ids'.*beyond its planned bound 16" -- "$snug" run "$fix" --bound sequence_length=16 \
  --bound past_sequence_length=32 --dim sequence_length=20 --dim past_sequence_length=0
expect 1 "has no --bound" -- "$snug" run "$fix" --bound sequence_length=16
# snug bench drives the KV cache itself; bad flags are usage errors.
expect 0 "decode +[0-9.]+ tok/s" -- "$snug" bench "$fix" --prompt 8 --gen 4 --rounds 1 --warmup 0 --threads 2
expect 0 "\"decode_tok_s\"" -- "$snug" bench "$fix" --prompt 4 --gen 2 --rounds 1 --warmup 0 --json
expect 2 "unknown option|usage" -- "$snug" bench "$fix" --bogus
# memory that would be made resident past the budget is an error before it is touched (not the OOM killer)
expect 1 "more than the memory budget" -- "$snug" bench "$fix" --config snug.memory_budget=20000 --prompt 4 --gen 2 --rounds 1 --warmup 0
# batched decode needs a length per row: a model without attention_mask is refused, saying why
expect 1 "no attention_mask" -- "$snug" bench "$fix" --slots 2 --prompt 4 --gen 2 --rounds 1 --warmup 0
# --slots times decode steps: none to time is a usage error, not "0 tok/s"
expect 2 "--gen must be at least 1" -- "$snug" bench "$fix" --slots 2 --prompt 4 --gen 0
expect 1 "snug.spin_pauses: 'abc' is not a count of pauses" -- "$snug" bench "$fix" --config snug.spin_pauses=abc
expect 2 "--config takes KEY=VALUE" -- "$snug" serve "$tmp" --config =3
expect 2 "--config takes KEY=VALUE" -- "$snug" serve "$tmp" --config novalue
# the last argument: an option that takes a value and has none, or one that is unknown
expect 2 "--port needs a value" -- "$snug" serve "$tmp" --port
expect 2 "unknown option --bogus" -- "$snug" serve "$tmp" --bogus
# a one-token prompt step would be a decode row (rounded otherwise): --batch starts at 2
expect 2 "--batch wants an integer from 2" -- "$snug" generate "$tmp" --batch 1 -p hi
expect 2 "--batch wants an integer from 2" -- "$snug" serve "$tmp" --batch 1
expect 0 "decode +[0-9.]+ tok/s" -- "$snug" bench "$fix" --prompt 4 --gen 2 --rounds 1 --warmup 0 --config snug.spin_pauses=0
expect 1 "snug bench: " -- "$snug" bench "$tmp/missing.onnx"
expect 0 "memory +RSS growth .*; estimated before planning .* accounted after planning .*arena" -- "$snug" bench "$fix" --prompt 8 --gen 4 --rounds 1 --warmup 0
expect 0 "\"decode_allocations\": 0, " -- "$snug" bench "$fix" --prompt 8 --gen 4 --rounds 1 --warmup 0 --json
# --ops: time per operator type, in the table and in JSON
expect 0 "all nodes +[0-9.]+ ms +[0-9.]+ ms" -- "$snug" bench "$fix" --prompt 8 --gen 4 --rounds 1 --warmup 0 --ops
expect 0 "\"ops\": \[\{\"op\": \"[A-Za-z]+\", \"prefill_ms\": [0-9.]+, \"decode_ms_per_token\": [0-9.]+\}" -- "$snug" bench "$fix" --prompt 4 --gen 2 --rounds 1 --warmup 0 --json --ops
# --nodes N: the N slowest nodes by name, in the table (beside --ops too) and in JSON
expect 0 "^nodes +the 3 slowest nodes" -- "$snug" bench "$fix" --prompt 8 --gen 4 --rounds 1 --warmup 0 --nodes 3
expect 0 "^  [^ ]+ +[A-Za-z]+ +[0-9.]+ ms +[0-9.]+% +[0-9.]+ ms +[0-9.]+%$" -- "$snug" bench "$fix" --prompt 8 --gen 4 --rounds 1 --warmup 0 --nodes 3
expect 0 "^nodes +the 2 slowest" -- "$snug" bench "$fix" --prompt 8 --gen 4 --rounds 1 --warmup 0 --ops --nodes 2
expect 0 "^  all nodes +[0-9.]+ ms" -- "$snug" bench "$fix" --prompt 8 --gen 4 --rounds 1 --warmup 0 --ops --nodes 2
expect 0 "\"nodes\": \[\{\"name\": \"[^\"]+\", \"op\": \"[A-Za-z]+\", \"prefill_ms\": [0-9.]+, \"decode_ms_per_token\": [0-9.]+\}, \{[^]]*\}\], " -- "$snug" bench "$fix" --prompt 4 --gen 2 --rounds 1 --warmup 0 --json --nodes 2
expect 2 "--nodes takes an integer in 1\.\.[0-9]+, got '0'" -- "$snug" bench "$fix" --nodes 0
expect 2 "--nodes takes an integer in 1\.\.[0-9]+, and none was given" -- "$snug" bench "$fix" --nodes
# --bandwidth: the machine's read bandwidth (T threads sum one buffer), no model
expect 0 "^read bandwidth +[0-9.]+ GB/s \(2 threads, 256 MiB buffer, best of 10\)$" -- "$snug" bench --bandwidth --threads 2
expect 0 "^\{\"threads\": 1, \"buffer_bytes\": 268435456, \"read_bandwidth_bytes_per_s\": [1-9][0-9]*\}$" -- "$snug" bench --bandwidth --threads 1 --json
expect 2 "--bandwidth takes no MODEL" -- "$snug" bench "$fix" --bandwidth
echo "cli: $passes passed, $fails failed"
[ "$fails" = 0 ]
