#!/usr/bin/env bash
# runner end to end: --help/--version/--info, running the examples with .npy I/O, bad arguments,
# corrupted and truncated programs (non-zero exit with a one-line reason, never a crash), and the
# same number of heap allocations for --iterations 1 and 100.
# usage: runner_test.sh RUNNER EXPORTER [ALLOC_COUNTER_SO]  (no shim under sanitizers: they own malloc)
set -u
RUNNER=$1 EXPORTER=$2 SHIM=${3:-}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
expect_ok() { "$@" >"$T/out" 2>"$T/err" || { fail "exit $? from: $*"; cat "$T/err"; }; }
# Non-zero exit, not a signal, exactly one line on stderr starting with "runner: error:".
expect_error() {
  local what=$1; shift
  "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  if [ $rc -eq 0 ]; then fail "$what: exit 0"; return; fi
  if [ $rc -ge 128 ]; then fail "$what: killed by signal $((rc - 128))"; return; fi
  if [ "$(wc -l <"$T/err")" -ne 1 ] || ! grep -q '^runner: error: ' "$T/err"; then
    fail "$what: stderr is not one 'runner: error:' line:"; cat "$T/err"
  fi
}

"$EXPORTER" --example mlp -o "$T/mlp.pte" >/dev/null || { echo "exporter failed"; exit 1; }
"$EXPORTER" --example cnn --backends null,portable -o "$T/cnn.pte" >/dev/null || { echo "exporter failed"; exit 1; }

expect_ok "$RUNNER" --help
grep -q -- '--program' "$T/out" || fail "--help does not list --program"
expect_ok "$RUNNER" --version
grep -q 'runner (Ember)' "$T/out" || fail "--version output: $(cat "$T/out")"

expect_ok "$RUNNER" --info "$T/cnn.pte"
grep -q 'arena 0: activation' "$T/out" || fail "--info shows no activation arena"
grep -q 'arena 1: io' "$T/out" || fail "--info shows no io arena"
grep -q -- '-> null' "$T/out" || fail "--info does not show the null backend running the delegate"
grep -q -- '-> cpu' "$T/out" || fail "--info does not show cpu kernels"
grep -q 'producer: ember-exporter' "$T/out" || fail "--info shows no producer"
# The bytes by purpose under each totals line (runtime/backend/README.md, "By purpose"): the null
# delegate's host memory, and again under the backend's total.
[ "$(grep -Ec '^    host [0-9.]+ KiB: handle [0-9]+ B, runner [0-9.]+ KiB, values [0-9.]+ KiB$' "$T/out")" -eq 2 ] \
  || fail "--info: no host breakdown under the null delegate and its total: $(cat "$T/out")"
grep -Eq '^  memory of null: host [0-9.]+ KiB, pinned 0 B, device 0 B$' "$T/out" || fail "--info: no null total"
grep -Eq '^    (pinned|device) |graphs:|memory in total' "$T/out" && fail "--info: host-only run lists device parts, graphs or a total"
# Whole on sim: its device memory by purpose (no CUDA graphs, one owner: no total line).
expect_ok "$RUNNER" --info "$T/cnn.pte" --backends sim
grep -Eq '^    device [0-9.]+ KiB: weights [0-9.]+ KiB, values [0-9.]+ KiB, io staging [0-9.]+ KiB(, scratch [0-9.]+ [KM]?i?B)?, page rounding [0-9.]+ K?i?B$' "$T/out" \
  || fail "--info --backends sim: no device breakdown: $(cat "$T/out")"
grep -Eq 'graphs:|memory in total' "$T/out" && fail "--info --backends sim: lists graphs or a total"
expect_ok "$RUNNER" --info "$T/cnn.pte" --backends portable
grep -q 'portable (fallback for null)' "$T/out" || fail "--backends portable does not fall back"
grep -Eq '^    (host|pinned|device) |^  memory of' "$T/out" && fail "--backends portable: lists backend memory: $(cat "$T/out")"
"$RUNNER" --program "$T/cnn.pte" --backends null >/dev/null 2>&1 || fail "--backends null failed"

# Run with outputs written, then feed an output back as an input of the right shape.
mkdir -p "$T/o"
expect_ok "$RUNNER" --program "$T/mlp.pte" --output-dir "$T/o" --iterations 3
grep -q 'output probs: f32 \[8, 10\]' "$T/out" || fail "mlp output line: $(cat "$T/out")"
grep -q 'latency: median' "$T/out" || fail "no latency line"
[ -s "$T/o/probs.npy" ] || fail "probs.npy not written"
expect_error "input of the wrong shape" "$RUNNER" --program "$T/mlp.pte" --input "x=$T/o/probs.npy"
grep -q "InvalidArgument" "$T/err" || fail "wrong-shape input: $(cat "$T/err")"
expect_error "unknown input name" "$RUNNER" --program "$T/mlp.pte" --input "nope=$T/o/probs.npy"
expect_error "missing file" "$RUNNER" --program "$T/does-not-exist.pte"
grep -q NotFound "$T/err" || fail "missing file error: $(cat "$T/err")"
expect_error "bad --iterations" "$RUNNER" --program "$T/mlp.pte" --iterations 0
expect_error "bad --threads" "$RUNNER" --program "$T/mlp.pte" --threads 0
expect_error "unknown backend" "$RUNNER" --program "$T/mlp.pte" --backends nosuch
# --cpu-target: an unknown name lists what this build and CPU can run; each of those is taken and named.
expect_error "unknown cpu target" "$RUNNER" --program "$T/mlp.pte" --cpu-target nosuch
grep -q "cpu target 'nosuch': not one this build and CPU can run (" "$T/err" || fail "cpu target message: $(cat "$T/err")"
targets=$(sed -n "s/.*can run (\(.*\)).*/\1/p" "$T/err" | tr -d ' ' | tr ',' ' ')
[ -n "$targets" ] || fail "no targets listed: $(cat "$T/err")"
for target in $targets; do
  expect_ok "$RUNNER" --program "$T/mlp.pte" --cpu-target "$(echo "$target" | tr 'A-Z' 'a-z')"
  grep -q "cpu kernels $target)" "$T/out" || fail "--cpu-target $target: $(head -1 "$T/out")"
done
# cuda: unknown in a build without it, unavailable without a GPU; never a silent CPU run (no
# 'portable' in the list). The GPU machine runs it for real (scripts/test_gpu.sh).
if ! nvidia-smi > /dev/null 2>&1; then
  expect_error "cuda without a GPU" "$RUNNER" --program "$T/mlp.pte" --backends cuda
  grep -Eq "unknown backend 'cuda'|cuda unavailable" "$T/err" || fail "cuda without a GPU: $(cat "$T/err")"
fi
expect_error "unknown flag" "$RUNNER" --program "$T/mlp.pte" --bogus
expect_error "flag without its value" "$RUNNER" --program "$T/mlp.pte" --iterations
expect_error "unknown method" "$RUNNER" --program "$T/mlp.pte" --method nope
grep -q NotFound "$T/err" || fail "unknown method error: $(cat "$T/err")"

# --profile writes a valid Chrome trace with one event per instruction and iteration.
expect_ok "$RUNNER" --program "$T/cnn.pte" --iterations 4 --profile "$T/trace.json"
grep -q 'profile: 20 events' "$T/out" || fail "--profile summary: $(cat "$T/out")"
/usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert len(d['traceEvents'])==20" "$T/trace.json" \
  || fail "--profile did not write a valid trace"

# Corrupted copies: flips in the header, the FlatBuffer and the segments; truncations.
size=$(stat -c %s "$T/cnn.pte")
# The FlatBuffer's last byte (header: offset u32 at 16, size u32 at 20): the bytes after it, up to
# the 64 KiB segment base, are padding no CRC covers, and the program's size moves with the exporter.
fb_last=$(( $(od -An -tu4 -j16 -N4 "$T/cnn.pte") + $(od -An -tu4 -j20 -N4 "$T/cnn.pte") - 1 ))
for offset in 0 3 5 9 17 30 45 61 64 100 500 1000 2000 "$fb_last" 65536 66000 $((size - 1)); do
  cp "$T/cnn.pte" "$T/bad.pte"
  printf '\xff' | dd of="$T/bad.pte" bs=1 seek="$offset" conv=notrunc status=none
  cmp -s "$T/cnn.pte" "$T/bad.pte" && printf '\x00' | dd of="$T/bad.pte" bs=1 seek="$offset" conv=notrunc status=none
  expect_error "flip at $offset" "$RUNNER" --program "$T/bad.pte"
done
for length in 0 1 32 63 64 65 200 1000 4000 65535 65536 66000 $((size - 1)); do
  head -c "$length" "$T/cnn.pte" >"$T/short.pte"
  expect_error "truncated to $length" "$RUNNER" --program "$T/short.pte"
done
# --verbose adds load details to the log but does not repeat the error (runtime errors are logged at
# Debug level only; the CLI prints the one line).
for length in 0 32 63; do
  head -c "$length" "$T/cnn.pte" >"$T/short.pte"
  expect_error "truncated to $length, --verbose" "$RUNNER" --program "$T/short.pte" --verbose
done

# Heap allocations do not depend on the iteration count.
count() {
  rm -f "$T/count"
  EMBER_ALLOC_COUNT_FILE="$T/count" LD_PRELOAD="$SHIM" "$RUNNER" --program "$1" --iterations "$2" --threads 2 \
    >/dev/null 2>&1 || fail "counted run of $1 failed"
  tail -1 "$T/count" | awk '{print $2}'
}
for model in mlp cnn; do
  [ -n "$SHIM" ] || { echo "allocation counting skipped (sanitizer build; the release build counts)"; break; }
  one=$(count "$T/$model.pte" 1)
  hundred=$(count "$T/$model.pte" 100)
  echo "$model: $one heap allocations with --iterations 1, $hundred with --iterations 100"
  [ -n "$one" ] && [ "$one" -gt 0 ] || fail "$model: the allocation counter saw nothing (shim not loaded?)"
  [ "$one" = "$hundred" ] || fail "$model: allocations differ: $one vs $hundred"
done

[ $failures -eq 0 ] && echo "runner_test: all checks passed"
exit $((failures > 0))
