#include "exporter/importers/builder/graph_builder.h"

#include <gtest/gtest.h>

#include <set>

#include "exporter/importers/builder/examples.h"

namespace ember::exporter {
namespace {

// Runs `fn`, expects an ExportError, returns its message.
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const ExportError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an ExportError";
  return "";
}

TEST(GraphBuilderTest, LinearShapeMismatchNamesOpNodeAndDims) {
  GraphBuilder b;
  ValueId x = b.input("x", ScalarType::F32, {4, 64});
  ValueId w = b.random_uniform("w", {128, 32}, -1, 1);
  const std::string msg = error_of([&] { b.linear(x, w, kNoValue, "fc_bad"); });
  EXPECT_NE(msg.find("linear"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'fc_bad'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("x: f32[4, 64]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("w: f32[128, 32]"), std::string::npos) << msg;
}

TEST(GraphBuilderTest, FailedOpLeavesBuilderUsable) {
  GraphBuilder b;
  ValueId x = b.input("x", ScalarType::F32, {2, 3});
  ValueId y = b.input("y", ScalarType::F32, {4, 5});
  const size_t values = b.graph().values.size();
  EXPECT_THROW(b.add(x, y, "bad_add"), ExportError);
  EXPECT_EQ(b.graph().values.size(), values);
  EXPECT_TRUE(b.graph().nodes.empty());
  b.output("z", b.relu(x, "bad_add"));  // the name is free again
  Graph g = b.build();
  EXPECT_EQ(g.nodes.size(), 1u);
}

TEST(GraphBuilderTest, BroadcastingAddInfersShape) {
  GraphBuilder b;
  ValueId x = b.input("x", ScalarType::F32, {2, 1, 5});
  ValueId c = b.random_uniform("c", {3, 1}, 0, 1);
  ValueId y = b.add(x, c);
  const Value& v = b.graph().values[static_cast<size_t>(y)];
  EXPECT_EQ(v.dtype, ScalarType::F32);
  ASSERT_EQ(v.dims.size(), 3u);
  EXPECT_EQ(v.dims[0].max, 2);
  EXPECT_EQ(v.dims[1].max, 3);
  EXPECT_EQ(v.dims[2].max, 5);
}

TEST(GraphBuilderTest, ErrorsForMisuse) {
  GraphBuilder b;
  b.symbol("batch", 1, 8);
  EXPECT_NE(error_of([&] { b.symbol("batch", 1, 8); }).find("declared twice"), std::string::npos);
  EXPECT_NE(error_of([&] { b.symbol("bad", 5, 2); }).find("0 <= min <= max"), std::string::npos);
  EXPECT_NE(error_of([&] { b.input("x", ScalarType::F32, {DimSpec::sym("seq"), 4}); }).find("'seq' is not declared"),
            std::string::npos);
  ValueId x = b.input("x", ScalarType::F32, {DimSpec::sym("batch"), 4});
  EXPECT_NE(error_of([&] { b.input("x", ScalarType::F32, {1}); }).find("exists"), std::string::npos);
  EXPECT_NE(error_of([&] { b.constant("c", ScalarType::F32, {2, 2}, std::vector<uint8_t>(15)); }).find("needs 16"),
            std::string::npos);
  EXPECT_NE(error_of([&] { b.output("y", x); }).find("is a graph input"), std::string::npos);
  ValueId w = b.random_uniform("w", {4, 4}, -1, 1);
  EXPECT_NE(error_of([&] { b.output("y", w); }).find("is a constant"), std::string::npos);
  EXPECT_NE(error_of([&] { b.linear(x, kNoValue); }).find("input 1 is required"), std::string::npos);
  EXPECT_NE(error_of([&] { b.relu(12345); }).find("not a value of this builder"), std::string::npos);
  ValueId h = b.relu(x, "r");
  EXPECT_NE(error_of([&] { b.relu(h, "r"); }).find("already used"), std::string::npos);
  EXPECT_NE(error_of([&] { b.symbol("late", 1, 2); }).find("after the first op"), std::string::npos);
  EXPECT_NE(error_of([&] { b.reshape(h, {DimSpec::sym("nope"), 4}); }).find("unknown symbol 'nope'"),
            std::string::npos);
  b.output("y", h);
  EXPECT_NE(error_of([&] { b.output("y2", h); }).find("already an output"), std::string::npos);
  EXPECT_NE(error_of([&] { b.output("y", b.sigmoid(h)); }).find("already used"), std::string::npos);
  EXPECT_NO_THROW(b.build());
  GraphBuilder empty;
  EXPECT_NE(error_of([&] { empty.build(); }).find("no outputs"), std::string::npos);
}

TEST(GraphBuilderTest, ConvAndPoolErrorsNameTheNode) {
  GraphBuilder b;
  ValueId x = b.input("img", ScalarType::F32, {1, 3, 8, 8});
  ValueId w = b.random_uniform("w", {8, 4, 3, 3}, -1, 1);  // C/groups = 4, input has 3 channels
  const std::string msg = error_of([&] { b.conv2d(x, w, kNoValue, Conv2dParams(), "conv_bad"); });
  EXPECT_NE(msg.find("conv2d 'conv_bad'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("img: f32[1, 3, 8, 8]"), std::string::npos) << msg;
}

TEST(GraphBuilderTest, EveryOpBuilds) {
  GraphBuilder b;
  ValueId x = b.input("x", ScalarType::F32, {2, 4, 6, 6});
  ValueId w = b.random_normal("w", {4, 4, 3, 3}, 0, 0.1f);
  ValueId h = b.conv2d(x, w, kNoValue, Conv2dParams::same3x3());
  h = b.max_pool2d(h, Pool2dParams::square(2, 2));                    // [2, 4, 3, 3]
  ValueId a = b.avg_pool2d(h, Pool2dParams::square(3, 1));            // [2, 4, 1, 1]
  ValueId g = b.global_avg_pool2d(h);                                 // [2, 4, 1, 1]
  ValueId s = b.sub(b.add(a, g), b.mul(a, g));
  s = b.div(s, b.random_uniform("d", {1}, 1, 2));
  ValueId r = b.reshape(s, {2, -1});                                  // [2, 4]
  r = b.gelu(b.silu(b.sigmoid(b.tanh(b.relu(r)))), GeluApprox::Tanh);
  ValueId t = b.transpose(r, {1, 0});                                 // [4, 2]
  ValueId m = b.matmul(r, t);                                         // [2, 2]
  ValueId c = b.concat({m, m, m}, 1);                                 // [2, 6]
  ValueId sl = b.slice(c, {1}, {1}, {5});                             // [2, 4]
  ValueId ln = b.layer_norm(sl, b.random_uniform("gamma", {4}, 0, 1), kNoValue, -1, 1e-5f);
  ValueId lin = b.linear(ln, b.random_uniform("lw", {3, 4}, -1, 1), b.random_uniform("lb", {3}, -1, 1));
  b.output("y", b.softmax(lin, 1));
  Graph graph = b.build();
  EXPECT_EQ(graph.nodes.size(), 21u);
  std::set<OpCode> ops;
  for (const Node& n : graph.nodes) ops.insert(n.op);
  EXPECT_EQ(ops.size(), 21u);
  const Value& y = graph.values[static_cast<size_t>(graph.outputs[0].value)];
  ASSERT_EQ(y.dims.size(), 2u);
  EXPECT_EQ(y.dims[0].max, 2);
  EXPECT_EQ(y.dims[1].max, 3);
}

TEST(GraphBuilderTest, SeededWeightsAreReproducible) {
  Graph a = build_mlp_example(7), b = build_mlp_example(7), c = build_mlp_example(8);
  ASSERT_EQ(a.values.size(), b.values.size());
  bool any_differs = false;
  for (size_t v = 0; v < a.values.size(); ++v) {
    if (!a.values[v].is_constant()) continue;
    EXPECT_EQ(*a.values[v].data, *b.values[v].data) << a.values[v].name;
    any_differs = any_differs || *a.values[v].data != *c.values[v].data;
  }
  EXPECT_TRUE(any_differs);
}

}  // namespace
}  // namespace ember::exporter
