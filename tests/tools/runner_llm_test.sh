#!/usr/bin/env bash
# runner's LLM modes end to end on the tiny checkpoints (tests/llm/make_checkpoints.py): export with
# hf_llm, generate with --prompt / --prompt-ids / --prompts-file / --chat / --stop, check the
# embedded tokenizer with --encode / --decode against the checkpoint's tokenizer.json, --info's llm
# block, --dump-logits, and the error paths (non-zero exit, one "runner: error:" line, never a crash).
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

# Issue 17 (newcomer snags). --info on an LLM program: what its LlmInfo table and KV state
# declarations say, "unknown" for what it does not store. llama_f32 (exported above: 4 x 32 tokens
# a step, context 64, blocks of 8): 2 layers x K,V x 2 kv heads x head_dim 32 x f32 = 8 KiB a
# block, 32 blocks = the 256 KiB of state checked above.
info_has() {  # info_has WHAT LINE...: each line must appear exactly in $T/out
  local what=$1; shift
  for line in "$@"; do grep -qxF -- "$line" "$T/out" || fail "--info $what: no line '$line' in: $(cat "$T/out")"; done
}
expect_ok "$RUNNER" --info "$T/llama_f32.pte"
info_has llama_f32 "llm (the program's LlmInfo; 'step' method):" \
  "  family: unknown (the program does not store the architecture)" \
  "  vocab_size: 1210 (logits columns; prompt and EOS ids are below it)" \
  "  max_context: 64 tokens per sequence (prompt + generated); step: max_seqs 4, max_tokens 32" \
  "  kv cache: f32, 2 layers x K,V x 2 kv heads x head_dim 32; block_size 8 tokens; 8.0 KiB per block (1.0 KiB per token)" \
  "  kv blocks: at most 32 (the default; num_blocks in [1, 32], runner --kv-blocks needs >= 8: one context); loaded with 32: 256.0 KiB in 4 state tensors" \
  "  eos ids: 1201, 1209; bos id: 1200" \
  "  chat template: Llama-3 (393 bytes of Jinja)" \
  "  tokenizer: byte-level BPE, pre-tokenizer Llama-3 regex; 1210 tokens (1200 BPE + 10 added), 944 merges; encode adds BOS: yes" \
  "  generation defaults (generation_config.json): temperature 0.6, top_k 0, top_p 0.9, repetition_penalty 1, do_sample true" \
  "  runner without sampling flags: samples at temperature 0.6, top_k 0, top_p 0.9, repetition_penalty 1"
# The LLM block comes before the methods, once.
[ "$(grep -c "^llm (" "$T/out")" -eq 1 ] && [ "$(grep -n "^llm (" "$T/out" | cut -d: -f1)" -lt "$(grep -n "^method 'step'" "$T/out" | cut -d: -f1)" ] \
  || fail "--info: the llm block is not once, before the method: $(cat "$T/out")"
expect_ok "$RUNNER" --info "$T/llama_f32.pte" --kv-blocks 8
info_has "--kv-blocks 8" "  kv blocks: at most 32 (the default; num_blocks in [1, 32], runner --kv-blocks needs >= 8: one context); loaded with 8: 64.0 KiB in 4 state tensors"
expect_ok "$RUNNER" --info "$T/qwen2_bf16.pte"
info_has qwen2_bf16 "  vocab_size: 1153 (logits columns; prompt and EOS ids are below it)" \
  "  kv cache: bf16, 2 layers x K,V x 2 kv heads x head_dim 32; block_size 8 tokens; 4.0 KiB per block (512 B per token)" \
  "  eos ids: 1152, 1150; bos id: 1150" \
  '  chat template: ChatML (333 bytes of Jinja), default system message "You are a helpful assistant.", generation prompt "<|im_start|>assistant\n"' \
  "  tokenizer: byte-level BPE, pre-tokenizer Qwen2 regex; 1153 tokens (1150 BPE + 3 added), 894 merges; encode adds BOS: no" \
  "  generation defaults (generation_config.json): temperature 0.7, top_k 20, top_p 0.8, repetition_penalty 1.05, do_sample true" \
  "  runner without sampling flags: samples at temperature 0.7, top_k 20, top_p 0.8, repetition_penalty 1.05"
# A program without a tokenizer (the folder has no tokenizer.json): its chat template is unknown.
mkdir -p "$T/notok"
cp "$CK/qwen2_bf16"/{config.json,generation_config.json,model.safetensors} "$T/notok/"
"$EXPORTER" "$T/notok" -o "$T/notok.pte" --max-seqs 4 --max-tokens 32 --max-context 64 --block-size 8 >"$T/export.out" 2>&1 \
  || fail "export without tokenizer: $(cat "$T/export.out")"
expect_ok "$RUNNER" --info "$T/notok.pte"
info_has "without tokenizer" "  chat template: unknown (no tokenizer embedded)" \
  "  tokenizer: none embedded (runner needs --tokenizer tokenizer.json, or --prompt-ids)"
expect_ok "$RUNNER" --info "$T/mlp.pte"
grep -q "^llm" "$T/out" && fail "--info on a non-LLM program prints an llm block: $(cat "$T/out")"
# A chat template the runtime does not render, and none at all (tokenizer_config.json edited).
mkdir -p "$T/tmpl"
cp "$CK/qwen2_bf16"/{config.json,generation_config.json,model.safetensors,tokenizer.json} "$T/tmpl/"
for t in other none; do
  /usr/bin/python3 - "$CK/qwen2_bf16/tokenizer_config.json" "$T/tmpl/tokenizer_config.json" $t <<'PY' || fail "edit chat_template"
import json, sys
d = json.load(open(sys.argv[1], encoding="utf-8"))
if sys.argv[3] == "other":
    d["chat_template"] = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
else:
    d.pop("chat_template", None)
json.dump(d, open(sys.argv[2], "w", encoding="utf-8"))
PY
  "$EXPORTER" "$T/tmpl" -o "$T/tmpl.pte" --max-seqs 4 --max-tokens 32 --max-context 64 --block-size 8 >/dev/null 2>&1 \
    || fail "export with chat_template $t"
  expect_ok "$RUNNER" --info "$T/tmpl.pte"
  if [ $t = other ]; then
    info_has "another template" "  chat template: present (53 bytes of Jinja) but not a family the runtime renders (ChatML, Llama-3): --chat sends the prompt as it is"
  else
    info_has "no template" "  chat template: none (--chat sends the prompt as it is)"
  fi
done

# --prompt-ids: the ids of a --prompt give the same run (same stdout: prompt ids, text, generated
# ids), whichever separators; without a tokenizer the output is the generated ids.
G=(--max-new-tokens 8 --ignore-eos --temperature 0 --print-ids)
expect_ok "$RUNNER" --program "$T/llama_f32.pte" --prompt "Hello world, this is" "${G[@]}"
cp "$T/out" "$T/by_text"
ids=$(sed -n 's/^prompt ids: //p' "$T/by_text")
[ "$(echo "$ids" | wc -w)" -gt 3 ] || fail "--prompt-ids: no prompt ids to reuse: $(cat "$T/by_text")"
for form in "$ids" "${ids// /,}" "${ids// /, }"; do
  expect_ok "$RUNNER" --program "$T/llama_f32.pte" --prompt-ids "$form" "${G[@]}"
  cmp -s "$T/out" "$T/by_text" || fail "--prompt-ids '$form' differs from --prompt: $(cat "$T/out") vs $(cat "$T/by_text")"
done
expect_ok "$RUNNER" --program "$T/qwen2_bf16.pte" --prompt-ids "5,6,7" "${G[@]}"
with_tok=$(sed -n 's/^generated ids: //p' "$T/out")
expect_ok "$RUNNER" --program "$T/notok.pte" --prompt-ids "5,6,7" --max-new-tokens 8 --ignore-eos --temperature 0
[ "$(cat "$T/out")" = "generated ids: $with_tok" ] || fail "--prompt-ids without a tokenizer: '$(cat "$T/out")', expected the ids '$with_tok'"
grep -q "^\[1\] 8 tokens, finished: length$" "$T/err" || fail "--prompt-ids without a tokenizer: $(cat "$T/err")"
expect_ok "$RUNNER" --program "$T/notok.pte" --tokenizer "$CK/qwen2_bf16/tokenizer.json" --prompt-ids "5,6,7" "${G[@]}"
cp "$T/out" "$T/notok_text"
expect_ok "$RUNNER" --program "$T/qwen2_bf16.pte" --prompt-ids "5,6,7" "${G[@]}"
cmp -s "$T/out" "$T/notok_text" || fail "--prompt-ids with --tokenizer: $(cat "$T/notok_text") vs $(cat "$T/out")"
L=(--program "$T/llama_f32.pte" --max-new-tokens 2)
expect_error "prompt-ids not a number" "runner: error: --prompt-ids: 'abc' is not an integer id$" "$RUNNER" "${L[@]}" --prompt-ids "1,2,abc"
expect_error "prompt-ids 1.5" "runner: error: --prompt-ids: '1.5' is not an integer id$" "$RUNNER" "${L[@]}" --prompt-ids "1.5"
expect_error "prompt-ids overflow" "runner: error: --prompt-ids: '99999999999' is not an int32 id$" "$RUNNER" "${L[@]}" --prompt-ids "99999999999"
expect_error "prompt-ids outside the vocab" "runner: error: --prompt-ids: id 1210 is outside the vocabulary (vocab_size 1210: ids 0 to 1209)$" \
  "$RUNNER" "${L[@]}" --prompt-ids "1 1210"
expect_error "prompt-ids negative" "runner: error: --prompt-ids: id -1 is outside the vocabulary (vocab_size 1210: ids 0 to 1209)$" \
  "$RUNNER" "${L[@]}" --prompt-ids "-1"
expect_error "prompt-ids empty item" "runner: error: --prompt-ids: an empty item in '1,,2'" "$RUNNER" "${L[@]}" --prompt-ids "1,,2"
expect_error "prompt-ids trailing comma" "runner: error: --prompt-ids: an empty item in '1,2,'" "$RUNNER" "${L[@]}" --prompt-ids "1,2,"
expect_error "prompt-ids empty" "runner: error: --prompt-ids is empty$" "$RUNNER" "${L[@]}" --prompt-ids ""
expect_error "prompt-ids blank" "runner: error: --prompt-ids: no ids in ' '$" "$RUNNER" "${L[@]}" --prompt-ids " "
expect_error "prompt-ids and prompt" "runner: error: give one of --prompt, --prompt-ids," "$RUNNER" "${L[@]}" --prompt-ids 1 --prompt hi
expect_error "prompt-ids and chat" "runner: error: --chat renders text: give --prompt" "$RUNNER" "${L[@]}" --prompt-ids 1 --chat
expect_error "stop without a tokenizer" "runner: error: --stop matches text, and $T/notok.pte carries no tokenizer" \
  "$RUNNER" --program "$T/notok.pte" --prompt-ids 1 --stop x
expect_error "prompt without a tokenizer" "runner: error: $T/notok.pte carries no tokenizer; pass --tokenizer tokenizer.json (or give the prompt as --prompt-ids)$" \
  "$RUNNER" --program "$T/notok.pte" --prompt hi

# --dump-logits: row i holds the logits generated token i was sampled from (row 0 at the prompt's
# last position, row i after generated token i-1), float32 [generated tokens, vocab]. Greedy: each
# row's argmax is its token; row 3 equals row 0 of the prompt extended by tokens 0..2.
"$EXPORTER" "$CK/llama_f32" -o "$T/logits.pte" --emit-logits --max-seqs 4 --max-tokens 32 --max-context 64 --block-size 8 >/dev/null \
  || fail "export --emit-logits"
expect_ok "$RUNNER" --program "$T/logits.pte" --prompt "Hello world, this is" "${G[@]}" --dump-logits "$T/logits.npy"
cmp -s "$T/out" "$T/by_text" || fail "--dump-logits changed the output: $(cat "$T/out")"
grep -qxF "logits: 8 rows (one per generated token) x 1210 -> $T/logits.npy" "$T/err" || fail "--dump-logits: no logits line: $(cat "$T/err")"
gen=$(sed -n 's/^generated ids: //p' "$T/out")
read -r -a g <<<"$gen"
expect_ok "$RUNNER" --program "$T/logits.pte" --prompt-ids "$ids ${g[0]:-} ${g[1]:-} ${g[2]:-}" --max-new-tokens 1 --temperature 0 \
  --dump-logits "$T/logits4.npy"
/usr/bin/python3 - "$T/logits.npy" "$T/logits4.npy" "$gen" <<'PY' || fail "--dump-logits: the rows do not match the generated ids"
import sys
import numpy as np
a, b, ids = np.load(sys.argv[1]), np.load(sys.argv[2]), [int(t) for t in sys.argv[3].split()]
assert a.dtype == np.float32 and a.shape == (8, 1210), (a.dtype, a.shape)
assert a.argmax(axis=1).tolist() == ids, (a.argmax(axis=1).tolist(), ids)
assert b.shape == (1, 1210) and np.allclose(a[3], b[0], rtol=1e-5, atol=1e-5), np.abs(a[3] - b[0]).max()
assert not np.allclose(a[2], b[0], rtol=1e-5, atol=1e-5)
PY
expect_error "dump-logits without logits" "runner: error: --dump-logits: $T/llama_f32.pte has no 'logits' output (export it with --emit-logits)$" \
  "$RUNNER" --program "$T/llama_f32.pte" --prompt hi --dump-logits "$T/none.npy"
[ -e "$T/none.npy" ] && fail "--dump-logits without logits wrote a file"
expect_error "dump-logits over the program" "runner: error: --dump-logits $T/logits.pte: is the same file as the input" \
  "$RUNNER" --program "$T/logits.pte" --prompt hi --dump-logits "$T/logits.pte"
expect_error "dump-logits into a missing folder" "runner: error: --dump-logits $T/no/x.npy: cannot create" \
  "$RUNNER" --program "$T/logits.pte" --prompt hi --dump-logits "$T/no/x.npy"
expect_error "dump-logits with a prompts file" "runner: error: --dump-logits takes one prompt" \
  "$RUNNER" --program "$T/logits.pte" --prompts-file "$T/prompts.txt" --dump-logits "$T/x.npy"
expect_error "dump-logits without generation" "runner: error: --dump-logits needs an LLM generation" \
  "$RUNNER" --program "$T/logits.pte" --dump-logits "$T/x.npy"
expect_error "dump-logits empty" "runner: error: --dump-logits is empty$" "$RUNNER" --program "$T/logits.pte" --prompt hi --dump-logits ""

# The counts and speeds start on a line of their own, also with stdout and stderr in one file
# (stdout fully buffered): a newline ends the streamed text only when it lacks one.
"$RUNNER" --program "$T/llama_f32.pte" --prompt "Hello world, this is" --max-new-tokens 8 --ignore-eos --temperature 0 >"$T/both" 2>&1 \
  || fail "merged output: exit $?"
[ "$(sed -n 2p "$T/both")" = "[1] 8 tokens, finished: length" ] && grep -q "^prefill: " "$T/both" \
  || fail "the speed lines do not start their own lines: $(cat -A "$T/both")"
[ "$(head -1 "$T/both")" = "$(sed -n 2p "$T/by_text")" ] || fail "merged output: the first line is not the text: $(cat -A "$T/both")"
# A text that ends with "\n": a tokenizer whose byte-level "\n" (Ċ) swaps ids with the last
# generated token; no empty line may follow the text.
last=$(sed -n 's/^generated ids: .* \([0-9]*\)$/\1/p' "$T/by_text")
/usr/bin/python3 - "$CK/llama_f32/tokenizer.json" "$T/nl/tokenizer.json" "$last" <<'PY' || fail "cannot make the newline tokenizer"
import json, os, sys
src, dst, last = sys.argv[1], sys.argv[2], int(sys.argv[3])
d = json.load(open(src, encoding="utf-8"))
vocab = d["model"]["vocab"]
name = {i: k for k, i in vocab.items()}[last]  # KeyError for an added token: the test must change
vocab[name], vocab["\u010a"] = vocab["\u010a"], last
os.makedirs(os.path.dirname(dst), exist_ok=True)
json.dump(d, open(dst, "w", encoding="utf-8"), ensure_ascii=False)
PY
"$RUNNER" --program "$T/llama_f32.pte" --tokenizer "$T/nl/tokenizer.json" --prompt-ids "$ids" --max-new-tokens 8 --ignore-eos \
  --temperature 0 >"$T/both" 2>&1 || fail "newline text: exit $?"
n=$(grep -n "^\[1\] 8 tokens, finished: length$" "$T/both" | cut -d: -f1)
[ -n "$n" ] && [ "$n" -ge 2 ] && [ -n "$(sed -n "$((n - 1))p" "$T/both")" ] \
  || fail "a text ending with a newline got another one: $(cat -A "$T/both")"
"$RUNNER" --program "$T/llama_f32.pte" --tokenizer "$T/nl/tokenizer.json" --prompt-ids "$ids" --max-new-tokens 8 --ignore-eos \
  --temperature 0 >"$T/out" 2>/dev/null || fail "newline text alone: exit $?"
[ "$(tail -c 1 "$T/out" | od -An -tx1)" = " 0a" ] && [ "$(tail -c 2 "$T/out" | head -c 1 | od -An -tx1)" != " 0a" ] \
  || fail "stdout does not end with exactly one newline: $(od -c "$T/out" | tail -3)"

if [ $failures -ne 0 ]; then echo "$failures failure(s)"; exit 1; fi
echo "runner LLM: all checks passed"
