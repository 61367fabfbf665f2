// ONNX ops the importer lowers to other Ember ops or evaluates at export: Einsum (Transpose /
// Reshape / ReduceSum / MatMul), ScatterND (export time only), Not (Equal with false), ReduceL2
// (Sqrt of ReduceSum of squares). Each is checked against the test's own brute-force oracle, plus
// the refusals with their messages.
#include "exporter/importers/onnx/onnx_importer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tests/exporter/onnx_importer_test_util.h"
#include "tests/exporter/onnx_test_util.h"

namespace ember::exporter {
namespace {

using testing::attr_i;
using testing::attr_ints;
using testing::attr_s;
using testing::count_ops;
using testing::expect_close;
using testing::import_error;
using testing::import_model;
using testing::kFloat;
using testing::OnnxModel;
using testing::ramp;
using testing::run1;

std::vector<std::string> dims_text(const std::vector<int64_t>& d) {
  std::vector<std::string> s;
  for (int64_t x : d) s.push_back(std::to_string(x));
  return s;
}

// Einsum by brute force over every assignment of the letters, in double. Terms have no spaces.
std::vector<double> einsum_ref(const std::vector<std::string>& terms, const std::string& out,
                               const std::vector<std::vector<float>>& data, const std::map<char, int64_t>& size) {
  std::string letters;  // every letter of the operands, once
  for (const std::string& t : terms) {
    for (char c : t) {
      if (letters.find(c) == std::string::npos) letters += c;
    }
  }
  size_t out_n = 1;
  for (char c : out) out_n *= static_cast<size_t>(size.at(c));
  std::vector<double> y(out_n, 0.0);
  std::map<char, int64_t> at;
  for (char c : letters) at[c] = 0;
  auto flat = [&](const std::string& t) {
    size_t i = 0;
    for (char c : t) i = i * static_cast<size_t>(size.at(c)) + static_cast<size_t>(at[c]);
    return i;
  };
  for (;;) {
    double p = 1.0;
    for (size_t k = 0; k < terms.size(); ++k) p *= data[k][flat(terms[k])];
    y[flat(out)] += p;
    size_t j = letters.size();
    while (j-- > 0) {
      if (++at[letters[j]] < size.at(letters[j])) break;
      at[letters[j]] = 0;
    }
    if (j == static_cast<size_t>(-1)) break;
  }
  return y;
}

struct EinsumCase {
  std::string equation;  // as written in the node (may have spaces, may be implicit)
  std::vector<std::string> terms;
  std::string out;
  int matmuls;
};

TEST(OnnxLoweringTest, EinsumMatchesBruteForce) {
  const std::map<char, int64_t> size = {{'B', 2}, {'G', 1}, {'H', 3}, {'I', 4}, {'J', 5}, {'D', 6},
                                        {'a', 2}, {'b', 3}, {'c', 4}, {'d', 5}};
  const std::vector<EinsumCase> cases = {
      {"B G H I D, B G H J D -> B G H I J", {"BGHID", "BGHJD"}, "BGHIJ", 1},  // MaxViT q @ k^T
      {"B G H I J, B G H J D -> B G H I D", {"BGHIJ", "BGHJD"}, "BGHID", 1},  // MaxViT attn @ v
      {"abc,cd->abd", {"abc", "cd"}, "abd", 1},                               // two free letters on the left
      {"abc,bcd->da", {"abc", "bcd"}, "da", 1},                               // two contracted, permuted out
      {"ab,cd->abcd", {"ab", "cd"}, "abcd", 1},                               // outer product
      {"abc,ad->bd", {"abc", "ad"}, "bd", 1},                                 // c summed before the matmul
      {"ab,bc", {"ab", "bc"}, "ac", 1},                                       // implicit output
      {"abc->cb", {"abc"}, "cb", 0},                                          // sum + permute
      {"abc->bca", {"abc"}, "bca", 0},                                        // permute only
  };
  uint32_t seed = 7;
  for (const EinsumCase& c : cases) {
    SCOPED_TRACE(c.equation);
    OnnxModel m(17);
    std::vector<std::string> names;
    std::vector<std::vector<float>> data;
    std::vector<HostTensor> inputs;
    for (size_t k = 0; k < c.terms.size(); ++k) {
      std::vector<int64_t> d;
      size_t n = 1;
      for (char ch : c.terms[k]) {
        d.push_back(size.at(ch));
        n *= static_cast<size_t>(size.at(ch));
      }
      names.push_back("x" + std::to_string(k));
      m.input(names.back(), kFloat, dims_text(d));
      data.push_back(ramp(n, 1.0f, seed++));
      inputs.push_back(HostTensor::from_f32(d, data.back()));
    }
    attr_s(m.node("Einsum", names, {"y"}), "equation", c.equation);
    m.output("y");
    const OnnxImport imp = import_model(m);
    EXPECT_EQ(count_ops(imp.graph, OpCode::MatMul), c.matmuls);
    expect_close(run1(imp.graph, inputs), einsum_ref(c.terms, c.out, data, size));
  }
}

TEST(OnnxLoweringTest, EinsumRefusalsNameTheReason) {
  struct Bad {
    std::string equation;
    std::vector<std::vector<std::string>> dims;
    std::string expect;
  };
  const std::vector<Bad> bad = {
      {"...ij,...jk->...ik", {{"2", "3", "4"}, {"2", "4", "5"}}, "ellipsis"},
      {"ii->i", {{"3", "3"}}, "diagonals are not supported"},
      {"ij,jk,kl->il", {{"2", "3"}, {"3", "4"}, {"4", "5"}}, "supported with one or two"},
      {"ij,jk->ik", {{"2", "3"}, {"4", "5"}}, "letter 'j' has size 3 in operand 0 and 4 in operand 1"},
      {"ijk,jk->ik", {{"2", "3"}, {"3", "4"}}, "operand 0 has rank 2, its term 'ijk' has 3 letters"},
      {"ij,jk->iz", {{"2", "3"}, {"3", "4"}}, "output letter 'z'"},
  };
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.equation);
    OnnxModel m(17);
    std::vector<std::string> names;
    for (size_t k = 0; k < b.dims.size(); ++k) {
      names.push_back("x" + std::to_string(k));
      m.input(names.back(), kFloat, b.dims[k]);
    }
    attr_s(m.node("Einsum", names, {"y"}, "the_einsum"), "equation", b.equation);
    m.output("y");
    const std::string err = import_error(m);
    EXPECT_NE(err.find("Einsum node 'the_einsum' (opset 17)"), std::string::npos) << err;
    EXPECT_NE(err.find(b.expect), std::string::npos) << err;
  }
}

// ScatterND of constants: y = x + scatter(zeros, indices, updates), so the result reaches the output.
TEST(OnnxLoweringTest, ScatterNDOfConstantsIsEvaluatedAtExport) {
  OnnxModel m(17);
  m.input("x", kFloat, {"3", "2", "2"});
  m.init_f32("data", {3, 2, 2}, std::vector<float>(12, 0.5f));
  m.init_i64("idx", {2, 2}, {2, 1, -3, 0});  // rows (2, 1) and (0, 0) after wrapping -3
  m.init_f32("upd", {2, 2}, {1, 2, 3, 4});
  m.node("ScatterND", {"data", "idx", "upd"}, {"s"});
  m.node("Add", {"x", "s"}, {"y"});
  m.output("y");
  const OnnxImport imp = import_model(m);
  EXPECT_EQ(imp.stats.evaluated_at_export >= 1, true);
  const std::vector<float> x = ramp(12, 1.0f, 3);
  std::vector<double> expect(12);
  std::vector<double> s(12, 0.5);
  s[2 * 4 + 1 * 2 + 0] = 1;
  s[2 * 4 + 1 * 2 + 1] = 2;
  s[0] = 3;
  s[1] = 4;
  for (size_t i = 0; i < 12; ++i) expect[i] = x[i] + s[i];
  expect_close(run1(imp.graph, {HostTensor::from_f32({3, 2, 2}, x)}), expect);
}

TEST(OnnxLoweringTest, ScatterNDRefusals) {
  {  // run-time data
    OnnxModel m(17);
    m.input("x", kFloat, {"3", "2"});
    m.init_i64("idx", {1, 1}, {0});
    m.init_f32("upd", {1, 2}, {1, 2});
    m.node("ScatterND", {"x", "idx", "upd"}, {"y"}, "sc");
    m.output("y");
    const std::string err = import_error(m);
    EXPECT_NE(err.find("ScatterND node 'sc'"), std::string::npos) << err;
    EXPECT_NE(err.find("must be known at export"), std::string::npos) << err;
  }
  {  // index out of range
    OnnxModel m(17);
    m.input("x", kFloat, {"3", "2"});
    m.init_f32("data", {3, 2}, std::vector<float>(6, 0.0f));
    m.init_i64("idx", {1, 1}, {3});
    m.init_f32("upd", {1, 2}, {1, 2});
    m.node("ScatterND", {"data", "idx", "upd"}, {"s"}, "sc");
    m.node("Add", {"x", "s"}, {"y"});
    m.output("y");
    const std::string err = import_error(m);
    EXPECT_NE(err.find("index 3 is out of range for dim 0 of size 3"), std::string::npos) << err;
  }
  {  // updates of the wrong shape
    OnnxModel m(17);
    m.input("x", kFloat, {"3", "2"});
    m.init_f32("data", {3, 2}, std::vector<float>(6, 0.0f));
    m.init_i64("idx", {1, 1}, {1});
    m.init_f32("upd", {1, 3}, {1, 2, 3});
    m.node("ScatterND", {"data", "idx", "upd"}, {"s"}, "sc");
    m.node("Add", {"x", "s"}, {"y"});
    m.output("y");
    EXPECT_NE(import_error(m).find("updates have the wrong shape"), std::string::npos);
  }
  {  // a reduction
    OnnxModel m(17);
    m.input("x", kFloat, {"3", "2"});
    m.init_f32("data", {3, 2}, std::vector<float>(6, 0.0f));
    m.init_i64("idx", {1, 1}, {1});
    m.init_f32("upd", {1, 2}, {1, 2});
    attr_s(m.node("ScatterND", {"data", "idx", "upd"}, {"s"}, "sc"), "reduction", "add");
    m.node("Add", {"x", "s"}, {"y"});
    m.output("y");
    EXPECT_NE(import_error(m).find("reduction 'add' is not supported"), std::string::npos);
  }
}

// y = Where(Not(x == 0.5), x, -1): a run-time Not (the not op since issue 17; it was equal(x, false)).
TEST(OnnxLoweringTest, NotIsTheNotOp) {
  OnnxModel m(17);
  m.input("x", kFloat, {"6"});
  m.init_f32("half", {}, {0.5f});
  m.init_f32("minus", {}, {-1.0f});
  m.node("Equal", {"x", "half"}, {"e"});
  m.node("Not", {"e"}, {"n"});
  m.node("Where", {"n", "x", "minus"}, {"y"});
  m.output("y");
  const OnnxImport imp = import_model(m);
  EXPECT_EQ(count_ops(imp.graph, OpCode::Equal), 1);
  EXPECT_EQ(count_ops(imp.graph, OpCode::Not), 1);
  const std::vector<float> x = {0.5f, 1.0f, -2.0f, 0.5f, 0.0f, 3.0f};
  expect_close(run1(imp.graph, {HostTensor::from_f32({6}, x)}), {-1, 1, -2, -1, 0, 3});

  OnnxModel bad(17);
  bad.input("x", kFloat, {"6"});
  bad.node("Not", {"x"}, {"y"}, "not_float");
  bad.output("y");
  EXPECT_NE(import_error(bad).find("input 0 ('x') has dtype f32, which Ember's Not does not support (bool)"),
            std::string::npos);
}

TEST(OnnxLoweringTest, ReduceL2AtOpsets13And18) {
  for (int opset : {13, 18}) {
    SCOPED_TRACE(opset);
    OnnxModel m(opset);
    m.input("x", kFloat, {"2", "3", "4"});
    std::vector<std::string> ins = {"x"};
    if (opset >= 18) {
      m.init_i64("axes", {1}, {-1});
      ins.push_back("axes");
    }
    auto& n = m.node("ReduceL2", ins, {"y"});
    if (opset < 18) attr_ints(n, "axes", {-1});
    attr_i(n, "keepdims", 1);
    m.output("y");
    const OnnxImport imp = import_model(m);
    const std::vector<float> x = ramp(24, 2.0f, 11);
    std::vector<double> expect(6, 0.0);
    for (size_t i = 0; i < 24; ++i) expect[i / 4] += static_cast<double>(x[i]) * x[i];
    for (double& v : expect) v = std::sqrt(v);
    expect_close(run1(imp.graph, {HostTensor::from_f32({2, 3, 4}, x)}), expect);
  }
}

}  // namespace
}  // namespace ember::exporter
