#include "exporter/passes/shape_inference.h"

#include <gtest/gtest.h>

#include "exporter/importers/builder/graph_builder.h"

namespace ember::exporter {
namespace {

const Value& value(const GraphBuilder& b, ValueId id) { return b.graph().values[static_cast<size_t>(id)]; }

TEST(ShapeInferenceTest, SymbolFlowsThroughLinear) {
  GraphBuilder b;
  b.symbol("batch", 1, 8);
  ValueId x = b.input("x", ScalarType::F32, {DimSpec::sym("batch"), 64});
  ValueId y = b.linear(x, b.random_uniform("w", {128, 64}, -1, 1));
  const Value& v = value(b, y);
  ASSERT_EQ(v.dims.size(), 2u);
  EXPECT_EQ(v.dims[0], (Dim{8, 1}));
  EXPECT_EQ(v.dims[1], (Dim{128, 0}));
  EXPECT_EQ(b.graph().symbols.size(), 1u);
}

TEST(ShapeInferenceTest, SymbolsWithEqualBoundsAreToldApart) {
  GraphBuilder b;
  b.symbol("batch", 1, 8);
  b.symbol("seq", 1, 8);
  ValueId x = b.input("x", ScalarType::F32, {DimSpec::sym("batch"), DimSpec::sym("seq"), 32});
  ValueId y = b.matmul(x, b.random_uniform("w", {32, 16}, -1, 1));
  const Value& v = value(b, y);
  ASSERT_EQ(v.dims.size(), 3u);
  EXPECT_EQ(v.dims[0], (Dim{8, 1}));
  EXPECT_EQ(v.dims[1], (Dim{8, 2}));
  EXPECT_EQ(v.dims[2], (Dim{16, 0}));
  ValueId t = b.transpose(y, {1, 0, 2});
  EXPECT_EQ(value(b, t).dims[0], (Dim{8, 2}));
  EXPECT_EQ(value(b, t).dims[1], (Dim{8, 1}));
}

TEST(ShapeInferenceTest, DerivedSymbolForProductAndReuse) {
  GraphBuilder b;
  b.symbol("batch", 1, 4);
  b.symbol("seq", 2, 16);
  ValueId x = b.input("x", ScalarType::F32, {DimSpec::sym("batch"), DimSpec::sym("seq"), 32});
  ValueId flat = b.reshape(x, {-1, 32}, "flat");
  const Value& v = value(b, flat);
  ASSERT_EQ(v.dims.size(), 2u);
  ASSERT_EQ(b.graph().symbols.size(), 3u);
  const Symbol& derived = b.graph().symbols[2];
  EXPECT_EQ(derived.name, "flat.d0");
  EXPECT_TRUE(derived.derived);
  EXPECT_EQ(derived.min, 2);   // batch=1, seq=2
  EXPECT_EQ(derived.max, 64);  // batch=4, seq=16
  EXPECT_EQ(v.dims[0], (Dim{64, 3}));
  EXPECT_EQ(v.dims[1], (Dim{32, 0}));
  // An op that keeps the dim reuses the derived symbol instead of making another.
  ValueId r = b.relu(flat);
  EXPECT_EQ(value(b, r).dims[0], (Dim{64, 3}));
  EXPECT_EQ(b.graph().symbols.size(), 3u);
  // Reshape back through the declared symbols.
  ValueId back = b.reshape(r, {DimSpec::sym("batch"), DimSpec::sym("seq"), 32});
  EXPECT_EQ(value(b, back).dims[0], (Dim{4, 1}));
  EXPECT_EQ(value(b, back).dims[1], (Dim{16, 2}));
}

TEST(ShapeInferenceTest, DerivedSymbolForConvOutputAndConcat) {
  GraphBuilder b;
  b.symbol("h", 8, 32);
  ValueId x = b.input("img", ScalarType::F32, {1, 3, DimSpec::sym("h"), 16});
  ValueId y = b.conv2d(x, b.random_uniform("w", {4, 3, 3, 3}, -1, 1), kNoValue, Conv2dParams(), "conv");
  const Value& v = value(b, y);
  EXPECT_EQ(v.dims[0], (Dim{1, 0}));
  EXPECT_EQ(v.dims[1], (Dim{4, 0}));
  EXPECT_EQ(v.dims[3], (Dim{14, 0}));
  ASSERT_EQ(b.graph().symbols.size(), 2u);
  EXPECT_EQ(b.graph().symbols[1].name, "conv.d2");
  EXPECT_EQ(b.graph().symbols[1].min, 6);
  EXPECT_EQ(b.graph().symbols[1].max, 30);
  EXPECT_EQ(v.dims[2], (Dim{30, 2}));
  ValueId c = b.concat({x, x}, 2, "cat");
  EXPECT_EQ(value(b, c).dims[2].max, 64);
  EXPECT_EQ(b.graph().symbols.back().name, "cat.d2");
  EXPECT_EQ(b.graph().symbols.back().min, 16);
}

TEST(ShapeInferenceTest, FailureAtAnotherProbeNamesTheSymbolValues) {
  GraphBuilder b;
  b.symbol("h", 1, 32);
  ValueId x = b.input("img", ScalarType::F32, {1, 3, DimSpec::sym("h"), 16});
  try {
    b.conv2d(x, b.random_uniform("w", {4, 3, 3, 3}, -1, 1), kNoValue, Conv2dParams(), "conv");
    FAIL() << "expected an error: h=1 is smaller than the kernel";
  } catch (const ExportError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("conv2d 'conv'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("h=1"), std::string::npos) << msg;
  }
}

TEST(ShapeInferenceTest, InferShapesRecomputesAGraph) {
  GraphBuilder b;
  b.symbol("batch", 1, 4);
  b.symbol("seq", 2, 16);
  ValueId x = b.input("x", ScalarType::F32, {DimSpec::sym("batch"), DimSpec::sym("seq"), 32});
  ValueId flat = b.reshape(x, {-1, 32}, "flat");
  b.output("y", b.relu(b.linear(flat, b.random_uniform("w", {8, 32}, -1, 1))));
  Graph built = b.build();
  Graph g = built;
  for (Value& v : g.values) {
    if (v.producer >= 0) v.dims.clear();
  }
  g.symbols.resize(2);
  infer_shapes(g);
  ASSERT_EQ(g.symbols.size(), built.symbols.size());
  for (size_t i = 0; i < g.values.size(); ++i) EXPECT_EQ(g.values[i].dims, built.values[i].dims) << g.values[i].name;
}

}  // namespace
}  // namespace ember::exporter
