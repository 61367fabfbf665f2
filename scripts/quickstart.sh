#!/usr/bin/env bash
# Sets everything up, builds, exports the bundled example models and runs them with `runner`.
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
