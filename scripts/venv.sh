#!/usr/bin/env bash
# Create (idempotently) the Python virtual environment used by snug's tests and
# benchmarks, and print its path on stdout.
#
#   scripts/venv.sh            # tests/requirements.txt
#   scripts/venv.sh --bench    # also tests/requirements-bench.txt (compiles llama.cpp)
#   scripts/venv.sh --genai    # also tests/requirements-genai.txt (onnxruntime-genai)
#
# Location: ${SNUG_VENV:-$HOME/.cache/snug/venv}. The environment is rebuilt only when
# the requirement files change (their hash is stored in the venv). Uses whichever
# python3 is on PATH (override with SNUG_PYTHON). On Debian, python3-venv is installed
# with apt-get when `python3 -m venv` is unavailable (needs root).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${SNUG_VENV:-$HOME/.cache/snug/venv}"
py="${SNUG_PYTHON:-python3}"
reqs=("$root/tests/requirements.txt")
for arg in "$@"; do
  case "$arg" in
    --bench) reqs+=("$root/tests/requirements-bench.txt") ;;
    --genai) reqs+=("$root/tests/requirements-genai.txt") ;;
    *) echo "venv.sh: unknown option $arg (--bench, --genai)" >&2; exit 2 ;;
  esac
done

log() { echo "venv.sh: $*" >&2; }

# The stamp holds one line per requirement file content installed into this venv.
stamp="$venv/.snug-requirements"
hashes=()
for r in "${reqs[@]}"; do hashes+=("$(sha256sum < "$r" | cut -d' ' -f1)"); done
up_to_date() {
  [[ -x "$venv/bin/python" && -f "$stamp" ]] || return 1
  local h
  for h in "${hashes[@]}"; do grep -qx "$h" "$stamp" || return 1; done
  "$venv/bin/python" -c 'import sys' 2>/dev/null
}
if up_to_date; then
  echo "$venv"
  exit 0
fi

# Tests run in parallel may all get here: one installs, the others wait for it.
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
if command -v flock >/dev/null 2>&1; then
  flock 9
fi
if up_to_date; then
  echo "$venv"
  exit 0
fi

if ! command -v "$py" >/dev/null 2>&1; then
  log "no $py on PATH"
  if command -v apt-get >/dev/null 2>&1 && [[ $(id -u) -eq 0 ]]; then
    log "installing python3 with apt-get"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >&2
  else
    exit 1
  fi
fi

# `python3 -m venv` exists on Debian only with python3-venv (ensurepip is split off).
probe="$(mktemp -d)"
if ! "$py" -m venv "$probe/v" >/dev/null 2>&1; then
  rm -rf "$probe"
  if command -v apt-get >/dev/null 2>&1 && [[ $(id -u) -eq 0 ]]; then
    ver="$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    log "python3 -m venv unavailable; installing python3-venv with apt-get"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv "python${ver}-venv" >&2 \
      || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >&2
  else
    log "python3 -m venv unavailable and cannot apt-get install python3-venv (not root?)"
    exit 1
  fi
else
  rm -rf "$probe"
fi

# A half-built or outdated environment is upgraded in place (pip is idempotent).
if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c 'import sys' 2>/dev/null; then
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  log "creating $venv with $("$py" --version 2>&1)"
  "$py" -m venv "$venv" >&2
fi
req_args=()
for r in "${reqs[@]}"; do req_args+=(-r "$r"); done
log "installing ${reqs[*]}"
"$venv/bin/python" -m pip install -q --disable-pip-version-check "${req_args[@]}" >&2
if [[ -f "$stamp" ]]; then
  # keep only lines still meaningful for files not reinstalled now, then add ours
  { cat "$stamp"; printf '%s\n' "${hashes[@]}"; } | sort -u > "$stamp.tmp"
else
  printf '%s\n' "${hashes[@]}" > "$stamp.tmp"
fi
mv "$stamp.tmp" "$stamp"
echo "$venv"
