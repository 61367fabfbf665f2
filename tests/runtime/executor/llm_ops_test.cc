// The LLM ops through the whole pipeline: built with GraphBuilder, exported, loaded and run by the
// GraphRunner on the builtin kernels, against the exporter's reference evaluation; and their run-time
// value errors (an id outside the vocabulary, a negative position) as InvalidArgument from execute().
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
using testing::i32_tensor;
using exporter::ValueId;

// ids [4], positions [4] -> silu_mul(rope(reshape(rms_norm(embedding(w, ids)))))
exporter::Graph llm_graph() {
  GraphBuilder b;
  const ValueId ids = b.input("ids", ScalarType::I32, {4});
  const ValueId pos = b.input("positions", ScalarType::I32, {4});
  const ValueId w = b.constant_f32("embed", {10, 8}, testing::pattern(80, 1));
  const ValueId e = b.op(OpCode::Embedding, {w, ids}, OpAttrs{});
  OpAttrs norm;
  norm.axis = -1;
  norm.epsilon = 1e-6f;
  const ValueId n = b.op(OpCode::RmsNorm, {e, b.constant_f32("norm.w", {8}, testing::pattern(8, 2))}, norm);
  const ValueId r = b.reshape(n, {4, 2, 4});
  const ValueId q = b.op(OpCode::Rope, {r, pos, b.constant_f32("inv_freq", {2}, {1.0f, 0.01f})}, OpAttrs{});
  b.output("y", b.op(OpCode::SiluMul, {q, q}, OpAttrs{}));
  return b.build();
}

TEST(LlmOpsEndToEnd, RunsAndMatchesTheReferenceEvaluation) {
  const exporter::Graph graph = llm_graph();
  const std::vector<HostTensor> inputs = {i32_tensor({4}, {3, 0, 9, 3}), i32_tensor({4}, {0, 1, 2, 700})};
  const std::vector<HostTensor> expected = exporter::evaluate(graph, inputs);
  testing::Runtime rt;
  testing::LoadedMethod lm(testing::export_program(graph).program.bytes, rt.context);
  ASSERT_TRUE(lm.ok()) << lm.ctx().message;
  const std::vector<HostTensor> actual = testing::run_method(lm.method(), inputs);
  ASSERT_EQ(actual.size(), 1u);
  testing::ExpectAllClose(actual[0], expected[0], {1e-5f, 1e-5f});
}

TEST(LlmOpsEndToEnd, BadIdsAndPositionsAreInvalidArgumentAtRunTime) {
  testing::Runtime rt;
  testing::LoadedMethod lm(testing::export_program(llm_graph()).program.bytes, rt.context);
  ASSERT_TRUE(lm.ok()) << lm.ctx().message;
  struct Case {
    std::vector<int32_t> ids, positions;
    const char* message;
  } cases[] = {
      {{1, 2, 10, 3}, {0, 1, 2, 3}, "id 10 at index 2"},
      {{1, -4, 1, 3}, {0, 1, 2, 3}, "id -4 at index 1"},
      {{1, 2, 3, 4}, {-1, 1, 2, 3}, "position -1 at index 0"},
  };
  for (const Case& c : cases) {
    HostTensor ids = i32_tensor({4}, c.ids), pos = i32_tensor({4}, c.positions);
    ErrorContext ctx;
    ASSERT_TRUE(lm.method().set_input(0, testing::view_of(ids), &ctx).is_ok());
    ASSERT_TRUE(lm.method().set_input(1, testing::view_of(pos), &ctx).is_ok());
    const Status s = lm.method().execute(&ctx);
    EXPECT_EQ(s.code(), Error::InvalidArgument) << c.message;
    EXPECT_NE(std::string(ctx.message).find(c.message), std::string::npos) << ctx.message;
  }
  // Valid again afterwards.
  const std::vector<HostTensor> out =
      testing::run_method(lm.method(), {i32_tensor({4}, {1, 2, 3, 4}), i32_tensor({4}, {0, 1, 2, 3})});
  EXPECT_EQ(out.size(), 1u);
}

}  // namespace
}  // namespace ember
