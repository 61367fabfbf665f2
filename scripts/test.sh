#!/usr/bin/env bash
# Sets everything up, builds and runs the whole test suite: the GoogleTest suites through ctest,
# the error-path tests again under ASan+UBSan, and 60 seconds of libFuzzer on
# load + load_method + execute. Exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
JOBS=$(nproc)

echo "== build + ctest (release)"
cmake --preset release >/dev/null
cmake --build --preset release
ctest --preset release

echo "== error-path tests under ASan + UBSan"
cmake --preset asan >/dev/null
cmake --build --preset asan --target ember_sanitized_tests
ctest --preset asan -L errorpath

echo "== libFuzzer: 60 s on load + load_method + execute"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz --target ember_fuzz_load ember_fuzz_corpus
build/fuzz/tests/fuzz/ember_fuzz_load -max_total_time=60 -timeout=10 -rss_limit_mb=4096 \
  -print_final_stats=1 build/fuzz/fuzz-corpus-work build/fuzz/fuzz-corpus 2>&1 | tail -15
echo "== all tests passed"
