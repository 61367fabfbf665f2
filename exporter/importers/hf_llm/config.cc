#include "exporter/importers/hf_llm/config.h"

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "tools/common/host_io.h"

namespace ember::exporter::hf {
namespace {

using json = nlohmann::json;
using tools::json_excerpt;
using tools::json_type_name;

[[noreturn]] void fail(const std::string& file, const std::string& what) {
  throw std::runtime_error(file + ": " + what);
}

// "<key> = <value>: expected <what>, got <type>".
[[noreturn]] void fail_type(const std::string& file, const std::string& key, const json& v, const char* expected) {
  fail(file, key + " = " + json_excerpt(v) + ": expected " + expected + ", got " + json_type_name(v));
}

const json* find(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

int64_t get_int(const json& j, const std::string& file, const char* key, int64_t lo, int64_t hi) {
  const json* v = find(j, key);
  if (v == nullptr) fail(file, std::string(key) + " is missing (expected an integer)");
  if (!v->is_number_integer()) fail_type(file, key, *v, "an integer");
  if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(hi)) {
    fail(file, std::string(key) + " = " + json_excerpt(*v) + " outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  const int64_t value = v->get<int64_t>();
  if (value < lo || value > hi) {
    fail(file, std::string(key) + " = " + std::to_string(value) + " outside [" + std::to_string(lo) + ", " +
                   std::to_string(hi) + "]");
  }
  return value;
}

// Entry i of the JSON array `a`, an integer in [lo, hi]; `key` names it in errors.
int64_t get_int(const json& a, const std::string& file, size_t i, const std::string& key, int64_t lo, int64_t hi) {
  const json& v = a[i];
  const bool in_range = v.is_number_unsigned() ? v.get<uint64_t>() <= uint64_t(hi) && uint64_t(lo) <= v.get<uint64_t>()
                        : v.is_number_integer() ? v.get<int64_t>() >= lo && v.get<int64_t>() <= hi
                                                : false;
  if (!v.is_number_integer()) fail(file, key + " = " + json_excerpt(v) + " is not an integer");
  if (!in_range) fail(file, key + " = " + json_excerpt(v) + " outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v.get<int64_t>();
}

double get_num(const json& j, const std::string& file, const char* key, double fallback) {
  const json* v = find(j, key);
  if (v == nullptr || v->is_null()) return fallback;
  if (!v->is_number()) fail_type(file, key, *v, "a number");
  const double value = v->get<double>();
  if (!std::isfinite(value)) fail(file, std::string(key) + " is not finite");
  return value;
}

std::string get_string(const json& j, const std::string& file, const char* key, const std::string& fallback) {
  const json* v = find(j, key);
  if (v == nullptr || v->is_null()) return fallback;
  if (!v->is_string()) fail_type(file, key, *v, "a string");
  return v->get<std::string>();
}

bool get_bool(const json& j, const std::string& file, const char* key, bool fallback) {
  const json* v = find(j, key);
  if (v == nullptr || v->is_null()) return fallback;
  if (!v->is_boolean()) fail_type(file, key, *v, "a boolean");
  return v->get<bool>();
}

// The JSON reader with limits (tools/common/host_io.h), its errors as this importer's.
json parse_json_text(const std::string& text, const std::string& file) {
  try {
    return tools::parse_json(text, file);
  } catch (const tools::HostIoError& e) {
    throw std::runtime_error(e.what());
  }
}

std::vector<int64_t> get_ids(const json& v, const std::string& file, const char* key) {
  std::vector<int64_t> ids;
  if (v.is_number_integer()) {
    ids.push_back(v.get<int64_t>());
  } else if (v.is_array()) {
    for (const json& e : v) {
      if (!e.is_number_integer()) fail(file, std::string(key) + " entry " + json_excerpt(e) + " is not a token id");
      ids.push_back(e.get<int64_t>());
    }
  } else if (!v.is_null()) {
    fail(file, std::string(key) + " = " + json_excerpt(v) + " is not a token id or a list of them");
  }
  return ids;
}

}  // namespace

const char* to_string(Family family) {
  switch (family) {
    case Family::Llama: return "llama";
    case Family::Qwen2: return "qwen2";
    case Family::Qwen3: return "qwen3";
    case Family::Mistral: return "mistral";
  }
  return "?";
}

LlmConfig parse_llm_config(const std::string& config_json, const std::string& generation_json,
                           const std::string& config_name, const std::string& generation_name) {
  const std::string& file = config_name;
  const json j = parse_json_text(config_json, file);
  if (!j.is_object()) fail(file, std::string("expected a JSON object, got ") + json_type_name(j));
  LlmConfig c;
  const std::string model_type = get_string(j, file, "model_type", "");
  if (model_type == "llama") c.family = Family::Llama;
  else if (model_type == "qwen2") c.family = Family::Qwen2;
  else if (model_type == "qwen3") c.family = Family::Qwen3;
  else if (model_type == "mistral") c.family = Family::Mistral;
  else fail(file, "model_type '" + model_type + "' is not supported (llama, mistral, qwen2, qwen3)");
  if (const json* a = find(j, "architectures"); a != nullptr && a->is_array() && !a->empty() && (*a)[0].is_string()) {
    c.architecture = (*a)[0].get<std::string>();
  }
  // Sizes, ids and counts end up in the program as int32 (LlmInfo, i32 token ids); layers, heads
  // and head_dim are far above any real model's at 4096, and bound what multiplies them.
  constexpr int64_t kBig = INT32_MAX;
  c.vocab_size = get_int(j, file, "vocab_size", 1, kBig);
  c.hidden_size = get_int(j, file, "hidden_size", 1, kBig);
  c.intermediate_size = get_int(j, file, "intermediate_size", 1, kBig);
  c.num_layers = get_int(j, file, "num_hidden_layers", 1, 4096);
  c.num_heads = get_int(j, file, "num_attention_heads", 1, 4096);
  const json* kv_heads = find(j, "num_key_value_heads");
  c.num_kv_heads = kv_heads != nullptr && !kv_heads->is_null() ? get_int(j, file, "num_key_value_heads", 1, c.num_heads)
                                                              : c.num_heads;
  if (c.num_heads % c.num_kv_heads != 0) {
    fail(file, "num_attention_heads = " + std::to_string(c.num_heads) + " is not a multiple of num_key_value_heads = " +
                   std::to_string(c.num_kv_heads));
  }
  if (const json* hd = find(j, "head_dim"); hd != nullptr && !hd->is_null()) {
    c.head_dim = get_int(j, file, "head_dim", 2, 4096);
  } else {
    if (c.hidden_size % c.num_heads != 0) {
      fail(file, "hidden_size = " + std::to_string(c.hidden_size) + " is not a multiple of num_attention_heads = " +
                     std::to_string(c.num_heads));
    }
    c.head_dim = c.hidden_size / c.num_heads;
    if (c.head_dim < 2 || c.head_dim > 4096) {
      fail(file, "head_dim = hidden_size / num_attention_heads = " + std::to_string(c.head_dim) +
                     " outside [2, 4096] (no head_dim field)");
    }
  }
  if (c.head_dim % 2 != 0) fail(file, "head_dim = " + std::to_string(c.head_dim) + " is odd (RoPE needs pairs)");
  c.max_position_embeddings = get_int(j, file, "max_position_embeddings", 1, kBig);
  c.rms_norm_eps = get_num(j, file, "rms_norm_eps", 1e-6);
  if (!(c.rms_norm_eps > 0.0) || c.rms_norm_eps > 1.0 || float(c.rms_norm_eps) == 0.0f) {
    fail(file, "rms_norm_eps = " + json_excerpt(*find(j, "rms_norm_eps")) + " outside (0, 1] (it is used as an f32)");
  }
  c.rope_theta = get_num(j, file, "rope_theta", 10000.0);
  if (!(c.rope_theta > 1.0) || !std::isfinite(float(c.rope_theta))) {
    fail(file, "rope_theta = " + json_excerpt(*find(j, "rope_theta")) + " must be > 1 and finite as an f32");
  }
  c.tie_word_embeddings = get_bool(j, file, "tie_word_embeddings", false);
  c.attention_bias = c.family == Family::Qwen2 ? true : get_bool(j, file, "attention_bias", false);
  c.qk_norm = c.family == Family::Qwen3;
  c.torch_dtype = get_string(j, file, "torch_dtype", get_string(j, file, "dtype", "float32"));
  const std::string act = get_string(j, file, "hidden_act", "silu");
  if (act != "silu") fail(file, "hidden_act '" + act + "' is not silu");
  if (get_bool(j, file, "mlp_bias", false)) fail(file, "mlp_bias = true is not supported");
  if (get_num(j, file, "partial_rotary_factor", 1.0) != 1.0) fail(file, "partial_rotary_factor != 1 is not supported");
  // Sliding windows. Mistral: a non-null `sliding_window` limits every layer's attention (the paged
  // attention kernels implement it). A Llama config that sets one is refused: transformers 5.17's
  // LlamaForCausalLM ignores it while MistralForCausalLM applies it (tests/llm/
  // hf_sliding_window_probe.py), so a silent choice would generate other tokens than one of them;
  // relabel the config `mistral` if it is one. Qwen2 / Qwen3
  // configs carry a window that applies only with use_sliding_window = true, and then only from
  // max_window_layers on: not implemented.
  const json* window = find(j, "sliding_window");
  if (c.family == Family::Mistral) {
    if (window != nullptr && !window->is_null()) c.sliding_window = get_int(j, file, "sliding_window", 1, kBig);
  } else if (c.family == Family::Llama) {
    if (window != nullptr && !window->is_null()) {
      fail(file, "sliding_window = " + json_excerpt(*window) +
                     " on a llama config: Ember's llama has no sliding window (use model_type mistral if the "
                     "checkpoint is a Mistral)");
    }
  } else if (get_bool(j, file, "use_sliding_window", false)) {
    fail(file, "use_sliding_window = true is not supported for " + std::string(to_string(c.family)) +
                   " (sliding windows from max_window_layers on)");
  }
  for (const char* field : {"attn_logit_softcapping", "final_logit_softcapping"}) {
    if (const json* f = find(j, field); f != nullptr && !f->is_null()) {
      fail(file, std::string(field) + " is set, which Ember does not implement for " + to_string(c.family));
    }
  }
  // transformers 5 writes layer_types: every layer must be the kind this family's graph builds.
  if (const json* lt = find(j, "layer_types"); lt != nullptr && !lt->is_null()) {
    if (!lt->is_array()) fail_type(file, "layer_types", *lt, "an array");
    const std::string want = c.sliding_window > 0 ? "sliding_attention" : "full_attention";
    for (size_t i = 0; i < lt->size(); ++i) {
      if (!(*lt)[i].is_string() || (*lt)[i].get<std::string>() != want) {
        fail(file, "layer_types[" + std::to_string(i) + "] = " + json_excerpt((*lt)[i]) + ": every layer must be '" +
                       want + "' (mixed attention layers are not implemented for " + to_string(c.family) + ")");
      }
    }
  }
  if (const json* r = find(j, "rope_scaling"); r != nullptr && !r->is_null()) {
    if (!r->is_object()) fail_type(file, "rope_scaling", *r, "an object");
    const std::string rfile = file + ": rope_scaling";
    const std::string type = get_string(*r, rfile, "rope_type", get_string(*r, rfile, "type", ""));
    if (type == "llama3") {
      c.rope_scaling.type = RopeScaling::Type::Llama3;
      c.rope_scaling.factor = get_num(*r, rfile, "factor", 0.0);
      c.rope_scaling.low_freq_factor = get_num(*r, rfile, "low_freq_factor", 0.0);
      c.rope_scaling.high_freq_factor = get_num(*r, rfile, "high_freq_factor", 0.0);
      c.rope_scaling.original_max_position_embeddings = get_int(*r, rfile, "original_max_position_embeddings", 1, kBig);
      if (!(c.rope_scaling.factor > 0.0) || !(c.rope_scaling.low_freq_factor > 0.0) ||
          !(c.rope_scaling.high_freq_factor > c.rope_scaling.low_freq_factor) ||
          !std::isfinite(float(c.rope_scaling.factor)) || !std::isfinite(float(c.rope_scaling.high_freq_factor))) {
        fail(file, "rope_scaling " + json_excerpt(*r) + ": needs factor > 0 and high_freq_factor > low_freq_factor > 0");
      }
    } else if (type != "default") {
      fail(file, "rope_scaling type '" + type + "' is not supported (default, llama3)");
    }
  }
  if (const json* q = find(j, "quantization_config"); q != nullptr && !q->is_null()) {
    if (!q->is_object()) fail_type(file, "quantization_config", *q, "an object");
    const std::string qfile = file + ": quantization_config";
    const std::string method = get_string(*q, qfile, "quant_method", "");
    if (method != "fp8") fail(file, "quantization_config.quant_method '" + method + "' is not supported (fp8)");
    const std::string fmt = get_string(*q, qfile, "fmt", "e4m3");
    if (fmt != "e4m3") fail(file, "quantization_config.fmt '" + fmt + "' is not e4m3");
    const json* block = find(*q, "weight_block_size");
    if (block == nullptr || !block->is_array() || block->size() != 2) {
      fail(file, "quantization_config.weight_block_size must be [block_out, block_in] (integers)");
    }
    c.fp8 = true;
    // Bounded so that ceil(dim / block) and the block products stay small; real checkpoints use 128.
    c.fp8_block_n = get_int(*block, file, 0, "quantization_config.weight_block_size[0]", 1, 65536);
    c.fp8_block_k = get_int(*block, file, 1, "quantization_config.weight_block_size[1]", 1, 65536);
  }
  if (const json* bos = find(j, "bos_token_id")) {
    const auto ids = get_ids(*bos, file, "bos_token_id");
    if (!ids.empty()) c.bos_token_id = ids[0];
  }
  if (const json* eos = find(j, "eos_token_id")) c.eos_token_ids = get_ids(*eos, file, "eos_token_id");
  if (!generation_json.empty()) {
    const std::string& gen_file = generation_name;
    const json g = parse_json_text(generation_json, gen_file);
    if (!g.is_object()) fail(gen_file, std::string("expected a JSON object, got ") + json_type_name(g));
    if (const json* bos = find(g, "bos_token_id")) {
      const auto ids = get_ids(*bos, gen_file, "bos_token_id");
      if (!ids.empty()) c.bos_token_id = ids[0];
    }
    if (const json* eos = find(g, "eos_token_id")) c.eos_token_ids = get_ids(*eos, gen_file, "eos_token_id");
    c.do_sample = get_bool(g, gen_file, "do_sample", false);
    c.temperature = get_num(g, gen_file, "temperature", 1.0);
    if (c.temperature < 0.0 || !std::isfinite(float(c.temperature))) {
      fail(gen_file, "temperature = " + json_excerpt(*find(g, "temperature")) + " must be >= 0 and finite as an f32");
    }
    c.top_p = get_num(g, gen_file, "top_p", 1.0);
    if (!(c.top_p > 0.0) || c.top_p > 1.0) fail(gen_file, "top_p = " + json_excerpt(*find(g, "top_p")) + " outside (0, 1]");
    const json* top_k = find(g, "top_k");
    c.top_k = top_k != nullptr && !top_k->is_null() ? get_int(g, gen_file, "top_k", 0, INT32_MAX) : 0;
    c.repetition_penalty = get_num(g, gen_file, "repetition_penalty", 1.0);
    if (!(c.repetition_penalty > 0.0) || !std::isfinite(float(c.repetition_penalty))) {
      fail(gen_file, "repetition_penalty = " + json_excerpt(*find(g, "repetition_penalty")) + " must be > 0 and finite as an f32");
    }
  }
  for (int64_t id : c.eos_token_ids) {
    if (id < 0 || id >= c.vocab_size) fail(file, "eos token id " + std::to_string(id) + " outside the vocabulary");
  }
  if (c.bos_token_id != -1 && (c.bos_token_id < 0 || c.bos_token_id >= c.vocab_size)) {
    fail(file, "bos token id " + std::to_string(c.bos_token_id) + " outside the vocabulary");
  }
  return c;
}

// dir/name, which must resolve inside dir unless the folder is trusted.
static std::string read_model_file(const std::string& dir, const std::string& name, bool trust_model_folder) {
  namespace fs = std::filesystem;
  const std::string path = (fs::path(dir) / name).string();
  try {
    tools::resolve_inside(dir, name, trust_model_folder, "model folder entry", "--trust-model-folder");
    return tools::read_regular_file(path, tools::JsonLimits{}.max_bytes);
  } catch (const tools::HostIoError& e) {
    throw std::runtime_error(e.what());
  }
}

LlmConfig load_config(const std::string& dir, bool trust_model_folder) {
  namespace fs = std::filesystem;
  const std::string file = (fs::path(dir) / "config.json").string();
  const std::string gen_file = (fs::path(dir) / "generation_config.json").string();
  const std::string config_text = read_model_file(dir, "config.json", trust_model_folder);
  // A folder without generation_config.json is common; a dangling link counts as absent too.
  std::error_code ec;
  std::string generation_text;
  if (fs::exists(gen_file, ec)) {
    generation_text = read_model_file(dir, "generation_config.json", trust_model_folder);
    if (generation_text.empty()) fail(gen_file, "empty file (expected a JSON object)");
  }
  return parse_llm_config(config_text, generation_text, file, gen_file);
}

std::vector<float> rope_inv_freq(const LlmConfig& c) {
  const int64_t half = c.head_dim / 2;
  std::vector<float> inv(static_cast<size_t>(half));
  // transformers: 1.0 / (base ** (arange(0, dim, 2).float() / dim)), all in f32.
  const float base = static_cast<float>(c.rope_theta), dim = static_cast<float>(c.head_dim);
  for (int64_t i = 0; i < half; ++i) inv[size_t(i)] = 1.0f / std::pow(base, static_cast<float>(2 * i) / dim);
  if (c.rope_scaling.type == RopeScaling::Type::Llama3) {
    const RopeScaling& r = c.rope_scaling;
    const float factor = float(r.factor), low = float(r.low_freq_factor), high = float(r.high_freq_factor);
    const float old_len = float(r.original_max_position_embeddings);
    const float low_wavelen = old_len / low, high_wavelen = old_len / high;
    const float two_pi = float(2.0 * M_PI);
    for (float& f : inv) {
      const float wavelen = two_pi / f;
      float scaled = wavelen > low_wavelen ? f / factor : f;
      const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
      if (medium) {
        const float smooth = (old_len / wavelen - low) / (high - low);
        scaled = (1.0f - smooth) * scaled / factor + smooth * scaled;
      }
      f = scaled;
    }
  }
  return inv;
}

}  // namespace ember::exporter::hf
