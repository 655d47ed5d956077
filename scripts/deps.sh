#!/usr/bin/env bash
# Installs what building and testing snug needs on Debian 12 (idempotent,
# quick when everything is there). Run as root, or with sudo available.
set -euo pipefail
pkgs=(cmake make gcc pkg-config libpcre2-dev libutf8proc-dev libcjson-dev libmicrohttpd-dev libonnx-testdata python3 python3-venv gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user clang libclang-rt-14-dev ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
