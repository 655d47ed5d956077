#!/usr/bin/env bash
# Fetches the ONNX backend test data that ships in the PyPI `onnx` wheel
# (newer opsets than Debian's libonnx-testdata) into the cache and prints the
# folder holding node/, simple/, pytorch-*/. The wheel is only unpacked,
# never installed. 1.19.1 is the newest wheel that still ships node/ tests.
set -euo pipefail
ver=${SNUG_ONNX_DATA_VERSION:-1.19.1}
cache=${SNUG_CACHE:-$HOME/.cache/snug}/onnx-testdata-$ver
if [ ! -f "$cache/.complete" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  # The project venv's pip: Debian's python3 has no pip of its own.
  venv=$(bash "$(dirname "$0")/../../scripts/venv.sh") || { echo "fetch_onnx_data: no Python venv" >&2; exit 1; }
  py=$venv/bin/python
  "$py" -m pip download --no-deps --only-binary=:all: -q -d "$tmp" "onnx==$ver" >&2 ||
    { echo "fetch_onnx_data: could not download onnx==$ver from PyPI" >&2; exit 1; }
  rm -rf "$cache"
  mkdir -p "$cache"
  "$py" - "$tmp" "$cache" <<'PY'
import glob, sys, zipfile
src, dst = sys.argv[1], sys.argv[2]
whl = glob.glob(src + "/*.whl")[0]
prefix = "onnx/backend/test/data/"
with zipfile.ZipFile(whl) as z:
    for n in z.namelist():
        if n.startswith(prefix) and not n.endswith("/"):
            rel = n[len(prefix):]
            if rel.split("/")[0] in ("node", "simple", "pytorch-converted", "pytorch-operator"):
                z.extract(n, dst + "/_x")
PY
  mv "$cache/_x/onnx/backend/test/data/"* "$cache/"
  rm -rf "$cache/_x"
  touch "$cache/.complete"
fi
echo "$cache"
