// The LLM facts a program carries (schema/program.fbs `LlmInfo`, docs/DESIGN.md §6): the `step` method's
// sizes, the KV cache layout, the EOS / BOS ids, generation_config.json's sampling defaults, and the
// tokenizer with its chat template, so that an app needs no other file and never parses JSON.
//
//   Result<Program> program = Program::load(loader, runtime);         // validates the LlmInfo table
//   const fb::Program& fbp = program->flatbuffer();
//   AddedTokenDesc added[64];                                          // llm_added_token_count(fbp)
//   EMBER_ASSIGN_OR_RETURN(LlmProgramView view, read_llm_info(fbp, added, &ctx));
//   EMBER_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::load(view.tokenizer, memory, &ctx));
//
// The view borrows the program's FlatBuffer and the caller's added-token storage: both must
// outlive it and any Tokenizer loaded from view.tokenizer. No heap; thread-safe (pure reads).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "runtime/core/scalar_type.h"
#include "runtime/core/span.h"
#include "runtime/core/status.h"
#include "runtime/llm/chat.h"
#include "runtime/llm/tokenizer.h"
#include "schema/program_generated.h"

namespace ember::llm {

// generation_config.json's values; has_* is false where the file did not give one (the engine then
// uses its own default: HF's are temperature 1, top_k 50, top_p 1, repetition_penalty 1,
// do_sample false).
struct GenerationDefaults {
  bool has_temperature = false;
  float temperature = 1.0f;
  bool has_top_k = false;
  int32_t top_k = 0;
  bool has_top_p = false;
  float top_p = 1.0f;
  bool has_repetition_penalty = false;
  float repetition_penalty = 1.0f;
  bool has_do_sample = false;
  bool do_sample = false;
};

struct LlmProgramView {
  int32_t vocab_size = 0;          // logits rows (>= tokenizer token count)
  int32_t block_size = 0;          // tokens per KV block
  int32_t max_seqs = 0;            // S of the step method
  int32_t max_tokens = 0;          // T of the step method
  int32_t max_context = 0;         // tokens per sequence, a multiple of block_size
  int32_t max_blocks_per_seq = 0;  // block table row length
  int32_t num_layers = 0;
  int32_t kv_heads = 0;
  int32_t head_dim = 0;
  ScalarType kv_dtype = ScalarType::Invalid;
  Span<const int32_t> eos_ids;     // each < vocab_size
  int32_t bos_id = -1;             // -1 = none
  GenerationDefaults generation;
  // The tokenizer, ready for Tokenizer::load; all empty when has_tokenizer is false (the program
  // was exported without one: the app brings its own).
  bool has_tokenizer = false;
  TokenizerDesc tokenizer;
  ChatTemplate chat;               // for render_chat (runtime/llm/chat.h)
  std::string_view chat_template;  // the Jinja text, for display (empty when there was none)
};

// Bytes one KV block takes over all layers (K and V): what an app multiplies by the num_blocks it
// chooses at load (LoadOptions::symbols) to size the pool (docs/DESIGN.md §6).
inline uint64_t kv_bytes_per_block(const LlmProgramView& view) {
  return uint64_t(view.num_layers) * 2u * uint64_t(view.block_size) * uint64_t(view.kv_heads) *
         uint64_t(view.head_dim) * nbytes_of(view.kv_dtype, 1);
}

// Whether the program carries an LlmInfo table.
bool has_llm_info(const fb::Program& program);
// Entries read_llm_info() needs in `added_storage` (0 without a tokenizer).
size_t llm_added_token_count(const fb::Program& program);

// Views of the program's LlmInfo. `program` must have been loaded with verification (the default;
// the validator checked every field, schema/README.md); with Verification::Trusted the caller
// vouches for the file. Errors: NotFound (no LlmInfo table), OutOfMemory (added_storage holds fewer
// than llm_added_token_count() entries; ctx names both counts), InvalidProgram (an enum value this
// runtime does not know, which only a file that skipped validation can hold).
Result<LlmProgramView> read_llm_info(const fb::Program& program, Span<AddedTokenDesc> added_storage,
                                     ErrorContext* ctx = nullptr);

}  // namespace ember::llm
