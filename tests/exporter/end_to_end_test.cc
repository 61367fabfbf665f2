// Exported programs run by the runtime (Program::load -> load_method -> execute) against the IR
// evaluator on the reference kernels (the oracle). A separate binary from ember_exporter_test, so
// the exporter's own tests build even while the executor is being changed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>

#include "backends/null/register.h"
#include "exporter/importers/builder/examples.h"
#include "exporter/importers/builder/graph_builder.h"
#include "kernels/reference/quantize.h"
#include "runtime/core/float_codecs.h"
#include "exporter/passes/evaluate.h"
#include "exporter/pipeline.h"
#include "exporter/plan/overlap_check.h"
#include "kernels/builtin.h"
#include "runtime/backend/backend.h"
#include "runtime/core/memory_allocator.h"
#include "runtime/executor/load_options.h"
#include "runtime/executor/memory_plan.h"
#include "runtime/core/data_loader.h"
#include "runtime/executor/method.h"
#include "runtime/executor/program.h"
#include "runtime/kernel/kernel_registry.h"
#include "tests/exporter/onnx_test_util.h"
#include "tests/exporter/test_util.h"

namespace ember::exporter {
namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<uint8_t, FreeDeleter>;

Buffer aligned_buffer(size_t size, size_t alignment = 65536) {
  const size_t rounded = (size + alignment - 1) / alignment * alignment;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(alignment, rounded == 0 ? alignment : rounded));
  std::memset(p, 0, rounded == 0 ? alignment : rounded);
  return Buffer(p);
}

// Runs `file` in the runtime on `inputs` (f32) and returns the outputs. With Fallback::Fail (the
// default) a delegate must really run on its backend. The scratch is MethodMeta's.
std::vector<HostTensor> run_in_runtime(const std::vector<uint8_t>& file, const std::vector<HostTensor>& inputs,
                                       const std::vector<const char*>& backend_list,
                                       Fallback fallback = Fallback::Fail) {
  auto kernels = std::make_unique<KernelRegistry>();
  EXPECT_TRUE(register_builtin(*kernels).is_ok());
  auto backends = std::make_unique<BackendRegistry>();
  EXPECT_TRUE(backends::null_backend::register_backend(*backends).is_ok());
  RuntimeContext runtime;
  runtime.kernels = kernels.get();
  runtime.backends = backends.get();
  Buffer bytes = aligned_buffer(file.size());
  std::memcpy(bytes.get(), file.data(), file.size());
  BufferDataLoader loader(bytes.get(), file.size());
  LoadOptions options;
  options.backends = Span<const char* const>(backend_list.data(), backend_list.size());
  options.fallback = fallback;
  ErrorContext ctx;
  Result<Program> program = Program::load(loader, runtime, options, &ctx);
  if (!program.is_ok()) {
    ADD_FAILURE() << "Program::load: " << ctx.message;
    return {};
  }
  Result<MethodMeta> meta = program->method_meta("forward", &ctx);
  EXPECT_TRUE(meta.is_ok()) << ctx.message;
  Buffer method_mem = aligned_buffer(meta->method_allocator_bytes() + 64, 64);
  BumpAllocator allocator(Span<uint8_t>(method_mem.get(), meta->method_allocator_bytes() + 64));
  std::vector<Buffer> arena_mem;
  std::vector<Span<uint8_t>> arenas;
  for (size_t a = 0; a < meta->arena_count(); ++a) {
    const ArenaMeta arena = meta->arena(a).value();
    arena_mem.push_back(aligned_buffer(arena.size + 64, 64));
    arenas.emplace_back(arena_mem.back().get(), arena.size);
  }
  const size_t scratch_bytes = meta->scratch_bytes();
  Buffer scratch = aligned_buffer(scratch_bytes + 64, 64);
  ember::MemoryPlan memory(allocator, Span<Span<uint8_t>>(arenas.data(), arenas.size()),
                    Span<uint8_t>(scratch.get(), scratch_bytes));
  Result<Method> method = program->load_method("forward", memory, &ctx);
  if (!method.is_ok()) {
    ADD_FAILURE() << "load_method: " << ctx.message;
    return {};
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    TensorView v;
    v.data = const_cast<uint8_t*>(inputs[i].bytes.data());
    v.dtype = inputs[i].dtype;
    v.rank = static_cast<uint8_t>(inputs[i].dims.size());
    std::copy(inputs[i].dims.begin(), inputs[i].dims.end(), v.dims);
    EXPECT_TRUE(method->set_input(i, v, &ctx).is_ok()) << ctx.message;
  }
  EXPECT_TRUE(method->execute(&ctx).is_ok()) << ctx.message;
  std::vector<HostTensor> outputs;
  for (size_t o = 0; o < method->output_count(); ++o) {
    const TensorView* t = method->output(o);
    HostTensor h;
    h.dtype = t->dtype;
    h.dims.assign(t->dims, t->dims + t->rank);
    h.bytes.assign(static_cast<const uint8_t*>(t->data), static_cast<const uint8_t*>(t->data) + t->nbytes());
    outputs.push_back(std::move(h));
  }
  return outputs;
}

void expect_close(const HostTensor& actual, const HostTensor& expected) {
  ASSERT_EQ(actual.dims, expected.dims);
  const std::vector<float> a = actual.to_f32(), e = expected.to_f32();
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(a[i], e[i], 1e-5f + 1e-4f * std::fabs(e[i])) << "element " << i;
  }
}

std::vector<float> pattern(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(0.37f * static_cast<float>(i)) * 2.0f;
  return v;
}

TEST(EndToEndTest, MlpMatchesOracleAtSeveralBatchSizes) {
  ExportOptions options;
  options.manifest = &testing::test_manifest();
  const ExportResult r = export_graph(build_mlp_example(1), options);
  EXPECT_TRUE(check_overlaps(r.program.bytes).empty());
  for (int64_t batch : {1, 3, 8}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    const std::vector<HostTensor> in{HostTensor::from_f32({batch, 64}, pattern(static_cast<size_t>(batch) * 64))};
    const auto expected = evaluate(r.graph, in);
    const auto actual = run_in_runtime(r.program.bytes, in, {"null"});
    ASSERT_EQ(actual.size(), 1u);
    expect_close(actual[0], expected[0]);
  }
}

TEST(EndToEndTest, CnnWithNullDelegateMatchesOracle) {
  for (const std::vector<std::string>& backends : {std::vector<std::string>{"portable"},
                                                  std::vector<std::string>{"null", "portable"}}) {
    ExportOptions options;
    options.manifest = &testing::test_manifest();
    options.backends = backends;
    const ExportResult r = export_graph(build_cnn_example(1), options);
    EXPECT_TRUE(check_overlaps(r.program.bytes).empty());
    EXPECT_EQ(r.partition.delegates.size(), backends.size() == 2 ? 1u : 0u);
    const std::vector<HostTensor> in{HostTensor::from_f32({1, 3, 32, 32}, pattern(3 * 32 * 32))};
    const auto expected = evaluate(r.graph, in);
    const auto actual = run_in_runtime(r.program.bytes, in, {"null"});
    ASSERT_EQ(actual.size(), 1u);
    expect_close(actual[0], expected[0]);
  }
}

// relu / clip fused into conv2d (passes/conv_clamp_fusion.h) on the runtime's kernels: the GEMM,
// depthwise stride 1 and stride 2 paths give, byte for byte, the unfused program's result, NaN and
// ±inf inputs included, in the method and in a null delegate; finite inputs also match the oracle.
TEST(EndToEndTest, FusedConvClampRunsLikeTheUnfusedProgram) {
  GraphBuilder b(5);
  const ValueId x = b.input("x", ScalarType::F32, {1, 8, 12, 12});
  auto conv = [&](ValueId in, int64_t out_c, int64_t in_c_per_group, int64_t k, const Conv2dParams& p,
                  const std::string& name) {
    const ValueId w = b.random_uniform(name + ".w", {out_c, in_c_per_group, k, k}, -0.4f, 0.4f);
    const ValueId bias = b.random_uniform(name + ".b", {out_c}, -0.2f, 0.2f);
    return b.conv2d(in, w, bias, p, name);
  };
  auto clip = [&](ValueId in, float lo, float hi, const std::string& name) {
    OpAttrs a;
    a.kind = AttrKind::Clip;
    a.clip_min = lo;
    a.clip_max = hi;
    return b.op(OpCode::Clip, {in}, a, name);
  };
  Conv2dParams s2 = Conv2dParams::same3x3(16);
  s2.stride[0] = s2.stride[1] = 2;
  ValueId h = b.relu(conv(x, 16, 8, 3, Conv2dParams::same3x3(), "gemm"), "relu");
  h = clip(conv(h, 16, 1, 3, Conv2dParams::same3x3(16), "dw1"), 0.0f, 6.0f, "relu6");
  h = clip(conv(h, 16, 1, 3, s2, "dw2"), -0.5f, 0.5f, "clip");
  b.output("y", b.relu(conv(h, 8, 16, 1, Conv2dParams(), "pw"), "relu_out"));
  const Graph graph = b.build();
  std::vector<float> special = pattern(8 * 12 * 12);
  special[13] = std::nanf("");
  special[200] = std::numeric_limits<float>::infinity();
  special[700] = -std::numeric_limits<float>::infinity();
  const std::vector<HostTensor> finite{HostTensor::from_f32({1, 8, 12, 12}, pattern(8 * 12 * 12))};
  const std::vector<HostTensor> non_finite{HostTensor::from_f32({1, 8, 12, 12}, special)};
  // clip on the cpu kernels (the test manifest has none); null takes the convs and relus.
  const CapabilityManifest manifest = CapabilityManifest::parse(R"({"format": 1, "kernels": [
      {"op": "conv2d", "dtypes": ["f32","f32","f32","f32"], "library": "cpu"},
      {"op": "relu", "dtypes": ["f32","f32"], "library": "cpu"},
      {"op": "clip", "dtypes": ["f32","f32"], "library": "cpu"}],
    "backends": [{"id": "null", "ops": [
      {"op": "conv2d", "dtypes": ["f32","f32","f32","f32"]}, {"op": "relu", "dtypes": ["f32","f32"]}]}]})");
  for (const std::vector<std::string>& backends : {std::vector<std::string>{"portable"},
                                                  std::vector<std::string>{"null", "portable"}}) {
    SCOPED_TRACE(backends[0]);
    std::vector<std::vector<HostTensor>> runs[2];
    for (bool fuse : {false, true}) {
      ExportOptions options;
      options.manifest = &manifest;
      options.backends = backends;
      options.fuse_conv_clamps = fuse;
      const ExportResult r = export_graph(graph, options);
      EXPECT_EQ(r.conv_clamps_fused, fuse ? 4 : 0);
      for (const std::vector<HostTensor>* in : {&finite, &non_finite}) {
        runs[fuse].push_back(run_in_runtime(r.program.bytes, *in, {"null"}));
        ASSERT_EQ(runs[fuse].back().size(), 1u);
      }
    }
    for (size_t i = 0; i < 2; ++i) EXPECT_EQ(runs[1][i][0].bytes, runs[0][i][0].bytes) << "input " << i;
    expect_close(runs[1][0][0], evaluate(graph, finite)[0]);
    int nan_count = 0;
    for (float v : runs[1][1][0].to_f32()) nan_count += std::isnan(v);
    EXPECT_GT(nan_count, 0);  // the NaN input reaches the output (clamps keep it)
  }
}

// A quantized linear delegated to a backend this runtime does not have ("sim") runs on the portable
// fallback from the payload alone: its QuantInfo, scale and global scale constants must be the
// Method's, or the output would differ from the portable export's (compared bit for bit).
TEST(EndToEndTest, QuantizedLinearInAGraphPayloadRunsLikeThePortableOne) {
  const CapabilityManifest manifest = CapabilityManifest::parse(R"({"format": 1, "kernels": [
      {"op": "relu", "dtypes": ["f32","f32"], "library": "cpu"},
      {"op": "linear", "dtypes": ["f32","f8_e4m3fn","f32","f32"], "quant": "per_channel", "library": "cpu"},
      {"op": "linear", "dtypes": ["f32","f8_e4m3fn","f32","f32"], "quant": "block2d", "library": "cpu"},
      {"op": "linear", "dtypes": ["f32","f8_e4m3fn","f32","f32"], "quant": "mx", "library": "cpu"},
      {"op": "linear", "dtypes": ["f32","f4_e2m1","f32","f32"], "quant": "nvfp4", "library": "cpu"}],
    "backends": [{"id": "sim", "ops": [
      {"op": "linear", "dtypes": ["f32","f8_e4m3fn","f32","f32"], "quant": "per_channel"},
      {"op": "linear", "dtypes": ["f32","f8_e4m3fn","f32","f32"], "quant": "block2d"},
      {"op": "linear", "dtypes": ["f32","f8_e4m3fn","f32","f32"], "quant": "mx"},
      {"op": "linear", "dtypes": ["f32","f4_e2m1","f32","f32"], "quant": "nvfp4"}]}]})");
  for (QuantPreset preset : {QuantPreset::Fp8, QuantPreset::Fp8Block, QuantPreset::Fp8Dynamic, QuantPreset::Mxfp8,
                             QuantPreset::Nvfp4}) {
    SCOPED_TRACE(to_string(preset));
    std::vector<std::vector<HostTensor>> outputs;
    for (bool delegated : {false, true}) {
      GraphBuilder b(3);
      b.symbol("batch", 1, 4);
      const ValueId x = b.input("x", ScalarType::F32, {DimSpec::sym("batch"), 160});
      const ValueId w = b.random_normal("w", {200, 160}, 0.0f, 0.08f);
      const ValueId bias = b.random_normal("bias", {200}, 0.0f, 0.1f);
      b.output("y", b.relu(b.linear(x, w, bias, "fc"), "act"));
      ExportOptions options;
      options.manifest = &manifest;
      options.backends = delegated ? std::vector<std::string>{"sim", "portable"} : std::vector<std::string>{"portable"};
      QuantizeOptions q;
      q.preset = preset;
      q.min_size = 1;
      options.quantize = q;
      const ExportResult r = export_graph(b.build(), options);
      ASSERT_EQ(r.partition.delegates.size(), delegated ? 1u : 0u);
      // MethodMeta's scratch covers the kernels of GRAPH payloads run on the portable fallback.
      outputs.push_back(run_in_runtime(r.program.bytes, {HostTensor::from_f32({3, 160}, pattern(3 * 160))}, {},
                                       Fallback::Portable));
      ASSERT_EQ(outputs.back().size(), 1u);
    }
    EXPECT_EQ(outputs[1][0].dims, outputs[0][0].dims);
    EXPECT_EQ(outputs[1][0].bytes, outputs[0][0].bytes);
  }
}

// Random graphs: a planning mistake (two live values sharing bytes) would corrupt the results.
TEST(EndToEndTest, RandomGraphsMatchOracle) {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    for (bool delegate : {false, true}) {
      SCOPED_TRACE("seed " + std::to_string(seed) + (delegate ? " delegated" : ""));
      ExportOptions options;
      options.manifest = &testing::test_manifest();
      options.fold_constants = false;
      if (delegate) options.backends = {"null", "portable"};
      const ExportResult r = export_graph(testing::random_graph(seed, seed % 2 == 0), options);
      EXPECT_TRUE(check_overlaps(r.program.bytes).empty());
      const int64_t rows = seed % 2 == 0 ? 1 + static_cast<int64_t>(seed % 6) : 3;
      std::vector<HostTensor> in;
      for (const NamedValue& nv : r.graph.inputs) {
        const Value& v = r.graph.values[static_cast<size_t>(nv.value)];
        std::vector<int64_t> dims;
        for (const Dim& d : v.dims) dims.push_back(d.sym != 0 ? rows : d.max);
        in.push_back(HostTensor::from_f32(dims, pattern(static_cast<size_t>(dims[0] * dims[1]))));
      }
      const auto expected = evaluate(r.graph, in);
      const auto actual = run_in_runtime(r.program.bytes, in, {"null"});
      ASSERT_EQ(actual.size(), expected.size());
      for (size_t o = 0; o < actual.size(); ++o) expect_close(actual[o], expected[o]);
    }
  }
}


// Exports `imp` (x [batch, 16] -> y [batch, 8]) with and without the GELU fusion: the fused graph
// has `gelus` gelu nodes of `approx` among `fused_nodes` nodes and no erf / tanh / div / mul / pow
// left; both programs run in the runtime (the CPU kernels) at batch 1 and 3 and match each other
// and the reference evaluator of the unfused import within the f32 transcendental tolerance (abs
// 1e-5, rel 1e-4).
void expect_fused_gelus_run_like_unfused(const OnnxImport& imp, int gelus, GeluApprox approx, size_t fused_nodes,
                                         size_t unfused_nodes) {
  std::vector<ExportResult> results;
  for (bool fuse : {true, false}) {
    ExportOptions options;
    options.fuse_gelu = fuse;
    results.push_back(export_graph(imp.graph, options));
  }
  const ExportResult& fused = results[0];
  const ExportResult& unfused = results[1];
  EXPECT_EQ(fused.gelus_fused, gelus);
  EXPECT_EQ(unfused.gelus_fused, 0);
  int approx_ok = 0;
  for (const Node& n : fused.graph.nodes) approx_ok += n.op == OpCode::Gelu && n.attrs.gelu_approx == approx;
  EXPECT_EQ(approx_ok, gelus);
  for (OpCode op : {OpCode::Erf, OpCode::Tanh, OpCode::Div, OpCode::Mul, OpCode::Pow}) {
    EXPECT_EQ(testing::count_ops(fused.graph, op), 0) << to_string(op);
  }
  EXPECT_EQ(fused.graph.nodes.size(), fused_nodes);
  EXPECT_EQ(unfused.graph.nodes.size(), unfused_nodes);
  EXPECT_EQ(fused.partition.steps.size(), fused_nodes);  // one kernel call per node
  EXPECT_LT(fused.program.constant_count, unfused.program.constant_count);
  const std::string line = "dead nodes removed, " + std::to_string(gelus) + " gelus fused\n";
  EXPECT_NE(format_summary(fused).find(line), std::string::npos) << format_summary(fused);
  EXPECT_NE(format_summary(unfused).find(", 0 gelus fused\n"), std::string::npos);
  EXPECT_EQ(testing::validate_with_runtime(fused.program.bytes), "");
  EXPECT_TRUE(check_overlaps(fused.program.bytes).empty());

  for (int64_t batch : {1, 3}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    const std::vector<HostTensor> in{HostTensor::from_f32({batch, 16}, pattern(static_cast<size_t>(batch) * 16))};
    const std::vector<float> reference = evaluate(imp.graph, in).at(0).to_f32();
    const auto a = run_in_runtime(fused.program.bytes, in, {});
    const auto b = run_in_runtime(unfused.program.bytes, in, {});
    ASSERT_EQ(a.size(), 1u);
    ASSERT_EQ(b.size(), 1u);
    EXPECT_EQ(a[0].dims, (std::vector<int64_t>{batch, 8}));
    const std::vector<float> ya = a[0].to_f32(), yb = b[0].to_f32();
    ASSERT_EQ(ya.size(), reference.size());
    ASSERT_EQ(yb.size(), reference.size());
    double nonzero = 0;
    for (size_t i = 0; i < ya.size(); ++i) {
      const float tol = 1e-5f + 1e-4f * std::fabs(reference[i]);
      ASSERT_NEAR(ya[i], reference[i], tol) << "fused, element " << i;
      ASSERT_NEAR(yb[i], reference[i], tol) << "unfused, element " << i;
      ASSERT_NEAR(ya[i], yb[i], 1e-5f + 1e-4f * std::fabs(yb[i])) << "element " << i;
      nonzero += std::fabs(reference[i]);
    }
    EXPECT_GT(nonzero / static_cast<double>(ya.size()), 0.05);  // the comparison is not of near-zeros
  }
}

// x [batch, 16] -> MatMul + bias (a1) -> the test's first GELU (g1) -> second_layer(): MatMul + bias
// (a2) -> the test's second GELU (y).
struct GeluModel {
  testing::OnnxModel m;
  GeluModel() {
    m.input("x", onnx::TensorProto::FLOAT, {"batch", "16"});
    m.init_f32("w1", {16, 24}, testing::ramp(16 * 24, 0.5f, 3));
    m.init_f32("b1", {24}, testing::ramp(24, 0.5f, 4));
    m.node("MatMul", {"x", "w1"}, {"h1"});
    m.node("Add", {"h1", "b1"}, {"a1"});
  }
  void second_layer() {
    m.init_f32("w2", {24, 8}, testing::ramp(24 * 8, 0.5f, 5));
    m.init_f32("b2", {8}, testing::ramp(8, 0.5f, 6));
    m.node("MatMul", {"g1", "w2"}, {"h2"});
    m.node("Add", {"b2", "h2"}, {"a2"});
  }
  // torch's way of writing a GELU's constants (the tests' first GELU; the second uses [1]
  // initializers).
  void scalar_node(const std::string& out, float v) {
    onnx::TensorProto* t = testing::attr_t(m.node("Constant", {}, {out}, "const_" + out), "value");
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_float_data(v);
  }
  OnnxImport import() {
    m.output("y");
    return testing::import_model(m, {"x=batch:1..4x16"});
  }
};

// The two erf-GELU spellings seen in the wild: torch.onnx.export's nn.GELU() (Div, Erf, Add,
// Mul(x, .), Mul(., 0.5)) and Hugging Face's x * 0.5 * (1 + erf(x * 1/sqrt(2))) with commuted
// operands.
TEST(EndToEndTest, OnnxErfGeluIsFusedAndMatchesTheUnfusedProgram) {
  GeluModel model;
  testing::OnnxModel& m = model.m;
  model.scalar_node("sqrt2", 1.4142135381698608f);
  model.scalar_node("one", 1.0f);
  model.scalar_node("half", 0.5f);
  m.node("Div", {"a1", "sqrt2"}, {"t1"});
  m.node("Erf", {"t1"}, {"t2"});
  m.node("Add", {"t2", "one"}, {"t3"});
  m.node("Mul", {"a1", "t3"}, {"t4"});
  m.node("Mul", {"t4", "half"}, {"g1"});
  model.second_layer();
  m.init_f32("inv_sqrt2", {1}, {0.70710678f});
  m.init_f32("one_1", {1}, {1.0f});
  m.init_f32("half_1", {1}, {0.5f});
  m.node("Mul", {"half_1", "a2"}, {"u1"});  // x * 0.5 first
  m.node("Mul", {"inv_sqrt2", "a2"}, {"u2"});
  m.node("Erf", {"u2"}, {"u3"});
  m.node("Add", {"one_1", "u3"}, {"u4"});
  m.node("Mul", {"u4", "u1"}, {"y"});
  const OnnxImport imp = model.import();
  ASSERT_EQ(testing::count_ops(imp.graph, OpCode::Erf), 2);
  expect_fused_gelus_run_like_unfused(imp, 2, GeluApprox::None, 4, 12);  // linear, gelu, linear, gelu
}

// The tanh GELU as torch.onnx.export writes nn.GELU(approximate="tanh") before opset 20 (x * (x *
// x), constants first) and as Hugging Face's gelu_new does (pow(x, 3), the 0.5 first).
TEST(EndToEndTest, OnnxTanhGeluIsFusedAndMatchesTheUnfusedProgram) {
  GeluModel model;
  testing::OnnxModel& m = model.m;
  model.scalar_node("kappa", 0.044714998453855515f);
  model.scalar_node("beta", 0.7978845834732056f);
  model.scalar_node("one", 1.0f);
  model.scalar_node("half", 0.5f);
  m.node("Mul", {"a1", "a1"}, {"t_sq"});
  m.node("Mul", {"a1", "t_sq"}, {"t_cube"});
  m.node("Mul", {"kappa", "t_cube"}, {"t_k"});
  m.node("Add", {"a1", "t_k"}, {"t_sum"});
  m.node("Mul", {"beta", "t_sum"}, {"t_inner"});
  m.node("Tanh", {"t_inner"}, {"t_tanh"});
  m.node("Add", {"one", "t_tanh"}, {"t_plus"});
  m.node("Mul", {"a1", "t_plus"}, {"t_prod"});
  m.node("Mul", {"half", "t_prod"}, {"g1"});
  model.second_layer();
  m.init_f32("three", {1}, {3.0f});
  m.init_f32("kappa_1", {1}, {0.044715f});
  m.init_f32("beta_1", {1}, {0.7978845608f});
  m.init_f32("one_1", {1}, {1.0f});
  m.init_f32("half_1", {1}, {0.5f});
  m.node("Mul", {"a2", "half_1"}, {"u_half"});
  m.node("Pow", {"a2", "three"}, {"u_cube"});
  m.node("Mul", {"u_cube", "kappa_1"}, {"u_k"});
  m.node("Add", {"u_k", "a2"}, {"u_sum"});
  m.node("Mul", {"u_sum", "beta_1"}, {"u_inner"});
  m.node("Tanh", {"u_inner"}, {"u_tanh"});
  m.node("Add", {"u_tanh", "one_1"}, {"u_plus"});
  m.node("Mul", {"u_half", "u_plus"}, {"y"});
  const OnnxImport imp = model.import();
  ASSERT_EQ(testing::count_ops(imp.graph, OpCode::Tanh), 2);
  ASSERT_EQ(testing::count_ops(imp.graph, OpCode::Pow), 1);
  expect_fused_gelus_run_like_unfused(imp, 2, GeluApprox::Tanh, 4, 19);
}

// The f32 weight the kernels compute with: a quantized value decoded by the reference dequantizers.
std::vector<float> dequantized_weight(const Value& v) {
  const QuantParams& q = *v.quant;
  const int64_t n = v.dims[0].max, k = v.dims[1].max;
  std::vector<float> out(static_cast<size_t>(n * k));
  Status s;
  if (q.scale_dtype == ScalarType::F32) {
    std::vector<float> scales(q.scale->size() / 4);
    std::memcpy(scales.data(), q.scale->data(), q.scale->size());
    s = kernels::reference::dequantize_fp8_e4m3(v.data->data(), n, k, q.block[0], q.block[1], scales.data(), out.data());
  } else if (q.scale_dtype == ScalarType::E8M0) {
    s = kernels::reference::dequantize_mxfp8(v.data->data(), n, k, q.scale->data(), out.data());
  } else {
    s = kernels::reference::dequantize_nvfp4(v.data->data(), n, k, q.scale->data(), q.global_scale, out.data());
  }
  EXPECT_TRUE(s.is_ok());
  return out;
}

// x [rows, k] · wᵀ (+ b), in double; `w8a8` first quantizes each row of x to FP8 (s = amax / 448).
std::vector<double> linear_ref(std::vector<double> x, int64_t rows, int64_t k, const std::vector<float>& w, int64_t n,
                               const std::vector<float>* b, bool w8a8) {
  if (w8a8) {
    for (int64_t r = 0; r < rows; ++r) {
      double amax = 0;
      for (int64_t j = 0; j < k; ++j) amax = std::max(amax, std::fabs(x[static_cast<size_t>(r * k + j)]));
      float sx = static_cast<float>(amax) / 448.0f;
      if (sx == 0) sx = 1;
      for (int64_t j = 0; j < k; ++j) {
        double& e = x[static_cast<size_t>(r * k + j)];
        e = static_cast<double>(e4m3fn_to_f32(f32_to_e4m3fn(static_cast<float>(e) / sx))) * sx;
      }
    }
  }
  std::vector<double> y(static_cast<size_t>(rows * n));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < n; ++o) {
      double acc = b ? (*b)[static_cast<size_t>(o)] : 0.0;
      for (int64_t j = 0; j < k; ++j) acc += x[static_cast<size_t>(r * k + j)] * w[static_cast<size_t>(o * k + j)];
      y[static_cast<size_t>(r * n + o)] = acc;
    }
  }
  return y;
}

// Every --quantize preset through the runtime: x [batch, 160] -> linear(200, bias) -> relu ->
// linear(96) matches dequantize-then-f32 (W8A8: with FP8 per-token activations) within 1e-5
// relative L2, at batch 1 (the GEMV shape) and 5.
TEST(EndToEndTest, QuantizedLinearsMatchTheDequantizedReference) {
  for (QuantPreset preset : {QuantPreset::Fp8, QuantPreset::Fp8Block, QuantPreset::Fp8Dynamic, QuantPreset::Mxfp8,
                             QuantPreset::Nvfp4}) {
    SCOPED_TRACE(to_string(preset));
    GraphBuilder b(11);
    b.symbol("batch", 1, 8);
    ValueId x = b.input("x", ScalarType::F32, {DimSpec::sym("batch"), 160});
    ValueId w1 = b.random_normal("w1", {200, 160}, 0.0f, 0.08f);
    ValueId b1 = b.random_normal("b1", {200}, 0.0f, 0.1f);
    ValueId w2 = b.random_normal("w2", {96, 200}, 0.0f, 0.07f);
    b.output("y", b.linear(b.relu(b.linear(x, w1, b1, "fc1"), "relu"), w2, kNoValue, "fc2"));
    ExportOptions options;
    QuantizeOptions q;
    q.preset = preset;
    q.min_size = 1;
    options.quantize = q;
    const ExportResult r = export_graph(b.build(), options);
    ASSERT_TRUE(r.quantize.has_value());
    int quantized = 0;
    for (const QuantLayerReport& l : r.quantize->layers) quantized += l.quantized;
    // mxfp8 and nvfp4 need K % 32 / K % 16: fc2's K = 200 is neither, so it stays f32 there.
    EXPECT_EQ(quantized, preset == QuantPreset::Mxfp8 || preset == QuantPreset::Nvfp4 ? 1 : 2);
    EXPECT_TRUE(check_overlaps(r.program.bytes).empty());
    // The weights the runtime computes with, by layer.
    std::vector<float> w1q, w2q, b1v;
    for (const Node& node : r.graph.nodes) {
      if (node.op != OpCode::Linear) continue;
      const Value& w = r.graph.values[static_cast<size_t>(node.inputs[1])];
      std::vector<float> wf = w.quant ? dequantized_weight(w) : HostTensor{w.dtype, {}, *w.data}.to_f32();
      if (node.name == "fc1") {
        w1q = std::move(wf);
        b1v = HostTensor{ScalarType::F32, {}, *r.graph.values[static_cast<size_t>(node.inputs[2])].data}.to_f32();
      } else {
        w2q = std::move(wf);
      }
    }
    ASSERT_EQ(w1q.size(), 200u * 160u);
    ASSERT_EQ(w2q.size(), 96u * 200u);
    const bool w8a8 = preset == QuantPreset::Fp8Dynamic;
    for (int64_t batch : {1, 5}) {
      SCOPED_TRACE("batch " + std::to_string(batch));
      const std::vector<float> xv = pattern(static_cast<size_t>(batch * 160));
      std::vector<double> h = linear_ref(std::vector<double>(xv.begin(), xv.end()), batch, 160, w1q, 200, &b1v, w8a8);
      for (double& e : h) e = std::max(e, 0.0);
      const std::vector<double> y = linear_ref(h, batch, 200, w2q, 96, nullptr, w8a8);
      const auto actual = run_in_runtime(r.program.bytes, {HostTensor::from_f32({batch, 160}, xv)}, {});
      ASSERT_EQ(actual.size(), 1u);
      const std::vector<float> a = actual[0].to_f32();
      ASSERT_EQ(a.size(), y.size());
      double num = 0, den = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        num += (a[i] - y[i]) * (a[i] - y[i]);
        den += y[i] * y[i];
      }
      EXPECT_LE(std::sqrt(num / den), 1e-5);
    }
  }
}

}  // namespace
}  // namespace ember::exporter
