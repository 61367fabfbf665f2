#!/usr/bin/env bash
# Sets everything up, builds and runs the whole test suite: the GoogleTest suites and tool tests
# through ctest, the suite again under ASan+UBSan (error paths: corrupted, truncated and hostile
# programs, bad inputs), the thread pool's stress tests under TSan, and 60 seconds of libFuzzer on
# load + load_method + execute.
# Exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

echo "== build + ctest (release)"
cmake --preset release >/dev/null
cmake --build --preset release
ctest --preset release

echo "== the suite under ASan + UBSan"
cmake --preset asan >/dev/null
cmake --build --preset asan
ctest --preset asan

echo "== the thread pool's stress tests under ThreadSanitizer"
cmake --preset tsan >/dev/null
cmake --build --preset tsan
ctest --preset tsan

echo "== libFuzzer: 60 s on load + load_method + execute (clang, ASan + UBSan)"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz --target ember_fuzz_load ember_fuzz_replay_test
F=build/fuzz/tests/fuzz
"$F/ember_fuzz_replay_test" --gtest_brief=1 >/dev/null   # replays mutations and writes the seed corpus
mkdir -p "$F/corpus-work"
"$F/ember_fuzz_load" -max_total_time=60 -timeout=10 -rss_limit_mb=4096 -max_len=262144 \
  -print_final_stats=1 "$F/corpus-work" "$F/corpus" 2>&1 | tail -12
echo "== all tests passed"
