#!/usr/bin/env bash
# Sets everything up, builds, exports the bundled example models and a tiny generated LLM checkpoint,
# and runs them with `runner`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release
mkdir -p out
B=build/release
echo "== export the bundled MLP (symbolic batch) and the CNN (with a subgraph delegated to backend 'null')"
$B/exporter/exporter --example mlp -o out/mlp.pte
$B/exporter/exporter --example cnn --backends null,portable -o out/cnn.pte
echo "== runner --info out/cnn.pte"
$B/tools/runner/runner --info out/cnn.pte
echo "== run them"
mkdir -p out/mlp out/cnn
$B/tools/runner/runner --program out/mlp.pte --iterations 100 --threads 2 --output-dir out/mlp
$B/tools/runner/runner --program out/cnn.pte --iterations 100 --threads 2 --output-dir out/cnn
echo "== an LLM: a tiny random-weight Qwen3 checkpoint (tests/llm/make_checkpoints.py), exported with"
echo "   hf_llm into a 'step' program with its tokenizer embedded, then generated from with runner --prompt"
.venv/bin/python tests/llm/make_checkpoints.py --out out/llm_checkpoints >/dev/null
$B/exporter/exporter out/llm_checkpoints/qwen3_bf16 -o out/qwen3_tiny.pte --max-seqs 4 --max-tokens 64 --max-context 256
$B/tools/runner/runner --program out/qwen3_tiny.pte --chat --prompt "Hello! Who are you?" --max-new-tokens 24 \
  --temperature 0.7 --top-p 0.9 --seed 1 --print-ids
echo "(random weights: the text is noise; the ids, speeds and the pipeline are real)"
