// The XNNPACK backend against kernels/reference: each op it claims at awkward shapes (the same graph
// exported with --backends xnnpack,portable and run on the reference kernels alone), the cases it
// refuses (ops its manifest entry lacks land on portable; attributes and shapes init() refuses with
// NotSupported), its error paths, plan == taken memory, and the bundled cnn example.
//
// Tolerance: XNNPACK sums in f32 in its own order (the reference in double) and evaluates sigmoid,
// softmax's exp and hardswish with its own polynomials; kTol below is what that needs, measured here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "backends/xnnpack/register.h"
#include "backends/xnnpack/subgraph.h"
#include "exporter/importers/builder/examples.h"
#include "exporter/importers/builder/graph_builder.h"
#include "kernels/reference/register.h"
#include "tests/common/program_util.h"

namespace ember {
namespace {

using exporter::Conv2dParams;
using exporter::DimSpec;
using exporter::Graph;
using exporter::GraphBuilder;
using exporter::HostTensor;
using exporter::Pool2dParams;
using exporter::ValueId;
using testing::ExpectAllClose;
using testing::LoadedMethod;
using testing::LoadedProgram;
using testing::Runtime;
using testing::RuntimeOptions;
using testing::Tolerance;

constexpr Tolerance kTol{1e-5f, 1e-5f};

// The reference kernels only (the oracle), plus the xnnpack backend; `threads` > 1 gives XNNPACK a
// pthreadpool of that many threads.
std::unique_ptr<Runtime> make_runtime(size_t threads = 0) {
  RuntimeOptions options;
  options.kernels = false;
  options.null_backend = false;
  options.threads = threads;
  auto rt = std::make_unique<Runtime>(options);
  EXPECT_TRUE(kernels::register_reference_kernels(*rt->kernels).is_ok());
  EXPECT_TRUE(backends::xnnpack::register_backend(*rt->backends).is_ok());
  return rt;
}

std::vector<HostTensor> run(const std::vector<uint8_t>& file, Runtime& rt, const std::vector<HostTensor>& inputs,
                            const LoadOptions& options = {}) {
  LoadedMethod lm(file, rt.context, options);
  EXPECT_TRUE(lm.ok()) << lm.ctx().message;
  if (!lm.ok()) return {};
  return testing::run_method(lm.method(), inputs);
}

HostTensor input(std::vector<int64_t> dims, uint32_t seed) {
  size_t n = 1;
  for (int64_t d : dims) n *= static_cast<size_t>(d);
  return testing::f32_tensor(std::move(dims), testing::pattern(n, seed));
}

// Exports `build()` twice (portable; xnnpack,portable), checks where every node went and that the
// xnnpack run matches the reference run.
void ExpectMatchesReference(const std::function<Graph()>& build, const std::vector<HostTensor>& inputs,
                            Tolerance tol = kTol, size_t threads = 0) {
  const exporter::ExportResult portable = testing::export_program(build(), {"portable"});
  const exporter::ExportResult xnn = testing::export_program(build(), {"xnnpack", "portable"});
  for (size_t n = 0; n < xnn.partition.node_backend.size(); ++n) {
    EXPECT_EQ(xnn.partition.node_backend[n], "xnnpack") << "node " << n;
  }
  auto rt = make_runtime(threads);
  const std::vector<HostTensor> expected = run(portable.program.bytes, *rt, inputs);
  LoadedMethod lm(xnn.program.bytes, rt->context);
  ASSERT_TRUE(lm.ok()) << lm.ctx().message;
  EXPECT_STREQ(lm.method().instruction_backend(0), "xnnpack");
  testing::ExpectPlannedMemoryIsTaken(lm, "xnnpack", xnn.partition.delegates.size());
  for (int step = 0; step < 2; ++step) {  // twice: the fixed slots are reused
    const std::vector<HostTensor> actual = testing::run_method(lm.method(), inputs);
    ASSERT_EQ(actual.size(), expected.size());
    for (size_t k = 0; k < actual.size(); ++k) ExpectAllClose(actual[k], expected[k], tol);
  }
}

ValueId conv(GraphBuilder& b, ValueId x, int64_t in_c, int64_t out_c, int64_t kh, int64_t kw, const Conv2dParams& p,
             bool bias = true) {
  static int count = 0;
  const std::string name = "conv" + std::to_string(count++);
  const ValueId w = b.random_uniform(name + ".w", {out_c, in_c / p.groups, kh, kw}, -0.5f, 0.5f);
  const ValueId bv = bias ? b.random_uniform(name + ".b", {out_c}, -0.5f, 0.5f) : exporter::kNoValue;
  return b.conv2d(x, w, bv, p);
}

TEST(XnnpackSupportsTest, AnswersF32CnnOpsOnly) {
  auto rt = make_runtime();
  const Backend& backend = *rt->backends->find("xnnpack");
  auto key = [](OpCode op, std::vector<ScalarType> dtypes) {
    KernelKey k;
    k.op = op;
    k.arg_count = static_cast<uint8_t>(dtypes.size());
    for (size_t i = 0; i < dtypes.size(); ++i) k.dtypes[i] = dtypes[i];
    return k;
  };
  const ScalarType F = ScalarType::F32, X = ScalarType::Invalid;
  EXPECT_TRUE(backend.supports(rt->context, key(OpCode::Conv2d, {F, F, F, F})));
  EXPECT_TRUE(backend.supports(rt->context, key(OpCode::Conv2d, {F, F, X, F})));
  EXPECT_TRUE(backend.supports(rt->context, key(OpCode::Linear, {F, F, F})));
  EXPECT_TRUE(backend.supports(rt->context, key(OpCode::Add, {F, F, F})));
  EXPECT_TRUE(backend.supports(rt->context, key(OpCode::Softmax, {F, F})));
  EXPECT_FALSE(backend.supports(rt->context, key(OpCode::Add, {ScalarType::F16, ScalarType::F16, ScalarType::F16})));
  EXPECT_FALSE(backend.supports(rt->context, key(OpCode::Add, {F, X, F})));
  EXPECT_FALSE(backend.supports(rt->context, key(OpCode::Tanh, {F, F})));
  EXPECT_FALSE(backend.supports(rt->context, key(OpCode::MatMul, {F, F, F})));
  EXPECT_FALSE(backend.supports(rt->context, key(OpCode::Reshape, {ScalarType::I64, ScalarType::I64})));
  KernelKey quantized = key(OpCode::Linear, {F, ScalarType::F8E4M3FN, X, F});
  quantized.quant = QuantLayout::PerChannel;
  EXPECT_FALSE(backend.supports(rt->context, quantized));
  KernelKey channels_last = key(OpCode::Relu, {F, F});
  channels_last.dim_order = DimOrder::ChannelsLast;
  EXPECT_FALSE(backend.supports(rt->context, channels_last));
}

TEST(XnnpackOpsTest, Conv2dStridedDilatedAsymmetricPadding) {
  ExpectMatchesReference(
      [] {
        GraphBuilder b(3);
        ValueId x = b.input("x", ScalarType::F32, {2, 3, 7, 9});
        Conv2dParams p;
        p.stride[0] = 2, p.stride[1] = 1;
        p.padding[0] = 1, p.padding[1] = 0, p.padding[2] = 2, p.padding[3] = 1;
        p.dilation[0] = 1, p.dilation[1] = 2;
        b.output("y", conv(b, x, 3, 5, 3, 2, p));
        return b.build();
      },
      {input({2, 3, 7, 9}, 1)});
}

TEST(XnnpackOpsTest, Conv2dWithoutBias) {
  ExpectMatchesReference(
      [] {
        GraphBuilder b(4);
        ValueId x = b.input("x", ScalarType::F32, {1, 4, 5, 6});
        b.output("y", conv(b, x, 4, 7, 3, 3, Conv2dParams::same3x3(), /*bias=*/false));
        return b.build();
      },
      {input({1, 4, 5, 6}, 2)});
}

TEST(XnnpackOpsTest, GroupedAndDepthwiseConv2d) {
  ExpectMatchesReference(
      [] {
        GraphBuilder b(5);
        ValueId x = b.input("x", ScalarType::F32, {1, 6, 9, 7});
        ValueId h = conv(b, x, 6, 9, 3, 3, Conv2dParams::same3x3(/*groups=*/3));   // grouped
        h = conv(b, h, 9, 9, 3, 3, Conv2dParams::same3x3(/*groups=*/9));           // depthwise
        Conv2dParams mult;
        mult.groups = 9;
        mult.stride[0] = mult.stride[1] = 2;
        b.output("y", conv(b, h, 9, 18, 3, 3, mult));                               // depthwise, multiplier 2
        return b.build();
      },
      {input({1, 6, 9, 7}, 3)}, kTol, /*threads=*/2);
}

TEST(XnnpackOpsTest, MaxPoolPaddingCeilModeAndDilation) {
  ExpectMatchesReference(
      [] {
        GraphBuilder b(6);
        ValueId x = b.input("x", ScalarType::F32, {2, 3, 10, 11});
        Pool2dParams p = Pool2dParams::square(3, 2);
        p.padding[0] = p.padding[1] = p.padding[2] = p.padding[3] = 1;
        b.output("padded", b.max_pool2d(x, p));
        Pool2dParams ceil = Pool2dParams::square(2, 2);
        ceil.ceil_mode = true;  // 11 wide: a sixth window over the last column
        b.output("ceil", b.max_pool2d(x, ceil));
        Pool2dParams dilated = Pool2dParams::square(2, 1);
        dilated.dilation[0] = dilated.dilation[1] = 2;
        b.output("dilated", b.max_pool2d(x, dilated));
        return b.build();
      },
      {input({2, 3, 10, 11}, 4)});
}

// Dilated windows over padding, with the maxima on the edges: a padded tap that XNNPACK mapped onto
// an edge pixel outside the window would show here.
TEST(XnnpackOpsTest, MaxPoolDilatedOverPaddingWithMaximaOnTheEdges) {
  std::vector<float> v(2 * 7 * 8, -1.0f);
  for (int c = 0; c < 2; ++c) {
    for (int w = 0; w < 8; ++w) v[(c * 7 + 0) * 8 + w] = 5.0f + static_cast<float>(w), v[(c * 7 + 6) * 8 + w] = 7.0f;
    for (int h = 0; h < 7; ++h) v[(c * 7 + h) * 8 + 0] = 9.0f, v[(c * 7 + h) * 8 + 7] = 3.0f + static_cast<float>(h);
  }
  ExpectMatchesReference(
      [] {
        GraphBuilder b(21);
        ValueId x = b.input("x", ScalarType::F32, {1, 2, 7, 8});
        Pool2dParams p = Pool2dParams::square(3, 1);
        p.dilation[0] = p.dilation[1] = 2;
        p.padding[0] = p.padding[1] = p.padding[2] = p.padding[3] = 1;
        b.output("padded", b.max_pool2d(x, p));
        Pool2dParams ceil = Pool2dParams::square(2, 2);
        ceil.dilation[0] = ceil.dilation[1] = 2;
        ceil.padding[0] = ceil.padding[1] = 1;
        ceil.ceil_mode = true;
        b.output("ceil", b.max_pool2d(x, ceil));
        return b.build();
      },
      {testing::f32_tensor({1, 2, 7, 8}, v)});
}

TEST(XnnpackOpsTest, AvgPoolCountIncludePadBothWays) {
  ExpectMatchesReference(
      [] {
        GraphBuilder b(7);
        ValueId x = b.input("x", ScalarType::F32, {1, 5, 9, 8});
        Pool2dParams p = Pool2dParams::square(3, 2);
        p.padding[0] = 1, p.padding[1] = 0, p.padding[2] = 1, p.padding[3] = 1;
        b.output("excluded", b.avg_pool2d(x, p));
        p.count_include_pad = true;
        b.output("included", b.avg_pool2d(x, p));
        Pool2dParams ceil = Pool2dParams::square(2, 2);
        ceil.ceil_mode = true;  // adds no window here: 3 rows, 4 columns either way (so it is accepted)
        ceil.kernel[0] = 3, ceil.stride[0] = 3;
        b.output("ceil_no_change", b.avg_pool2d(x, ceil));
        return b.build();
      },
      {input({1, 5, 9, 8}, 5)});
}

TEST(XnnpackOpsTest, ElementwiseBroadcastingOnImagesAndPlainTensors) {
  ExpectMatchesReference(
      [] {
        GraphBuilder b(8);
        ValueId x = b.input("x", ScalarType::F32, {2, 3, 4, 5});
        ValueId y = b.input("y", ScalarType::F32, {2, 3, 4, 5});
        ValueId v = b.input("v", ScalarType::F32, {3, 7});
        std::vector<float> per_channel = {0.5f, -1.25f, 2.0f};
        std::vector<float> grid(3 * 4 * 5);
        for (size_t i = 0; i < grid.size(); ++i) grid[i] = 1.5f + 0.01f * static_cast<float>(i);
        ValueId c = b.constant_f32("c", {3, 1, 1}, per_channel);      // per channel, rank 3
        ValueId g = b.constant_f32("g", {1, 3, 4, 5}, grid);           // a full image, permuted at init
        ValueId row = b.constant_f32("row", {7}, {1, 2, 3, 4, 5, 6, 7});
        ValueId gated = b.mul(b.sigmoid(y), x);                         // image * image (squeeze-excite)
        b.output("sum", b.add(x, y));
        b.output("scaled", b.mul(gated, c));
        b.output("shifted", b.sub(c, x));                               // constant first
        b.output("divided", b.div(x, g));
        b.output("plain", b.div(b.sub(v, row), row));                   // plain [3, 7] with [7]
        return b.build();
      },
      {input({2, 3, 4, 5}, 6), input({2, 3, 4, 5}, 7), input({3, 7}, 8)});
}

TEST(XnnpackOpsTest, Activations) {
  ExpectMatchesReference(
      [] {
        GraphBuilder b(9);
        ValueId x = b.input("x", ScalarType::F32, {1, 3, 5, 7});
        OpAttrs clip;
        clip.kind = AttrKind::Clip;
        clip.clip_min = -0.5f, clip.clip_max = 1.25f;
        b.output("relu", b.relu(x));
        b.output("clip", b.op(OpCode::Clip, {x}, clip));
        b.output("sigmoid", b.sigmoid(x));
        b.output("hardswish", b.op(OpCode::HardSwish, {x}, OpAttrs()));
        return b.build();
      },
      {input({1, 3, 5, 7}, 9)});
}

OpAttrs clip_attrs(float lo, float hi) {
  OpAttrs a;
  a.kind = AttrKind::Clip;
  a.clip_min = lo;
  a.clip_max = hi;
  return a;
}

// relu / clip fused into the conv (exporter passes/conv_clamp_fusion.h) become XNNPACK's
// output_min / output_max: GEMM, depthwise and strided depthwise convs, clamps that bite.
TEST(XnnpackOpsTest, Conv2dWithFusedClamps) {
  auto build = [] {
    GraphBuilder b(21);
    ValueId x = b.input("x", ScalarType::F32, {1, 4, 9, 8});
    ValueId h = b.relu(conv(b, x, 4, 8, 3, 3, Conv2dParams::same3x3()));
    h = b.op(OpCode::Clip, {conv(b, h, 8, 8, 3, 3, Conv2dParams::same3x3(/*groups=*/8))}, clip_attrs(0.0f, 0.75f));
    Conv2dParams s2 = Conv2dParams::same3x3(/*groups=*/8);
    s2.stride[0] = s2.stride[1] = 2;
    h = b.op(OpCode::Clip, {conv(b, h, 8, 8, 3, 3, s2)}, clip_attrs(-0.25f, 0.3f));
    b.output("y", b.relu(conv(b, h, 8, 5, 1, 1, Conv2dParams())));
    return b.build();
  };
  EXPECT_EQ(testing::export_program(build(), {"xnnpack", "portable"}).conv_clamps_fused, 4);
  ExpectMatchesReference(build, {input({1, 4, 9, 8}, 22)});
}

// NaN: XNNPACK's conv applies output_min / output_max with max / min instructions that drop a NaN
// (x86: maxps returns the bound), so a NaN sum comes out as output_min, -inf without a clamp (here,
// on x86 with this snapshot), where the reference keeps NaN. A separate clamp node does the same,
// so fusing changes nothing on XNNPACK: the fused and unfused exports give the same bytes. Finite
// and infinite inputs match the reference.
TEST(XnnpackOpsTest, FusedClampGivesTheUnfusedBytesForNaNAndInf) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> bounds[] = {{}, {0.0f, inf}, {0.0f, 6.0f}, {-1.0f, 6.0f}};
  for (const std::vector<float>& clamp : bounds) {
    auto build = [&clamp] {
      GraphBuilder b(40);
      ValueId x = b.input("x", ScalarType::F32, {1, 1, 1, 5});
      const ValueId w = b.constant_f32("w", {2, 1, 1, 1}, {1.0f, -1.0f});  // y = x, -x
      ValueId h = b.conv2d(x, w, exporter::kNoValue, Conv2dParams(), "c");
      if (!clamp.empty()) h = b.op(OpCode::Clip, {h}, clip_attrs(clamp[0], clamp[1]));
      b.output("y", h);
      return b.build();
    };
    const std::vector<HostTensor> in = {testing::f32_tensor({1, 1, 1, 5}, {std::nanf(""), 2.0f, inf, -inf, -0.5f})};
    auto rt = make_runtime();
    const std::vector<HostTensor> expected = run(testing::export_program(build()).program.bytes, *rt, in);
    std::vector<std::vector<HostTensor>> outputs;
    for (bool fuse : {false, true}) {
      exporter::ExportOptions options;
      options.manifest = &testing::builtin_manifest();
      options.backends = {"xnnpack", "portable"};
      options.fuse_conv_clamps = fuse;
      const exporter::ExportResult xnn = exporter::export_graph(build(), options);
      EXPECT_EQ(xnn.conv_clamps_fused, fuse && !clamp.empty() ? 1 : 0);
      EXPECT_EQ(xnn.partition.delegates.size(), 1u);
      outputs.push_back(run(xnn.program.bytes, *rt, in));
      ASSERT_EQ(outputs.back().size(), 1u);
    }
    EXPECT_EQ(outputs[1][0].bytes, outputs[0][0].bytes);
    const std::vector<float> got = outputs[1][0].to_f32(), want = expected[0].to_f32();
    ASSERT_EQ(got.size(), 10u);
    for (size_t i = 0; i < got.size(); ++i) {
      if (i % 5 == 0) {  // the NaN column: the reference keeps it
        EXPECT_TRUE(std::isnan(want[i]));
        continue;
      }
      EXPECT_EQ(got[i], want[i]) << "element " << i;
    }
  }
}

TEST(XnnpackOpsTest, GlobalPoolFlattenLinearSoftmax) {
  ExpectMatchesReference(
      [] {
        GraphBuilder b(10);
        ValueId x = b.input("x", ScalarType::F32, {3, 11, 6, 5});
        ValueId h = b.global_avg_pool2d(x);
        h = b.reshape(h, {3, 11});
        const ValueId w = b.random_uniform("fc.w", {13, 11}, -0.5f, 0.5f);
        const ValueId bias = b.random_uniform("fc.b", {13}, -0.5f, 0.5f);
        h = b.linear(h, w, bias);
        const ValueId w2 = b.random_uniform("fc2.w", {6, 13}, -0.5f, 0.5f);
        b.output("logits", b.linear(h, w2));
        b.output("probs", b.softmax(h, -1));
        return b.build();
      },
      {input({3, 11, 6, 5}, 10)});
}

// The cnn example (conv, relu, max pool, depthwise + pointwise conv, global pool, flatten, linear,
// softmax): exported for xnnpack it is one delegate; the portable export retargeted with
// LoadOptions::backends runs whole on xnnpack. Both match the reference.
TEST(XnnpackEndToEndTest, CnnExampleDelegatedAndRetargeted) {
  ExpectMatchesReference([] { return exporter::build_cnn_example(1); }, {input({1, 3, 32, 32}, 11)});
  auto rt = make_runtime();
  const std::vector<uint8_t>& portable = testing::example("cnn").program.bytes;
  const std::vector<HostTensor> in = {input({1, 3, 32, 32}, 12)};
  const std::vector<HostTensor> expected = run(portable, *rt, in);
  const char* const order[] = {"xnnpack", "portable"};
  LoadOptions options;
  options.backends = Span<const char* const>(order, 2);
  LoadedMethod lm(portable, rt->context, options);
  ASSERT_TRUE(lm.ok()) << lm.ctx().message;
  EXPECT_STREQ(lm.method().instruction_backend(0), "xnnpack (whole method)");
  const std::vector<HostTensor> actual = testing::run_method(lm.method(), in);
  ASSERT_EQ(actual.size(), 1u);
  ExpectAllClose(actual[0], expected[0], kTol);
}

// Ops the manifest entry lacks (tanh here) stay on portable; the runs around them become delegates.
TEST(XnnpackRefusalTest, UnsupportedOpsLandOnPortable) {
  auto build = [] {
    GraphBuilder b(13);
    ValueId x = b.input("x", ScalarType::F32, {1, 2, 6, 6});
    ValueId h = b.relu(conv(b, x, 2, 4, 3, 3, Conv2dParams::same3x3()));
    h = b.tanh(h);
    b.output("y", b.max_pool2d(conv(b, h, 4, 4, 1, 1, Conv2dParams()), Pool2dParams::square(2, 2)));
    return b.build();
  };
  const exporter::ExportResult xnn = testing::export_program(build(), {"xnnpack", "portable"});
  // The relu is the first conv's output clamp (passes/conv_clamp_fusion.h).
  EXPECT_EQ(xnn.partition.node_backend, (std::vector<std::string>{"xnnpack", "portable", "xnnpack", "xnnpack"}));
  EXPECT_EQ(xnn.partition.delegates.size(), 2u);
  const std::vector<HostTensor> in = {input({1, 2, 6, 6}, 14)};
  auto rt = make_runtime();
  const std::vector<HostTensor> expected = run(testing::export_program(build()).program.bytes, *rt, in);
  const std::vector<HostTensor> actual = run(xnn.program.bytes, *rt, in);
  ASSERT_EQ(actual.size(), 1u);
  ExpectAllClose(actual[0], expected[0], kTol);
}

// What a kernel key cannot say (attributes, shapes), accepts() refuses: Program::load gives the
// delegate to the portable kernels (fallback), names the reason, and the results are the reference's.
// init(), called directly, refuses the same graph with NotSupported.
void ExpectFallsBackToPortable(const std::function<Graph()>& build, const std::vector<HostTensor>& inputs,
                               const char* reason) {
  SCOPED_TRACE(reason);
  const exporter::ExportResult xnn = testing::export_program(build(), {"xnnpack", "portable"});
  ASSERT_EQ(xnn.partition.delegates.size(), 1u) << "the manifest takes the ops: one xnnpack delegate";
  auto rt = make_runtime();
  const std::vector<HostTensor> expected = run(testing::export_program(build()).program.bytes, *rt, inputs);
  LoadedMethod lm(xnn.program.bytes, rt->context);
  ASSERT_TRUE(lm.ok()) << lm.ctx().message;
  ASSERT_EQ(lm.method().meta().delegate_count(), 1u);
  EXPECT_STREQ(lm.method().meta().delegate(0)->runs_on, "portable");
  EXPECT_NE(std::strstr(lm.method().meta().delegate(0)->reason, reason), nullptr)
      << lm.method().meta().delegate(0)->reason;
  const std::vector<HostTensor> actual = testing::run_method(lm.method(), inputs);
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t k = 0; k < actual.size(); ++k) ExpectAllClose(actual[k], expected[k], kTol);

  // The backend itself, asked directly.
  LoadedProgram lp(xnn.program.bytes, rt->context);
  ASSERT_TRUE(lp.ok()) << lp.ctx().message;
  const fb::Delegate& del = *lp.program().flatbuffer().methods()->Get(0)->delegates()->Get(0);
  const GraphView graph(del.payload_nested_root(), lp.program().segments());
  const Backend& backend = *rt->backends->find("xnnpack");
  char why[160] = {0};
  EXPECT_FALSE(backend.accepts(rt->context, graph, why, sizeof(why)));
  EXPECT_NE(std::strstr(why, reason), nullptr) << why;
  ErrorContext error;
  BackendInitContext ctx;
  ctx.runtime = &rt->context;
  ctx.error = &error;
  EXPECT_FALSE(backend.init(ctx, graph, Span<const CompileSpec>()).is_ok());
  EXPECT_EQ(error.code, Error::NotSupported);
  EXPECT_NE(std::strstr(error.message, reason), nullptr) << error.message;
}

TEST(XnnpackRefusalTest, AttributesXnnpackComputesDifferentlyFallBackToPortable) {
  ExpectFallsBackToPortable(
      [] {
        GraphBuilder b(15);
        Pool2dParams p = Pool2dParams::square(2, 1);
        p.dilation[0] = p.dilation[1] = 2;
        b.output("y", b.avg_pool2d(b.input("x", ScalarType::F32, {1, 2, 6, 6}), p));
        return b.build();
      },
      {input({1, 2, 6, 6}, 30)}, "instruction 0 (avg_pool2d): dilated average pool");
  ExpectFallsBackToPortable(
      [] {
        GraphBuilder b(16);
        Pool2dParams p = Pool2dParams::square(2, 2);
        p.ceil_mode = true;
        b.output("y", b.avg_pool2d(b.input("x", ScalarType::F32, {1, 2, 5, 5}), p));
        return b.build();
      },
      {input({1, 2, 5, 5}, 31)}, "ceil_mode adds a window");
  ExpectFallsBackToPortable(
      [] {  // flattening an NHWC image with H * W > 1 would reorder it
        GraphBuilder b(17);
        ValueId x = b.input("x", ScalarType::F32, {1, 2, 3, 3});
        b.output("y", b.reshape(b.relu(x), {1, 18}));
        return b.build();
      },
      {input({1, 2, 3, 3}, 32)}, "instruction 1 (reshape): reshape of an image with H * W > 1");
  ExpectFallsBackToPortable(
      [] {
        GraphBuilder b(18);
        ValueId x = b.input("x", ScalarType::F32, {1, 2, 3, 4});
        b.output("y", b.softmax(x, 1));
        return b.build();
      },
      {input({1, 2, 3, 4}, 33)}, "softmax over an axis other than the last");
  ExpectFallsBackToPortable(  // a clip fused into the conv whose bounds are equal: XNNPACK needs min < max
      [] {
        GraphBuilder b(19);
        ValueId x = b.input("x", ScalarType::F32, {1, 2, 5, 5});
        b.output("y", b.op(OpCode::Clip, {conv(b, x, 2, 3, 3, 3, Conv2dParams::same3x3())}, clip_attrs(0.5f, 0.5f)));
        return b.build();
      },
      {input({1, 2, 5, 5}, 35)}, "instruction 0 (conv2d): an output clamp with min == max");
  ExpectFallsBackToPortable(  // XNNPACK's own define call rejects a one-tap window
      [] {
        GraphBuilder b(20);
        b.output("y", b.max_pool2d(b.input("x", ScalarType::F32, {1, 2, 4, 4}), Pool2dParams::square(1, 2)));
        return b.build();
      },
      {input({1, 2, 4, 4}, 34)}, "a 1x1 pooling window");
}

// Without a portable fallback the refusal is a load error naming the reason.
TEST(XnnpackRefusalTest, RefusedGraphWithoutFallbackIsALoadError) {
  const exporter::ExportResult xnn = testing::export_program(
      [] {
        GraphBuilder b(19);
        b.symbol("batch", 1, 4);
        ValueId x = b.input("x", ScalarType::F32, {DimSpec::sym("batch"), 2, 5, 5});
        b.output("y", b.relu(x));
        return b.build();
      }(),
      {"xnnpack", "portable"});
  auto rt = make_runtime();
  LoadOptions options;
  options.fallback = Fallback::Fail;
  LoadedMethod lm(xnn.program.bytes, rt->context, options);
  ASSERT_FALSE(lm.ok());
  EXPECT_EQ(lm.ctx().code, Error::BackendUnavailable);
  EXPECT_NE(std::strstr(lm.ctx().message, "symbolic dim 0"), nullptr) << lm.ctx().message;
}

// A failed XNNPACK call becomes a Status naming the call, where, and the xnn_status.
TEST(XnnpackErrorTest, XnnpackFailuresNameTheStatus) {
  ErrorContext e;
  Status s = backends::xnnpack::xnn_failure(&e, xnn_status_invalid_parameter, "xnn_define_max_pooling_2d",
                                            "instruction 0 (max_pool2d)");
  EXPECT_EQ(s.code(), Error::NotSupported);
  EXPECT_STREQ(e.message,
               "xnnpack: instruction 0 (max_pool2d): xnn_define_max_pooling_2d failed: xnn_status_invalid_parameter");
  e = ErrorContext();
  s = backends::xnnpack::xnn_failure(&e, xnn_status_out_of_memory, "xnn_create_runtime_v2", "init");
  EXPECT_EQ(s.code(), Error::OutOfMemory);
  e = ErrorContext();
  s = backends::xnnpack::xnn_failure(&e, xnn_status_uninitialized, "xnn_setup_runtime", "init");
  EXPECT_EQ(s.code(), Error::BackendFailed);
  EXPECT_NE(std::strstr(e.message, "xnn_status_uninitialized"), nullptr) << e.message;
}

// Calls the backend directly with the cnn example's delegate graph: an unknown compile spec, and an
// input of the wrong shape at execute().
TEST(XnnpackErrorTest, UnknownCompileSpecAndBadInputShape) {
  const exporter::ExportResult xnn = testing::export_program(exporter::build_cnn_example(1), {"xnnpack", "portable"});
  auto rt = make_runtime();
  LoadedProgram lp(xnn.program.bytes, rt->context);
  ASSERT_TRUE(lp.ok()) << lp.ctx().message;
  const fb::Delegate& del = *lp.program().flatbuffer().methods()->Get(0)->delegates()->Get(0);
  const GraphView graph(del.payload_nested_root(), lp.program().segments());
  const Backend& backend = *rt->backends->find("xnnpack");

  ErrorContext error;
  BackendInitContext ctx;
  ctx.runtime = &rt->context;
  ctx.error = &error;
  const uint8_t one = 1;
  const CompileSpec spec{"threads", Span<const uint8_t>(&one, 1)};
  Result<MemoryRequirements> planned = backend.plan_memory(ctx, graph, Span<const CompileSpec>(&spec, 1));
  ASSERT_FALSE(planned.is_ok());
  EXPECT_EQ(error.code, Error::NotSupported);
  EXPECT_NE(std::strstr(error.message, "unknown compile spec 'threads'"), nullptr) << error.message;

  error = ErrorContext();
  Result<DelegateHandle*> handle = backend.init(ctx, graph, Span<const CompileSpec>());
  ASSERT_TRUE(handle.is_ok()) << error.message;
  std::vector<float> image(1 * 3 * 32 * 31), probs(10);
  TensorView in;
  in.data = image.data();
  in.dtype = ScalarType::F32;
  in.rank = 4;
  in.dims[0] = 1, in.dims[1] = 3, in.dims[2] = 32, in.dims[3] = 31;
  TensorView out;
  out.data = probs.data();
  out.dtype = ScalarType::F32;
  out.rank = 2;
  out.dims[0] = 1, out.dims[1] = 10;
  BackendExecuteContext exec;
  exec.error = &error;
  Status s = backend.execute(exec, *handle, Span<const TensorView>(&in, 1), Span<TensorView>(&out, 1));
  EXPECT_EQ(s.code(), Error::InvalidArgument);
  EXPECT_NE(std::strstr(error.message, "input 0 is f32 [1, 3, 32, 31] in host memory; the delegate was built for "
                                       "f32 [1, 3, 32, 32]"),
            nullptr)
      << error.message;
  backend.destroy(*handle);
}

}  // namespace
}  // namespace ember
