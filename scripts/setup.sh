#!/usr/bin/env bash
# Installs everything Ember's build and tests need on Debian 12: Debian packages with apt (what the
# C++ build links) and a Python virtual environment with pinned PyPI tools (.venv). Idempotent,
# non-interactive, and quick when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  cmake ninja-build g++ pkg-config ccache
  clang-14 libclang-rt-14-dev                      # fuzzing (libFuzzer) and sanitizers
  flatbuffers-compiler libflatbuffers-dev          # schema
  libhwy-dev libxxhash-dev                         # kernels, segment hashes
  libgtest-dev libgmock-dev libbenchmark-dev       # tests, benchmarks
  nlohmann-json3-dev libcli11-dev                  # exporter and tools
  libprotobuf-dev protobuf-compiler libonnx-dev    # ONNX importer
  libxnnpack-dev libpthreadpool-dev libcpuinfo-dev # XNNPACK backend
  python3 python3-venv python3-numpy               # golden-data scripts
  python3-torch python3-torchvision python3-onnx   # ONNX end-to-end tests (tests/onnx)
)

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: Debian packages present"
fi

# Python tools for tests and benchmarks, pinned. The venv sees Debian's python3-* packages too.
if [ ! -x .venv/bin/python ]; then
  /usr/bin/python3 -m venv --system-site-packages .venv
fi
if ! .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt >/dev/null 2>&1; then
  echo "setup: pip install -r requirements.txt failed" >&2
  .venv/bin/python -m pip install --disable-pip-version-check -r requirements.txt
fi
echo "setup: done"
