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

// Backend entries carry "dim_order" and "quant" as kernel entries do (defaults contiguous / none).
TEST(PartitionerTest, ManifestBackendEntriesReadDimOrderAndQuant) {
  const CapabilityManifest m = CapabilityManifest::parse(R"({"format": 1, "backends": [{"id": "sim", "ops": [
      {"op": "linear", "dtypes": ["f32","f8_e4m3fn","-","f32"], "dim_order": "contiguous", "quant": "per_channel"},
      {"op": "linear", "dtypes": ["f32","f32","-","f32"]},
      {"op": "relu", "dtypes": ["f32","f32"], "dim_order": "channels_last"}]}]})");
  const std::vector<std::string> fp8 = {"f32", "f8_e4m3fn:per_channel", "-", "f32"};
  EXPECT_TRUE(m.backend_supports("sim", "linear", fp8));
  EXPECT_TRUE(m.backend_supports("sim", "linear", fp8, "contiguous"));
  EXPECT_FALSE(m.backend_supports("sim", "linear", fp8, "channels_last"));
  EXPECT_FALSE(m.backend_supports("sim", "linear", {"f32", "f8_e4m3fn", "-", "f32"}));  // layout is part of the dtype
  EXPECT_FALSE(m.backend_supports("sim", "linear", {"f32", "f8_e4m3fn:block2d", "-", "f32"}));
  EXPECT_TRUE(m.backend_supports("sim", "linear", {"f32", "f32", "-", "f32"}));
  // A channels_last entry is kept, and matches channels_last nodes only.
  EXPECT_FALSE(m.backend_supports("sim", "relu", {"f32", "f32"}));
  EXPECT_TRUE(m.backend_supports("sim", "relu", {"f32", "f32"}, "channels_last"));
  EXPECT_FALSE(m.backend_supports("other", "relu", {"f32", "f32"}, "channels_last"));
  // Portable entries follow the same rule.
  EXPECT_FALSE(testing::test_manifest().portable_supports("tanh", {"f32", "f32"}));
  EXPECT_TRUE(testing::test_manifest().portable_supports("tanh", {"f32", "f32"}, "channels_last"));
  EXPECT_TRUE(testing::test_manifest().portable_supports("linear", fp8));

  // Names outside the schema's dim orders and QuantLayout's names are errors naming the entry.
  auto parse_error = [](const std::string& entry) {
    try {
      CapabilityManifest::parse(R"({"format": 1, "backends": [{"id": "sim", "ops": [)" + entry + "]}]}", "bad.json");
    } catch (const ExportError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string err = parse_error(R"({"op": "relu", "dtypes": ["f32","f32"], "dim_order": "nhwc"})");
  EXPECT_NE(err.find("dim_order 'nhwc'"), std::string::npos) << err;
  EXPECT_NE(err.find("backend 'sim'"), std::string::npos) << err;
  EXPECT_NE(err.find("relu(f32, f32)"), std::string::npos) << err;
  err = parse_error(R"({"op": "linear", "dtypes": ["f32","f8_e4m3fn","-","f32"], "quant": "per-channel"})");
  EXPECT_NE(err.find("quant 'per-channel'"), std::string::npos) << err;
  err = parse_error(R"({"op": "relu", "dtypes": ["f32"], "quant": "per_channel"})");
  EXPECT_NE(err.find("no weight argument"), std::string::npos) << err;
  err = parse_error(R"({"op": "relu", "dtypes": ["f32","f32"], "quant": 3})");
  EXPECT_NE(err.find("\"quant\" must be a string"), std::string::npos) << err;
}

// x [2, 64] -> linear(w: f8_e4m3fn [32, 64] with one f32 scale per output channel).
Graph fp8_per_channel_graph() {
  GraphBuilder b;
  const ValueId x = b.input("x", ScalarType::F32, {2, 64});
  auto q = std::make_shared<QuantParams>();
  q->scale_dtype = ScalarType::F32;
  q->block = {1, 64};
  q->scale_dims = {32, 1};
  const std::vector<float> scales(32, 0.5f);
  q->scale = std::make_shared<const std::vector<uint8_t>>(reinterpret_cast<const uint8_t*>(scales.data()),
                                                           reinterpret_cast<const uint8_t*>(scales.data() + 32));
  const ValueId w = b.constant_quantized("w", ScalarType::F8E4M3FN, {32, 64}, std::vector<uint8_t>(32 * 64, 0x30), q);
  b.output("y", b.linear(x, w, kNoValue, "fc"));
  return b.build();
}

TEST(PartitionerTest, QuantizedWeightIsDelegatedOnlyInALayoutTheBackendLists) {
  const Graph g = fp8_per_channel_graph();
  ASSERT_EQ(node_dtypes(g, g.nodes[0]), (std::vector<std::string>{"f32", "f8_e4m3fn:per_channel", "-", "f32"}));
  auto manifest = [](const std::string& sim_quant, const std::string& sim_dim_order) {
    return CapabilityManifest::parse(R"({"format": 1, "kernels": [
        {"op": "linear", "dtypes": ["f32","f8_e4m3fn","-","f32"], "quant": "per_channel", "library": "cpu"}],
      "backends": [{"id": "sim", "ops": [{"op": "linear", "dtypes": ["f32","f8_e4m3fn","-","f32"],
        "dim_order": ")" + sim_dim_order + R"(", "quant": ")" + sim_quant + R"("}]}]})");
  };
  {
    const Partition p = partition_graph(g, manifest("per_channel", "contiguous"), {"sim", "portable"});
    ASSERT_EQ(p.delegates.size(), 1u);
    EXPECT_EQ(p.node_backend[0], "sim");
    EXPECT_EQ(p.delegates[0].constants, (std::vector<int>{g.find_value("w")}));
    EXPECT_TRUE(p.delegates[0].states.empty());
  }
  for (const auto& [quant, dim_order] : std::vector<std::pair<std::string, std::string>>{
           {"block2d", "contiguous"}, {"per_tensor", "contiguous"}, {"none", "contiguous"},
           {"per_channel", "channels_last"}}) {
    SCOPED_TRACE(quant + " " + dim_order);
    const Partition p = partition_graph(g, manifest(quant, dim_order), {"sim", "portable"});
    EXPECT_TRUE(p.delegates.empty());
    EXPECT_EQ(p.node_backend[0], "portable");
  }
}

// One program state lives in one memory: readers split between a backend that owns state and the
// host (portable kernels, or a backend that does not own state) are refused at export, naming the
// state and both nodes; readers all in one memory are fine.
TEST(PartitionerTest, StateReadFromTwoMemoriesIsRefusedAtExport) {
  GraphBuilder b;
  const ValueId x = b.input("x", ScalarType::F32, {4});
  const ValueId s = b.state("cache", ScalarType::F32, {4});
  ValueId h = b.add(x, s, "add1");
  h = b.mul(h, s, "mul1");
  b.output("y", h);
  const Graph g = b.build();
  auto manifest = [](bool owns_state, bool with_mul) {
    return CapabilityManifest::parse(std::string(R"({"format": 1, "kernels": [
        {"op": "add", "dtypes": ["f32","f32","f32"], "library": "cpu"},
        {"op": "mul", "dtypes": ["f32","f32","f32"], "library": "cpu"}],
      "backends": [{"id": "dev", "owns_state": )") + (owns_state ? "true" : "false") +
                                     R"(, "ops": [{"op": "add", "dtypes": ["f32","f32","f32"]})" +
                                     (with_mul ? R"(, {"op": "mul", "dtypes": ["f32","f32","f32"]})" : "") + "]}]}");
  };
  try {
    partition_graph(g, manifest(true, false), {"dev", "portable"});
    FAIL() << "a state read on dev and on the portable kernels was partitioned";
  } catch (const ExportError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("state 'cache'"), std::string::npos) << what;
    EXPECT_NE(what.find("add1"), std::string::npos) << what;
    EXPECT_NE(what.find("mul1"), std::string::npos) << what;
    EXPECT_NE(what.find("dev (dev memory)"), std::string::npos) << what;
    EXPECT_NE(what.find("portable (host memory)"), std::string::npos) << what;
  }
  // dev without state of its own: both readers use host memory.
  EXPECT_EQ(partition_graph(g, manifest(false, false), {"dev", "portable"}).node_backend,
            (std::vector<std::string>{"dev", "portable"}));
  // dev runs both readers: the state lives in dev's memory only.
  const Partition p = partition_graph(g, manifest(true, true), {"dev", "portable"});
  ASSERT_EQ(p.delegates.size(), 1u);
  EXPECT_EQ(p.delegates[0].states, (std::vector<int>{s}));
  // "owns_state" must be a boolean.
  EXPECT_THROW(CapabilityManifest::parse(R"({"format": 1, "backends": [{"id": "dev", "owns_state": 1}]})"),
               ExportError);
}

// A stateful graph for a device backend that owns state, without 'portable' in the list, runs whole
// on it: a node it lacks is an export error naming every such node, never a silent split (issue 15).
TEST(PartitionerTest, StatefulGraphForADeviceBackendRunsWholeOnIt) {
  GraphBuilder b;
  const ValueId x = b.input("x", ScalarType::F32, {4});
  const ValueId s = b.state("cache", ScalarType::F32, {4});
  ValueId h = b.add(x, s, "add1");
  h = b.mul(h, x, "mul1");
  h = b.mul(h, x, "mul2");
  b.output("y", h);
  const Graph g = b.build();
  const CapabilityManifest m = CapabilityManifest::parse(R"({"format": 1, "kernels": [
      {"op": "add", "dtypes": ["f32","f32","f32"], "library": "cpu"},
      {"op": "mul", "dtypes": ["f32","f32","f32"], "library": "cpu"}],
    "backends": [{"id": "dev", "owns_state": true, "ops": [{"op": "add", "dtypes": ["f32","f32","f32"]}]}]})");
  try {
    partition_graph(g, m, {"dev"});
    FAIL() << "a stateful graph was split between dev and the portable kernels";
  } catch (const ExportError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("dev cannot run 2 node(s)"), std::string::npos) << what;
    EXPECT_NE(what.find("mul1"), std::string::npos) << what;
    EXPECT_NE(what.find("mul2"), std::string::npos) << what;
    EXPECT_NE(what.find("add 'portable'"), std::string::npos) << what;
  }
  // 'portable' listed: the mix is allowed where the state stays in one memory (mul reads no state).
  const Partition p = partition_graph(g, m, {"dev", "portable"});
  EXPECT_EQ(p.node_backend, (std::vector<std::string>{"dev", "portable", "portable"}));
}

}  // namespace
}  // namespace ember::exporter
