#include "exporter/passes/evaluate.h"

#include <gtest/gtest.h>

#include <cmath>

#include "exporter/importers/builder/examples.h"
#include "exporter/importers/builder/graph_builder.h"
#include "exporter/passes/constant_folding.h"

namespace ember::exporter {
namespace {

TEST(EvaluateTest, LinearMatchesHandComputation) {
  GraphBuilder b;
  ValueId x = b.input("x", ScalarType::F32, {2, 3});
  ValueId w = b.constant_f32("w", {2, 3}, {1, 2, 3, 4, 5, 6});
  ValueId bias = b.constant_f32("b", {2}, {0.5f, -1});
  b.output("y", b.linear(x, w, bias));
  const Graph g = b.build();
  const auto out = evaluate(g, {HostTensor::from_f32({2, 3}, {1, 0, -1, 2, 1, 0})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].dims, (std::vector<int64_t>{2, 2}));
  const std::vector<float> y = out[0].to_f32();
  EXPECT_FLOAT_EQ(y[0], 1 - 3 + 0.5f);
  EXPECT_FLOAT_EQ(y[1], 4 - 6 - 1);
  EXPECT_FLOAT_EQ(y[2], 2 + 2 + 0.5f);
  EXPECT_FLOAT_EQ(y[3], 8 + 5 - 1);
}

TEST(EvaluateTest, MlpWithSymbolicBatchGivesDistributions) {
  const Graph g = build_mlp_example(1);
  for (int64_t batch : {1, 3, 8}) {
    std::vector<float> x(static_cast<size_t>(batch) * 64);
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.1f * static_cast<float>(i));
    const auto out = evaluate(g, {HostTensor::from_f32({batch, 64}, x)});
    ASSERT_EQ(out[0].dims, (std::vector<int64_t>{batch, 10}));
    const std::vector<float> y = out[0].to_f32();
    for (int64_t r = 0; r < batch; ++r) {
      float sum = 0;
      for (int c = 0; c < 10; ++c) sum += y[static_cast<size_t>(r * 10 + c)];
      EXPECT_NEAR(sum, 1.0f, 1e-5f);
    }
  }
  EXPECT_THROW(evaluate(g, {HostTensor::from_f32({9, 64}, std::vector<float>(9 * 64))}), ExportError);
}

TEST(EvaluateTest, CnnRuns) {
  const Graph g = build_cnn_example(1);
  std::vector<float> img(3 * 32 * 32);
  for (size_t i = 0; i < img.size(); ++i) img[i] = static_cast<float>((i * 7) % 13) / 13.0f;
  const auto out = evaluate(g, {HostTensor::from_f32({1, 3, 32, 32}, img)});
  ASSERT_EQ(out[0].dims, (std::vector<int64_t>{1, 10}));
  float sum = 0;
  for (float v : out[0].to_f32()) sum += v;
  EXPECT_NEAR(sum, 1.0f, 1e-5f);
}

TEST(ConstantFoldingTest, FoldsConstantSubgraphsAndKeepsResults) {
  GraphBuilder b(3);
  ValueId x = b.input("x", ScalarType::F32, {2, 8});
  ValueId w = b.random_uniform("w", {8, 8}, -1, 1);
  ValueId w_t = b.transpose(w, {1, 0}, "w_t");               // foldable
  ValueId scale = b.random_uniform("scale", {8}, 0.5f, 1.5f);
  ValueId s = b.sigmoid(scale, "sig_scale");                  // foldable
  ValueId h = b.linear(x, w_t, kNoValue, "fc");
  h = b.mul(h, s, "scaled");
  b.output("y", b.relu(h, "relu"));
  Graph g = b.build();
  const std::vector<HostTensor> in{HostTensor::from_f32({2, 8}, {1, 2, 3, 4, 5, 6, 7, 8, -1, -2, -3, -4, 5, 6, 7, 8})};
  const auto before = evaluate(g, in);
  Graph folded = g;
  const FoldStats stats = fold_constants(folded);
  EXPECT_EQ(stats.folded_nodes, 2);
  EXPECT_EQ(stats.removed_constants, 2);  // w and scale are no longer read
  EXPECT_EQ(folded.nodes.size(), 3u);
  folded.check_structure();
  const auto after = evaluate(folded, in);
  EXPECT_EQ(before[0].bytes, after[0].bytes);  // same kernels, same order: bitwise equal
}

TEST(ConstantFoldingTest, DeadCodeIsRemoved) {
  GraphBuilder b;
  ValueId x = b.input("x", ScalarType::F32, {4});
  b.relu(x, "unused");
  b.output("y", b.sigmoid(x, "used"));
  Graph g = b.build();
  EXPECT_EQ(remove_dead_code(g), 1);
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].name, "used");
  g.check_structure();
}

}  // namespace
}  // namespace ember::exporter
