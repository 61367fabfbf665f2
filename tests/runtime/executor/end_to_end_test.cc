// End to end: models built with GraphBuilder (together they use every op of the initial set, with
// a symbolic batch), exported in-process, loaded from memory and executed, compared with the
// exporter's IR evaluation on the reference kernels.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <set>
#include <thread>
#include <string>
#include <vector>

#include "exporter/importers/builder/examples.h"
#include "exporter/importers/builder/graph_builder.h"
#include "exporter/passes/evaluate.h"
#include "runtime/core/float_codecs.h"
#include "tests/common/program_util.h"
#include "tests/common/test_util.h"

namespace ember {
namespace {

using exporter::DimSpec;
using exporter::Graph;
using exporter::GraphBuilder;
using exporter::HostTensor;
using exporter::ValueId;
using testing::ExpectAllClose;
using testing::ExpectBitwiseEqual;

// [batch, 16] -> linear, gelu (both), silu, sigmoid, tanh, add/sub/mul/div, layer_norm (with and
// without affine), matmul, linear without bias, concat, slice, reshape/transpose, relu, softmax.
Graph DenseModel() {
  GraphBuilder b(7);
  b.symbol("batch", 1, 8);
  const ValueId x = b.input("x", ScalarType::F32, {DimSpec::sym("batch"), 16});
  const ValueId w1 = b.random_uniform("w1", {32, 16}, -0.3f, 0.3f);
  const ValueId b1 = b.random_uniform("b1", {32}, -0.1f, 0.1f);
  const ValueId h = b.linear(x, w1, b1, "fc1");
  const ValueId g1 = b.gelu(h, GeluApprox::None, "gelu_erf");
  const ValueId g2 = b.gelu(h, GeluApprox::Tanh, "gelu_tanh");
  const ValueId s = b.silu(g1, "silu");
  const ValueId sg = b.sigmoid(g2, "sigmoid");
  const ValueId t = b.tanh(s, "tanh");
  const ValueId a = b.add(t, sg, "add");
  const ValueId c1 = b.random_uniform("c1", {32}, -0.5f, 0.5f);
  const ValueId su = b.sub(a, c1, "sub");
  const ValueId m = b.mul(su, sg, "mul");
  const ValueId dconst = b.random_uniform("dconst", {32}, 0.5f, 2.0f);
  const ValueId dv = b.div(m, dconst, "div");
  const ValueId gamma = b.random_uniform("gamma", {32}, 0.5f, 1.5f);
  const ValueId beta = b.random_uniform("beta", {32}, -0.2f, 0.2f);
  const ValueId ln = b.layer_norm(dv, gamma, beta, -1, 1e-5f, "ln_affine");
  const ValueId ln2 = b.layer_norm(dv, exporter::kNoValue, exporter::kNoValue, -1, 1e-5f, "ln_plain");
  const ValueId wm = b.random_uniform("wm", {32, 8}, -0.3f, 0.3f);
  const ValueId mm = b.matmul(ln, wm, "matmul");
  const ValueId w2 = b.random_uniform("w2", {8, 32}, -0.3f, 0.3f);
  const ValueId l2 = b.linear(ln2, w2, exporter::kNoValue, "fc2");
  const ValueId cat = b.concat({mm, l2}, 1, "concat");
  const ValueId sl = b.slice(cat, {1}, {1}, {15}, {2}, "slice");
  const ValueId r = b.reshape(ln, {DimSpec::sym("batch"), 4, 8}, "reshape3d");
  const ValueId tr = b.transpose(r, {0, 2, 1}, "transpose");
  const ValueId r2 = b.reshape(tr, {DimSpec::sym("batch"), 32}, "reshape2d");
  b.output("probs", b.softmax(cat, -1, "softmax"));
  b.output("sliced", sl);
  b.output("permuted", b.relu(r2, "relu"));
  return b.build();
}

// [n, 3, 10, 10] -> conv2d (bias), relu, max_pool2d, avg_pool2d, depthwise strided conv2d (no
// bias), global_avg_pool2d, reshape, linear, softmax.
Graph ConvModel() {
  GraphBuilder b(11);
  b.symbol("n", 1, 4);
  const ValueId x = b.input("image", ScalarType::F32, {DimSpec::sym("n"), 3, 10, 10});
  const ValueId w = b.random_uniform("conv1.w", {8, 3, 3, 3}, -0.4f, 0.4f);
  const ValueId bias = b.random_uniform("conv1.b", {8}, -0.1f, 0.1f);
  const ValueId c = b.conv2d(x, w, bias, exporter::Conv2dParams::same3x3(), "conv1");
  const ValueId r = b.relu(c, "relu1");
  const ValueId mp = b.max_pool2d(r, exporter::Pool2dParams::square(2, 2), "maxpool");
  exporter::Pool2dParams avg = exporter::Pool2dParams::square(3, 1);
  avg.padding[0] = avg.padding[1] = avg.padding[2] = avg.padding[3] = 1;
  const ValueId ap = b.avg_pool2d(mp, avg, "avgpool");
  exporter::Conv2dParams dwp = exporter::Conv2dParams::same3x3(/*groups=*/8);
  dwp.stride[0] = dwp.stride[1] = 2;
  const ValueId dw_w = b.random_uniform("dw.w", {8, 1, 3, 3}, -0.4f, 0.4f);
  const ValueId dw = b.conv2d(ap, dw_w, exporter::kNoValue, dwp, "dwconv");
  const ValueId gap = b.global_avg_pool2d(dw, "gap");
  const ValueId fl = b.reshape(gap, {DimSpec::sym("n"), 8}, "flatten");
  const ValueId fw = b.random_uniform("fc.w", {5, 8}, -0.4f, 0.4f);
  const ValueId fb = b.random_uniform("fc.b", {5}, -0.1f, 0.1f);
  b.output("probs", b.softmax(b.linear(fl, fw, fb, "fc"), -1, "softmax"));
  b.output("pooled", ap);
  return b.build();
}

std::vector<HostTensor> Inputs(const exporter::Graph& g, int64_t batch, uint32_t seed) {
  std::vector<HostTensor> in;
  for (const exporter::NamedValue& nv : g.inputs) {
    const exporter::Value& v = g.values[static_cast<size_t>(nv.value)];
    std::vector<int64_t> dims;
    size_t n = 1;
    for (const exporter::Dim& d : v.dims) {
      dims.push_back(d.sym != 0 ? batch : d.max);
      n *= static_cast<size_t>(dims.back());
    }
    in.push_back(HostTensor::from_f32(dims, testing::pattern(n, seed)));
  }
  return in;
}

// Runs `r` at each batch size through one loaded Method and compares with the oracle.
void CheckAgainstOracle(const exporter::ExportResult& r, const RuntimeContext& runtime, const LoadOptions& options,
                        std::initializer_list<int64_t> batches) {
  testing::LoadedMethod lm(r.program.bytes, runtime, options);
  ASSERT_TRUE(lm.ok()) << to_string(lm.error()) << ": " << lm.ctx().message;
  uint32_t seed = 0;
  for (int64_t batch : batches) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    const std::vector<HostTensor> in = Inputs(r.graph, batch, ++seed);
    const std::vector<HostTensor> expected = exporter::evaluate(r.graph, in);
    const std::vector<HostTensor> actual = testing::run_method(lm.method(), in);
    ASSERT_EQ(actual.size(), expected.size());
    for (size_t o = 0; o < actual.size(); ++o) {
      SCOPED_TRACE("output " + std::to_string(o));
      ASSERT_GT(expected[o].numel(), 0u);
      ExpectAllClose(actual[o], expected[o]);
      // The comparison is not vacuous: a change of one element by 1e-3 is caught.
      HostTensor perturbed = expected[o];
      float first;
      std::memcpy(&first, perturbed.bytes.data(), 4);
      first += 1e-3f + 1e-3f * std::fabs(first);
      std::memcpy(perturbed.bytes.data(), &first, 4);
      EXPECT_NONFATAL_FAILURE(ExpectAllClose(actual[o], perturbed), "first mismatch at element 0");
    }
  }
}

// An FP8 per-channel linear [1, 64] x [8, 64]^T whose weight row 3 holds `nan_code` at column 10
// (0 = none). Bind scans the constant once (QuantView::nan_codes) and the CPU kernel skips its own
// scan only when the codes are NaN-free, so a NaN code must still make that row NaN.
exporter::ExportResult Fp8Linear(uint8_t nan_code, std::vector<float>* dequant) {
  const int64_t n = 8, k = 64;
  std::vector<uint8_t> codes(static_cast<size_t>(n * k));
  std::vector<float> scales(static_cast<size_t>(n));
  dequant->assign(size_t(n * k), 0.0f);
  for (int64_t j = 0; j < n; ++j) {
    scales[size_t(j)] = 0.01f * float(j + 1);
    for (int64_t p = 0; p < k; ++p) {
      codes[size_t(j * k + p)] = f32_to_e4m3fn(float((j * 7 + p * 13) % 41) - 20.0f);
    }
  }
  if (nan_code != 0) codes[size_t(3 * k + 10)] = nan_code;
  for (size_t i = 0; i < codes.size(); ++i) (*dequant)[i] = e4m3fn_to_f32(codes[i]) * scales[i / size_t(k)];
  auto q = std::make_shared<exporter::QuantParams>();
  q->scale_dtype = ScalarType::F32;
  q->block = {1, k};
  q->scale_dims = {n, 1};
  std::vector<uint8_t> scale_bytes(scales.size() * 4);
  std::memcpy(scale_bytes.data(), scales.data(), scale_bytes.size());
  q->scale = std::make_shared<const std::vector<uint8_t>>(std::move(scale_bytes));
  GraphBuilder b(3);
  const ValueId x = b.input("x", ScalarType::F32, {1, k});
  const ValueId w = b.constant_quantized("w", ScalarType::F8E4M3FN, {n, k}, codes, q);
  b.output("y", b.linear(x, w, exporter::kNoValue, "fc"));
  // NaN codes on purpose: the pipeline refuses non-finite weights unless allowed.
  exporter::ExportOptions options;
  options.manifest = &testing::builtin_manifest();
  options.allow_non_finite_weights = nan_code != 0;
  return exporter::export_graph(b.build(), options);
}

TEST(EndToEndTest, Fp8WeightNanCodesGiveNanRowsAfterBind) {
  testing::Runtime rt;
  for (uint8_t nan_code : {uint8_t(0), uint8_t(0x7F), uint8_t(0xFF)}) {
    SCOPED_TRACE("nan code " + std::to_string(nan_code));
    std::vector<float> dequant;
    const exporter::ExportResult r = Fp8Linear(nan_code, &dequant);
    testing::LoadedMethod lm(r.program.bytes, rt.context);
    ASSERT_TRUE(lm.ok()) << lm.ctx().message;
    const std::vector<float> xv = testing::pattern(64, 5);
    const std::vector<HostTensor> out = testing::run_method(lm.method(), {HostTensor::from_f32({1, 64}, xv)});
    ASSERT_EQ(out.size(), 1u);
    const std::vector<float> y = out[0].to_f32();
    ASSERT_EQ(y.size(), 8u);
    for (size_t j = 0; j < 8; ++j) {
      double e = 0.0, mag = 0.0;
      for (size_t p = 0; p < 64; ++p) {
        e += double(xv[p]) * dequant[j * 64 + p];
        mag += std::fabs(double(xv[p]) * dequant[j * 64 + p]);
      }
      if (nan_code != 0 && j == 3) {
        EXPECT_TRUE(std::isnan(y[j])) << "row 3: " << y[j];
      } else {
        EXPECT_NEAR(y[j], e, 1e-5 * mag + 1e-6) << "row " << j;
      }
    }
  }
}

TEST(EndToEndTest, ModelsCoverEveryOp) {
  std::set<OpCode> seen;
  for (const Graph& g : {DenseModel(), ConvModel()}) {
    const exporter::ExportResult r = testing::export_program(g);
    for (const exporter::Node& n : r.graph.nodes) seen.insert(n.op);  // after the exporter's passes
  }
  for (int op = static_cast<int>(OpCode::Add); op <= static_cast<int>(OpCode::Slice); ++op) {
    EXPECT_TRUE(seen.count(static_cast<OpCode>(op))) << "op " << to_string(static_cast<OpCode>(op))
                                                      << " is in no end-to-end model";
  }
}

TEST(EndToEndTest, DenseModelMatchesOracleAtTwoBatchSizes) {
  testing::Runtime rt;
  CheckAgainstOracle(testing::export_program(DenseModel()), rt.context, {}, {3, 8, 1});
}

TEST(EndToEndTest, ConvModelMatchesOracleAtTwoBatchSizes) {
  testing::Runtime rt;
  CheckAgainstOracle(testing::export_program(ConvModel()), rt.context, {}, {2, 4, 1});
}

TEST(EndToEndTest, ConvModelDelegatedToNullBackendMatchesOracle) {
  const exporter::ExportResult r = testing::export_program(ConvModel(), {"null", "portable"});
  ASSERT_GE(r.partition.delegates.size(), 1u);
  testing::Runtime rt;
  LoadOptions options;
  options.fallback = Fallback::Fail;  // really on the backend
  CheckAgainstOracle(r, rt.context, options, {2, 4, 1});
}

TEST(EndToEndTest, ConvModelDelegateFallsBackToPortable) {
  const exporter::ExportResult r = testing::export_program(ConvModel(), {"null", "portable"});
  testing::RuntimeOptions ro;
  ro.null_backend = false;
  testing::Runtime rt(ro);
  CheckAgainstOracle(r, rt.context, {}, {3, 1});
}

TEST(EndToEndTest, ExamplesMatchOracle) {
  testing::Runtime rt;
  for (const char* name : {"mlp", "cnn", "cnn_null"}) {
    SCOPED_TRACE(name);
    const exporter::ExportResult& r = testing::example(name);
    if (std::string(name) == "mlp") {
      CheckAgainstOracle(r, rt.context, {}, {1, 5, 8});
    } else {
      CheckAgainstOracle(r, rt.context, {}, {1});
    }
  }
}

TEST(EndToEndTest, LoadsThroughFileAndMmapLoaders) {
  const exporter::ExportResult& r = testing::example("mlp");
  testing::TempFile file(r.program.bytes);
  ASSERT_TRUE(file.ok());
  testing::Runtime rt;
  const std::vector<HostTensor> in = Inputs(r.graph, 2, 5);
  const std::vector<HostTensor> expected = exporter::evaluate(r.graph, in);
  for (int kind = 0; kind < 2; ++kind) {
    SCOPED_TRACE(kind == 0 ? "file" : "mmap");
    std::unique_ptr<DataLoader> loader;
    if (kind == 0) {
      Result<FileDataLoader> l = FileDataLoader::open(file.path());
      ASSERT_TRUE(l.is_ok());
      loader = std::make_unique<FileDataLoader>(std::move(l).value());
    } else {
      Result<MmapDataLoader> l = MmapDataLoader::open(file.path());
      ASSERT_TRUE(l.is_ok());
      loader = std::make_unique<MmapDataLoader>(std::move(l).value());
    }
    ErrorContext ctx;
    Result<Program> program = Program::load(*loader, rt.context, {}, &ctx);
    ASSERT_TRUE(program.is_ok()) << ctx.message;
    Result<MethodMeta> meta = program->method_meta("forward");
    ASSERT_TRUE(meta.is_ok());
    testing::MethodMemory memory(*meta);
    Result<Method> method = program->load_method("forward", memory.plan(), &ctx);
    ASSERT_TRUE(method.is_ok()) << ctx.message;
    const std::vector<HostTensor> actual = testing::run_method(*method, in);
    ASSERT_EQ(actual.size(), 1u);
    ExpectAllClose(actual[0], expected[0]);
  }
}

// Thread pools of 1 and 2 threads (and none) give bitwise-equal outputs.
TEST(EndToEndTest, ThreadCountDoesNotChangeResults) {
  const std::vector<std::pair<exporter::ExportResult, int64_t>> programs = [] {
    std::vector<std::pair<exporter::ExportResult, int64_t>> p;
    p.emplace_back(testing::export_program(DenseModel()), 8);
    p.emplace_back(testing::export_program(ConvModel()), 4);
    p.emplace_back(testing::export_program(ConvModel(), {"null", "portable"}), 3);
    p.emplace_back(testing::export_program(exporter::build_cnn_example(1)), 1);
    return p;
  }();
  for (size_t i = 0; i < programs.size(); ++i) {
    SCOPED_TRACE("program " + std::to_string(i));
    const auto& [r, batch] = programs[i];
    const std::vector<HostTensor> in = Inputs(r.graph, batch, 3);
    std::vector<std::vector<HostTensor>> results;
    for (size_t threads : {0, 1, 2}) {
      testing::RuntimeOptions ro;
      ro.threads = threads;
      testing::Runtime rt(ro);
      testing::LoadedMethod lm(r.program.bytes, rt.context);
      ASSERT_TRUE(lm.ok()) << lm.ctx().message;
      results.push_back(testing::run_method(lm.method(), in));
      // Twice on the same method: same bits again.
      const std::vector<HostTensor> again = testing::run_method(lm.method(), in);
      ASSERT_EQ(again.size(), results.back().size());
      for (size_t o = 0; o < again.size(); ++o) ExpectBitwiseEqual(again[o], results.back()[o]);
    }
    for (size_t t = 1; t < results.size(); ++t) {
      ASSERT_EQ(results[t].size(), results[0].size());
      for (size_t o = 0; o < results[0].size(); ++o) {
        SCOPED_TRACE("threads config " + std::to_string(t) + " output " + std::to_string(o));
        ExpectBitwiseEqual(results[t][o], results[0][o]);
      }
    }
  }
}

// Program is shareable: two Methods of one Program run on two threads at once, sharing one pool.
TEST(EndToEndTest, TwoMethodsOfOneProgramRunConcurrently) {
  const exporter::ExportResult r = testing::export_program(DenseModel());
  testing::RuntimeOptions ro;
  ro.threads = 2;
  testing::Runtime rt(ro);
  testing::LoadedProgram lp(r.program.bytes, rt.context);
  ASSERT_TRUE(lp.ok()) << lp.ctx().message;
  Result<MethodMeta> meta = lp.program().method_meta("forward");
  ASSERT_TRUE(meta.is_ok());
  testing::MethodMemory memory_a(*meta), memory_b(*meta);
  Result<Method> a = lp.program().load_method("forward", memory_a.plan());
  Result<Method> b = lp.program().load_method("forward", memory_b.plan());
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  const std::vector<HostTensor> in_a = Inputs(r.graph, 8, 1), in_b = Inputs(r.graph, 3, 2);
  const std::vector<HostTensor> expected_a = exporter::evaluate(r.graph, in_a);
  const std::vector<HostTensor> expected_b = exporter::evaluate(r.graph, in_b);
  std::vector<HostTensor> last_a, last_b;
  std::thread ta([&] {
    for (int i = 0; i < 50; ++i) last_a = testing::run_method(*a, in_a);
  });
  std::thread tb([&] {
    for (int i = 0; i < 50; ++i) last_b = testing::run_method(*b, in_b);
  });
  ta.join();
  tb.join();
  ASSERT_EQ(last_a.size(), expected_a.size());
  ASSERT_EQ(last_b.size(), expected_b.size());
  for (size_t o = 0; o < expected_a.size(); ++o) {
    ExpectAllClose(last_a[o], expected_a[o]);
    ExpectAllClose(last_b[o], expected_b[o]);
  }
}

}  // namespace
}  // namespace ember
