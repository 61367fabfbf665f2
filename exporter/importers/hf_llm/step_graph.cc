#include "exporter/importers/hf_llm/step_graph.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "exporter/importers/builder/graph_builder.h"
#include "exporter/importers/hf_llm/safetensors.h"
#include "runtime/core/float_codecs.h"

namespace ember::exporter::hf {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + str(shape[i]);
  return s + "]";
}

// n elements of dtype at data as f32 (f32 / bf16 / f16; exact); `what` names the tensor in errors.
std::vector<float> to_f32(ScalarType dtype, const uint8_t* data, size_t n, const std::string& what) {
  std::vector<float> out(n);
  switch (dtype) {
    case ScalarType::F32: std::memcpy(out.data(), data, n * 4); break;
    case ScalarType::BF16:
    case ScalarType::F16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t b;
        std::memcpy(&b, data + 2 * i, 2);
        out[i] = dtype == ScalarType::BF16 ? bf16_to_f32(b) : f16_to_f32(b);
      }
      break;
    default:
      throw ExportError("hf_llm: tensor " + what + " has dtype " + to_string(dtype) + "; expected F32, BF16 or F16");
  }
  return out;
}

std::vector<float> to_f32(const SafeTensor& t) {
  return to_f32(t.dtype, t.data, static_cast<size_t>(t.numel()), "'" + t.name + "' (" + t.file + ")");
}

// The StepOptions bounds of step_graph.h, named by the exporter's flags.
void check_option(const char* flag, int64_t value, int64_t lo, int64_t hi) {
  if (value < lo) throw ExportError("hf_llm: " + std::string(flag) + " " + str(value) + ": below the minimum " + str(lo));
  if (value > hi) throw ExportError("hf_llm: " + std::string(flag) + " " + str(value) + ": above the limit " + str(hi));
}

void check_options(const StepOptions& o) {
  check_option("--max-seqs", o.max_seqs, 1, kMaxStepSeqs);
  check_option("--max-tokens", o.max_tokens, 1, kMaxStepTokens);
  if (o.max_context != 0) check_option("--max-context", o.max_context, 1, kMaxStepContext);
  check_option("--block-size", o.block_size, 1, kMaxBlockSize);
  if (o.max_tokens < o.max_seqs) {
    throw ExportError("hf_llm: --max-tokens " + str(o.max_tokens) + " is below --max-seqs " + str(o.max_seqs) +
                      " (every sequence of a step needs a token)");
  }
  if (!(o.kv_scale > 0.0f) || !std::isfinite(o.kv_scale)) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", double(o.kv_scale));
    throw ExportError("hf_llm: --kv-scale " + std::string(buf) + ": must be finite and > 0");
  }
}

class Importer {
 public:
  Importer(const std::string& dir, const StepOptions& options)
      : dir_(dir), options_(options), config_(load_config(dir, options.trust_model_folder)),
        ckpt_(Checkpoint::open(dir, options.trust_model_folder)) {}

  StepImport run();

 private:
  const SafeTensor& take(const std::string& name, const std::vector<int64_t>& shape) {
    const SafeTensor& t = ckpt_.take(name);
    if (t.shape != shape) {
      throw ExportError("hf_llm: tensor '" + name + "' (" + t.file + ") has shape " + shape_text(t.shape) +
                        ", config.json implies " + shape_text(shape));
    }
    parameters_ += t.numel();
    return t;
  }
  ValueId f32_constant(const std::string& name, const std::vector<int64_t>& shape) {
    const SafeTensor& t = take(name, shape);
    return b_.constant_f32(name, shape, to_f32(t));
  }
  ValueId linear_weight(const std::string& prefix, int64_t n, int64_t k);
  ValueId embedding_table();
  ValueId linear(ValueId x, const std::string& prefix, int64_t n, int64_t k, bool bias) {
    const ValueId w = linear_weight(prefix, n, k);
    const ValueId b = bias ? f32_constant(prefix + ".bias", {n}) : kNoValue;
    return b_.linear(x, w, b, prefix);
  }
  ValueId rms_norm(ValueId x, const std::string& weight, int64_t size, const std::string& node) {
    OpAttrs a;
    a.axis = -1;
    a.epsilon = static_cast<float>(config_.rms_norm_eps);
    return b_.op(OpCode::RmsNorm, {x, f32_constant(weight, {size})}, a, node);
  }
  void progress(int64_t done, int64_t total) {
    if (options_.progress == nullptr) return;
    const int width = 30, filled = static_cast<int>(width * done / std::max<int64_t>(total, 1));
    *options_.progress << "\rconverting weights [" << std::string(size_t(filled), '#')
                       << std::string(size_t(width - filled), ' ') << "] layer " << done << "/" << total
                       << (done == total ? "\n" : "") << std::flush;
  }

  std::string dir_;
  StepOptions options_;
  LlmConfig config_;
  Checkpoint ckpt_;
  GraphBuilder b_;
  int64_t parameters_ = 0;
  ValueId embed_ = kNoValue;
};

ValueId Importer::linear_weight(const std::string& prefix, int64_t n, int64_t k) {
  const std::string name = prefix + ".weight";
  const SafeTensor& t = take(name, {n, k});
  if (config_.fp8 && t.dtype == ScalarType::F8E4M3FN) {
    const int64_t bn = config_.fp8_block_n, bk = config_.fp8_block_k;
    // ceil(n / bn) without n + bn - 1 (config.json bounds bn, but this cannot overflow at all).
    const std::vector<int64_t> scale_dims = {n / bn + (n % bn != 0), k / bk + (k % bk != 0)};
    const SafeTensor& s = take(prefix + ".weight_scale_inv", scale_dims);
    const std::vector<float> scale = to_f32(s);
    for (size_t i = 0; i < scale.size(); ++i) {
      if (!(scale[i] > 0.0f) || !std::isfinite(scale[i])) {
        throw ExportError("hf_llm: '" + s.name + "' element " + std::to_string(i) + " is " +
                          std::to_string(scale[i]) + "; block scales must be finite and > 0");
      }
    }
    auto q = std::make_shared<QuantParams>();
    q->scale_dtype = ScalarType::F32;
    q->block = {bn, bk};
    q->scale_dims = scale_dims;
    auto bytes = std::make_shared<std::vector<uint8_t>>(scale.size() * 4);
    std::memcpy(bytes->data(), scale.data(), bytes->size());
    q->scale = bytes;
    return b_.constant_quantized(name, ScalarType::F8E4M3FN, {n, k}, std::vector<uint8_t>(t.data, t.data + t.nbytes),
                                 std::move(q));
  }
  if (t.dtype == ScalarType::BF16) {
    return b_.constant(name, ScalarType::BF16, {n, k}, std::vector<uint8_t>(t.data, t.data + t.nbytes));
  }
  return b_.constant_f32(name, {n, k}, to_f32(t));
}

ValueId Importer::embedding_table() {
  const std::string name = "model.embed_tokens.weight";
  const SafeTensor& t = take(name, {config_.vocab_size, config_.hidden_size});
  if (t.dtype == ScalarType::F32 || t.dtype == ScalarType::BF16 || t.dtype == ScalarType::F16) {
    return b_.constant(name, t.dtype, {config_.vocab_size, config_.hidden_size},
                       std::vector<uint8_t>(t.data, t.data + t.nbytes));
  }
  throw ExportError("hf_llm: '" + name + "' has dtype " + t.dtype_name + "; expected F32, BF16 or F16");
}

StepImport Importer::run() {
  const LlmConfig& c = config_;
  check_options(options_);
  // Within check_options' bounds nothing below overflows: max_context <= 2^20 + 2^16,
  // max_num_blocks <= 2^16 * 2^20.
  int64_t max_context = options_.max_context > 0 ? options_.max_context : std::min<int64_t>(c.max_position_embeddings, 4096);
  max_context = (max_context + options_.block_size - 1) / options_.block_size * options_.block_size;
  const int64_t max_blocks = max_context / options_.block_size;
  const int64_t max_num_blocks = options_.max_seqs * max_blocks;
  if (max_num_blocks > (int64_t{1} << 31) / options_.block_size) {
    throw ExportError("hf_llm: --max-seqs " + str(options_.max_seqs) + " x --max-context " + str(max_context) + " = " +
                      str(options_.max_seqs * max_context) + " KV slots exceeds the int32 slot_mapping (2147483648)");
  }
  ScalarType kv = options_.kv_dtype;
  if (kv == ScalarType::Invalid) {
    kv = c.torch_dtype == "float32" ? ScalarType::F32 : c.torch_dtype == "float16" ? ScalarType::F16 : ScalarType::BF16;
  }
  const int64_t hd = c.head_dim, hq = c.num_heads, hkv = c.num_kv_heads, hidden = c.hidden_size;
  // One layer's K (or V) cache at the largest num_blocks, then all layers' K and V: checked, as
  // config.json's kv heads / head_dim / layers multiply the flags' slots.
  uint64_t kv_bytes = 0;
  if (__builtin_mul_overflow(uint64_t(max_num_blocks) * uint64_t(options_.block_size), uint64_t(hkv) * uint64_t(hd),
                             &kv_bytes) ||
      __builtin_mul_overflow(kv_bytes, uint64_t(bits_of(kv) / 8), &kv_bytes) ||
      __builtin_mul_overflow(kv_bytes, 2 * uint64_t(c.num_layers), &kv_bytes)) {
    throw ExportError("hf_llm: the KV cache at " + str(max_num_blocks) + " blocks of " + str(options_.block_size) +
                      " tokens x " + str(hkv) + " kv heads x " + str(hd) + " x " + str(c.num_layers) +
                      " layers overflows 64 bits: lower --max-seqs or --max-context");
  }

  b_.symbol("T", 1, options_.max_tokens);
  b_.symbol("S", 1, options_.max_seqs);
  b_.symbol("S1", 2, options_.max_seqs + 1);
  b_.symbol("H", 1, max_context);
  b_.symbol("num_blocks", 1, max_num_blocks);
  const DimSpec T = DimSpec::sym("T"), S = DimSpec::sym("S");
  const ScalarType I = ScalarType::I32, F = ScalarType::F32;
  const ValueId token_ids = b_.input("token_ids", I, {T});
  const ValueId positions = b_.input("positions", I, {T});
  const ValueId slot_mapping = b_.input("slot_mapping", I, {T});
  const ValueId block_tables = b_.input("block_tables", I, {S, max_blocks});
  const ValueId context_lens = b_.input("context_lens", I, {S});
  const ValueId query_start = b_.input("query_start", I, {DimSpec::sym("S1")});
  const ValueId logits_indices = b_.input("logits_indices", I, {S});
  const ValueId temperature = b_.input("temperature", F, {S});
  const ValueId top_k = b_.input("top_k", I, {S});
  const ValueId top_p = b_.input("top_p", F, {S});
  const ValueId penalty = b_.input("repetition_penalty", F, {S});
  const ValueId seed = b_.input("seed", I, {S});
  const ValueId sample_position = b_.input("sample_position", I, {S});
  const ValueId history = b_.input("history", I, {S, DimSpec::sym("H")});
  const ValueId history_len = b_.input("history_len", I, {S});

  const std::vector<float> inv_freq = rope_inv_freq(c);
  const ValueId inv_freq_c = b_.constant_f32("rope.inv_freq", {hd / 2}, inv_freq);
  embed_ = embedding_table();
  ValueId x = b_.op(OpCode::Embedding, {embed_, token_ids}, OpAttrs{}, "model.embed_tokens");
  OpAttrs attn;
  attn.attn_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  attn.kv_scale = options_.kv_scale;
  attn.attn_window = static_cast<int32_t>(c.sliding_window);
  const std::vector<DimSpec> cache_dims = {DimSpec::sym("num_blocks"), options_.block_size, hkv, hd};
  progress(0, c.num_layers);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + str(l);
    const ValueId h = rms_norm(x, p + ".input_layernorm.weight", hidden, p + ".input_layernorm");
    const bool bias = c.attention_bias;
    ValueId q = b_.reshape(linear(h, p + ".self_attn.q_proj", hq * hd, hidden, bias), {T, hq, hd});
    ValueId k = b_.reshape(linear(h, p + ".self_attn.k_proj", hkv * hd, hidden, bias), {T, hkv, hd});
    const ValueId v = b_.reshape(linear(h, p + ".self_attn.v_proj", hkv * hd, hidden, bias), {T, hkv, hd});
    if (c.qk_norm) {
      q = rms_norm(q, p + ".self_attn.q_norm.weight", hd, p + ".self_attn.q_norm");
      k = rms_norm(k, p + ".self_attn.k_norm.weight", hd, p + ".self_attn.k_norm");
    }
    q = b_.op(OpCode::Rope, {q, positions, inv_freq_c}, OpAttrs{}, p + ".rope_q");
    k = b_.op(OpCode::Rope, {k, positions, inv_freq_c}, OpAttrs{}, p + ".rope_k");
    const ValueId kc = b_.state("kv." + str(l) + ".k", kv, cache_dims);
    const ValueId vc = b_.state("kv." + str(l) + ".v", kv, cache_dims);
    const ValueId a = b_.op(OpCode::PagedAttention,
                            {q, k, v, kc, vc, slot_mapping, block_tables, context_lens, query_start}, attn,
                            p + ".self_attn.attention");
    const ValueId o = linear(b_.reshape(a, {T, hq * hd}), p + ".self_attn.o_proj", hidden, hq * hd, false);
    x = b_.add(x, o, p + ".attn_residual");
    const ValueId h2 = rms_norm(x, p + ".post_attention_layernorm.weight", hidden, p + ".post_attention_layernorm");
    const ValueId gate = linear(h2, p + ".mlp.gate_proj", c.intermediate_size, hidden, false);
    const ValueId up = linear(h2, p + ".mlp.up_proj", c.intermediate_size, hidden, false);
    const ValueId act = b_.op(OpCode::SiluMul, {gate, up}, OpAttrs{}, p + ".mlp.act");
    x = b_.add(x, linear(act, p + ".mlp.down_proj", hidden, c.intermediate_size, false), p + ".mlp_residual");
    progress(l + 1, c.num_layers);
  }
  const ValueId normed = rms_norm(x, "model.norm.weight", hidden, "model.norm");
  const ValueId rows = b_.op(OpCode::LogitsGather, {normed, logits_indices}, OpAttrs{}, "logits_gather");
  ValueId head = kNoValue;
  if (c.tie_word_embeddings) {
    // The table again as the head's weight: its own constant (a quantize pass may replace it) that
    // shares the table's bytes, which the serializer then stores once.
    if (ckpt_.has("lm_head.weight")) take("lm_head.weight", {c.vocab_size, hidden});
    const Value& e = b_.graph().values[static_cast<size_t>(embed_)];
    if (e.dtype == ScalarType::F16) {  // no f16 linear kernel
      head = b_.constant_f32("lm_head.weight", {c.vocab_size, hidden},
                             to_f32(e.dtype, e.data->data(), e.data->size() / 2, "'model.embed_tokens.weight'"));
    } else {
      head = b_.constant_shared("lm_head.weight", e.dtype, {c.vocab_size, hidden}, e.data);
    }
  } else {
    head = linear_weight("lm_head", c.vocab_size, hidden);
  }
  const ValueId logits = b_.linear(rows, head, kNoValue, "lm_head");
  const ValueId sampled = b_.op(OpCode::Sample,
                                {logits, temperature, top_k, top_p, penalty, seed, sample_position, history, history_len},
                                OpAttrs{}, "sample");
  b_.output("next_ids", sampled);
  if (options_.emit_logprobs) b_.output("logprobs", b_.graph().nodes.back().outputs.at(1));
  if (options_.emit_logits) b_.output("logits", logits);

  const std::vector<std::string> left = ckpt_.leftovers();
  if (!left.empty()) {
    std::string names;
    for (size_t i = 0; i < left.size() && i < 8; ++i) names += (i ? ", " : "") + left[i];
    if (left.size() > 8) names += ", ... (" + str(int64_t(left.size())) + " in all)";
    throw ExportError("hf_llm: " + dir_ + ": tensors not used by the " + std::string(to_string(c.family)) +
                      " graph: " + names);
  }
  StepImport out;
  out.graph = b_.build();
  out.config = c;
  out.max_context = max_context;
  out.max_blocks = max_blocks;
  out.max_num_blocks = max_num_blocks;
  out.kv_cache_bytes = kv_bytes;
  out.kv_dtype = kv;
  out.parameters = parameters_;
  std::ostringstream s;
  s << "hf_llm: " << to_string(c.family) << " (" << c.architecture << "), " << c.num_layers << " layers, hidden "
    << hidden << ", heads " << hq << "/" << hkv << " x " << hd << ", vocab " << c.vocab_size << ", "
    << parameters_ << " parameters (" << c.torch_dtype << (c.fp8 ? ", FP8 128x128 blocks" : "") << ")\n"
    << "step: max_seqs " << options_.max_seqs << ", max_tokens " << options_.max_tokens << ", max_context "
    << max_context << ", block_size " << options_.block_size << ", kv " << to_string(kv) << ", num_blocks 1.."
    << max_num_blocks << ", outputs next_ids" << (options_.emit_logprobs ? ", logprobs" : "")
    << (options_.emit_logits ? ", logits" : "") << "\n";
  out.summary = s.str();
  return out;
}

}  // namespace

StepImport import_step(const std::string& dir, const StepOptions& options) {
  try {
    Importer importer(dir, options);
    return importer.run();
  } catch (const ExportError&) {
    throw;
  } catch (const std::runtime_error& e) {  // config / safetensors readers
    throw ExportError(e.what());
  }
}

}  // namespace ember::exporter::hf
