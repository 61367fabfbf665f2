#!/usr/bin/env bash
# The GPU decode benchmark (bench/cuda_decode.py; bench/README.md, "GPU decode"), from the repository
# root on the GPU machine, after `scripts/test_gpu.sh pack` here:
#
#   bench/cuda/run.sh [stage ...] [options]    stages: checkpoint export ember hf roofline report
#                                              (none = all, in order; each skips what it has done)
#   bench/cuda/run.sh --tiny                   the whole pipeline on a tiny model, on the CPU
#
# Binaries come from build/gpu/bin (--bin), big files go to /tmp/ember_bench (--work; it survives
# between device calls while the machine stays warm), the report to $OUT/bench_cuda.md.
# EMBER_BENCH_BUDGET_S=S starts no new work item after S seconds (then run it again);
# EMBER_BENCH_PYTHON picks the interpreter (default: python3 when it has transformers, else .venv).
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH=$PWD/build/gpu/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
py=${EMBER_BENCH_PYTHON:-}
if [[ -z $py ]]; then
  if python3 -c 'import torch, transformers' 2> /dev/null; then
    py=python3
  elif [[ -x .venv/bin/python ]] && .venv/bin/python -c 'import torch' 2> /dev/null; then
    py=.venv/bin/python
  else
    py=python3
  fi
fi
exec "$py" bench/cuda_decode.py "$@"
