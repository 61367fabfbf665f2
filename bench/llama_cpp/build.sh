#!/usr/bin/env bash
# Builds llama.cpp's llama-bench and llama-quantize, CPU only, from the llama.cpp that the PyPI sdist
# of llama-cpp-python 0.3.36 vendors (issue 16: llama.cpp commit 0c1e57098), for
# bench/llm_vs_llama_cpp.py. Nothing is vendored into the repository: the sdist, its unpacked tree
# and the build trees live under build/llama_cpp/ (gitignored; LLAMA_CPP_DIR overrides).
#
#   bench/llama_cpp/build.sh            # native: -march=native (AVX-512 on the Zen 5 dev VM)
#   bench/llama_cpp/build.sh avx2       # GGML_NATIVE=OFF, AVX2 + FMA + F16C + BMI2, no AVX-512
#   bench/llama_cpp/build.sh native avx2
#
# Outputs: $LLAMA_CPP_DIR/bin-<variant>/{llama-bench,llama-quantize} (static, no shared libs),
# $LLAMA_CPP_DIR/src -> the sdist's vendor/llama.cpp (its gguf-py writes the GGUF files), and
# $LLAMA_CPP_DIR/build-<variant>.log. JOBS (default 2) sets the compile parallelism.
set -euo pipefail

VERSION=0.3.36
COMMIT=0c1e57098                      # issue 16; the sdist's CHANGELOG and git metadata name it
SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e  # the sdist, as downloaded 2026-11-27
REPO=$(cd "$(dirname "$0")/../.." && pwd)
DIR=${LLAMA_CPP_DIR:-$REPO/build/llama_cpp}
JOBS=${JOBS:-2}
PY=${PYTHON:-$REPO/.venv/bin/python}
VARIANTS=("$@")
[ ${#VARIANTS[@]} -eq 0 ] && VARIANTS=(native)
for v in "${VARIANTS[@]}"; do
  case $v in native|avx2) ;; *) echo "build.sh: unknown variant '$v' (native, avx2)" >&2; exit 2 ;; esac
done

mkdir -p "$DIR/cache"
SDIST=$DIR/cache/llama_cpp_python-$VERSION.tar.gz
if [ ! -f "$SDIST" ]; then
  # pip prepares the sdist's metadata (it installs scikit-build-core into a temporary build env):
  # a few minutes, once.
  "$PY" -m pip download --no-binary :all: --no-deps "llama-cpp-python==$VERSION" -d "$DIR/cache"
fi
echo "$SHA256  $SDIST" | sha256sum -c --quiet - || { echo "build.sh: $SDIST: sha256 differs from the pinned one" >&2; exit 1; }

TREE=$DIR/llama_cpp_python-$VERSION
if [ ! -d "$TREE/vendor/llama.cpp" ]; then
  tar -xzf "$SDIST" -C "$DIR"
fi
SRC=$TREE/vendor/llama.cpp
ln -sfn "$SRC" "$DIR/src"

# The sdist carries the superproject's .git with the submodule's git dir
# (.git/modules/vendor/llama.cpp), so the vendored tree's commit is recorded; check it.
HEAD_FILE=$TREE/.git/modules/vendor/llama.cpp/HEAD
if [ ! -f "$HEAD_FILE" ]; then
  echo "build.sh: $HEAD_FILE missing: the sdist does not record the vendored llama.cpp commit" >&2; exit 1
fi
HEAD=$(cat "$HEAD_FILE")
case $HEAD in
  $COMMIT*) echo "llama.cpp: vendored commit $HEAD (expected $COMMIT)" ;;
  *) echo "build.sh: vendored llama.cpp is at $HEAD, expected $COMMIT" >&2; exit 1 ;;
esac

common=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_CUDA=OFF -DGGML_METAL=OFF
        -DGGML_VULKAN=OFF -DGGML_BLAS=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF)
for v in "${VARIANTS[@]}"; do
  case $v in
    native) flags=(-DGGML_NATIVE=ON) ;;
    # The AVX2 column: what a generic x86-64-v3 build runs (no AVX-512 even where the CPU has it).
    avx2) flags=(-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
                 -DGGML_BMI2=ON -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF
                 -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF) ;;
  esac
  BUILD=$DIR/build-$v
  LOG=$DIR/build-$v.log
  start=$(date +%s)
  {
    cmake -S "$SRC" -B "$BUILD" "${common[@]}" "${flags[@]}"
    cmake --build "$BUILD" -j"$JOBS" --target llama-bench llama-quantize
  } > "$LOG" 2>&1 || { echo "build.sh: $v build failed; tail of $LOG:" >&2; tail -30 "$LOG" >&2; exit 1; }
  mkdir -p "$DIR/bin-$v"
  cp "$BUILD/bin/llama-bench" "$BUILD/bin/llama-quantize" "$DIR/bin-$v/"
  echo "llama.cpp $v: $DIR/bin-$v/{llama-bench,llama-quantize} in $(( $(date +%s) - start )) s (log $LOG)"
done
