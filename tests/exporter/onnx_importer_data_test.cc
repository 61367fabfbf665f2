// The ONNX importer's data (initializers, external data with bounds checks, dtypes) and its errors:
// each unsupported construct is rejected with a reason that names the node, op or dtype.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "exporter/importers/onnx/onnx_importer.h"
#include "tests/exporter/onnx_importer_test_util.h"
#include "tests/exporter/onnx_test_util.h"

namespace ember::exporter {
namespace {

using testing::attr_f;
using testing::attr_i;
using testing::attr_s;
using testing::expect_close;
using testing::import_error;
using testing::import_model;
using testing::kFloat;
using testing::OnnxModel;
using testing::ramp;
using testing::run1;

// ---- Data ---------------------------------------------------------------------------------------

TEST(OnnxImporterTest, ExternalDataIsReadWithBoundsChecks) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("ember_onnx_ext_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto wv = ramp(3 * 4, 1.0f, 34);
  {
    std::ofstream f(dir / "weights.bin", std::ios::binary);
    const std::string pad(16, 'x');
    f.write(pad.data(), 16);
    f.write(reinterpret_cast<const char*>(wv.data()), static_cast<std::streamsize>(wv.size() * 4));
  }
  auto make = [&](const std::string& location, const std::string& offset, const std::string& length) {
    OnnxModel m;
    m.input("x", kFloat, {"2", "4"});
    onnx::TensorProto* t = m.graph().add_initializer();
    t->set_name("w");
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(3);
    t->add_dims(4);
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    for (auto [k, v] : std::vector<std::pair<std::string, std::string>>{{"location", location}, {"offset", offset}, {"length", length}}) {
      auto* e = t->add_external_data();
      e->set_key(k);
      e->set_value(v);
    }
    auto& g = m.node("Gemm", {"x", "w"}, {"y"}, "fc");
    attr_i(g, "transB", 1);
    m.output("y");
    return m;
  };
  OnnxModel good = make("weights.bin", "16", "48");
  {
    std::ofstream f(dir / "model.onnx", std::ios::binary);
    const std::string bytes = good.bytes();
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  OnnxImport imp = import_onnx_file((dir / "model.onnx").string());
  EXPECT_EQ(imp.stats.external_tensors, 1);
  const auto xv = ramp(8, 1.0f, 35);
  std::vector<double> ref(6);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) ref[static_cast<size_t>(i * 3 + j)] += static_cast<double>(xv[static_cast<size_t>(i * 4 + k)]) * wv[static_cast<size_t>(j * 4 + k)];
  expect_close(run1(imp.graph, {HostTensor::from_f32({2, 4}, xv)}), ref);

  OnnxModel past_end = make("weights.bin", "32", "48");
  EXPECT_NE(import_error(past_end, {}, dir.string()).find("outside"), std::string::npos);
  OnnxModel wrong_length = make("weights.bin", "0", "40");
  EXPECT_NE(import_error(wrong_length, {}, dir.string()).find("length 40"), std::string::npos);
  OnnxModel escape = make("../weights.bin", "0", "48");
  EXPECT_NE(import_error(escape, {}, dir.string()).find("leaves the model's folder"), std::string::npos);
  OnnxModel absolute = make((dir / "weights.bin").string(), "0", "48");
  EXPECT_NE(import_error(absolute, {}, dir.string()).find("absolute"), std::string::npos);
  OnnxModel missing = make("nope.bin", "0", "48");
  EXPECT_NE(import_error(missing, {}, dir.string()).find("does not exist"), std::string::npos);
  fs::remove_all(dir);
}

TEST(OnnxImporterTest, UnsupportedDtypesAreRejectedByName) {
  struct Case {
    int32_t type;
    const char* name;
  };
  for (const Case& c : {Case{4, "UINT16"}, Case{12, "UINT32"}, Case{13, "UINT64"}, Case{8, "STRING"},
                        Case{14, "COMPLEX64"}, Case{15, "COMPLEX128"}, Case{17, "FLOAT8E4M3FN"},
                        Case{19, "FLOAT8E5M2"}, Case{18, "FLOAT8E4M3FNUZ"}, Case{22, "INT4"},
                        Case{23, "FLOAT4E2M1"}, Case{0, "UNDEFINED"}, Case{99, "data type 99"}}) {
    SCOPED_TRACE(c.name);
    OnnxModel m;
    m.input("x", kFloat, {"2"});
    onnx::TensorProto* t = m.graph().add_initializer();
    t->set_name("w");
    t->set_data_type(c.type);
    t->add_dims(2);
    t->set_raw_data(std::string(16, '\0'));
    m.node("Add", {"x", "w"}, {"y"});
    m.output("y");
    const std::string err = import_error(m);
    EXPECT_NE(err.find(c.name), std::string::npos) << err;
    EXPECT_NE(err.find("initializer 'w'"), std::string::npos) << err;
    if (c.type == 17 || c.type == 19) {
      EXPECT_NE(err.find("not supported yet"), std::string::npos) << err;
    }
  }
  OnnxModel dbl;
  dbl.input("x", onnx::TensorProto::DOUBLE, {"2"});
  dbl.node("Relu", {"x"}, {"y"});
  dbl.output("y");
  EXPECT_NE(import_error(dbl).find("DOUBLE"), std::string::npos);
  OnnxModel uin;
  uin.input("x", onnx::TensorProto::UINT16, {"2"});
  uin.node("Relu", {"x"}, {"y"});
  uin.output("y");
  EXPECT_NE(import_error(uin).find("graph input 'x': ONNX data type UINT16"), std::string::npos) << import_error(uin);
}

TEST(OnnxImporterTest, DoubleConstantsBecomeF32AndTypedFieldsAreRead) {
  OnnxModel m;
  m.input("x", kFloat, {"3"});
  onnx::TensorProto* t = m.graph().add_initializer();
  t->set_name("d");
  t->set_data_type(onnx::TensorProto::DOUBLE);
  t->add_dims(3);
  for (double v : {1.5, -2.0, 0.25}) t->add_double_data(v);
  auto& c = m.node("Constant", {}, {"f"});
  auto* a = c.add_attribute();
  a->set_name("value_floats");
  a->set_type(onnx::AttributeProto::FLOATS);
  for (float v : {1.0f, 2.0f, 3.0f}) a->add_floats(v);
  m.node("Add", {"x", "d"}, {"s"});
  m.node("Mul", {"s", "f"}, {"y"});
  m.output("y");
  OnnxImport imp = import_model(m);
  const auto out = run1(imp.graph, {HostTensor::from_f32({3}, {1, 1, 1})});
  expect_close(out, {2.5, -2.0, 3.75});
}

// ---- Errors -------------------------------------------------------------------------------------

TEST(OnnxImporterTest, QuantizedGraphsGetANamedReason) {
  for (const char* op : {"QuantizeLinear", "DequantizeLinear"}) {
    OnnxModel m;
    m.input("x", kFloat, {"2"});
    m.init_f32("scale", {}, {0.1f});
    m.node(op, {"x", "scale"}, {"y"}, "q_node");
    m.output("y");
    const std::string err = import_error(m);
    EXPECT_NE(err.find("quantized ONNX graphs are not supported yet (QDQ)"), std::string::npos) << err;
    EXPECT_NE(err.find(op), std::string::npos) << err;
    EXPECT_NE(err.find("'q_node'"), std::string::npos) << err;
    EXPECT_NE(err.find("opset 13"), std::string::npos) << err;
  }
}

// Issue 17: the import goes on after a failing node and lists every failure (op type, node, opset,
// reason); nodes that read a failed node's output are skipped (counted, not reported).
TEST(OnnxImporterTest, KeepsGoingAndListsEveryUnsupportedNode) {
  OnnxModel m(15);
  m.input("x", kFloat, {"2"});
  m.node("NonMaxSuppression", {"x"}, {"a"}, "nms");
  m.node("Relu", {"a"}, {"b"}, "reads_nms");           // skipped: its input is unknown
  m.node("Frobnicate", {"x"}, {"c"}, "frob");           // a second unsupported op type
  auto& conv = m.node("Relu", {"x"}, {"d"}, "relu_attr");
  attr_i(conv, "frobnicate", 1);                        // a supported op with a bad attribute
  m.node("NonMaxSuppression", {"x"}, {"e"}, "nms2");
  m.node("Add", {"b", "c"}, {"f"}, "add");
  m.node("Add", {"f", "d"}, {"g"}, "add2");
  m.node("Add", {"g", "e"}, {"h"}, "add3");
  m.node("Gizmo", {"h"}, {"y"}, "gizmo");  // not tried, but an op type without a handler is listed
  m.output("y");
  const std::string err = import_error(m);
  EXPECT_EQ(err,
            "onnx: 5 nodes could not be imported (Frobnicate x1, Gizmo x1, NonMaxSuppression x2, Relu x1); 4 more "
            "read their outputs and were not tried:\n"
            "  onnx: NonMaxSuppression node 'nms' (opset 15): op type not supported by Ember's ONNX importer\n"
            "  onnx: Frobnicate node 'frob' (opset 15): op type not supported by Ember's ONNX importer\n"
            "  onnx: Relu node 'relu_attr' (opset 15): attribute 'frobnicate' is not supported\n"
            "  onnx: NonMaxSuppression node 'nms2' (opset 15): op type not supported by Ember's ONNX importer\n"
            "  onnx: Gizmo node 'gizmo' (opset 15): op type not supported by Ember's ONNX importer");
}

TEST(OnnxImporterTest, UnsupportedOpAttributeAndDomainNameTheNode) {
  OnnxModel a(15);
  a.input("x", kFloat, {"2"});
  a.node("NonMaxSuppression", {"x"}, {"y"}, "nms");
  a.output("y");
  const std::string e1 = import_error(a);
  EXPECT_EQ(e1, "onnx: NonMaxSuppression node 'nms' (opset 15): op type not supported by Ember's ONNX importer");

  OnnxModel b;
  b.input("x", kFloat, {"1", "1", "3", "3"});
  b.init_f32("w", {1, 1, 1, 1}, {1.0f});
  auto& conv = b.node("Conv", {"x", "w"}, {"y"}, "conv7");
  attr_i(conv, "frobnicate", 1);
  b.output("y");
  EXPECT_EQ(import_error(b), "onnx: Conv node 'conv7' (opset 13): attribute 'frobnicate' is not supported");

  OnnxModel c;
  c.input("x", kFloat, {"1", "1", "3", "3"});
  c.init_f32("w", {1, 1, 1, 1}, {1.0f});
  auto& conv2 = c.node("Conv", {"x", "w"}, {"y"}, "conv8");
  attr_s(conv2, "auto_pad", "SAME_WHATEVER");
  c.output("y");
  EXPECT_NE(import_error(c).find("attribute 'auto_pad' = 'SAME_WHATEVER' is not supported"), std::string::npos);

  OnnxModel d;
  d.input("x", kFloat, {"2"});
  auto& custom = d.node("FusedThing", {"x"}, {"y"}, "fused");
  custom.set_domain("com.microsoft");
  d.output("y");
  EXPECT_NE(import_error(d).find("domain 'com.microsoft'"), std::string::npos) << import_error(d);

  OnnxModel e;
  e.input("x", kFloat, {"1", "2", "3", "3", "3"});
  e.init_f32("w", {1, 2, 1, 1, 1}, {1.0f, 1.0f});
  e.node("Conv", {"x", "w"}, {"y"}, "conv3d");
  e.output("y");
  EXPECT_NE(import_error(e).find("3-D Conv (input rank 5) is not supported yet"), std::string::npos) << import_error(e);

  OnnxModel f(9);
  f.input("x", kFloat, {"2"});
  f.node("Relu", {"x"}, {"y"});
  f.output("y");
  EXPECT_NE(import_error(f).find("opset 9 is not supported"), std::string::npos);
  OnnxModel g(22);
  g.input("x", kFloat, {"2"});
  g.node("Relu", {"x"}, {"y"});
  g.output("y");
  EXPECT_NE(import_error(g).find("opset 22 is not supported"), std::string::npos);
}

TEST(OnnxImporterTest, SoftmaxBeforeOpset13NeedsTheLastAxis) {
  OnnxModel ok(11);
  ok.input("x", kFloat, {"2", "5"});
  ok.node("Softmax", {"x"}, {"y"});
  ok.output("y");
  EXPECT_EQ(import_error(ok), "");
  OnnxModel bad(11);
  bad.input("x", kFloat, {"2", "3", "5"});
  bad.node("Softmax", {"x"}, {"y"}, "sm");
  bad.output("y");
  const std::string err = import_error(bad);
  EXPECT_NE(err.find("Softmax node 'sm' (opset 11)"), std::string::npos) << err;
  EXPECT_NE(err.find("opset >= 13"), std::string::npos) << err;
}

TEST(OnnxImporterTest, IdentityAndDropoutAreRemoved) {
  OnnxModel m;
  m.input("x", kFloat, {"4"});
  m.node("Identity", {"x"}, {"a"});
  m.node("Dropout", {"a"}, {"b"});
  m.node("Relu", {"b"}, {"c"});
  m.node("Identity", {"c"}, {"y"});
  m.output("y");
  OnnxImport imp = import_model(m);
  EXPECT_EQ(imp.stats.removed_identity, 3);
  ASSERT_EQ(imp.graph.nodes.size(), 1u);
  EXPECT_EQ(imp.graph.outputs[0].name, "y");
  // An output that is the input passes through a copy.
  OnnxModel pass;
  pass.input("x", kFloat, {"4"});
  pass.node("Identity", {"x"}, {"y"});
  pass.output("y");
  OnnxImport p = import_model(pass);
  EXPECT_EQ(p.graph.nodes.size(), 1u);
  expect_close(run1(p.graph, {HostTensor::from_f32({4}, {1, 2, 3, 4})}), {1, 2, 3, 4});
}

TEST(OnnxImporterTest, ConstantOutputsAndRuntimeShapesAreErrors) {
  OnnxModel m;
  m.input("x", kFloat, {"2"});
  m.init_f32("c", {2}, {1, 2});
  m.node("Relu", {"c"}, {"y"});
  m.output("y");
  EXPECT_NE(import_error(m).find("computed entirely at export"), std::string::npos);

  OnnxModel r;
  r.input("x", kFloat, {"4"});
  r.input("s", onnx::TensorProto::INT64, {"1"});
  r.node("Reshape", {"x", "s"}, {"y"}, "dyn");
  r.output("y");
  const std::string err = import_error(r);
  EXPECT_NE(err.find("Reshape node 'dyn'"), std::string::npos) << err;
  EXPECT_NE(err.find("run time"), std::string::npos) << err;
}

TEST(OnnxImporterTest, ModelLocalFunctionsAreInlined) {
  OnnxModel m(15);
  auto* op = m.proto().add_opset_import();
  op->set_domain("local");
  op->set_version(1);
  onnx::FunctionProto* f = m.proto().add_functions();
  f->set_name("ScaledRelu");
  f->set_domain("local");
  f->add_input("a");
  f->add_output("b");
  f->add_attribute("alpha");
  auto* fo = f->add_opset_import();
  fo->set_domain("");
  fo->set_version(15);
  onnx::NodeProto* r = f->add_node();
  r->set_op_type("Relu");
  r->add_input("a");
  r->add_output("t");
  onnx::NodeProto* c = f->add_node();
  c->set_op_type("Constant");
  c->add_output("k");
  auto* ref = c->add_attribute();
  ref->set_name("value_float");
  ref->set_type(onnx::AttributeProto::FLOAT);
  ref->set_ref_attr_name("alpha");
  onnx::NodeProto* mul = f->add_node();
  mul->set_op_type("Mul");
  mul->add_input("t");
  mul->add_input("k");
  mul->add_output("b");
  m.input("x", kFloat, {"3"});
  auto& call = m.node("ScaledRelu", {"x"}, {"y"}, "call");
  call.set_domain("local");
  attr_f(call, "alpha", 3.0f);
  m.output("y");
  OnnxImport imp = import_model(m);
  EXPECT_EQ(imp.stats.inlined_functions, 1);
  expect_close(run1(imp.graph, {HostTensor::from_f32({3}, {-1, 0.5f, 2})}), {0, 1.5, 6});
}

}  // namespace
}  // namespace ember::exporter
