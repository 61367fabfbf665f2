#include "exporter/plan/memory_planner.h"

#include <gtest/gtest.h>

#include "exporter/importers/builder/graph_builder.h"
#include "exporter/plan/overlap_check.h"
#include "exporter/serialize/serializer.h"
#include "tests/exporter/test_util.h"

namespace ember::exporter {
namespace {

struct Exported {
  Graph graph;
  Partition partition;
  MemoryPlan plan;
  SerializedProgram program;
};

Exported export_random(uint64_t seed, bool symbolic, bool delegate) {
  Exported e;
  e.graph = testing::random_graph(seed, symbolic);
  e.partition = delegate ? partition_graph(e.graph, testing::test_manifest(), {"null", "portable"})
                         : portable_partition(e.graph);
  e.plan = plan_memory(e.graph, e.partition);
  e.program = serialize_program(e.graph, e.partition, e.plan);
  return e;
}

TEST(MemoryPlannerTest, RandomGraphsHaveNoOverlapsAndPeakAtLeastLowerBound) {
  int with_delegates = 0;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    for (bool delegate : {false, true}) {
      SCOPED_TRACE("seed " + std::to_string(seed) + (delegate ? " delegated" : ""));
      const Exported e = export_random(seed, seed % 2 == 0, delegate);
      with_delegates += e.partition.delegates.empty() ? 0 : 1;
      const std::vector<std::string> violations = check_overlaps(e.program.bytes);
      EXPECT_TRUE(violations.empty()) << violations.front();
      EXPECT_GE(e.plan.activation_size, e.plan.live_lower_bound);
      EXPECT_EQ(testing::validate_with_runtime(e.program.bytes), "");
    }
  }
  EXPECT_GT(with_delegates, 10);  // the delegated variant really exercises delegate internals
}

TEST(MemoryPlannerTest, AlignmentPadAndIoLayout) {
  const Exported e = export_random(5, true, false);
  uint64_t io = 0;
  for (const auto* list : {&e.graph.inputs, &e.graph.outputs}) {
    for (const NamedValue& nv : *list) {
      const Placement& p = e.plan.values[static_cast<size_t>(nv.value)];
      EXPECT_EQ(p.arena, kIoArena);
      EXPECT_EQ(p.offset, io);  // inputs then outputs, contiguous
      io += slot_bytes(p.nbytes);
    }
  }
  EXPECT_EQ(e.plan.io_size, io);
  for (size_t v = 0; v < e.graph.values.size(); ++v) {
    const Placement& p = e.plan.values[v];
    if (p.arena < 0) continue;
    EXPECT_EQ(p.offset % 64, 0u);
    EXPECT_EQ(p.nbytes, nbytes_max(e.graph.values[v]));  // upper-bound shape
    if (p.arena == kActivationArena) {
      EXPECT_LE(p.offset + slot_bytes(p.nbytes), e.plan.activation_size);
    }
  }
  EXPECT_EQ(slot_bytes(1), 128u);
  EXPECT_EQ(slot_bytes(64), 128u);
  EXPECT_EQ(slot_bytes(65), 192u);
}

TEST(MemoryPlannerTest, ChainReusesMemory) {
  GraphBuilder b;
  ValueId h = b.input("x", ScalarType::F32, {1024});
  for (int i = 0; i < 10; ++i) h = b.relu(h);
  b.output("y", h);
  Graph g = b.build();
  const MemoryPlan plan = plan_memory(g, portable_partition(g));
  // 9 intermediates of 4 KiB, at most two live at once.
  EXPECT_EQ(plan.live_lower_bound, 2 * slot_bytes(4096));
  EXPECT_EQ(plan.activation_size, 2 * slot_bytes(4096));
  EXPECT_NE(plan.summary().find("planned peak 8320 bytes, live-bytes lower bound 8320 bytes"), std::string::npos)
      << plan.summary();
}

TEST(MemoryPlannerTest, CheckerFlagsABrokenPlan) {
  Exported e = export_random(11, false, false);
  // Find two activation values live at the same time and put them on top of each other.
  int a = -1, c = -1;
  for (size_t i = 0; i < e.plan.values.size() && c < 0; ++i) {
    for (size_t j = i + 1; j < e.plan.values.size(); ++j) {
      const Placement& p = e.plan.values[i];
      const Placement& q = e.plan.values[j];
      if (p.arena == kActivationArena && q.arena == kActivationArena && p.nbytes > 0 && q.nbytes > 0 &&
          p.first <= q.last && q.first <= p.last) {
        a = static_cast<int>(i);
        c = static_cast<int>(j);
        break;
      }
    }
  }
  ASSERT_GE(c, 0) << "seed 11 should have two simultaneously live intermediates";
  MemoryPlan broken = e.plan;
  broken.values[static_cast<size_t>(c)].offset = broken.values[static_cast<size_t>(a)].offset;
  const auto violations = check_overlaps(serialize_program(e.graph, e.partition, broken).bytes);
  ASSERT_FALSE(violations.empty());
  EXPECT_NE(violations[0].find("overlap in arena 0"), std::string::npos) << violations[0];

  MemoryPlan outside = e.plan;
  outside.values[static_cast<size_t>(a)].offset = outside.activation_size;  // past the end
  const auto outside_violations = check_overlaps(serialize_program(e.graph, e.partition, outside).bytes);
  bool found = false;
  for (const auto& v : outside_violations) found = found || v.find("outside arena 0") != std::string::npos;
  EXPECT_TRUE(found);

  // The IO arena too: an output moved onto an input that is still read when the output is written.
  GraphBuilder b;
  ValueId x = b.input("x", ScalarType::F32, {16});
  b.output("y", b.add(b.relu(x), x));
  const Graph g = b.build();
  const Partition p = portable_partition(g);
  MemoryPlan io = plan_memory(g, p);
  EXPECT_TRUE(check_overlaps(serialize_program(g, p, io).bytes).empty());
  io.values[static_cast<size_t>(g.outputs[0].value)].offset = 0;
  const auto io_violations = check_overlaps(serialize_program(g, p, io).bytes);
  ASSERT_FALSE(io_violations.empty());
  EXPECT_NE(io_violations[0].find("overlap in arena 1"), std::string::npos) << io_violations[0];
}

TEST(MemoryPlannerTest, CheckerFlagsDelegateInternalsCollidingWithMethodValues) {
  // cnn-like chain on the null backend: the delegate's internals live at its call only.
  GraphBuilder b;
  ValueId x = b.input("x", ScalarType::F32, {1, 4, 8, 8});
  ValueId h = b.conv2d(x, b.random_uniform("w", {4, 4, 3, 3}, -1, 1), kNoValue, Conv2dParams::same3x3(), "conv");
  h = b.relu(h, "relu");
  h = b.sigmoid(h, "sig");
  ValueId keep = b.add(h, x, "add");  // portable
  b.output("y", b.relu(keep, "relu_out"));
  Graph g = b.build();
  const Partition p = partition_graph(g, testing::test_manifest(), {"null", "portable"});
  ASSERT_EQ(p.delegates.size(), 2u);
  ASSERT_EQ(p.delegates[0].internals.size(), 2u);  // conv, relu outputs
  MemoryPlan plan = plan_memory(g, p);
  EXPECT_TRUE(check_overlaps(serialize_program(g, p, plan).bytes).empty());
  // Move an internal onto the delegate's output: both are live at the call.
  const int internal = p.delegates[0].internals[0];
  const int output = p.delegates[0].outputs[0];
  ASSERT_EQ(plan.values[static_cast<size_t>(output)].arena, kActivationArena);
  plan.values[static_cast<size_t>(internal)].offset = plan.values[static_cast<size_t>(output)].offset;
  const auto violations = check_overlaps(serialize_program(g, p, plan).bytes);
  ASSERT_FALSE(violations.empty());
  EXPECT_NE(violations[0].find("delegate 0"), std::string::npos) << violations[0];
}

TEST(MemoryPlannerTest, CheckerRejectsGarbage) {
  std::vector<uint8_t> junk(100, 0x5a);
  EXPECT_FALSE(check_overlaps(junk).empty());
}

}  // namespace
}  // namespace ember::exporter
