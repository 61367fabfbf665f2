// passes/conv_clamp_fusion: which relu / clip nodes fold into their conv2d, the bounds the conv gets,
// results bitwise equal to the unfused graph's (reference evaluator, NaN and ±inf inputs included),
// and the pipeline's report, feature bit and serialized Conv2dAttrs.
#include "exporter/passes/conv_clamp_fusion.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "exporter/importers/builder/examples.h"
#include "exporter/importers/builder/graph_builder.h"
#include "exporter/passes/evaluate.h"
#include "exporter/pipeline.h"
#include "runtime/program/program_file.h"
#include "schema/program_generated.h"
#include "tests/exporter/test_util.h"

namespace ember::exporter {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

ValueId Conv(GraphBuilder& b, ValueId x, int64_t in_c, int64_t out_c, const std::string& name) {
  const ValueId w = b.random_uniform(name + ".w", {out_c, in_c, 3, 3}, -0.5f, 0.5f);
  const ValueId bias = b.random_uniform(name + ".b", {out_c}, -0.5f, 0.5f);
  return b.conv2d(x, w, bias, Conv2dParams::same3x3(), name);
}

ValueId Clip(GraphBuilder& b, ValueId x, float lo, float hi, const std::string& name) {
  OpAttrs a;
  a.kind = AttrKind::Clip;
  a.clip_min = lo;
  a.clip_max = hi;
  return b.op(OpCode::Clip, {x}, a, name);
}

std::string Ops(const Graph& g) {
  std::string s;
  for (const Node& n : g.nodes) {
    if (!s.empty()) s += ' ';
    s += to_string(n.op);
  }
  return s;
}

// An input with NaN, +inf and -inf pixels besides random values in [-3, 3].
HostTensor Image(int64_t c, int64_t h, int64_t w) {
  std::vector<float> v(size_t(c * h * w));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(float(i) * 0.37f) * 3.0f;
  v[5] = std::nanf("");
  v[v.size() / 2] = kInf;
  v[v.size() - 3] = -kInf;
  return HostTensor::from_f32({1, c, h, w}, v);
}

// The fused graph computes, byte for byte, what the unfused one does (NaN where it has NaN).
void ExpectSameOutputs(const Graph& fused, const Graph& plain, const HostTensor& input) {
  const std::vector<HostTensor> a = evaluate(fused, {input}), b = evaluate(plain, {input});
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].bytes.size(), b[i].bytes.size());
    EXPECT_EQ(std::memcmp(a[i].bytes.data(), b[i].bytes.data(), a[i].bytes.size()), 0) << "output " << i;
  }
}

TEST(ConvClampFusionTest, ReluAndClipFoldIntoTheirConv) {
  GraphBuilder b(7);
  const ValueId x = b.input("x", ScalarType::F32, {1, 3, 6, 6});
  ValueId h = b.relu(Conv(b, x, 3, 4, "c1"), "relu1");
  h = Clip(b, Conv(b, h, 4, 4, "c2"), 0.0f, 6.0f, "relu6");
  h = Clip(b, Conv(b, h, 4, 2, "c3"), -0.5f, 0.25f, "clip3");
  b.output("y", h);  // the last clip's output is the graph output: it moves to c3's output
  const Graph plain = b.build();
  Graph g = plain;
  EXPECT_EQ(fuse_conv_clamps(g), 3);
  g.check_structure();
  EXPECT_EQ(Ops(g), "conv2d conv2d conv2d");
  const float expected[3][2] = {{0.0f, kInf}, {0.0f, 6.0f}, {-0.5f, 0.25f}};
  for (size_t n = 0; n < 3; ++n) {
    EXPECT_EQ(g.nodes[n].attrs.out_min, expected[n][0]) << g.nodes[n].name;
    EXPECT_EQ(g.nodes[n].attrs.out_max, expected[n][1]) << g.nodes[n].name;
  }
  ASSERT_EQ(g.outputs.size(), 1u);
  EXPECT_EQ(g.outputs[0].name, "y");
  EXPECT_EQ(g.outputs[0].value, g.nodes[2].outputs[0]);
  ExpectSameOutputs(g, plain, Image(3, 6, 6));
  EXPECT_EQ(fuse_conv_clamps(g), 0);  // nothing left to fuse
}

TEST(ConvClampFusionTest, ChainsIntersectTheirBounds) {
  GraphBuilder b(8);
  const ValueId x = b.input("x", ScalarType::F32, {1, 2, 5, 5});
  // relu then clip(-1, 4): [0, 4]; then clip(0.5, 9): [0.5, 4].
  ValueId h = Clip(b, Clip(b, b.relu(Conv(b, x, 2, 3, "c1")), -1.0f, 4.0f, "a"), 0.5f, 9.0f, "b");
  // clip(0, 1) then clip(2, 3): the second range misses the first ([2, 1] is no clamp the
  // validator takes), so only the first fuses and the second stays a clip (which yields 2).
  ValueId k = Clip(b, Clip(b, Conv(b, x, 2, 3, "c2"), 0.0f, 1.0f, "c"), 2.0f, 3.0f, "d");
  b.output("h", h);
  b.output("k", k);
  const Graph plain = b.build();
  Graph g = plain;
  EXPECT_EQ(fuse_conv_clamps(g), 4);
  g.check_structure();
  EXPECT_EQ(Ops(g), "conv2d conv2d clip");
  EXPECT_EQ(g.nodes[0].attrs.out_min, 0.5f);
  EXPECT_EQ(g.nodes[0].attrs.out_max, 4.0f);
  EXPECT_EQ(g.nodes[1].attrs.out_min, 0.0f);
  EXPECT_EQ(g.nodes[1].attrs.out_max, 1.0f);
  EXPECT_EQ(g.nodes[2].name, "d");
  ExpectSameOutputs(g, plain, Image(2, 5, 5));
}

TEST(ConvClampFusionTest, NotFusedWhenTheConvOutputHasAnotherReader) {
  GraphBuilder b(9);
  const ValueId x = b.input("x", ScalarType::F32, {1, 2, 5, 5});
  const ValueId c = Conv(b, x, 2, 2, "c");
  b.output("y", b.add(c, b.relu(c, "relu"), "sum"));  // the pre-relu values are still needed
  Graph g = b.build();
  EXPECT_EQ(fuse_conv_clamps(g), 0);
  EXPECT_EQ(Ops(g), "conv2d relu add");
  EXPECT_FALSE(conv2d_has_clamp(g.nodes[0].attrs));
  // Two clips of one conv: two readers as well.
  GraphBuilder b2(9);
  const ValueId x2 = b2.input("x", ScalarType::F32, {1, 2, 5, 5});
  const ValueId c2 = Conv(b2, x2, 2, 2, "c");
  b2.output("lo", Clip(b2, c2, -1.0f, 0.0f, "lo"));
  b2.output("hi", Clip(b2, c2, 0.0f, 1.0f, "hi"));
  Graph g2 = b2.build();
  EXPECT_EQ(fuse_conv_clamps(g2), 0);
  EXPECT_EQ(Ops(g2), "conv2d clip clip");
}

TEST(ConvClampFusionTest, NotFusedWhenTheConvOutputIsAGraphOutput) {
  GraphBuilder b(10);
  const ValueId x = b.input("x", ScalarType::F32, {1, 2, 5, 5});
  const ValueId c = Conv(b, x, 2, 2, "c");
  b.output("features", c);
  b.output("y", b.relu(c, "relu"));
  Graph g = b.build();
  EXPECT_EQ(fuse_conv_clamps(g), 0);
  EXPECT_EQ(Ops(g), "conv2d relu");
}

// A clip's bounds are attributes in the IR (the ONNX importer refuses a Clip whose min / max input
// is not a constant), so the bounds the pass can see but not fuse are NaN and min > max.
TEST(ConvClampFusionTest, NotFusedForNaNOrInvertedBoundsOrOtherProducers) {
  GraphBuilder b(11);
  const ValueId x = b.input("x", ScalarType::F32, {1, 2, 5, 5});
  b.output("nan", Clip(b, Conv(b, x, 2, 2, "c1"), 0.0f, 1.0f, "nan"));
  b.output("inverted", Clip(b, Conv(b, x, 2, 2, "c2"), 2.0f, 1.0f, "inverted"));
  b.output("pool", b.relu(b.max_pool2d(x, Pool2dParams::square(2, 1)), "after_pool"));
  Graph g = b.build();
  g.nodes[1].attrs.clip_min = std::nanf("");  // the builder's shape check refuses NaN bounds
  EXPECT_EQ(fuse_conv_clamps(g), 0);
  EXPECT_EQ(Ops(g), "conv2d clip conv2d clip max_pool2d relu");
}

// The pipeline runs the pass by default and reports it; the file carries the clamp in Conv2dAttrs
// and the conv_clamp feature bit, and passes the runtime's validator. Off: the relus stay.
TEST(ConvClampFusionTest, PipelineReportsAndSerializesTheClamp) {
  for (bool fuse : {true, false}) {
    SCOPED_TRACE(fuse ? "fused" : "not fused");
    ExportOptions options;
    options.fuse_conv_clamps = fuse;
    const ExportResult r = export_graph(build_cnn_example(1), options);
    EXPECT_EQ(r.conv_clamps_fused, fuse ? 2 : 0);
    const std::string summary = format_summary(r);
    EXPECT_NE(summary.find("fusions: " + std::string(fuse ? "2" : "0") + " relu / clip into conv2d\n"),
              std::string::npos)
        << summary;
    EXPECT_EQ(summary.find(" relu x2") != std::string::npos, !fuse) << summary;
    EXPECT_EQ((r.program.required_features & kFeatureConvClamp) != 0, fuse);
    EXPECT_EQ(testing::validate_with_runtime(r.program.bytes), "");
    const std::vector<uint8_t>& file = r.program.bytes;
    FileHeader header;
    ErrorContext ctx;
    ASSERT_TRUE(decode_header(file.data(), file.size(), file.size(), true, &header, &ctx).is_ok()) << ctx.message;
    EXPECT_EQ(header.required_features, r.program.required_features);
    const fb::Program* program = fb::GetProgram(file.data() + header.flatbuffer_offset);
    std::vector<std::pair<float, float>> clamps;
    for (const fb::Instruction* ins : *program->methods()->Get(0)->graph()->instructions()) {
      const fb::KernelCall* call = ins->args_as_KernelCall();
      if (call == nullptr || call->op() != fb::OpCode::Conv2d) continue;
      clamps.emplace_back(call->attrs_as_Conv2dAttrs()->out_min(), call->attrs_as_Conv2dAttrs()->out_max());
    }
    // conv1 (-> relu1), dw2, pw2 (-> relu2).
    ASSERT_EQ(clamps.size(), 3u);
    EXPECT_EQ(clamps[0].first, fuse ? 0.0f : -kInf);
    EXPECT_EQ(clamps[0].second, kInf);
    EXPECT_EQ(clamps[1].first, -kInf);
    EXPECT_EQ(clamps[1].second, kInf);
    EXPECT_EQ(clamps[2].first, fuse ? 0.0f : -kInf);
    EXPECT_EQ(clamps[2].second, kInf);
  }
}

}  // namespace
}  // namespace ember::exporter
