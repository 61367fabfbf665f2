// A Hugging Face LLM checkpoint's config.json and generation_config.json, as the hf_llm importer
// needs them: Llama, Qwen2 and Qwen3 families. Host-only: errors are std::runtime_error naming the
// file, the field and the value.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember::exporter::hf {

enum class Family { Llama, Qwen2, Qwen3, Mistral };
const char* to_string(Family family);

struct RopeScaling {
  enum class Type { None, Llama3 } type = Type::None;
  double factor = 1.0, low_freq_factor = 1.0, high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 0;
};

struct LlmConfig {
  Family family = Family::Llama;
  std::string architecture;  // architectures[0]
  int64_t vocab_size = 0, hidden_size = 0, intermediate_size = 0, num_layers = 0;
  int64_t num_heads = 0, num_kv_heads = 0, head_dim = 0, max_position_embeddings = 0;
  double rms_norm_eps = 1e-6, rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;   // q/k/v projections have biases (always for Qwen2)
  bool qk_norm = false;          // Qwen3: RMSNorm over head_dim on q and k, before RoPE
  // Every layer's attention sees the last `sliding_window` positions only (the query's own
  // included; 0 = all): Mistral's `sliding_window`, and a Llama config that sets one (transformers
  // applies it there too).
  int64_t sliding_window = 0;
  std::string torch_dtype;       // "float32", "bfloat16", "float16"
  // Pre-quantized FP8 (quantization_config.quant_method == "fp8"): block along [out, in].
  bool fp8 = false;
  int64_t fp8_block_n = 0, fp8_block_k = 0;
  // generation_config.json (and config.json's ids where it lacks them).
  int64_t bos_token_id = -1;
  std::vector<int64_t> eos_token_ids;
  double temperature = 1.0, top_p = 1.0, repetition_penalty = 1.0;
  int64_t top_k = 0;
  bool do_sample = false;
};

// Reads dir/config.json and, when present, dir/generation_config.json: regular files of at most
// 128 MiB that resolve inside `dir` (symlinks followed) unless `trust_model_folder`
// (tools/common/host_io.h; exporter --trust-model-folder).
LlmConfig load_config(const std::string& dir, bool trust_model_folder = false);

// The same from the files' text (the fuzzers' entry point): `generation_json` empty means there is
// no generation_config.json. The names prefix error messages. JSON nested deeper than 512 levels
// or larger than 128 MiB is refused before it is parsed.
LlmConfig parse_llm_config(const std::string& config_json, const std::string& generation_json = "",
                           const std::string& config_name = "config.json",
                           const std::string& generation_name = "generation_config.json");

// RoPE inverse frequencies [head_dim / 2] in f32 as transformers computes them
// (_compute_default_rope_parameters, _compute_llama3_parameters).
std::vector<float> rope_inv_freq(const LlmConfig& config);

}  // namespace ember::exporter::hf
