#!/usr/bin/env bash
# CTest driver for the LLM-op cases: (re)generates them with ONNX Runtime when
# missing or when gen_cases.py changed (stamped by its hash), then runs the
# conformance runner over them (and the bit-exact cases once more, exactly).
#   run.sh RUNNER SNUG
set -euo pipefail
runner=$1
snug=$2
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${SNUG_CACHE:-$HOME/.cache/snug}/contrib-cases"
py="$(bash "$here/../../scripts/venv.sh")/bin/python" || py=
if [[ ! -x "$py" ]] || ! "$py" -c 'import onnxruntime' 2>/dev/null; then
  echo "run.sh: no Python with onnxruntime (run scripts/venv.sh)" >&2
  exit 1
fi
want="$(sha256sum < "$here/gen_cases.py" | cut -d' ' -f1) $("$py" -c 'import onnxruntime as o; print(o.__version__)')"
stamp="$out/.stamp"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  rm -rf "$out"
  mkdir -p "$out"
  "$py" "$here/gen_cases.py" --out "$out"
  echo "$want" > "$stamp"
fi
# Chains of int8-activation MatMulNBits (const_acc4_chain*): on AVX-512 VNNI
# snug sums them in its own order, and a rounding that differs from ORT's
# grows down the chain, so there they are held to the accuracy rule against
# float64 (check_int8.py) instead of a tolerance against ORT; elsewhere snug
# follows ORT's order and both hold.
chains=const_acc4_chain
if grep -qw avx512_vnni /proc/cpuinfo 2>/dev/null; then
  "$runner" --rtol 1e-3 --atol 1e-4 --exclude "$chains" "$out"
else
  "$runner" --rtol 1e-3 --atol 1e-4 "$out"
fi
"$py" "$here/check_int8.py" "$snug" "$out" "$chains"
# GatherBlockQuantized computes (q - zero_point) * scale in float32 as ONNX
# Runtime does: its cases (gbq_*) match bit for bit on every machine.
"$runner" --rtol 0 --atol 0 --filter gbq_ "$out"
# Sigmoid is MLAS's rational function in both: bit for bit, on one thread and
# split over two (gen_cases.py sigmoids).
"$runner" --rtol 0 --atol 0 --filter sigmoid_exact "$out"
"$runner" --rtol 0 --atol 0 --threads 2 --filter sigmoid_exact "$out"
# Models snug must refuse (gen_cases.py gbq_errors): snug run fails, with the
# message in the case's `expect`.
for e in "$out"/errors/*/; do
  [[ -f "$e/expect" ]] || continue
  if msg="$("$snug" run "$e/model.onnx" --input-dir "$e" 2>&1 >/dev/null)"; then
    echo "FAIL $(basename "$e"): snug run succeeded, expected an error" >&2
    exit 1
  fi
  if ! grep -qF "$(cat "$e/expect")" <<<"$msg"; then
    echo "FAIL $(basename "$e"): error '$msg' lacks '$(cat "$e/expect")'" >&2
    exit 1
  fi
  echo "ok   $(basename "$e"): $msg"
done
# Cases named *_bx must match bit for bit: snug reproduces the rounding of ONNX
# Runtime's AVX2 MatMulNBits kernels there (8 bits through its int8 kernels). ORT takes other kernels on AVX-512 and
# AVX-VNNI machines, where only the tolerances above hold.
if grep -qw avx2 /proc/cpuinfo 2>/dev/null && ! grep -qwE 'avx512f|avx_vnni' /proc/cpuinfo; then
  exec "$runner" --rtol 0 --atol 0 --filter _bx "$out"
fi
