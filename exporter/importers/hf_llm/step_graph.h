// The hf_llm importer's graph: a Hugging Face Llama / Qwen2 / Qwen3 checkpoint folder as the `step`
// method of docs/DESIGN.md §6 (one method for any mix of prefill chunks and decode tokens, paged KV cache
// as program state, sampling inside the graph). Host-only; errors are ExportError naming the
// tensor, the field and the value.
//
// Inputs (i32 unless stated; T tokens, S sequences, H history columns, all symbols):
//   token_ids [T], positions [T], slot_mapping [T] (-1 = padding), block_tables [S, max_blocks],
//   context_lens [S] (KV length after this step), query_start [S + 1], logits_indices [S] (the
//   token whose logits sample row s, -1 = a padding row), temperature [S] f32, top_k [S],
//   top_p [S] f32, repetition_penalty [S] f32, seed [S], sample_position [S] (the Philox counter:
//   the number of tokens the sequence has generated), history [S, H], history_len [S].
// Outputs: next_ids [S] i32, logprobs [S] f32 (unless StepOptions::emit_logprobs is false, exporter
// --no-logprobs: then a step sends only the S ids back); with StepOptions::emit_logits (exporter
// --emit-logits) also logits [S, vocab] f32 (before the penalty), last. Without it the lm_head's
// output only feeds `sample` and never leaves the graph: for a 152k vocabulary it would be the
// largest transfer of a decode step, and generation needs only the sampled ids.
// State: kv.<layer>.k / kv.<layer>.v [num_blocks, block_size, kv_heads, head_dim] of kv_dtype;
// num_blocks is a program symbol (1 .. max_seqs · max_blocks) chosen at load.
//
// Per layer (HF modeling_llama / qwen2 / qwen3 in f32 with the checkpoint's weights):
//   h = rms_norm(x); q, k, v = linear(h) (+ bias: Qwen2); Qwen3: q, k = rms_norm over head_dim;
//   q, k = rope(positions); a = paged_attention(q, k, v, caches, ...); x += o_proj(a);
//   x += down_proj(silu_mul(gate_proj(rms_norm(x)), up_proj(...))).
// Then norm, logits_gather, lm_head (or the embedding table when tied), sample.
//
// Weights: f32 stays f32; bf16 linear weights stay bf16 (linear_bf16; the quantize pass widens the
// ones it quantizes); f16 linear weights become f32 (no f16 linear kernel);
// norms and biases become f32; the embedding table keeps f32 / bf16 / f16. Pre-quantized FP8
// checkpoints (quantization_config.quant_method "fp8", `weight_scale_inv` per 128 x 128 block)
// become f8_e4m3fn weights with Block2d f32 scales, exactly (bf16 scales widen without rounding).
// Every checkpoint tensor is consumed, or the import fails naming the leftovers.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "exporter/importers/hf_llm/config.h"
#include "exporter/ir/graph.h"

namespace ember::exporter::hf {

// Bounds of StepOptions (and the exporter's --max-seqs / --max-tokens / --max-context /
// --block-size). The step's index inputs are i32 and every KV slot (max_seqs x max_context) must fit
// an i32 slot_mapping entry; within these bounds every size derived from them fits int64 without
// overflow. Real deployments sit far below them.
constexpr int64_t kMaxStepSeqs = 65536;
constexpr int64_t kMaxStepTokens = int64_t{1} << 20;
constexpr int64_t kMaxStepContext = int64_t{1} << 20;
constexpr int64_t kMaxBlockSize = 65536;

struct StepOptions {
  int64_t max_seqs = 8;       // S
  int64_t max_tokens = 256;   // T (>= max_seqs)
  int64_t max_context = 0;    // 0: min(max_position_embeddings, 4096); rounded up to block_size
  int64_t block_size = 16;
  // f32, bf16, f16 or f8_e4m3fn; Invalid: the checkpoint's dtype (f32 / bf16 / f16; FP8 -> bf16).
  ScalarType kv_dtype = ScalarType::Invalid;
  float kv_scale = 1.0f;      // FP8 cache: stored = e4m3(x / kv_scale); finite and > 0
  bool emit_logits = false;   // logits [S, vocab] as a third output (tests against reference logits)
  bool emit_logprobs = true;  // logprobs [S] f32 (the sampled token's log-probability) as an output
  std::ostream* progress = nullptr;  // a progress bar while weights are converted; null = quiet
  bool trust_model_folder = false;   // files may resolve outside the folder (--trust-model-folder)
};

struct StepImport {
  Graph graph;
  LlmConfig config;
  int64_t max_context = 0, max_blocks = 0, max_num_blocks = 0;
  uint64_t kv_cache_bytes = 0;  // all layers' K and V caches at num_blocks = max_num_blocks
  ScalarType kv_dtype = ScalarType::Invalid;
  int64_t parameters = 0;   // checkpoint elements imported
  std::string summary;      // one paragraph for the CLI
};

// Reads dir/config.json (+ generation_config.json) and the safetensors, and builds the step graph.
// Options outside the bounds above fail naming the flag and the value ("--max-context
// 9223372036854775807: above the limit 1048576"), before anything is allocated.
StepImport import_step(const std::string& dir, const StepOptions& options);

}  // namespace ember::exporter::hf
