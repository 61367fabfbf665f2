#!/usr/bin/env bash
# GPU tests and benchmarks, in two halves (the GPU machine builds nothing: its OS lacks Ember's
# Debian libraries, so binaries built here travel with the shared libraries it lacks):
#
#   scripts/test_gpu.sh pack [BUILD_DIR]   here (Debian 12, CUDA toolkit): copies every ctest test
#                                          labelled `gpu`, runner, exporter, the shared libraries the
#                                          GPU machine lacks and the tiny LLM checkpoints into
#                                          build/gpu/ (ignored by git; carry it to the device call).
#   scripts/test_gpu.sh run [FILTER]       on the GPU machine, from the repository root: runs every
#                                          packed gpu test (FILTER: a regex on test names), then
#                                          compute-sanitizer memcheck and racecheck over the op
#                                          tests, then (unless EMBER_GPU_BENCH=0) bench/cuda/run.sh;
#                                          the log goes to ${OUT:-build/gpu}/test_gpu.log. Exit 0 only
#                                          when every test passed and the sanitizers found nothing.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-run}

if [[ $mode == pack ]]; then
  build=${2:-build/release}
  dest=build/gpu
  rm -rf "$dest" && mkdir -p "$dest/bin" "$dest/lib"
  # The gpu-labelled tests, by their command (ctest's JSON lists each test's command line).
  mapfile -t tests < <(ctest --test-dir "$build" -L gpu --show-only=json-v1 |
    python3 -c 'import json,sys; [print(t["command"][0]) for t in json.load(sys.stdin)["tests"] if "/ember_" in t["command"][0]]' | sort -u)
  if [[ ${#tests[@]} -eq 0 ]]; then
    echo "test_gpu.sh pack: no gpu-labelled tests in $build (configure with EMBER_BACKEND_CUDA=ON)" >&2
    exit 1
  fi
  cp "${tests[@]}" "$dest/bin/"
  for tool in tools/runner/runner exporter/exporter bench/cuda/ember_llm_bench; do
    [[ -x $build/$tool ]] && cp "$build/$tool" "$dest/bin/"
  done
  # Debian's libraries that the GPU machine's Ubuntu lacks (CUDA's come from its own toolkit).
  for bin in "$dest"/bin/*; do
    ldd "$bin" | awk '/=> \/(usr\/)?lib/ {print $3}'
  done | sort -u | grep -E 'libhwy|libxxhash|libprotobuf|libabsl|libgtest|libgmock|libXNNPACK|libpthreadpool|libcpuinfo' | xargs -r cp -L -t "$dest/lib/"
  [[ -d $build/llm_checkpoints ]] && cp -r "$build/llm_checkpoints" "$dest/"
  cp "$build/capabilities.json" "$dest/"   # the exporter's manifest (--backends cuda)
  echo "packed into $dest: $(ls "$dest/bin" | wc -l) binaries, $(du -sh "$dest" | cut -f1)"
  exit 0
fi

if [[ $mode != run ]]; then
  echo "usage: scripts/test_gpu.sh pack [BUILD_DIR] | run [FILTER]" >&2
  exit 2
fi
filter=${2:-.}
out=${OUT:-build/gpu}
mkdir -p "$out"
log=$out/test_gpu.log
export LD_LIBRARY_PATH=$PWD/build/gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export EMBER_SOURCE_DIR=$PWD EMBER_BINARY_DIR=$PWD/build/gpu EMBER_LLM_CHECKPOINTS=$PWD/build/gpu/llm_checkpoints
export EMBER_LLM_TEST_DATA=$PWD/tests/data/llm
export PATH=/usr/local/cuda/bin:$PATH
exec > >(tee "$log") 2>&1
echo "== test_gpu.sh $(date -u +%FT%TZ) on $(hostname)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || echo "nvidia-smi: no GPU"
failed=0
passed=0
failures=()
for bin in build/gpu/bin/ember_*_test; do
  name=$(basename "$bin")
  [[ $name =~ $filter ]] || continue
  start=$(date +%s)
  "$bin" > "$out/$name.log" 2>&1
  rc=$?
  grep -E '^\[  (PASSED|FAILED) |^\[==========\] .* ran|^[a-z0-9_]+ on cuda|near-tie' "$out/$name.log" | sed 's/^/    /'
  if [[ $rc -eq 0 ]]; then
    passed=$((passed + 1)); echo "PASS $name ($(( $(date +%s) - start )) s)"
  else
    failed=$((failed + 1)); failures+=("$name"); echo "FAIL $name (exit $rc, $(( $(date +%s) - start )) s); the end of its log:"
    grep -B2 -A12 'Failure$\|FAILED  \]' "$out/$name.log" | head -60 | sed 's/^/    /'
    tail -15 "$out/$name.log" | sed 's/^/    | /'
  fi
done
# runner end to end: each tiny checkpoint exported here (f32 / bf16 / FP8 weights), `--backends cuda`
# generates the same greedy ids as the portable CPU run of the same program; --info shows the device
# bytes.
if [[ -z ${2:-} || cuda_runner =~ $filter ]]; then
  mkdir -p "$out/runner"
  for ck in qwen3_f32 qwen3_bf16 qwen3_fp8 llama_f32 qwen2_bf16; do
    pte=$out/runner/$ck.pte
    if ! build/gpu/bin/exporter "$EMBER_LLM_CHECKPOINTS/$ck" -o "$pte" > "$out/runner/$ck.export.log" 2>&1; then
      failed=$((failed + 1)); failures+=("runner:$ck:export"); echo "FAIL runner $ck: export"; tail -3 "$out/runner/$ck.export.log"; continue
    fi
    args=(--program "$pte" --prompt "The capital of France is" --max-new-tokens 24 --ignore-eos --print-ids)
    build/gpu/bin/runner "${args[@]}" --backends portable > "$out/runner/$ck.cpu.txt" 2> "$out/runner/$ck.cpu.err"
    cpu_rc=$?
    build/gpu/bin/runner "${args[@]}" --backends cuda > "$out/runner/$ck.cuda.txt" 2> "$out/runner/$ck.cuda.err"
    cuda_rc=$?
    cpu_ids=$(grep '^generated ids:' "$out/runner/$ck.cpu.txt"); cuda_ids=$(grep '^generated ids:' "$out/runner/$ck.cuda.txt")
    if [[ $cpu_rc -eq 0 && $cuda_rc -eq 0 && -n $cpu_ids && $cpu_ids == "$cuda_ids" ]]; then
      passed=$((passed + 1)); echo "PASS runner --backends cuda $ck: $cuda_ids"
      grep -h 'decode:' "$out/runner/$ck.cuda.err" | sed 's/^/    cuda /'
    else
      failed=$((failed + 1)); failures+=("runner:$ck")
      echo "FAIL runner --backends cuda $ck (rc cpu $cpu_rc, cuda $cuda_rc)"; echo "  cpu:  $cpu_ids"; echo "  cuda: $cuda_ids"
      tail -3 "$out/runner/$ck.cuda.err"
    fi
  done
  build/gpu/bin/runner --info "$out/runner/qwen3_f32.pte" --backends cuda > "$out/runner/info.txt" 2>&1
  grep -E 'runs on|-> cuda|device' "$out/runner/info.txt" | head -8
fi
sanitizer_failed=0
if [[ ${EMBER_GPU_SANITIZE:-1} != 0 ]] && command -v compute-sanitizer > /dev/null; then
  for tool in memcheck racecheck; do
    for bin in build/gpu/bin/ember_cuda_*_test; do
      name=$(basename "$bin")
      [[ $name =~ $filter ]] || continue
      # The no-heap test counts every host allocation in the process: the sanitizer's own fail it.
      [[ $name == ember_cuda_no_heap_test ]] && continue
      # racecheck: cuBLAS's own kernels (nvjet_*: its split-K GEMMs report shared-memory hazards
      # inside NVIDIA's code, 2026-11-26) are left out; every Ember kernel is checked.
      extra=()
      if [[ $tool == racecheck ]] && compute-sanitizer --help 2>&1 | grep -q -- '--kernel-name-exclude'; then
        extra=(--kernel-name-exclude kns=nvjet)
      fi
      echo "== compute-sanitizer --tool $tool ${extra[*]} $name"
      if compute-sanitizer --tool "$tool" "${extra[@]}" --error-exitcode 99 "$bin" --gtest_brief=1 > "$out/sanitizer_${tool}_$name.log" 2>&1; then
        echo "sanitizer $tool $name: clean ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer_${tool}_$name.log" | tail -1))"
      else
        sanitizer_failed=1
        echo "sanitizer $tool $name: FAILED"; tail -40 "$out/sanitizer_${tool}_$name.log"
      fi
    done
  done
elif [[ ${EMBER_GPU_SANITIZE:-1} != 0 ]]; then
  echo "compute-sanitizer: not found"; sanitizer_failed=1
fi
echo "== gpu tests: $passed passed, $failed failed ${failures[*]:-}"
bench_rc=0
if [[ ${EMBER_GPU_BENCH:-1} != 0 && -x bench/cuda/run.sh ]]; then
  bench/cuda/run.sh || bench_rc=$?
fi
[[ $failed -eq 0 && $sanitizer_failed -eq 0 && $bench_rc -eq 0 ]]
