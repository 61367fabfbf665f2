#include "exporter/importers/hf_llm/config.h"

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace ember::exporter::hf {
namespace {

using json = nlohmann::json;

[[noreturn]] void fail(const std::string& file, const std::string& what) {
  throw std::runtime_error(file + ": " + what);
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(path, "cannot open");
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    fail(path, std::string("not valid JSON: ") + e.what());
  }
}

int64_t get_int(const json& j, const std::string& file, const char* key, int64_t lo, int64_t hi) {
  if (!j.contains(key) || !j[key].is_number_integer()) fail(file, std::string(key) + " missing or not an integer");
  // An unsigned above INT64_MAX would wrap to a negative number in get<int64_t>.
  if (j[key].is_number_unsigned() && j[key].get<uint64_t>() > uint64_t(hi)) {
    fail(file, std::string(key) + " = " + j[key].dump() + " outside [" + std::to_string(lo) + ", " + std::to_string(hi) +
                   "]");
  }
  const int64_t v = j[key].get<int64_t>();
  if (v < lo || v > hi) {
    fail(file, std::string(key) + " = " + std::to_string(v) + " outside [" + std::to_string(lo) + ", " +
                   std::to_string(hi) + "]");
  }
  return v;
}

// Entry i of the JSON array `a`, an integer in [lo, hi]; `key` names it in errors.
int64_t get_int(const json& a, const std::string& file, size_t i, const std::string& key, int64_t lo, int64_t hi) {
  const json& v = a[i];
  const bool in_range = v.is_number_unsigned() ? v.get<uint64_t>() <= uint64_t(hi) && uint64_t(lo) <= v.get<uint64_t>()
                        : v.is_number_integer() ? v.get<int64_t>() >= lo && v.get<int64_t>() <= hi
                                                : false;
  if (!v.is_number_integer()) fail(file, key + " = " + v.dump() + " is not an integer");
  if (!in_range) fail(file, key + " = " + v.dump() + " outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v.get<int64_t>();
}

double get_num(const json& j, const std::string& file, const char* key, double fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_number()) fail(file, std::string(key) + " = " + j[key].dump() + " is not a number");
  const double v = j[key].get<double>();
  if (!std::isfinite(v)) fail(file, std::string(key) + " is not finite");
  return v;
}

std::vector<int64_t> get_ids(const json& v, const std::string& file, const char* key) {
  std::vector<int64_t> ids;
  if (v.is_number_integer()) {
    ids.push_back(v.get<int64_t>());
  } else if (v.is_array()) {
    for (const json& e : v) {
      if (!e.is_number_integer()) fail(file, std::string(key) + " entry " + e.dump() + " is not a token id");
      ids.push_back(e.get<int64_t>());
    }
  } else if (!v.is_null()) {
    fail(file, std::string(key) + " = " + v.dump() + " is not a token id or a list of them");
  }
  return ids;
}

}  // namespace

const char* to_string(Family family) {
  switch (family) {
    case Family::Llama: return "llama";
    case Family::Qwen2: return "qwen2";
    case Family::Qwen3: return "qwen3";
  }
  return "?";
}

LlmConfig load_config(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string file = (fs::path(dir) / "config.json").string();
  const json j = read_json(file);
  if (!j.is_object()) fail(file, "not a JSON object");
  LlmConfig c;
  const std::string model_type = j.value("model_type", "");
  if (model_type == "llama") c.family = Family::Llama;
  else if (model_type == "qwen2") c.family = Family::Qwen2;
  else if (model_type == "qwen3") c.family = Family::Qwen3;
  else fail(file, "model_type '" + model_type + "' is not supported (llama, qwen2, qwen3)");
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string()) {
    c.architecture = j["architectures"][0].get<std::string>();
  }
  // Sizes, ids and counts end up in the program as int32 (LlmInfo, i32 token ids); layers, heads
  // and head_dim are far above any real model's at 4096, and bound what multiplies them.
  constexpr int64_t kBig = INT32_MAX;
  c.vocab_size = get_int(j, file, "vocab_size", 1, kBig);
  c.hidden_size = get_int(j, file, "hidden_size", 1, kBig);
  c.intermediate_size = get_int(j, file, "intermediate_size", 1, kBig);
  c.num_layers = get_int(j, file, "num_hidden_layers", 1, 4096);
  c.num_heads = get_int(j, file, "num_attention_heads", 1, 4096);
  c.num_kv_heads = j.contains("num_key_value_heads") && !j["num_key_value_heads"].is_null()
                       ? get_int(j, file, "num_key_value_heads", 1, c.num_heads)
                       : c.num_heads;
  if (c.num_heads % c.num_kv_heads != 0) {
    fail(file, "num_attention_heads = " + std::to_string(c.num_heads) + " is not a multiple of num_key_value_heads = " +
                   std::to_string(c.num_kv_heads));
  }
  if (j.contains("head_dim") && !j["head_dim"].is_null()) {
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
    fail(file, "rms_norm_eps = " + j["rms_norm_eps"].dump() + " outside (0, 1] (it is used as an f32)");
  }
  c.rope_theta = get_num(j, file, "rope_theta", 10000.0);
  if (!(c.rope_theta > 1.0) || !std::isfinite(float(c.rope_theta))) {
    fail(file, "rope_theta = " + j["rope_theta"].dump() + " must be > 1 and finite as an f32");
  }
  c.tie_word_embeddings = j.value("tie_word_embeddings", false);
  c.attention_bias = c.family == Family::Qwen2 ? true : j.value("attention_bias", false);
  c.qk_norm = c.family == Family::Qwen3;
  c.torch_dtype = j.value("torch_dtype", j.value("dtype", "float32"));
  if (j.value("hidden_act", "silu") != "silu") fail(file, "hidden_act '" + j.value("hidden_act", "") + "' is not silu");
  if (j.value("mlp_bias", false)) fail(file, "mlp_bias = true is not supported");
  if (get_num(j, file, "partial_rotary_factor", 1.0) != 1.0) fail(file, "partial_rotary_factor != 1 is not supported");
  if (j.value("use_sliding_window", false)) fail(file, "use_sliding_window = true is not supported");
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
    const json& r = j["rope_scaling"];
    const std::string type = r.value("rope_type", r.value("type", ""));
    if (type == "llama3") {
      c.rope_scaling.type = RopeScaling::Type::Llama3;
      c.rope_scaling.factor = get_num(r, file, "factor", 0.0);
      c.rope_scaling.low_freq_factor = get_num(r, file, "low_freq_factor", 0.0);
      c.rope_scaling.high_freq_factor = get_num(r, file, "high_freq_factor", 0.0);
      c.rope_scaling.original_max_position_embeddings =
          get_int(r, file, "original_max_position_embeddings", 1, kBig);
      if (!(c.rope_scaling.factor > 0.0) || !(c.rope_scaling.low_freq_factor > 0.0) ||
          !(c.rope_scaling.high_freq_factor > c.rope_scaling.low_freq_factor) ||
          !std::isfinite(float(c.rope_scaling.factor)) || !std::isfinite(float(c.rope_scaling.high_freq_factor))) {
        fail(file, "rope_scaling " + r.dump() + ": needs factor > 0 and high_freq_factor > low_freq_factor > 0");
      }
    } else if (type != "default") {
      fail(file, "rope_scaling type '" + type + "' is not supported (default, llama3)");
    }
  }
  if (j.contains("quantization_config") && !j["quantization_config"].is_null()) {
    const json& q = j["quantization_config"];
    const std::string method = q.value("quant_method", "");
    if (method != "fp8") fail(file, "quantization_config.quant_method '" + method + "' is not supported (fp8)");
    if (q.value("fmt", "e4m3") != "e4m3") fail(file, "quantization_config.fmt '" + q.value("fmt", "") + "' is not e4m3");
    if (!q.contains("weight_block_size") || !q["weight_block_size"].is_array() || q["weight_block_size"].size() != 2) {
      fail(file, "quantization_config.weight_block_size must be [block_out, block_in]");
    }
    c.fp8 = true;
    // Bounded so that ceil(dim / block) and the block products stay small; real checkpoints use 128.
    c.fp8_block_n = get_int(q["weight_block_size"], file, 0, "quantization_config.weight_block_size[0]", 1, 65536);
    c.fp8_block_k = get_int(q["weight_block_size"], file, 1, "quantization_config.weight_block_size[1]", 1, 65536);
  }
  if (j.contains("bos_token_id")) {
    const auto ids = get_ids(j["bos_token_id"], file, "bos_token_id");
    if (!ids.empty()) c.bos_token_id = ids[0];
  }
  if (j.contains("eos_token_id")) c.eos_token_ids = get_ids(j["eos_token_id"], file, "eos_token_id");
  const std::string gen_file = (fs::path(dir) / "generation_config.json").string();
  if (fs::exists(gen_file)) {
    const json g = read_json(gen_file);
    if (g.contains("bos_token_id")) {
      const auto ids = get_ids(g["bos_token_id"], gen_file, "bos_token_id");
      if (!ids.empty()) c.bos_token_id = ids[0];
    }
    if (g.contains("eos_token_id")) c.eos_token_ids = get_ids(g["eos_token_id"], gen_file, "eos_token_id");
    c.do_sample = g.value("do_sample", false);
    c.temperature = get_num(g, gen_file, "temperature", 1.0);
    if (c.temperature < 0.0 || !std::isfinite(float(c.temperature))) {
      fail(gen_file, "temperature = " + g["temperature"].dump() + " must be >= 0 and finite as an f32");
    }
    c.top_p = get_num(g, gen_file, "top_p", 1.0);
    if (!(c.top_p > 0.0) || c.top_p > 1.0) fail(gen_file, "top_p = " + g["top_p"].dump() + " outside (0, 1]");
    c.top_k = g.contains("top_k") && !g["top_k"].is_null() ? get_int(g, gen_file, "top_k", 0, INT32_MAX) : 0;
    c.repetition_penalty = get_num(g, gen_file, "repetition_penalty", 1.0);
    if (!(c.repetition_penalty > 0.0) || !std::isfinite(float(c.repetition_penalty))) {
      fail(gen_file, "repetition_penalty = " + g["repetition_penalty"].dump() + " must be > 0 and finite as an f32");
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
