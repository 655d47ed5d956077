#!/usr/bin/env bash
# CTest driver: fetches the onnx wheel's backend test data (newer opsets) and
# runs the conformance runner over it with its expected-failures list.
set -euo pipefail
runner=$1; expected=$2
dir=$(bash "$(dirname "$0")/fetch_onnx_data.sh")
exec "$runner" --expected "$expected" "$dir/node" "$dir/pytorch-converted" "$dir/pytorch-operator" "$dir/simple"
