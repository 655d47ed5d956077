#!/usr/bin/env bash
# Build llama.cpp's llama-bench, llama-server and llama-quantize from the
# llama.cpp vendored in PyPI's llama-cpp-python sdist (idempotently) and print
# the folder holding the binaries on stdout.
#
#   bench/llamacpp_build.sh                    # llama-cpp-python 0.3.36
#   LLAMACPP_VERSION=0.3.37 bench/llamacpp_build.sh
#
# CPU only, GGML_NATIVE=ON (tuned to this machine's CPU) but AMX off (below),
# static, Release, no CURL/OpenSSL, no web UI: only the targets llama-bench,
# llama-server and llama-quantize.
# Cache: ${SNUG_LLAMACPP:-~/.cache/snug/llamacpp}/: the sdist, <version>/src
# (vendor/llama.cpp), <version>/llama.cpp-commit (the vendored llama.cpp's
# commit, from the sdist's changelog), <version>/build (bin/llama-bench,
# bin/llama-server, bin/llama-quantize). A second run rebuilds nothing unless
# the version, the configure options or the CPU (GGML_NATIVE) changed; a build
# that lacks a target (one from before it was listed) only builds that target.
# JOBS (default: nproc) sets the parallel jobs, PYTHON the interpreter whose pip
# downloads the sdist (default python3).
# Progress goes to stderr; the build's output is also kept in build/snug-build.log.
# Used by bench/vs_llamacpp (and as the llama-server peer of bench/serve_load);
# tests/models/build.py's genai-q40 style runs its llama-quantize.
set -euo pipefail

version="${LLAMACPP_VERSION:-0.3.36}"
cache="${SNUG_LLAMACPP:-$HOME/.cache/snug/llamacpp}"
jobs="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
py="${PYTHON:-python3}"
dir="$cache/$version"
src="$dir/src"
build="$dir/build"
targets=(llama-bench llama-server llama-quantize)
t_start=$SECONDS

log() { echo "llamacpp_build: [$(( SECONDS - t_start ))s] $*" >&2; }
die() { echo "llamacpp_build: ERROR: $*" >&2; exit 1; }

cfg=(-DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF
     -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF
     -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON
     -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF
     -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF   # no npm, no download: a server without the web page
     -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_OPENCL=OFF -DGGML_SYCL=OFF
     -DGGML_HIP=OFF -DGGML_BLAS=OFF -DGGML_RPC=OFF)
# AMX off (x86-64): in this llama.cpp, with GCC 12, every AMX product segfaults
# at its ldtilecfg (the tile configuration on the stack is optimized away; a
# known upstream bug, llama.cpp issue #20824 / PR #26954), and -march=native
# turns AMX on wherever the CPU has it. The -mno-amx-* flags win over
# -march=native; llama.cpp then uses its AVX-512/AVX2 kernels, as on any CPU
# without AMX. LLAMACPP_AMX=1 keeps AMX (for a fixed llama.cpp or compiler).
if [[ "$(uname -m)" == x86_64 && "${LLAMACPP_AMX:-0}" != 1 ]]; then
  noamx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  cfg+=("-DCMAKE_C_FLAGS=$noamx" "-DCMAKE_CXX_FLAGS=$noamx")
fi

# What the binaries depend on: a change in any of these rebuilds them. The
# targets are not part of it: a new target is built into the same folder.
cpu="$(uname -m) $(grep -m1 -E '^(flags|Features)' /proc/cpuinfo 2>/dev/null | sha256sum | cut -c1-16)"
want="llama-cpp-python $version | ${cfg[*]} | cpu $cpu"
# the stamp's form while it named the targets (llama-bench and llama-server only)
want_old="llama-cpp-python $version | ${cfg[*]} | llama-bench llama-server | cpu $cpu"
stamp="$build/.snug-built"
same_config() {
  local s
  s="$(cat "$stamp" 2>/dev/null)" || return 1
  [[ "$s" == "$want" || "$s" == "$want_old" ]]
}

sdist="$cache/llama_cpp_python-$version.tar.gz"
# The sdist has no .git (llama-bench reports build "unknown"): its changelog names the commit.
record_commit() {
  [[ -f "$dir/llama.cpp-commit" || ! -f "$sdist" ]] && return 0
  tar -xzOf "$sdist" "llama_cpp_python-$version/CHANGELOG.md" 2>/dev/null \
    | awk -v v="## [$version]" '$0 == v {on = 1; next} on && /^## \[/ {exit}
        on && match($0, /llama\.cpp@[0-9a-f]+/) {print substr($0, RSTART + 10, RLENGTH - 10); exit}' \
    > "$dir/llama.cpp-commit" || true
}

built() {
  same_config || return 1
  local t
  for t in "${targets[@]}"; do [[ -x "$build/bin/$t" ]] || return 1; done
}
if built; then
  record_commit
  log "cached: $build/bin (llama-cpp-python $version)"
  echo "$build/bin"
  exit 0
fi

# Two benchmarks may ask at once: one builds, the other waits for it.
mkdir -p "$dir"
exec 9>"$dir.lock"
if command -v flock >/dev/null 2>&1; then
  flock 9
fi
if built; then
  echo "$build/bin"
  exit 0
fi

# Tools first, so that a missing one is named before minutes of downloading.
command -v cmake >/dev/null 2>&1 || die "cmake not found (Debian: apt-get install cmake)"
cc="${CC:-$(command -v cc || command -v gcc || command -v clang || true)}"
cxx="${CXX:-$(command -v c++ || command -v g++ || command -v clang++ || true)}"
[[ -n "$cc" ]] || die "no C compiler (cc, gcc or clang; Debian: apt-get install build-essential)"
[[ -n "$cxx" ]] || die "no C++ compiler (c++, g++ or clang++; Debian: apt-get install g++)"
if command -v ninja >/dev/null 2>&1; then
  gen=(-G Ninja)
elif command -v make >/dev/null 2>&1; then
  gen=(-G "Unix Makefiles")
else
  die "neither ninja nor make found (Debian: apt-get install ninja-build or make)"
fi
command -v "$py" >/dev/null 2>&1 || die "no $py to run pip download (set PYTHON)"
"$py" -m pip --version >/dev/null 2>&1 || die "$py has no pip (Debian: apt-get install python3-pip)"

if [[ ! -f "$sdist" ]]; then
  log "downloading the llama-cpp-python $version sdist from PyPI (about 75 MB)"
  tmp="$(mktemp -d "$cache/.dl.XXXXXX")"
  if ! "$py" -m pip download --no-deps --no-binary :all: --disable-pip-version-check -q \
      -d "$tmp" "llama-cpp-python==$version" >&2; then
    rm -rf "$tmp"
    die "pip download llama-cpp-python==$version failed (network? is PyPI reachable?)"
  fi
  got=("$tmp"/llama_cpp_python-*.tar.gz)
  [[ -f "${got[0]}" ]] || { rm -rf "$tmp"; die "pip download gave no llama_cpp_python-*.tar.gz"; }
  mv "${got[0]}" "$sdist"
  rm -rf "$tmp"
fi

if [[ ! -f "$src/CMakeLists.txt" ]]; then
  log "extracting vendor/llama.cpp from $(basename "$sdist")"
  rm -rf "$src.part"
  mkdir -p "$src.part"
  tar -xzf "$sdist" -C "$src.part" --strip-components=3 "llama_cpp_python-$version/vendor/llama.cpp" \
    || die "no vendor/llama.cpp in $sdist"
  rm -rf "$src"
  mv "$src.part" "$src"
fi

# A configure with other options (or for another CPU) starts from an empty build folder.
# The same configuration with a target missing keeps the folder: cmake builds only what is not there.
if [[ -f "$stamp" || -f "$build/CMakeCache.txt" ]] && ! same_config; then
  log "options or CPU changed since the last build: rebuilding from scratch"
  rm -rf "$build"
fi
mkdir -p "$build"
log "configuring (${gen[*]}, CPU only, GGML_NATIVE=ON, static, Release) in $build"
if ! cmake -S "$src" -B "$build" "${gen[@]}" -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
    "${cfg[@]}" > "$build/snug-configure.log" 2>&1; then
  tail -n 30 "$build/snug-configure.log" >&2
  die "cmake configure failed (whole log: $build/snug-configure.log)"
fi
log "building ${targets[*]} with $jobs jobs (several minutes on 2 cores)"
if ! cmake --build "$build" --target "${targets[@]}" -j "$jobs" 2>&1 | tee "$build/snug-build.log" >&2; then
  die "build failed (log: $build/snug-build.log)"
fi
for t in "${targets[@]}"; do
  [[ -x "$build/bin/$t" ]] || die "the build made no $build/bin/$t"
done
echo "$want" > "$stamp"
record_commit
log "done: ${targets[*]} in $build/bin"
echo "$build/bin"
