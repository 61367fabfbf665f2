#include "exporter/importers/builder/examples.h"

#include <cmath>

#include "exporter/importers/builder/graph_builder.h"

namespace ember::exporter {
namespace {

// Uniform in +-1/sqrt(fan_in), as torch initializes Linear and Conv2d.
ValueId weight(GraphBuilder& b, const std::string& name, std::vector<int64_t> dims, int64_t fan_in) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(fan_in));
  return b.random_uniform(name, std::move(dims), -bound, bound);
}

}  // namespace

Graph build_paged_attention_example(ScalarType cache_dtype, bool cache_as_state) {
  constexpr int64_t kHq = 4, kHkv = 2, kD = 8, kBlockSize = 4, kMaxBlocks = 4;
  GraphBuilder b;
  b.symbol("T", 1, 8);
  b.symbol("S", 1, 2);
  b.symbol("S1", 2, 3);
  b.symbol("num_blocks", 1, 16);
  const DimSpec T = DimSpec::sym("T"), S = DimSpec::sym("S");
  const ValueId q = b.input("q", ScalarType::F32, {T, kHq, kD});
  const ValueId k = b.input("k", ScalarType::F32, {T, kHkv, kD});
  const ValueId v = b.input("v", ScalarType::F32, {T, kHkv, kD});
  const std::vector<DimSpec> cache_dims = {DimSpec::sym("num_blocks"), kBlockSize, kHkv, kD};
  const ValueId kc = cache_as_state ? b.state("kv.0.k", cache_dtype, cache_dims) : b.input("kc", cache_dtype, cache_dims);
  const ValueId vc = b.state("kv.0.v", cache_dtype, cache_dims);
  const ValueId slots = b.input("slot_mapping", ScalarType::I32, {T});
  const ValueId tables = b.input("block_tables", ScalarType::I32, {S, kMaxBlocks});
  const ValueId lens = b.input("context_lens", ScalarType::I32, {S});
  const ValueId starts = b.input("query_start", ScalarType::I32, {DimSpec::sym("S1")});
  const ValueId idx = b.input("logits_indices", ScalarType::I32, {S});
  OpAttrs attn;
  attn.attn_scale = 1.0f / std::sqrt(static_cast<float>(kD));
  attn.kv_scale = 0.05f;
  const ValueId out = b.op(OpCode::PagedAttention, {q, k, v, kc, vc, slots, tables, lens, starts}, attn, "attn");
  const ValueId flat = b.reshape(out, {T, kHq * kD});
  b.output("gathered", b.op(OpCode::LogitsGather, {flat, idx}, OpAttrs{}, "gather"));
  return b.build();
}

Graph build_mlp_example(uint64_t seed) {
  GraphBuilder b(seed);
  b.symbol("batch", 1, 8);
  ValueId x = b.input("x", ScalarType::F32, {DimSpec::sym("batch"), 64});
  // One statement per weight: argument evaluation order is unspecified, the RNG order must not be.
  auto fc = [&](ValueId in, const std::string& name, int64_t out_features, int64_t in_features) {
    const ValueId w = weight(b, name + ".weight", {out_features, in_features}, in_features);
    const ValueId bias = weight(b, name + ".bias", {out_features}, in_features);
    return b.linear(in, w, bias, name);
  };
  ValueId h = fc(x, "fc1", 128, 64);
  h = b.gelu(h, GeluApprox::None, "gelu1");
  h = fc(h, "fc2", 128, 128);
  h = b.relu(h, "relu2");
  h = fc(h, "fc3", 10, 128);
  b.output("probs", b.softmax(h, -1, "softmax"));
  return b.build();
}

Graph build_cnn_example(uint64_t seed) {
  GraphBuilder b(seed);
  ValueId x = b.input("image", ScalarType::F32, {1, 3, 32, 32});
  auto conv = [&](ValueId in, const std::string& name, int64_t out_c, int64_t in_c_per_group, int64_t k,
                  const Conv2dParams& params) {
    const int64_t fan_in = in_c_per_group * k * k;
    const ValueId w = weight(b, name + ".weight", {out_c, in_c_per_group, k, k}, fan_in);
    const ValueId bias = weight(b, name + ".bias", {out_c}, fan_in);
    return b.conv2d(in, w, bias, params, name);
  };
  ValueId h = conv(x, "conv1", 16, 3, 3, Conv2dParams::same3x3());
  h = b.relu(h, "relu1");
  h = b.max_pool2d(h, Pool2dParams::square(2, 2), "pool1");
  h = conv(h, "dw2", 16, 1, 3, Conv2dParams::same3x3(/*groups=*/16));  // depthwise
  h = conv(h, "pw2", 32, 16, 1, Conv2dParams());                        // pointwise
  h = b.relu(h, "relu2");
  h = b.global_avg_pool2d(h, "gap");
  h = b.reshape(h, {1, 32}, "flatten");
  const ValueId fc_w = weight(b, "fc.weight", {10, 32}, 32);
  const ValueId fc_b = weight(b, "fc.bias", {10}, 32);
  h = b.linear(h, fc_w, fc_b, "fc");
  b.output("probs", b.softmax(h, -1, "softmax"));
  return b.build();
}

std::vector<std::string> example_names() { return {"mlp", "cnn"}; }

Graph build_example(const std::string& name, uint64_t seed) {
  if (name == "mlp") return build_mlp_example(seed);
  if (name == "cnn") return build_cnn_example(seed);
  throw ExportError("unknown example '" + name + "' (choose mlp or cnn)");
}

}  // namespace ember::exporter
