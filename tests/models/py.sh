#!/usr/bin/env bash
# Run a Python script of tests/models in snug's test venv (created on first use).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$("$here/../../scripts/venv.sh")"
exec "$venv/bin/python" "$@"
