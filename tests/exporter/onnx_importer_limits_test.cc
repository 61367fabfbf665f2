// The ONNX reader on hostile and careless input (issue #14): empty and non-ONNX files, broken wire
// format, messages nested past the recursion limit, a ModelProto without a graph, tensors whose
// dims and data disagree or claim absurd sizes, functions that multiply when inlined, and export-time
// ops (ConstantOfShape, Range) sized by the model's numbers. Each is one ExportError naming the file,
// tensor or node; none allocates what the input does not hold.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "exporter/importers/onnx/model_proto.h"
#include "exporter/importers/onnx/onnx_importer.h"
#include "tests/exporter/onnx_importer_test_util.h"
#include "tests/exporter/onnx_test_util.h"

namespace ember::exporter {
namespace {

using testing::attr_i;
using testing::attr_t;
using testing::const_i64;
using testing::import_error;
using testing::kFloat;
using testing::OnnxModel;

std::string bytes_error(const std::string& bytes, const std::string& source = "m.onnx") {
  try {
    import_onnx_bytes(bytes, ".", {}, source);
  } catch (const ExportError& e) {
    return e.what();
  }
  return "";
}

// A valid model to corrupt: x -> Relu -> y.
OnnxModel relu_model() {
  OnnxModel m(17);
  m.input("x", kFloat, {"2", "3"});
  m.node("Relu", {"x"}, {"y"}, "relu");
  m.output("y");
  return m;
}

TEST(OnnxImporterLimitsTest, EmptyFileIsNotAModel) {
  EXPECT_EQ(bytes_error(""), "onnx: m.onnx: empty file, not an ONNX model");
}

TEST(OnnxImporterLimitsTest, EmptyFileOnDiskNamesThePath) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("ember_empty_" + std::to_string(::getpid()) + ".onnx")).string();
  { std::ofstream f(path); }
  try {
    import_onnx_file(path);
    ADD_FAILURE() << "an empty file was imported";
  } catch (const ExportError& e) {
    EXPECT_EQ(std::string(e.what()), "onnx: " + path + ": empty file, not an ONNX model");
  }
  std::filesystem::remove(path);
}

TEST(OnnxImporterLimitsTest, TextIsNotAModelProto) {
  // 'h' = field 13 as a varint ('e'), then 'l' = field 13's end-group tag with no group open.
  EXPECT_EQ(bytes_error("hello world, not a model\n"),
            "onnx: m.onnx: not an ONNX ModelProto (parse failed at byte 2, in field 13: an end-group tag without its "
            "start)");
}

TEST(OnnxImporterLimitsTest, ParsableBytesWithoutAGraphAreNotAModel) {
  // Field 1 (ir_version) = 8 and nothing else: valid protobuf, no graph.
  EXPECT_EQ(bytes_error(std::string("\x08\x08", 2)),
            "onnx: m.onnx: not an ONNX model: the ModelProto has no graph (ir_version 8, 0 opset imports)");
  // Bytes of another message: a StringStringEntryProto {key: "a"} reads as ModelProto.ir_version...
  // no: field 1 is a string there, so ir_version has the wrong wire type and becomes an unknown field.
  EXPECT_EQ(bytes_error(std::string("\x0a\x01" "a", 3)),
            "onnx: m.onnx: not an ONNX model: the ModelProto has no graph (ir_version 0, 0 opset imports)");
}

TEST(OnnxImporterLimitsTest, TruncatedModelNamesTheFieldItStopsIn) {
  OnnxModel m = relu_model();
  const std::string bytes = m.bytes();
  // Fields are written in number order: ir_version, producer_name, graph (7), opset_import (8);
  // half the bytes end inside the graph.
  const std::string e = bytes_error(bytes.substr(0, bytes.size() / 2));
  EXPECT_EQ(e.rfind("onnx: m.onnx: not an ONNX ModelProto (parse failed at byte ", 0), 0u) << e;
  EXPECT_NE(e.find(", in graph: length "), std::string::npos) << e;
  EXPECT_NE(e.find("runs past the end of its message"), std::string::npos) << e;
}

TEST(OnnxImporterLimitsTest, BrokenPackedDataNamesTheTensor) {
  OnnxModel m = relu_model();
  m.init_i64("i", {2}, {1, 2});
  std::string bytes = m.bytes();
  // int64_data is packed: tag 0x3a, length 2, varints 01 02. Make the last varint say "more follows".
  const size_t at = bytes.find(std::string("\x3a\x02\x01\x02", 4));
  ASSERT_NE(at, std::string::npos);
  bytes[at + 3] = '\x82';
  const std::string e = bytes_error(bytes);
  EXPECT_EQ(e.rfind("onnx: m.onnx: not an ONNX ModelProto (parse failed at byte ", 0), 0u) << e;
  EXPECT_NE(e.find(", in graph.initializer[0].int64_data[0]: a packed varint is truncated"), std::string::npos) << e;
}

// If nodes nested in then_branch attributes, `depth` deep.
std::string nested_if_bytes(int depth) {
  onnx::GraphProto inner;
  for (int i = 0; i < depth; ++i) {
    onnx::GraphProto outer;
    onnx::NodeProto* node = outer.add_node();
    node->set_op_type("If");
    node->set_name("if" + std::to_string(i));
    node->add_input("cond");
    node->add_output("out");
    onnx::AttributeProto* a = node->add_attribute();
    a->set_name("then_branch");
    a->set_type(onnx::AttributeProto::GRAPH);
    a->mutable_g()->Swap(&inner);  // not a copy: building 10,000 levels stays linear
    inner.Swap(&outer);
  }
  OnnxModel m(17);
  m.input("cond", onnx::TensorProto::BOOL, {"1"});
  *m.graph().add_node() = inner.node(0);
  m.output("out");
  return m.bytes();
}

// The same If nesting as wire-format bytes written directly (outermost first; the lengths computed
// inside out), without protobuf objects: building, serializing or destroying 10,000 nested messages
// recurses once per level, which overflows the stack under ASan before the importer is reached.
std::string nested_if_wire_bytes(int depth) {
  auto varint_size = [](uint64_t v) {
    size_t n = 1;
    for (; v >= 0x80; v >>= 7) ++n;
    return n;
  };
  auto put_varint = [](std::string& s, uint64_t v) {
    for (; v >= 0x80; v >>= 7) s.push_back(static_cast<char>((v & 0x7f) | 0x80));
    s.push_back(static_cast<char>(v));
  };
  // NodeProto: input (1) "cond", output (2) "out", op_type (4) "If"; attribute (5).
  const std::string node_fixed("\x0a\x04" "cond" "\x12\x03" "out" "\x22\x02" "If", 15);
  // AttributeProto: name (1) "then_branch", type (20) = GRAPH (5); g (6).
  const std::string attr_fixed("\x0a\x0b" "then_branch" "\xa0\x01\x05", 16);
  std::vector<uint64_t> graph(static_cast<size_t>(depth) + 1, 0), attr(graph.size()), node(graph.size());
  for (size_t i = 1; i < graph.size(); ++i) {
    attr[i] = attr_fixed.size() + 1 + varint_size(graph[i - 1]) + graph[i - 1];
    node[i] = node_fixed.size() + 1 + varint_size(attr[i]) + attr[i];
    graph[i] = 1 + varint_size(node[i]) + node[i];  // GraphProto: node (1)
  }
  std::string out("\x08\x08", 2);  // ModelProto: ir_version (1) = 8
  out += '\x3a';                     // graph (7)
  put_varint(out, graph.back());
  for (size_t i = graph.size() - 1; i >= 1; --i) {
    out += '\x0a';
    put_varint(out, node[i]);
    out += node_fixed;
    out += '\x2a';
    put_varint(out, attr[i]);
    out += attr_fixed;
    out += '\x32';
    put_varint(out, graph[i - 1]);
  }
  return out;
}

TEST(OnnxImporterLimitsTest, GraphsNestedPastTheRecursionLimitAreRefused) {
  // Model -> graph (1) -> node (2) -> attribute (3) -> graph (4) ...: 32 If levels nest 97 deep
  // and parse (the If, which has no else_branch, is then refused), 34 go past 100.
  const std::string ok = bytes_error(nested_if_bytes(32));
  EXPECT_NE(ok.find("If node 'if31' (opset 17): needs then_branch and else_branch graphs"), std::string::npos) << ok;
  const std::string deep = bytes_error(nested_if_bytes(34));
  EXPECT_EQ(deep.rfind("onnx: m.onnx: not an ONNX ModelProto (parse failed at byte ", 0), 0u) << deep;
  EXPECT_NE(deep.find("messages nest deeper than 100 levels"), std::string::npos) << deep;
  EXPECT_NE(deep.find("in graph.node[0].attribute[0].g.node[0].attribute[0].g."), std::string::npos) << deep;
  // 10,000 levels: no stack overflow in protobuf or in the wire walk.
  const std::string very = bytes_error(nested_if_wire_bytes(10000));
  EXPECT_NE(very.find("messages nest deeper than 100 levels"), std::string::npos) << very.substr(0, 300);
  // The hand-written encoding nests like the protobuf-built one: 34 levels are refused for their
  // depth, 32 parse (and fail later, for other reasons).
  EXPECT_NE(bytes_error(nested_if_wire_bytes(34)).find("messages nest deeper than 100 levels"), std::string::npos);
  const std::string shallow = bytes_error(nested_if_wire_bytes(32));
  EXPECT_EQ(shallow.find("messages nest deeper"), std::string::npos) << shallow;
  EXPECT_EQ(shallow.find("not an ONNX ModelProto"), std::string::npos) << shallow;
}

TEST(OnnxImporterLimitsTest, WireWalkAcceptsValidModels) {
  OnnxModel m = relu_model();
  m.init_f32("w", {2, 2}, {1, 2, 3, 4}, /*raw=*/false);
  const std::string bytes = m.bytes();
  EXPECT_EQ(describe_onnx_wire_error(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), "");
}

TEST(OnnxImporterLimitsTest, HugeDimsWithShortDataAreRefusedBeforeAllocating) {
  {
    OnnxModel m = relu_model();
    onnx::TensorProto* t = m.init_f32("w", {int64_t{1} << 31, int64_t{1} << 31}, {1.0f}, /*raw=*/true);
    (void)t;
    EXPECT_EQ(import_error(m), "onnx: initializer 'w': dims [2147483648, 2147483648] make more than 2^40 elements");
  }
  {
    // 2^39 elements claimed with one float_data value: the count is checked before 2 TB are allocated.
    OnnxModel m = relu_model();
    m.init_f32("w", {int64_t{1} << 39}, {1.0f}, /*raw=*/false);
    EXPECT_EQ(import_error(m), "onnx: initializer 'w': float_data holds 1 values, the dims need 549755813888");
  }
  {
    OnnxModel m = relu_model();
    m.init_i64("i", {int64_t{1} << 38}, {7});
    EXPECT_EQ(import_error(m), "onnx: initializer 'i': int64_data holds 1 values, the dims need 274877906944");
  }
  {
    // Dims whose product wraps to 0 in 64 bits are not an empty tensor.
    OnnxModel m = relu_model();
    m.init_f32("w", {int64_t{1} << 32, int64_t{1} << 32}, {}, /*raw=*/true);
    EXPECT_EQ(import_error(m), "onnx: initializer 'w': dims [4294967296, 4294967296] make more than 2^40 elements");
  }
}

TEST(OnnxImporterLimitsTest, NegativeDimsAndMismatchedRawDataNameTheTensor) {
  {
    OnnxModel m = relu_model();
    m.init_f32("w", {-3}, {});
    EXPECT_EQ(import_error(m), "onnx: initializer 'w': negative dim -3");
  }
  {
    OnnxModel m = relu_model();
    m.init_f32("w", {2, 3}, {1, 2, 3, 4, 5});  // raw_data of 20 bytes
    EXPECT_EQ(import_error(m), "onnx: initializer 'w': raw_data holds 20 bytes, FLOAT x 6 needs 24");
  }
}

TEST(OnnxImporterLimitsTest, ConstantOfShapeSizedByTheModelIsBounded) {
  OnnxModel m(17);
  m.input("x", kFloat, {"2"});
  const_i64(m, "shape", {int64_t{1} << 20, int64_t{1} << 20});
  m.node("ConstantOfShape", {"shape"}, {"big"}, "cos");
  m.node("Add", {"x", "big"}, {"y"}, "add");
  m.output("y");
  EXPECT_EQ(import_error(m),
            "onnx: ConstantOfShape node 'cos' (opset 17): shape [1048576, 1048576] makes a tensor larger than 256 MiB "
            "at export");
  OnnxModel wrap(17);
  wrap.input("x", kFloat, {"2"});
  const_i64(wrap, "shape", {int64_t{1} << 62, 8});  // 2^65 elements: the product overflows
  wrap.node("ConstantOfShape", {"shape"}, {"big"}, "cos");
  wrap.node("Add", {"x", "big"}, {"y"}, "add");
  wrap.output("y");
  EXPECT_NE(import_error(wrap).find("makes a tensor larger than 256 MiB at export"), std::string::npos) << import_error(wrap);
}

TEST(OnnxImporterLimitsTest, RangeSizedByTheModelIsBounded) {
  auto range = [](int64_t start, int64_t limit, int64_t delta) {
    OnnxModel m(17);
    m.input("x", onnx::TensorProto::INT64, {"2"});
    const_i64(m, "start", {start}, true);
    const_i64(m, "limit", {limit}, true);
    const_i64(m, "delta", {delta}, true);
    m.node("Range", {"start", "limit", "delta"}, {"r"}, "range");
    m.node("Add", {"x", "r"}, {"y"}, "add");
    m.output("y", onnx::TensorProto::INT64);
    return import_error(m);
  };
  EXPECT_EQ(range(INT64_MIN, INT64_MAX, 1),
            "onnx: Range node 'range' (opset 17): start -9223372036854775808, limit 9223372036854775807, delta 1 make "
            "more than 4096 elements");
  // Two elements that span the whole int64 range: no overflow on the way.
  EXPECT_EQ(range(INT64_MIN, INT64_MAX, INT64_MAX).find("make more than"), std::string::npos);
  OnnxModel empty(17);
  empty.input("x", onnx::TensorProto::INT64, {"2"});
  const_i64(empty, "start", {});
  const_i64(empty, "limit", {4}, true);
  const_i64(empty, "delta", {1}, true);
  empty.node("Range", {"start", "limit", "delta"}, {"r"}, "range");
  empty.node("Add", {"x", "r"}, {"y"}, "add");
  empty.output("y", onnx::TensorProto::INT64);
  EXPECT_EQ(import_error(empty),
            "onnx: Range node 'range' (opset 17): start, limit and delta must be scalars (they hold 0, 1 and 1 elements)");
}

TEST(OnnxImporterLimitsTest, FunctionsThatMultiplyWhenInlinedAreBounded) {
  // f0 calls f1 sixteen times, f1 calls f2 sixteen times, ...: 16^5 = 1M nodes after inlining.
  OnnxModel m(17);
  onnx::OperatorSetIdProto* local = m.proto().add_opset_import();
  local->set_domain("local");
  local->set_version(1);
  constexpr int kLevels = 6;
  for (int level = 0; level < kLevels; ++level) {
    onnx::FunctionProto* f = m.proto().add_functions();
    f->set_name("f" + std::to_string(level));
    f->set_domain("local");
    f->add_input("a");
    f->add_output("a_out");
    onnx::OperatorSetIdProto* op = f->add_opset_import();
    op->set_domain("");
    op->set_version(17);
    std::string prev = "a";
    for (int k = 0; k < 16; ++k) {
      onnx::NodeProto* n = f->add_node();
      const bool leaf = level == kLevels - 1;
      n->set_op_type(leaf ? "Relu" : "f" + std::to_string(level + 1));
      if (!leaf) n->set_domain("local");
      n->add_input(prev);
      prev = k == 15 ? "a_out" : "t" + std::to_string(k);
      n->add_output(prev);
    }
  }
  m.input("x", kFloat, {"2"});
  m.node("f0", {"x"}, {"y"}, "call").set_domain("local");
  m.output("y");
  const std::string e = import_error(m);
  EXPECT_NE(e.find("inlining functions makes more than 1048576 nodes or 256 MiB of node protos"), std::string::npos) << e;
}

}  // namespace
}  // namespace ember::exporter
