#!/usr/bin/env bash
# runner's LLM modes end to end on the tiny checkpoints (tests/llm/make_checkpoints.py): export with
# hf_llm, generate with --prompt / --prompts-file / --chat / --stop, check the embedded tokenizer
# with --encode / --decode against the checkpoint's tokenizer.json, and the error paths (non-zero
# exit, one "runner: error:" line, never a crash).
# usage: runner_llm_test.sh RUNNER EXPORTER CHECKPOINTS_DIR
set -u
RUNNER=$1 EXPORTER=$2 CK=$3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
expect_ok() { "$@" >"$T/out" 2>"$T/err" || { fail "exit $? from: $*"; cat "$T/err"; }; }
expect_error() {
  local what=$1 pattern=$2; shift 2
  "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  if [ $rc -eq 0 ]; then fail "$what: exit 0"; return; fi
  if [ $rc -ge 128 ]; then fail "$what: killed by signal $((rc - 128))"; return; fi
  if ! grep -q "^$pattern" "$T/err" || [ "$(wc -l <"$T/err")" -ne 1 ]; then
    fail "$what: expected one line matching '$pattern', got:"; cat "$T/err"
  fi
}

for m in llama_f32 qwen2_bf16 qwen3_fp8; do
  "$EXPORTER" "$CK/$m" -o "$T/$m.pte" --max-seqs 4 --max-tokens 32 --max-context 64 --block-size 8 >"$T/export.out" 2>"$T/export.err" \
    || { fail "export $m: $(cat "$T/export.err")"; continue; }
  grep -q "tokenizer: .* tokens, .* merges embedded" "$T/export.out" || fail "$m: no tokenizer line: $(cat "$T/export.out")"
  expect_ok "$RUNNER" --program "$T/$m.pte" --prompt "Hello world, this is" --max-new-tokens 8 --ignore-eos --print-ids
  grep -q "^prompt ids: " "$T/out" || fail "$m: no prompt ids"
  n=$(grep "^generated ids: " "$T/out" | wc -w)
  [ "$n" -eq 10 ] || fail "$m: expected 8 generated ids: $(grep generated "$T/out")"
  grep -q "decode: 7 tokens in .* tok/s" "$T/err" || fail "$m: no decode tokens/s line: $(cat "$T/err")"
  grep -q "finished: length" "$T/err" || fail "$m: not finished by length: $(cat "$T/err")"
  # Greedy is deterministic; an untimed warm-up generation first (--warmup) changes nothing the
  # timed request produces, and its whole prompt is still counted as prefill (no prefix reuse).
  cp "$T/out" "$T/first"
  expect_ok "$RUNNER" --program "$T/$m.pte" --prompt "Hello world, this is" --max-new-tokens 8 --ignore-eos --print-ids
  cmp -s "$T/out" "$T/first" || fail "$m: two greedy runs differ"
  prefill=$(grep -o "prefill: [0-9]* tokens" "$T/err")
  expect_ok "$RUNNER" --program "$T/$m.pte" --prompt "Hello world, this is" --max-new-tokens 8 --ignore-eos --print-ids --warmup
  cmp -s "$T/out" "$T/first" || fail "$m: --warmup changed the output: $(cat "$T/out")"
  grep -q "$prefill" "$T/err" || fail "$m: --warmup changed the timed prefill ($prefill): $(cat "$T/err")"
  # The embedded tokenizer equals the checkpoint's tokenizer.json.
  text='Hello wörld! 12345 你好 🙂  spaces'
  expect_ok "$RUNNER" --tokenizer "$CK/$m/tokenizer.json" --encode "$text"
  cp "$T/out" "$T/ids_file"
  expect_ok "$RUNNER" --program "$T/$m.pte" --encode "$text"
  cmp -s "$T/out" "$T/ids_file" || fail "$m: --encode differs between the program and tokenizer.json"
  expect_ok "$RUNNER" --program "$T/$m.pte" --decode "$(cat "$T/ids_file")"
  # --decode keeps special tokens (HF's default): Llama-3's encode adds <|begin_of_text|>.
  decoded=$(cat "$T/out")
  [ "$decoded" = "$text" ] || [ "$decoded" = "<|begin_of_text|>$text" ] || fail "$m: --decode of --encode is '$decoded'"
done

# Re-quantized checkpoints: the pass quantizes the bf16 linears it takes and keeps the others bf16.
for q in fp8 nvfp4 mxfp8 fp8-dynamic; do
  "$EXPORTER" "$CK/qwen2_bf16" -o "$T/q.pte" --quantize $q --max-seqs 4 --max-tokens 32 --max-context 64 >"$T/export.out" 2>&1 \
    || { fail "export --quantize $q: $(tail -1 "$T/export.out")"; continue; }
  grep -q "quantize $q: 11 of 15 linear layers" "$T/export.out" || fail "--quantize $q: $(grep quantize "$T/export.out")"
  expect_ok "$RUNNER" --program "$T/q.pte" --prompt "Hello there" --max-new-tokens 6 --ignore-eos --print-ids
  [ "$(grep "^generated ids: " "$T/out" | wc -w)" -eq 8 ] || fail "--quantize $q: $(cat "$T/out")"
done

# A model vocabulary larger than the tokenizer (as Qwen2.5's 151936 rows over 151665 tokens): ids
# without a token are skipped in the text, with one note (llama_f32 has 1210 rows, qwen2's tokenizer
# 1153 tokens; this prompt generates id 1157).
expect_ok "$RUNNER" --program "$T/llama_f32.pte" --tokenizer "$CK/qwen2_f32/tokenizer.json" --prompt "Hello world, this is" \
  --max-new-tokens 40 --ignore-eos --print-ids
grep -q "generated ids: .* 1157 " "$T/out" || fail "expected id 1157 in: $(grep generated "$T/out")"
grep -q "runner: note: id 1157 has no token in the tokenizer (1153 tokens)" "$T/err" || fail "no note for id 1157: $(cat "$T/err")"

# Sampling with a seed is reproducible; another seed differs.
expect_ok "$RUNNER" --program "$T/qwen2_bf16.pte" --prompt "abc" --max-new-tokens 12 --ignore-eos --temperature 0.9 --top-p 0.95 --seed 7 --print-ids
grep "^generated" "$T/out" >"$T/s1"
expect_ok "$RUNNER" --program "$T/qwen2_bf16.pte" --prompt "abc" --max-new-tokens 12 --ignore-eos --temperature 0.9 --top-p 0.95 --seed 7 --print-ids
grep "^generated" "$T/out" | cmp -s - "$T/s1" || fail "seed 7 twice gives different ids"
expect_ok "$RUNNER" --program "$T/qwen2_bf16.pte" --prompt "abc" --max-new-tokens 12 --ignore-eos --temperature 0.9 --top-p 0.95 --seed 8 --print-ids
grep "^generated" "$T/out" | cmp -s - "$T/s1" && fail "seeds 7 and 8 give the same 12 ids"

# Several prompts through the scheduler, with a KV pool of one context (forces preemption).
printf 'first prompt here\nsecond one, a little longer than the first\nthird\n' >"$T/prompts.txt"
expect_ok "$RUNNER" --program "$T/llama_f32.pte" --prompts-file "$T/prompts.txt" --max-new-tokens 40 --ignore-eos --kv-blocks 8
for i in 1 2 3; do grep -q "^\[$i\] " "$T/out" || fail "--prompts-file: no output [$i]"; done
grep -q "[1-9][0-9]* preemption" "$T/err" || fail "--kv-blocks 8 did not preempt: $(tail -1 "$T/err")"

# Prefix reuse: the second prompt shares the first's full KV blocks (published after the first's
# prefill chunks; 16-token steps), and its greedy ids equal the same prompt run alone.
"$EXPORTER" "$CK/llama_f32" -o "$T/chunked.pte" --max-seqs 4 --max-tokens 16 --max-context 128 --block-size 8 >/dev/null
p='The quick brown fox jumps over the lazy dog near the river bank, then again and again and again.'
printf '%s One\n%s Two\n' "$p" "$p" >"$T/shared.txt"
expect_ok "$RUNNER" --program "$T/chunked.pte" --prompts-file "$T/shared.txt" --max-new-tokens 6 --ignore-eos --print-ids
grep -q " [1-9][0-9]* prefix-cache tokens" "$T/err" || fail "no prefix reuse: $(tail -1 "$T/err")"
batched=$(grep "^generated ids \[2\]: " "$T/out" | cut -d: -f2)
expect_ok "$RUNNER" --program "$T/chunked.pte" --prompt "$p Two" --max-new-tokens 6 --ignore-eos --print-ids
alone=$(grep "^generated ids: " "$T/out" | cut -d: -f2)
[ -n "$alone" ] && [ "$batched" = "$alone" ] || fail "prefix-reused ids '$batched' differ from alone '$alone'"

# --chat renders the template (ChatML for Qwen: <|im_start|> is an added token).
expect_ok "$RUNNER" --program "$T/qwen2_bf16.pte" --prompt "hi" --chat --max-new-tokens 2 --print-ids
im_start=$("$RUNNER" --program "$T/qwen2_bf16.pte" --encode "<|im_start|>")
grep -q "^prompt ids: $im_start " "$T/out" || fail "--chat prompt does not start with <|im_start|> ($im_start): $(head -1 "$T/out")"

# --stop: cut at a string seen in an unconstrained run.
expect_ok "$RUNNER" --program "$T/llama_f32.pte" --prompt "Once" --max-new-tokens 24 --ignore-eos
full=$(head -1 "$T/out")
stop=${full:6:3}
if [ -n "$stop" ]; then
  expect_ok "$RUNNER" --program "$T/llama_f32.pte" --prompt "Once" --max-new-tokens 24 --ignore-eos --stop "$stop"
  grep -q "finished: stop" "$T/err" || fail "--stop '$stop' did not stop: $(cat "$T/err")"
  case "$(head -1 "$T/out")" in *"$stop"*) fail "--stop: the stop string is in the output";; esac
fi

# --info: the KV cache by purpose, as host state of the portable run, as sim's device state beside its
# delegate's breakdown, and the total over two owners (null delegates + host state). 2 layers x K, V
# of 64 KiB each (f32, the export options above).
expect_ok "$RUNNER" --info "$T/llama_f32.pte"
grep -A1 '^  program state: 4 tensors' "$T/out" | grep -q '^    host 256.0 KiB: state 256.0 KiB$' \
  || fail "--info: host state breakdown: $(cat "$T/out")"
grep -A1 '^  memory of program (host state): host 256.0 KiB, pinned 0 B, device 0 B$' "$T/out" \
  | grep -q '^    host 256.0 KiB: state 256.0 KiB$' || fail "--info: host state total: $(cat "$T/out")"
expect_ok "$RUNNER" --info "$T/llama_f32.pte" --backends sim
grep -A2 '^  program state: 4 tensors .*in device memory of sim' "$T/out" | grep -q '^    device 256.0 KiB: state 256.0 KiB$' \
  || fail "--info --backends sim: device state breakdown: $(cat "$T/out")"
grep -A2 '^  memory of sim: ' "$T/out" \
  | grep -Eq '^    device [0-9.]+ MiB: weights [0-9.]+ MiB, values [0-9.]+ KiB, io staging [0-9.]+ KiB, scratch [0-9.]+ KiB, page rounding [0-9.]+ K?i?B, state 256.0 KiB$' \
  || fail "--info --backends sim: the backend's total by purpose: $(cat "$T/out")"
grep -q '^  memory in total' "$T/out" && fail "--info --backends sim: a total line for one owner"
"$EXPORTER" "$CK/llama_f32" -o "$T/llama_null.pte" --backends null,portable --max-seqs 4 --max-tokens 32 \
  --max-context 64 --block-size 8 >/dev/null || fail "export llama_f32 for null"
expect_ok "$RUNNER" --info "$T/llama_null.pte"
[ "$(grep -Ec '^    host [0-9.]+ K?i?B: handle [0-9]+ B, runner [0-9.]+ KiB$' "$T/out")" -eq 5 ] \
  || fail "--info: null delegates and their total by purpose: $(cat "$T/out")"
grep -A1 '^  memory in total: host ' "$T/out" | grep -Eq '^    host [0-9.]+ KiB: handle [0-9]+ B, runner [0-9.]+ KiB, state 256.0 KiB$' \
  || fail "--info: the total over null and the host state: $(cat "$T/out")"

# Errors.
"$EXPORTER" --example mlp -o "$T/mlp.pte" >/dev/null
expect_error "prompt on a non-LLM program" "runner: error: .*not an LLM program" "$RUNNER" --program "$T/mlp.pte" --prompt hi
expect_error "kv-blocks below one context" "runner: error: --kv-blocks 2 holds less than one context" "$RUNNER" --program "$T/llama_f32.pte" --prompt hi --kv-blocks 2
expect_error "kv-blocks above the maximum" "runner: error: cannot load" "$RUNNER" --program "$T/llama_f32.pte" --prompt hi --kv-blocks 100000
long=$(printf 'word %.0s' $(seq 1 200))
expect_error "prompt beyond the context" "runner: error: prompt 1: InvalidArgument: .*context" "$RUNNER" --program "$T/llama_f32.pte" --prompt "$long"
expect_error "decode of a non-number" "runner: error: --decode: 'abc' is not an integer id" "$RUNNER" --program "$T/llama_f32.pte" --decode "1 abc"
expect_error "decode of an unknown id" "runner: error: --decode: InvalidArgument" "$RUNNER" --program "$T/llama_f32.pte" --decode "999999"
expect_error "encode without a tokenizer" "runner: error: --encode/--decode need" "$RUNNER" --encode hi
expect_error "two modes" "runner: error: give one of" "$RUNNER" --program "$T/llama_f32.pte" --prompt a --encode b
expect_error "bad tokenizer file" "runner: error: --tokenizer $T/prompts.txt: not valid JSON at line 1, column 2 (byte 1): " "$RUNNER" --tokenizer "$T/prompts.txt" --encode hi
expect_error "missing prompts file" "runner: error: --prompts-file $T/none.txt: cannot open: No such file or directory" "$RUNNER" --program "$T/llama_f32.pte" --prompts-file "$T/none.txt"
# A FIFO nobody writes: refused at once (timeout turns a blocking open into exit 124, a failure).
mkfifo "$T/prompts.fifo"
expect_error "prompts file FIFO" "runner: error: --prompts-file $T/prompts.fifo: not a regular file (FIFO)" timeout 20 "$RUNNER" --program "$T/llama_f32.pte" --prompts-file "$T/prompts.fifo"
"$EXPORTER" "$CK/llama_f32" -o "$T/x.pte" --kv-dtype f64 >/dev/null 2>"$T/err" && fail "--kv-dtype f64 accepted"
grep -q "expected f32, f16, bf16 or fp8" "$T/err" || fail "--kv-dtype f64: $(cat "$T/err")"
"$EXPORTER" --example mlp -o "$T/x.pte" --max-seqs 4 >/dev/null 2>"$T/err" && fail "--max-seqs accepted for an example"
grep -q "applies to Hugging Face checkpoint folders only" "$T/err" || fail "--max-seqs on an example: $(cat "$T/err")"

# Issue 14: KV pools that cannot hold every running sequence. Each run is bounded by `timeout`
# (and the ctest TIMEOUT): a livelock fails instead of hanging.
"$EXPORTER" "$CK/llama_f32" -o "$T/small.pte" --max-seqs 4 --max-tokens 32 --max-context 128 --block-size 16 >/dev/null
"$EXPORTER" "$CK/qwen2_f32" -o "$T/tiny_steps.pte" --max-seqs 2 --max-tokens 8 --max-context 128 --block-size 16 >/dev/null
# Three ~80-token prompts, 100 new tokens each, one context of KV (8 blocks): used to loop forever.
cat >"$T/long3.txt" <<'PROMPTS'
gamma kappa beta epsilon beta theta theta theta lambda eta delta beta theta alpha eta eta kappa alpha mu theta epsilon mu
delta kappa beta zeta alpha alpha alpha lambda iota alpha eta lambda delta eta mu alpha iota delta theta theta iota delta
zeta delta lambda delta theta epsilon alpha eta iota lambda beta gamma lambda mu epsilon beta mu zeta mu mu iota eta
PROMPTS
expect_ok timeout 120 "$RUNNER" --program "$T/small.pte" --prompts-file "$T/long3.txt" --kv-blocks 8 --max-new-tokens 100 --ignore-eos
# Each runs to the end of its context (128 tokens, its prompt included).
for i in 1 2 3; do
  n=$(sed -n "s/^\[$i\] \([0-9]*\) tokens, finished: length$/\1/p" "$T/err")
  p=$("$RUNNER" --program "$T/small.pte" --encode "$(sed -n ${i}p "$T/long3.txt")" | wc -w)
  [ -n "$n" ] && [ $((n + p)) -eq 128 ] || fail "long prompts: [$i] ($p prompt tokens): $(cat "$T/err")"
done
# Two 84-token prompts, 8 tokens a step: used to fail with "the scheduler planned nothing".
cat >"$T/two84.txt" <<'PROMPTS'
delta kappa iota gamma zeta kappa theta lambda kappa beta kappa alpha theta epsilon iota delta delta mu theta iota iot
lambda epsilon eta iota eta kappa zeta iota kappa eta kappa delta zeta lambda alpha epsilon kappa lambda mu gam
PROMPTS
[ "$("$RUNNER" --program "$T/tiny_steps.pte" --encode "$(head -1 "$T/two84.txt")" | wc -w)" -eq 84 ] || fail "two84: the first prompt is not 84 tokens"
expect_ok timeout 120 "$RUNNER" --program "$T/tiny_steps.pte" --prompts-file "$T/two84.txt" --kv-blocks 8 --max-new-tokens 20 --ignore-eos
for i in 1 2; do grep -q "^\[$i\] 20 tokens, finished: length" "$T/err" || fail "two 84-token prompts: [$i]: $(cat "$T/err")"; done

# The LLM flags: one error line naming the flag and the value, never a silent default.
P=(--program "$T/llama_f32.pte" --prompt hi --max-new-tokens 2)
expect_error "temperature -1" "runner: error: --temperature -1: must be finite and >= 0" "$RUNNER" "${P[@]}" --temperature -1
expect_error "temperature nan" "runner: error: --temperature nan: must be finite and >= 0" "$RUNNER" "${P[@]}" --temperature nan
expect_error "temperature inf" "runner: error: --temperature inf: must be finite" "$RUNNER" "${P[@]}" --temperature inf
expect_error "temperature 1e99" "runner: error: --temperature 1e99: must be finite" "$RUNNER" "${P[@]}" --temperature 1e99
expect_error "temperature 0.5x" "runner: error: --temperature '0.5x': not a number" "$RUNNER" "${P[@]}" --temperature 0.5x
expect_error "top-p nan" "runner: error: --top-p nan: must be in (0, 1\]" "$RUNNER" "${P[@]}" --top-p nan
expect_error "top-p -0.5" "runner: error: --top-p -0.5: must be in (0, 1\]" "$RUNNER" "${P[@]}" --top-p -0.5
expect_error "top-p 0" "runner: error: --top-p 0: must be in (0, 1\]" "$RUNNER" "${P[@]}" --top-p 0
expect_error "top-p 1.01" "runner: error: --top-p 1.01: must be in (0, 1\]" "$RUNNER" "${P[@]}" --top-p 1.01
expect_error "top-k -3" "runner: error: --top-k -3: must be in \[0, 2147483647\] (0 = off)" "$RUNNER" "${P[@]}" --top-k -3
expect_error "top-k 1.5" "runner: error: --top-k '1.5': not an integer" "$RUNNER" "${P[@]}" --top-k 1.5
expect_error "top-k overflow" "runner: error: --top-k 99999999999: must be in" "$RUNNER" "${P[@]}" --top-k 99999999999
expect_error "repetition-penalty nan" "runner: error: --repetition-penalty nan: must be finite and > 0" "$RUNNER" "${P[@]}" --repetition-penalty nan
expect_error "repetition-penalty 0" "runner: error: --repetition-penalty 0: must be finite and > 0" "$RUNNER" "${P[@]}" --repetition-penalty 0
expect_error "kv-blocks 0" "runner: error: --kv-blocks 0: must be in \[1, 2147483647\]" "$RUNNER" "${P[@]}" --kv-blocks 0
expect_error "kv-blocks -4" "runner: error: --kv-blocks -4: must be in" "$RUNNER" "${P[@]}" --kv-blocks -4
expect_error "kv-blocks 8x" "runner: error: --kv-blocks '8x': not an integer" "$RUNNER" "${P[@]}" --kv-blocks 8x
expect_error "max-new-tokens 0" "runner: error: --max-new-tokens 0: must be in \[1, 2147483647\]" "$RUNNER" --program "$T/llama_f32.pte" --prompt hi --max-new-tokens 0
expect_error "max-new-tokens overflow" "runner: error: --max-new-tokens 99999999999: must be in" "$RUNNER" --program "$T/llama_f32.pte" --prompt hi --max-new-tokens 99999999999
expect_error "max-new-tokens empty" "runner: error: --max-new-tokens '': not an integer" "$RUNNER" --program "$T/llama_f32.pte" --prompt hi --max-new-tokens ""
expect_error "empty prompt" "runner: error: --prompt is empty" "$RUNNER" --program "$T/llama_f32.pte" --prompt ""
expect_error "empty prompts-file name" "runner: error: --prompts-file is empty" "$RUNNER" --program "$T/llama_f32.pte" --prompts-file ""
printf '\n\n' >"$T/blank.txt"
expect_error "blank prompts file" "runner: error: --prompts-file: .* has no prompts" "$RUNNER" --program "$T/llama_f32.pte" --prompts-file "$T/blank.txt"
# Boundary values are accepted; empty lines between prompts are skipped.
expect_ok "$RUNNER" "${P[@]}" --temperature 0 --top-k 0 --top-p 1 --repetition-penalty 1 --kv-blocks 8
printf 'one\n\ntwo\n' >"$T/gap.txt"
expect_ok "$RUNNER" --program "$T/llama_f32.pte" --prompts-file "$T/gap.txt" --max-new-tokens 2 --ignore-eos
grep -q "^\[2\] 2 tokens" "$T/err" && ! grep -q "^\[3\]" "$T/err" || fail "empty line not skipped: $(cat "$T/err")"

# A CRLF prompts file: the \r is not part of the prompt (same ids as --prompt).
printf 'abc\r\n' >"$T/crlf.txt"
expect_ok "$RUNNER" --program "$T/llama_f32.pte" --prompts-file "$T/crlf.txt" --max-new-tokens 4 --ignore-eos --print-ids
crlf=$(grep "^prompt ids: " "$T/out" | cut -d: -f2)
expect_ok "$RUNNER" --program "$T/llama_f32.pte" --prompt abc --max-new-tokens 4 --ignore-eos --print-ids
plain=$(grep "^prompt ids: " "$T/out" | cut -d: -f2)
[ -n "$plain" ] && [ "$crlf" = "$plain" ] || fail "CRLF prompt ids '$crlf' differ from '$plain'"

if [ $failures -ne 0 ]; then echo "$failures failure(s)"; exit 1; fi
echo "runner LLM: all checks passed"
