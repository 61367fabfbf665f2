// The run-time index checks of gather and gather_elements (issue 17): built with GraphBuilder,
// exported, loaded and run by the GraphRunner on the builtin kernels. In-range indices (negative ones
// wrap once) match the exporter's reference evaluation; an index outside [-dim, dim) fails execute()
// with InvalidArgument naming the op, the index, its position and the bound (before, such a gather
// silently gave a zero row); the method runs again afterwards. The exporter's evaluator refuses the
// same indices with InputValueError.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "exporter/importers/builder/graph_builder.h"
#include "exporter/passes/evaluate.h"
#include "tests/common/program_util.h"
#include "tests/common/test_util.h"

namespace ember {
namespace {

using exporter::GraphBuilder;
using exporter::HostTensor;
using exporter::ValueId;
using testing::f32_tensor;
using testing::i32_tensor;

// data [4, 3] (input), idx [3] i32 -> gather(data, idx, axis 0);
// data, idx2 [2, 3] i32 -> gather_elements(data, idx2, axis 0).
exporter::Graph index_graph() {
  GraphBuilder b;
  const ValueId data = b.input("data", ScalarType::F32, {4, 3});
  const ValueId idx = b.input("idx", ScalarType::I32, {3});
  const ValueId idx2 = b.input("idx2", ScalarType::I32, {2, 3});
  OpAttrs a;
  a.axis = 0;
  b.output("rows", b.op(OpCode::Gather, {data, idx}, a));
  b.output("elements", b.op(OpCode::GatherElements, {data, idx2}, a));
  return b.build();
}

std::vector<float> data_values() {
  std::vector<float> v(12);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) + 0.5f;
  return v;
}

TEST(IndexCheck, InRangeIndicesMatchTheReferenceEvaluation) {
  const exporter::Graph graph = index_graph();
  const std::vector<HostTensor> inputs = {f32_tensor({4, 3}, data_values()), i32_tensor({3}, {3, -4, 1}),
                                          i32_tensor({2, 3}, {0, -1, 2, 3, 1, -4})};
  const std::vector<HostTensor> expected = exporter::evaluate(graph, inputs);
  testing::Runtime rt;
  testing::LoadedMethod lm(testing::export_program(graph).program.bytes, rt.context);
  ASSERT_TRUE(lm.ok()) << lm.ctx().message;
  const std::vector<HostTensor> actual = testing::run_method(lm.method(), inputs);
  ASSERT_EQ(actual.size(), 2u);
  testing::ExpectBitwiseEqual(actual[0], expected[0]);
  testing::ExpectBitwiseEqual(actual[1], expected[1]);
  // Spot values: rows 3, 0 (= -4 + 4), 1; elements data[0][0], data[3][1] (-1 + 4), data[2][2].
  testing::ExpectBitwiseEqual(actual[0], f32_tensor({3, 3}, {9.5f, 10.5f, 11.5f, 0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f}));
  testing::ExpectBitwiseEqual(actual[1], f32_tensor({2, 3}, {0.5f, 10.5f, 8.5f, 9.5f, 4.5f, 2.5f}));
}

TEST(IndexCheck, OutOfRangeIndicesAreInvalidArgumentAtRunTime) {
  testing::Runtime rt;
  testing::LoadedMethod lm(testing::export_program(index_graph()).program.bytes, rt.context);
  ASSERT_TRUE(lm.ok()) << lm.ctx().message;
  struct Case {
    std::vector<int32_t> idx, idx2;
    const char* message;
  } cases[] = {
      {{0, 4, 1}, {0, 0, 0, 0, 0, 0}, "gather: index 4 at indices[1] is outside [-4, 4) (axis 0 of data [4, 3])"},
      {{0, 1, -5}, {0, 0, 0, 0, 0, 0}, "gather: index -5 at indices[2] is outside [-4, 4)"},
      {{0, 1, 2}, {0, 0, 0, 0, 7, 0}, "gather_elements: index 7 at indices[1, 1] is outside [-4, 4) (axis 0 of data [4, 3])"},
      {{0, 1, 2}, {-9, 0, 0, 0, 0, 0}, "gather_elements: index -9 at indices[0, 0] is outside [-4, 4)"},
  };
  for (const Case& c : cases) {
    const HostTensor data = f32_tensor({4, 3}, data_values());
    const HostTensor idx = i32_tensor({3}, c.idx), idx2 = i32_tensor({2, 3}, c.idx2);
    ErrorContext ctx;
    ASSERT_TRUE(lm.method().set_input(0, testing::view_of(data), &ctx).is_ok());
    ASSERT_TRUE(lm.method().set_input(1, testing::view_of(idx), &ctx).is_ok());
    ASSERT_TRUE(lm.method().set_input(2, testing::view_of(idx2), &ctx).is_ok());
    const Status s = lm.method().execute(&ctx);
    EXPECT_EQ(s.code(), Error::InvalidArgument) << c.message;
    EXPECT_NE(std::string(ctx.message).find(c.message), std::string::npos) << ctx.message;
  }
  // Valid again afterwards.
  const std::vector<HostTensor> out = testing::run_method(
      lm.method(), {f32_tensor({4, 3}, data_values()), i32_tensor({3}, {0, 1, 2}), i32_tensor({2, 3}, {0, 1, 2, 3, 0, 1})});
  EXPECT_EQ(out.size(), 2u);
}

TEST(IndexCheck, TheEvaluatorRefusesOutOfRangeIndices) {
  const exporter::Graph graph = index_graph();
  try {
    exporter::evaluate(graph, {f32_tensor({4, 3}, data_values()), i32_tensor({3}, {0, 9, 1}),
                               i32_tensor({2, 3}, {0, 0, 0, 0, 0, 0})});
    FAIL() << "evaluated";
  } catch (const exporter::InputValueError& e) {
    EXPECT_NE(std::string(e.what()).find("gather: index 9 at indices[1] is outside [-4, 4)"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ember
