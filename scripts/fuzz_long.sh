#!/usr/bin/env bash
# A long libFuzzer campaign: every harness (the loader and the exporter's parsers: onnx, safetensors,
# hf_config, tokenizer) at once, each with libFuzzer's -jobs/-workers, for a given time. Crash,
# leak, timeout and OOM reproducers of all harnesses are collected in one folder; at the end it
# prints per harness the executions, the corpus size and the number of reproducers. Exits 1 when
# any harness left a reproducer.
#
#   scripts/fuzz_long.sh [SECONDS] [JOBS]          SECONDS per worker (default 3600); JOBS workers in
#                                                  all (default: the CPU count), shared evenly
#   scripts/fuzz_long.sh --pack DIR                packs the built binaries into DIR for another machine
#
# Binaries: $EMBER_FUZZ_BIN (a folder holding ember_fuzz_*), else a --pack folder's bin/ when run
# from one, else build/fuzz/tests/fuzz, built with the fuzz preset (clang-14, ASan + UBSan) when a
# binary is missing. The binaries link libprotobuf, libxxhash and libstdc++ dynamically: --pack
# copies the non-libc libraries `ldd` names into DIR/lib (run with LD_LIBRARY_PATH set by this
# script) and strips debug info (function names stay in stack traces; reproduce a crash with the
# full binary for lines). A pack of the five harnesses is about 50 MB.
# Seeds: the build's corpus (tests/fuzz/corpus for the loader, corpus-exporter/<harness> for the
# others: written by the replay tests) and
# tests/fuzz/regressions/<harness>/; dictionaries: tests/fuzz/dict/<harness>.dict.
# Output: $EMBER_FUZZ_OUT (default fuzz-long-<date> in the current folder): crashes/, corpus/<harness>
# (new inputs), logs/<harness>/fuzz-<n>.log, summary.txt.
set -euo pipefail

# EMBER_FUZZ_HARNESSES="onnx tokenizer" picks a subset.
read -r -a HARNESSES <<<"${EMBER_FUZZ_HARNESSES:-load onnx safetensors hf_config tokenizer}"
SCRIPT_DIR=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$SCRIPT_DIR/.." && pwd)

# Extra flags per harness (the loader's inputs are whole programs).
harness_flags() {
  case "$1" in
    load) echo "-max_len=262144" ;;
    onnx) echo "-max_len=65536 -dict=$DICT_DIR/onnx.dict" ;;
    tokenizer) echo "-max_len=131072 -dict=$DICT_DIR/tokenizer.dict" ;;
    *) echo "-max_len=16384 -dict=$DICT_DIR/$1.dict" ;;
  esac
}

if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
if [[ -n "${1:-}" && "${1:-}" != "--pack" && ! "${1:-}" =~ ^[0-9]+$ ]] || [[ -n "${2:-}" && "${1:-}" != "--pack" && ! "${2:-}" =~ ^[0-9]+$ ]]; then
  echo "usage: scripts/fuzz_long.sh [SECONDS] [JOBS] | --pack DIR | --help" >&2
  exit 2
fi

if [[ "${1:-}" == "--pack" ]]; then
  DEST=${2:?usage: scripts/fuzz_long.sh --pack DIR}
  BIN=${EMBER_FUZZ_BIN:-$ROOT/build/fuzz/tests/fuzz}
  mkdir -p "$DEST/bin" "$DEST/lib" "$DEST/seeds" "$DEST/dict"
  for h in "${HARNESSES[@]}"; do
    [[ -x "$BIN/ember_fuzz_$h" ]] || { echo "fuzz_long: $BIN/ember_fuzz_$h is missing (build the fuzz preset)" >&2; exit 2; }
    cp "$BIN/ember_fuzz_$h" "$DEST/bin/" && strip -g "$DEST/bin/ember_fuzz_$h"
    # Libraries outside the C runtime (libc, libm, libgcc_s, the loader and vdso are everywhere).
    ldd "$BIN/ember_fuzz_$h" | awk '/=> \// {print $3}' | while read -r lib; do
      case "$(basename "$lib")" in libc.so*|libm.so*|libgcc_s.so*|ld-linux*|libpthread.so*|libdl.so*|librt.so*) ;;
        *) cp -L "$lib" "$DEST/lib/" ;; esac
    done
    mkdir -p "$DEST/seeds/$h"
    for d in "$BIN/corpus-exporter/$h" "$ROOT/tests/fuzz/regressions/$h"; do
      [[ -d "$d" ]] && find "$d" -maxdepth 1 -type f -exec cp {} "$DEST/seeds/$h/" \;
    done
  done
  # The loader's seeds: its replay test writes corpus/ (program files with a control byte).
  if [[ -d "$DEST/seeds/load" && -d "$BIN/corpus" ]]; then
    find "$BIN/corpus" -maxdepth 1 -type f -exec cp {} "$DEST/seeds/load/" \;
  fi
  cp "$ROOT"/tests/fuzz/dict/*.dict "$DEST/dict/"
  cp "$0" "$DEST/fuzz_long.sh"
  echo "packed into $DEST ($(du -sh "$DEST" | cut -f1)); run there: $DEST/fuzz_long.sh SECONDS JOBS"
  exit 0
fi

SECONDS_PER_WORKER=${1:-3600}
JOBS=${2:-$(nproc)}
OUT=${EMBER_FUZZ_OUT:-$PWD/fuzz-long-$(date +%Y%m%d-%H%M%S)}

if [[ -d "$SCRIPT_DIR/bin" && -d "$SCRIPT_DIR/seeds" ]]; then  # running from a --pack folder
  BIN=${EMBER_FUZZ_BIN:-$SCRIPT_DIR/bin}
  SEEDS_OF() { echo "$SCRIPT_DIR/seeds/$1"; }
  DICT_DIR=$SCRIPT_DIR/dict
  export LD_LIBRARY_PATH="$SCRIPT_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
  BIN=${EMBER_FUZZ_BIN:-$ROOT/build/fuzz/tests/fuzz}
  DICT_DIR=$ROOT/tests/fuzz/dict
  SEEDS_OF() {
    local dirs=("$ROOT/tests/fuzz/regressions/$1")
    if [[ "$1" == load ]]; then dirs+=("$BIN/corpus"); else dirs+=("$BIN/corpus-exporter/$1"); fi
    for d in "${dirs[@]}"; do [[ -d "$d" ]] && printf '%s ' "$d"; done
  }
  missing=0
  for h in "${HARNESSES[@]}"; do [[ -x "$BIN/ember_fuzz_$h" ]] || missing=1; done
  if [[ $missing == 1 && -z "${EMBER_FUZZ_BIN:-}" ]]; then
    echo "== building the fuzz targets (cmake --preset fuzz)"
    (cd "$ROOT" && cmake --preset fuzz >/dev/null &&
      cmake --build --preset fuzz --target ember_fuzz_replay_test ember_fuzz_exporter_replay_test \
        $(printf 'ember_fuzz_%s ' "${HARNESSES[@]}"))
    # The replay tests write the generated seeds into the build's corpus folders.
    "$BIN/ember_fuzz_replay_test" --gtest_brief=1 >/dev/null || true   # failures: see ctest
    "$BIN/ember_fuzz_exporter_replay_test" --gtest_brief=1 >/dev/null || true
  fi
fi
for h in "${HARNESSES[@]}"; do
  [[ -x "$BIN/ember_fuzz_$h" ]] || { echo "fuzz_long: $BIN/ember_fuzz_$h is missing" >&2; exit 2; }
  if ! "$BIN/ember_fuzz_$h" -help=1 >/dev/null 2>&1; then
    echo "fuzz_long: $BIN/ember_fuzz_$h does not start here; ldd says:" >&2
    ldd "$BIN/ember_fuzz_$h" >&2 || true
    exit 2
  fi
done

PER=$(( JOBS / ${#HARNESSES[@]} ))
(( PER >= 1 )) || PER=1
mkdir -p "$OUT/crashes"
echo "== fuzz_long: ${#HARNESSES[@]} harnesses x $PER workers, ${SECONDS_PER_WORKER}s each, into $OUT"
pids=()
for h in "${HARNESSES[@]}"; do
  mkdir -p "$OUT/corpus/$h" "$OUT/logs/$h"
  # shellcheck disable=SC2046
  (cd "$OUT/logs/$h" && exec "$BIN/ember_fuzz_$h" -jobs="$PER" -workers="$PER" -max_total_time="$SECONDS_PER_WORKER" \
     -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$OUT/crashes/$h-" $(harness_flags "$h") \
     "$OUT/corpus/$h" $(SEEDS_OF "$h") >"$OUT/logs/$h/main.log" 2>&1) &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || true; done

found=0
{
  printf '%-12s %14s %8s %8s\n' harness executions corpus crashes
  for h in "${HARNESSES[@]}"; do
    # Each worker's final stats line, or (a worker that crashed prints none) its last "#N" status line.
    execs=0
    for log in "$OUT"/logs/"$h"/fuzz-*.log; do
      [[ -f "$log" ]] || continue
      n=$(awk -F: '/stat::number_of_executed_units/ {n = $NF + 0} END {print n + 0}' "$log")
      (( n > 0 )) || n=$(grep -o '^#[0-9]*' "$log" | tail -1 | tr -d '#')
      execs=$(( execs + ${n:-0} ))
    done
    corpus=$(find "$OUT/corpus/$h" -type f | wc -l)
    crashes=$(find "$OUT/crashes" -maxdepth 1 -type f -name "$h-*" | wc -l)
    (( crashes == 0 )) || found=1
    printf '%-12s %14s %8s %8s\n' "$h" "$execs" "$corpus" "$crashes"
  done
  echo "reproducers: $OUT/crashes (replay one: ember_fuzz_<harness> FILE)"
} | tee "$OUT/summary.txt"
# (found is set inside the piped block's subshell: count the reproducers again here.)
[[ -z "$(find "$OUT/crashes" -maxdepth 1 -type f)" ]] || found=1
exit $found
