#include "exporter/partition/partitioner.h"

#include <gtest/gtest.h>

#include "exporter/importers/builder/examples.h"
#include "exporter/importers/builder/graph_builder.h"
#include "tests/exporter/test_util.h"

namespace ember::exporter {
namespace {

TEST(PartitionerTest, CnnConvReluPoolPartBecomesOneDelegate) {
  const Graph g = build_cnn_example(1);
  const Partition p = partition_graph(g, testing::test_manifest(), {"null", "portable"});
  ASSERT_EQ(p.delegates.size(), 1u);
  const DelegateGraph& d = p.delegates[0];
  EXPECT_EQ(d.backend, "null");
  std::vector<std::string> names;
  for (int n : d.nodes) names.push_back(g.nodes[static_cast<size_t>(n)].name);
  EXPECT_EQ(names, (std::vector<std::string>{"conv1", "relu1", "pool1", "dw2", "pw2", "relu2", "gap"}));
  ASSERT_EQ(d.inputs.size(), 1u);
  EXPECT_EQ(g.values[static_cast<size_t>(d.inputs[0])].name, "image");
  ASSERT_EQ(d.outputs.size(), 1u);
  EXPECT_EQ(g.values[static_cast<size_t>(d.outputs[0])].name, "gap");
  EXPECT_EQ(d.internals.size(), 6u);
  EXPECT_EQ(d.constants.size(), 6u);
  ASSERT_EQ(p.steps.size(), 4u);
  EXPECT_EQ(p.steps[0].kind, Step::Kind::Delegate);
  for (size_t i = 1; i < 4; ++i) EXPECT_EQ(p.steps[i].kind, Step::Kind::Kernel);
  EXPECT_EQ(p.node_backend[7], "portable");  // flatten
}

TEST(PartitionerTest, PortableOnlyListMakesNoDelegates) {
  const Graph g = build_cnn_example(1);
  const Partition p = partition_graph(g, testing::test_manifest(), {"portable"});
  EXPECT_TRUE(p.delegates.empty());
  EXPECT_EQ(p.steps.size(), g.nodes.size());
}

TEST(PartitionerTest, BackendOrderDecides) {
  GraphBuilder b;
  ValueId x = b.input("x", ScalarType::F32, {4});
  ValueId h = b.add(x, x, "add1");
  h = b.relu(h, "relu1");
  h = b.add(h, x, "add2");
  b.output("y", h);
  const Graph g = b.build();
  // "other" takes add, "null" takes relu: three runs, three delegates.
  const Partition p = partition_graph(g, testing::test_manifest(), {"other", "null", "portable"});
  ASSERT_EQ(p.delegates.size(), 3u);
  EXPECT_EQ(p.delegates[0].backend, "other");
  EXPECT_EQ(p.delegates[1].backend, "null");
  EXPECT_EQ(p.delegates[2].backend, "other");
  // Portable first: portable kernels win whenever they exist.
  const Partition q = partition_graph(g, testing::test_manifest(), {"portable", "other"});
  EXPECT_TRUE(q.delegates.empty());
}

TEST(PartitionerTest, UnsupportedOpNamesOpNodeAndDtypes) {
  GraphBuilder b;
  ValueId x = b.input("x", ScalarType::F32, {4});
  b.output("y", b.tanh(x, "my_tanh"));  // the test manifest has tanh only channels-last
  const Graph g = b.build();
  try {
    partition_graph(g, testing::test_manifest(), {"null", "portable"});
    FAIL() << "expected an ExportError";
  } catch (const ExportError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("tanh"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'my_tanh'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("tanh(f32, f32)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("null, portable"), std::string::npos) << msg;
  }
}

TEST(PartitionerTest, UnsupportedDtypeCombinationFails) {
  GraphBuilder b;
  ValueId x = b.input("x", ScalarType::I32, {4});
  b.output("y", b.add(x, x, "int_add"));
  const Graph g = b.build();
  try {
    partition_graph(g, testing::test_manifest(), {"portable"});
    FAIL() << "expected an ExportError";
  } catch (const ExportError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("add(i32, i32, i32)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'int_add'"), std::string::npos) << msg;
  }
}

TEST(PartitionerTest, UnknownBackendAndBadManifest) {
  const Graph g = build_mlp_example(1);
  EXPECT_THROW(partition_graph(g, testing::test_manifest(), {"cuda", "portable"}), ExportError);
  EXPECT_THROW(CapabilityManifest::parse("{\"format\": 2}"), ExportError);
  EXPECT_THROW(CapabilityManifest::parse("not json"), ExportError);
  EXPECT_THROW(CapabilityManifest::load("/nonexistent/capabilities.json"), ExportError);
}

TEST(PartitionerTest, DelegateOutputsIncludeValuesReadLater) {
  GraphBuilder b;
  ValueId x = b.input("x", ScalarType::F32, {1, 2, 4, 4});
  ValueId r = b.relu(x, "r");
  ValueId s = b.sigmoid(r, "s");  // r is read again after the run
  b.output("y", b.add(s, r, "sum"));
  const Graph g = b.build();
  const Partition p = partition_graph(g, testing::test_manifest(), {"null", "portable"});
  ASSERT_EQ(p.delegates.size(), 1u);
  EXPECT_EQ(p.delegates[0].outputs.size(), 2u);
  EXPECT_TRUE(p.delegates[0].internals.empty());
}

}  // namespace
}  // namespace ember::exporter
