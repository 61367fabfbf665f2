// The LLM facts an exported program carries (schema/program.fbs `LlmInfo`, docs/DESIGN.md §6): the `step`
// method's sizes, the KV cache layout, EOS / BOS ids, generation_config.json's defaults and the
// tokenizer (tools/common/tokenizer_json's TokenizerData) with its chat template. The serializer
// writes them when SerializeOptions::llm is set; runtime/llm/program_info.h reads them back.
// Host-only; errors are ExportError.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/core/scalar_type.h"
#include "schema/program_generated.h"
#include "tools/common/tokenizer_json.h"

namespace ember::exporter {

struct LlmProgramInfo {
  int32_t vocab_size = 0;          // logits rows; >= the tokenizer's id count
  int32_t block_size = 0;          // tokens per KV block
  int32_t max_seqs = 0;            // S of step
  int32_t max_tokens = 0;          // T of step (>= max_seqs)
  int32_t max_context = 0;         // a multiple of block_size
  int32_t max_blocks_per_seq = 0;  // >= max_context / block_size
  int32_t num_layers = 0;
  int32_t kv_heads = 0;
  int32_t head_dim = 0;
  ScalarType kv_dtype = ScalarType::Invalid;  // f32, f16, bf16 or f8e4m3fn
  std::vector<int32_t> eos_ids;
  int32_t bos_id = -1;             // -1 = none
  // generation_config.json; nullopt where the file has no value.
  std::optional<float> temperature;
  std::optional<int32_t> top_k;
  std::optional<float> top_p;
  std::optional<float> repetition_penalty;
  std::optional<bool> do_sample;
  // nullopt: the program carries no tokenizer (an app then brings its own).
  std::optional<tools::TokenizerData> tokenizer;
};

// How the runtime renders a single-turn chat prompt (runtime/llm/chat.h has the exact text).
enum class ChatFormat : uint8_t { None, ChatMl, Llama3 };

struct ChatInfo {
  ChatFormat format = ChatFormat::None;
  std::optional<std::string> default_system;     // ChatML: inserted when the prompt has no system message
  std::optional<std::string> generation_prompt;  // ChatML: what add_generation_prompt appends
};

// Recognizes the chat template's family from its text:
//   - ChatML when it contains "<|im_start|>", with the default system message (Qwen2 "You are a
//     helpful assistant.", Qwen2.5 "You are Qwen, created by Alibaba Cloud. ...") when the template
//     holds one as a literal "<|im_start|>system\n...<|im_end|>" (Qwen3 has none), and the generation
//     prompt: the first string literal starting "<|im_start|>assistant" after "add_generation_prompt"
//     ("<|im_start|>assistant\n"; Qwen3 Thinking-2507 "<|im_start|>assistant\n<think>\n");
//   - Llama-3 when it contains "<|start_header_id|>" and bos_token is "<|begin_of_text|>" (the
//     runtime writes that text itself), except Llama-3.1+ templates, whose dated "Cutting Knowledge
//     Date" system block the runtime does not render: None;
//   - None otherwise (also without a template): the runtime passes the prompt through as it is.
ChatInfo detect_chat(const std::string& chat_template, const std::string& bos_token);

// Checks `info` (sizes positive, ids in range, the tokenizer's ids within vocab_size) and writes the
// LlmInfo table. Throws ExportError naming the field and value.
flatbuffers::Offset<fb::LlmInfo> write_llm_info(flatbuffers::FlatBufferBuilder& fbb, const LlmProgramInfo& info);

}  // namespace ember::exporter
