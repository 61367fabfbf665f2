// The ONNX importer's issue-17 elementwise handlers (onnx_ops_elementwise.cc): which Ember ops they
// make, with which attributes, the variadic chains, export-time evaluation of the comparisons on
// shape values, and every refusal. Values are checked against the test's double-precision oracle
// through the reference evaluator; tests/onnx/elementwise_ops_test.py compares with onnxruntime.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "exporter/importers/onnx/onnx_importer.h"
#include "tests/exporter/onnx_importer_test_util.h"
#include "tests/exporter/onnx_test_util.h"

namespace ember::exporter {
namespace {

using testing::attr_f;
using testing::attr_i;
using testing::count_ops;
using testing::expect_close;
using testing::find_op;
using testing::import_error;
using testing::import_model;
using testing::kFloat;
using testing::OnnxModel;
using testing::ramp;
using testing::run1;

constexpr int32_t kBool = onnx::TensorProto::BOOL;
constexpr int32_t kInt32 = onnx::TensorProto::INT32;

std::vector<uint8_t> run_bytes(const Graph& g, const std::vector<HostTensor>& inputs) {
  return evaluate(g, inputs).at(0).bytes;
}

// One unary node y = op(x) over x [2, 3, 5], with optional float attributes.
OnnxImport unary(const std::string& op, std::vector<std::pair<std::string, float>> attrs = {}) {
  OnnxModel m(17);
  m.input("x", kFloat, {"2", "3", "5"});
  auto& n = m.node(op, {"x"}, {"y"}, "n");
  for (const auto& [name, v] : attrs) attr_f(n, name, v);
  m.output("y");
  return import_model(m);
}

TEST(OnnxElementwiseTest, ActivationsTakeTheirAttributesAndDefaults) {
  const std::vector<float> x = ramp(30, 4.0f, 3);
  struct Want {
    std::string op;
    std::vector<std::pair<std::string, float>> attrs;
    OpCode code;
    float alpha, beta;
  };
  const Want wants[] = {
      {"LeakyRelu", {}, OpCode::LeakyRelu, 0.01f, 0.0f},
      {"LeakyRelu", {{"alpha", 0.3f}}, OpCode::LeakyRelu, 0.3f, 0.0f},
      {"Elu", {}, OpCode::Elu, 1.0f, 0.0f},
      {"Elu", {{"alpha", 0.5f}}, OpCode::Elu, 0.5f, 0.0f},
      {"Selu", {}, OpCode::Selu, 1.67326319217681884765625f, 1.05070102214813232421875f},
      {"Selu", {{"alpha", 2.0f}, {"gamma", 0.5f}}, OpCode::Selu, 2.0f, 0.5f},
  };
  for (const Want& w : wants) {
    SCOPED_TRACE(w.op + " with " + std::to_string(w.attrs.size()) + " attributes");
    const OnnxImport imp = unary(w.op, w.attrs);
    const Node* n = find_op(imp.graph, w.code);
    ASSERT_NE(n, nullptr);
    EXPECT_EQ(n->attrs.alpha, w.alpha);
    if (w.code == OpCode::Selu) EXPECT_EQ(n->attrs.beta, w.beta);
    std::vector<double> expect;
    for (float v : x) {
      const double a = w.alpha, d = v;
      if (w.code == OpCode::LeakyRelu) expect.push_back(d < 0 ? a * d : d);
      if (w.code == OpCode::Elu) expect.push_back(d < 0 ? a * std::expm1(d) : d);
      if (w.code == OpCode::Selu) expect.push_back(w.beta * (d <= 0 ? a * std::expm1(d) : d));
    }
    expect_close(run1(imp.graph, {HostTensor::from_f32({2, 3, 5}, x)}), expect);
  }
}

TEST(OnnxElementwiseTest, MathOpsMapOneToOne) {
  const std::vector<float> x = ramp(30, 3.0f, 5);
  const std::pair<const char*, OpCode> ops[] = {
      {"Softplus", OpCode::Softplus}, {"Abs", OpCode::Abs},   {"Reciprocal", OpCode::Reciprocal},
      {"Floor", OpCode::Floor},       {"Ceil", OpCode::Ceil}, {"Round", OpCode::Round},
      {"Sin", OpCode::Sin},           {"Cos", OpCode::Cos},   {"Log", OpCode::Log}};
  for (const auto& [op, code] : ops) {
    SCOPED_TRACE(op);
    const OnnxImport imp = unary(op);
    EXPECT_EQ(count_ops(imp.graph, code), 1);
    EXPECT_EQ(imp.graph.nodes.size(), 1u);
    std::vector<float> in = x;
    if (code == OpCode::Log) {
      for (float& v : in) v = std::fabs(v) + 0.01f;
    }
    std::vector<double> expect;
    for (float v : in) {
      const double d = v;
      switch (code) {
        case OpCode::Softplus: expect.push_back(std::log1p(std::exp(d))); break;
        case OpCode::Abs: expect.push_back(std::fabs(d)); break;
        case OpCode::Reciprocal: expect.push_back(1.0 / d); break;
        case OpCode::Floor: expect.push_back(std::floor(d)); break;
        case OpCode::Ceil: expect.push_back(std::ceil(d)); break;
        case OpCode::Round: expect.push_back(std::nearbyint(d)); break;
        case OpCode::Sin: expect.push_back(std::sin(d)); break;
        case OpCode::Cos: expect.push_back(std::cos(d)); break;
        default: expect.push_back(std::log(d)); break;
      }
    }
    expect_close(run1(imp.graph, {HostTensor::from_f32({2, 3, 5}, in)}), expect);
  }
}

TEST(OnnxElementwiseTest, PReluSlopeBroadcastsToX) {
  OnnxModel m(17);
  m.input("x", kFloat, {"2", "3", "2", "2"});
  m.init_f32("slope", {3, 1, 1}, {0.1f, -2.0f, 0.5f});
  m.node("PRelu", {"x", "slope"}, {"y"}, "prelu");
  m.output("y");
  const OnnxImport imp = import_model(m);
  ASSERT_EQ(count_ops(imp.graph, OpCode::PRelu), 1);
  const std::vector<float> x = ramp(24, 2.0f, 7);
  std::vector<double> expect;
  const double slope[] = {0.1f, -2.0f, 0.5f};
  for (size_t i = 0; i < x.size(); ++i) expect.push_back(x[i] < 0 ? slope[(i / 4) % 3] * x[i] : x[i]);
  expect_close(run1(imp.graph, {HostTensor::from_f32({2, 3, 2, 2}, x)}), expect);

  OnnxModel bad(17);
  bad.input("x", kFloat, {"2", "3", "2", "2"});
  bad.init_f32("slope", {3}, {0.1f, 0.2f, 0.3f});  // aligns with the last axis (2): not PyTorch's [C, 1, 1]
  bad.node("PRelu", {"x", "slope"}, {"y"}, "prelu_bad");
  bad.output("y");
  EXPECT_NE(import_error(bad).find("PRelu node 'prelu_bad' (opset 17): slope [3] does not broadcast to x [2, 3, 2, 2]"),
            std::string::npos)
      << import_error(bad);
}

TEST(OnnxElementwiseTest, ComparisonsAndLogicalOpsAtRunTime) {
  OnnxModel m(17);
  m.input("a", kFloat, {"4"});
  m.input("b", kFloat, {"4"});
  m.node("Greater", {"a", "b"}, {"gt"});
  m.node("LessOrEqual", {"a", "b"}, {"le"});
  m.node("Xor", {"gt", "le"}, {"x1"});  // always true
  m.node("GreaterOrEqual", {"a", "b"}, {"ge"});
  m.node("Less", {"a", "b"}, {"lt"});
  m.node("Or", {"ge", "lt"}, {"o"});  // always true
  m.node("And", {"x1", "o"}, {"t"});
  m.node("Not", {"gt"}, {"ngt"});
  m.node("And", {"t", "ngt"}, {"y"});  // = a <= b
  m.output("y", kBool);
  const OnnxImport imp = import_model(m);
  for (OpCode op : {OpCode::Greater, OpCode::LessOrEqual, OpCode::Xor, OpCode::GreaterOrEqual, OpCode::Less,
                    OpCode::Or, OpCode::Not}) {
    EXPECT_EQ(count_ops(imp.graph, op), 1) << to_string(op);
  }
  EXPECT_EQ(count_ops(imp.graph, OpCode::And), 2);
  EXPECT_EQ(count_ops(imp.graph, OpCode::Equal), 0);  // Not is no longer equal(x, false)
  const std::vector<uint8_t> y = run_bytes(imp.graph, {HostTensor::from_f32({4}, {1.0f, 2.0f, -1.0f, NAN}),
                                                       HostTensor::from_f32({4}, {1.0f, 1.0f, 3.0f, 0.0f})});
  // NaN: every comparison false, so gt false, le false: xor false -> y false.
  EXPECT_EQ(y, (std::vector<uint8_t>{1, 0, 1, 0}));
}

TEST(OnnxElementwiseTest, ComparisonsOnShapeValuesAreEvaluatedAtExport) {
  // Shape(x)[1] >= 4 and <= 2 and Xor of them, Sum of dims, all known at export: no run-time op.
  OnnxModel m(17);
  m.input("x", kFloat, {"2", "5"});
  m.node("Shape", {"x"}, {"s"});
  testing::const_i64(m, "i", {1}, true);
  m.node("Gather", {"s", "i"}, {"d"});
  testing::const_i64(m, "four", {4}, true);
  testing::const_i64(m, "two", {2}, true);
  m.node("GreaterOrEqual", {"d", "four"}, {"ge"});
  m.node("LessOrEqual", {"d", "two"}, {"le"});
  m.node("Xor", {"ge", "le"}, {"c"});  // true
  m.node("Sum", {"d", "four", "two"}, {"total"});  // 11
  attr_i(m.node("Cast", {"total"}, {"tf"}), "to", onnx::TensorProto::FLOAT);
  m.init_f32("zero", {}, {0.0f});
  m.node("Where", {"c", "tf", "zero"}, {"w"});
  m.node("Add", {"x", "w"}, {"y"});
  m.output("y");
  const OnnxImport imp = import_model(m);
  for (OpCode op : {OpCode::GreaterOrEqual, OpCode::LessOrEqual, OpCode::Xor, OpCode::Where}) {
    EXPECT_EQ(count_ops(imp.graph, op), 0) << to_string(op);
  }
  const std::vector<float> x = ramp(10, 1.0f, 9);
  std::vector<double> expect;
  for (float v : x) expect.push_back(v + 11.0);
  expect_close(run1(imp.graph, {HostTensor::from_f32({2, 5}, x)}), expect);
}

TEST(OnnxElementwiseTest, VariadicOpsAreChainsOfBinaryOps) {
  const std::vector<int64_t> dims[] = {{2, 3}, {3}, {2, 1}, {1}};
  std::vector<std::vector<float>> data;
  for (int i = 0; i < 4; ++i) data.push_back(ramp(static_cast<size_t>(dims[i].size() == 2 ? dims[i][0] * dims[i][1] : dims[i][0]), 2.0f, 11 + i));
  for (const char* op : {"Max", "Min", "Sum", "Mean"}) {
    for (int n = 1; n <= 4; ++n) {
      SCOPED_TRACE(std::string(op) + " of " + std::to_string(n));
      OnnxModel m(17);
      std::vector<std::string> names;
      std::vector<HostTensor> feeds;
      for (int i = 0; i < n; ++i) {
        names.push_back("v" + std::to_string(i));
        std::vector<std::string> d;
        for (int64_t v : dims[i]) d.push_back(std::to_string(v));
        m.input(names.back(), kFloat, d);
        feeds.push_back(HostTensor::from_f32(dims[i], data[static_cast<size_t>(i)]));
      }
      m.node(op, names, {"r"}, "variadic");
      m.node("Relu", {"r"}, {"y"});  // so a single input's alias is not a graph output
      m.output("y");
      const OnnxImport imp = import_model(m);
      const std::string o = op;
      const OpCode chain = o == "Max" ? OpCode::Max : o == "Min" ? OpCode::Min : OpCode::Add;
      EXPECT_EQ(count_ops(imp.graph, chain), n - 1);
      EXPECT_EQ(count_ops(imp.graph, OpCode::Div), o == "Mean" && n > 1 ? 1 : 0);
      // The oracle over the broadcast [2, 3].
      std::vector<double> expect;
      for (int r = 0; r < 2; ++r) {
        for (int c = 0; c < 3; ++c) {
          double acc = data[0][static_cast<size_t>(r * 3 + c)];
          for (int i = 1; i < n; ++i) {
            const double v = i == 1 ? data[1][static_cast<size_t>(c)] : i == 2 ? data[2][static_cast<size_t>(r)] : data[3][0];
            acc = o == "Max" ? std::max(acc, v) : o == "Min" ? std::min(acc, v) : acc + v;
          }
          if (o == "Mean") acc /= n;
          expect.push_back(acc < 0 ? 0.0 : acc);
        }
      }
      expect_close(run1(imp.graph, feeds), expect);
    }
  }
}

TEST(OnnxElementwiseTest, IntegerMaxMinAbsNeg) {
  OnnxModel m(17);
  m.input("a", kInt32, {"3"});
  m.input("b", kInt32, {"3"});
  m.node("Max", {"a", "b"}, {"mx"});
  m.node("Neg", {"mx"}, {"n"});
  m.node("Abs", {"n"}, {"ab"});
  m.node("Min", {"ab", "b"}, {"y"});
  m.output("y", kInt32);
  const OnnxImport imp = import_model(m);
  auto i32 = [](std::vector<int32_t> v) {
    HostTensor t;
    t.dtype = ScalarType::I32;
    t.dims = {static_cast<int64_t>(v.size())};
    t.bytes.resize(v.size() * 4);
    std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
    return t;
  };
  const std::vector<uint8_t> out = run_bytes(imp.graph, {i32({-5, 7, -2147483647 - 1}), i32({3, -9, 5})});
  std::vector<int32_t> y(3);
  std::memcpy(y.data(), out.data(), 12);
  // max(-5, 3) = 3 -> |-3| = 3, min(3, 3) = 3; max(7, -9) = 7 -> 7, min(7, -9) = -9; max(INT_MIN, 5)
  // = 5 -> 5, min(5, 5) = 5.
  EXPECT_EQ(y, (std::vector<int32_t>{3, -9, 5}));
}

TEST(OnnxElementwiseTest, RefusalsNameTheNodeAndTheReason) {
  auto one = [](const char* op, int32_t type, const char* attr, float v) {
    OnnxModel m(17);
    m.input("x", type, {"3"});
    auto& n = m.node(op, {"x"}, {"y"}, "bad");
    if (attr != nullptr) attr_f(n, attr, v);
    m.output("y", type);
    return import_error(m);
  };
  EXPECT_NE(one("Log", kInt32, nullptr, 0).find("Log node 'bad' (opset 17): input 0 ('x') has dtype i32, which Ember's "
                                               "Log does not support (f32)"),
            std::string::npos);
  EXPECT_NE(one("Abs", onnx::TensorProto::INT8, nullptr, 0).find("has dtype i8, which Ember's Abs does not support (f32, i32, i64)"),
            std::string::npos);
  EXPECT_NE(one("LeakyRelu", kFloat, "beta", 1.0f).find("attribute 'beta' is not supported"), std::string::npos);
  EXPECT_NE(one("Elu", kFloat, "alpha", INFINITY).find("attribute 'alpha' must be finite"), std::string::npos);
  EXPECT_NE(one("Selu", kFloat, "gamma", NAN).find("attribute 'gamma' must be finite"), std::string::npos);
  EXPECT_NE(one("Not", kFloat, nullptr, 0).find("has dtype f32, which Ember's Not does not support (bool)"),
            std::string::npos);
  EXPECT_NE(one("Softplus", kInt32, nullptr, 0).find("Softplus does not support"), std::string::npos);
  {  // mixed dtypes in a comparison
    OnnxModel m(17);
    m.input("a", kFloat, {"3"});
    m.input("b", kInt32, {"3"});
    m.node("Greater", {"a", "b"}, {"y"}, "cmp");
    m.output("y", kBool);
    EXPECT_NE(import_error(m).find("inputs have dtypes f32 and i32 (must match)"), std::string::npos);
  }
  {  // Sum on integers: no integer add kernel
    OnnxModel m(17);
    m.input("a", kInt32, {"3"});
    m.input("b", kInt32, {"3"});
    m.node("Sum", {"a", "b"}, {"y"}, "sum");
    m.output("y", kInt32);
    EXPECT_NE(import_error(m).find("has dtype i32, which Ember's Sum does not support (f32)"), std::string::npos);
  }
  {  // Max with mismatched dtypes, then with no inputs, then with an empty name
    OnnxModel m(17);
    m.input("a", kFloat, {"3"});
    m.input("b", kInt32, {"3"});
    m.node("Max", {"a", "b"}, {"y"}, "mx");
    m.output("y");
    EXPECT_NE(import_error(m).find("input 1 has dtype i32, input 0 f32 (must match)"), std::string::npos);
    OnnxModel none(17);
    none.input("a", kFloat, {"3"});
    none.node("Max", {}, {"y"}, "mx0");
    none.output("y");
    EXPECT_NE(import_error(none).find("Max node 'mx0' (opset 17): takes 1 or more inputs, got none"), std::string::npos)
        << import_error(none);
    OnnxModel empty(17);
    empty.input("a", kFloat, {"3"});
    empty.node("Mean", {"a", ""}, {"y"}, "mean");
    empty.output("y");
    EXPECT_NE(import_error(empty).find("input 1 is empty"), std::string::npos) << import_error(empty);
  }
}

}  // namespace
}  // namespace ember::exporter
