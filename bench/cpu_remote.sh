#!/usr/bin/env bash
# bench/cpu_models.py on the lent GPU machine's CPU (16-core Xeon; onnxruntime 1.30 and PyTorch
# 2.11 there), with Ember's binaries built here (its Ubuntu lacks Debian's libraries, so they travel
# with the shared libraries it lacks):
#
#   bench/cpu_remote.sh pack [BUILD_DIR]   here: runner, exporter, the capability manifest and the
#                                          shared libraries Ubuntu lacks into build/gpu-cpu/ (ignored
#                                          by git; carry it to the device call).
#   bench/cpu_remote.sh run [THREADS]      there, from the repository root: every model at 1 and
#                                          THREADS (default: nproc) threads, portable, then the CNNs
#                                          with --backends xnnpack,portable; reports in ${OUT:-/tmp}.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-run}
if [[ $mode == pack ]]; then
  build=${2:-build/release}
  dest=build/gpu-cpu
  rm -rf "$dest" && mkdir -p "$dest/bin" "$dest/lib"
  cp "$build/tools/runner/runner" "$build/exporter/exporter" "$dest/bin/"
  cp "$build/capabilities.json" "$dest/"
  for bin in "$dest"/bin/*; do ldd "$bin" | awk '/=> \/(usr\/)?lib/ {print $3}'; done | sort -u |
    grep -E 'libhwy|libxxhash|libprotobuf|libabsl|libXNNPACK|libpthreadpool|libcpuinfo|libclog|libflatbuffers' |
    xargs -r cp -L -t "$dest/lib/"
  echo "packed into $dest: $(ls "$dest/bin" | tr '\n' ' ')+ $(ls "$dest/lib" | wc -l) libraries, $(du -sh "$dest" | cut -f1)"
  exit 0
fi
if [[ $mode != run ]]; then
  echo "usage: bench/cpu_remote.sh pack [BUILD_DIR] | run [THREADS]" >&2
  exit 2
fi
threads=${2:-$(nproc)}
out=${OUT:-/tmp}
export LD_LIBRARY_PATH=$PWD/build/gpu-cpu/lib:${LD_LIBRARY_PATH:-}
py=python3
lscpu | grep -E 'Model name|^CPU\(s\)|Flags' | sed 's/Flags:.*avx512f.*/Flags: ... avx512f .../' | head -3
"$py" -c 'import onnxruntime, torch; print("onnxruntime", onnxruntime.__version__, "torch", torch.__version__)'
common=(--bin build/gpu-cpu/bin --manifest build/gpu-cpu/capabilities.json --threads "1,$threads" --work /tmp/ember_cpu_bench)
"$py" bench/cpu_models.py "${common[@]}" --rounds "${ROUNDS:-3}" --iterations "${ITERATIONS:-5}" --out "$out/portable"
"$py" bench/cpu_models.py "${common[@]}" --models resnet18,mobilenet_v2 --backends xnnpack,portable \
  --export-backends xnnpack,portable --peers ort --rounds "${ROUNDS:-3}" --iterations "${ITERATIONS:-5}" --out "$out/xnnpack"
