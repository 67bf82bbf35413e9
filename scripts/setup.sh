#!/usr/bin/env bash
# Installs what is missing (Debian packages, a Python virtual environment with
# the build and test requirements) and builds Loom: the C++ library, its
# tests and the Python package, in one CMake build (build/release).
# Idempotent: a second run only rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake ninja-build python3-venv libopenblas-dev liblapacke-dev
          nlohmann-json3-dev zlib1g-dev libgtest-dev
          libfftw3-single3) # FFTW (single precision), dlopen'ed at run time: backend/cpu/fft_fftw.cpp
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv"
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -r requirements-dev.txt

echo "== building (build/release)"
# ccache, when present, shares object files between rebuilds and worktrees
# (paths are made relative to the repository root).
if command -v ccache >/dev/null 2>&1; then
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_C_COMPILER_LAUNCHER=ccache
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
fi
# One build: library, C++ tests and the extension; pip installs from it.
.venv/bin/python -m pip install -q --no-build-isolation \
  -Cbuild-dir=build/release -Ccmake.define.LOOM_BUILD_TESTS=ON .
