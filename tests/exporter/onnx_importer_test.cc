#include "exporter/importers/onnx/onnx_importer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include "exporter/importers/builder/graph_builder.h"
#include "exporter/importers/onnx/input_shape.h"
#include "exporter/passes/batch_norm_folding.h"
#include "runtime/kernel/op_info.h"
#include "tests/exporter/onnx_test_util.h"

namespace ember::exporter {
namespace {

using testing::attr_f;
using testing::attr_i;
using testing::attr_ints;
using testing::attr_s;
using testing::attr_t;
using testing::const_i64;
using testing::count_ops;
using testing::find_op;
using testing::import_model;
using testing::OnnxModel;
using testing::ramp;
using testing::run1;

constexpr int32_t kFloat = onnx::TensorProto::FLOAT;

#define REQUIRE_OP(op) ASSERT_NE(find_op_info(op), nullptr) << "op " << static_cast<int>(op) << " has no OpInfo"

// The first problem (or "") of an import, as text.
std::string import_error(OnnxModel& m, std::vector<std::string> shapes = {}, const std::string& dir = ".") {
  try {
    import_model(m, std::move(shapes), dir);
  } catch (const ExportError& e) {
    return e.what();
  }
  return "";
}

void expect_close(const std::vector<float>& actual, const std::vector<double>& expected, double tol = 1e-5) {
  ASSERT_EQ(actual.size(), expected.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    num += (actual[i] - expected[i]) * (actual[i] - expected[i]);
    den += expected[i] * expected[i];
    if (std::abs(actual[i] - expected[i]) > tol * (1 + std::abs(expected[i]))) {
      ADD_FAILURE() << "first mismatch at " << i << ": " << actual[i] << " vs " << expected[i];
      return;
    }
  }
  EXPECT_LE(std::sqrt(num / (den + 1e-30)), tol);
}

// Direct NCHW convolution in double: the test's own oracle.
std::vector<double> conv_ref(const std::vector<float>& x, std::vector<int64_t> xd, const std::vector<float>& w,
                             std::vector<int64_t> wd, const std::vector<float>* b, int stride, int pad_t, int pad_l,
                             int pad_b, int pad_r, int dil, int groups, std::vector<int64_t>* out_dims) {
  const int64_t n = xd[0], c = xd[1], h = xd[2], wi = xd[3], o = wd[0], cg = wd[1], kh = wd[2], kw = wd[3];
  const int64_t oh = (h + pad_t + pad_b - dil * (kh - 1) - 1) / stride + 1;
  const int64_t ow = (wi + pad_l + pad_r - dil * (kw - 1) - 1) / stride + 1;
  *out_dims = {n, o, oh, ow};
  std::vector<double> y(static_cast<size_t>(n * o * oh * ow));
  const int64_t og = o / groups;
  for (int64_t in = 0; in < n; ++in)
    for (int64_t oc = 0; oc < o; ++oc)
      for (int64_t yy = 0; yy < oh; ++yy)
        for (int64_t xx = 0; xx < ow; ++xx) {
          double acc = b ? (*b)[static_cast<size_t>(oc)] : 0.0;
          const int64_t g = oc / og;
          for (int64_t ic = 0; ic < cg; ++ic)
            for (int64_t ky = 0; ky < kh; ++ky)
              for (int64_t kx = 0; kx < kw; ++kx) {
                const int64_t sy = yy * stride - pad_t + ky * dil, sx = xx * stride - pad_l + kx * dil;
                if (sy < 0 || sy >= h || sx < 0 || sx >= wi) continue;
                const int64_t ch = g * cg + ic;
                acc += static_cast<double>(x[static_cast<size_t>(((in * c + ch) * h + sy) * wi + sx)]) *
                       w[static_cast<size_t>(((oc * cg + ic) * kh + ky) * kw + kx)];
              }
          y[static_cast<size_t>(((in * o + oc) * oh + yy) * ow + xx)] = acc;
        }
  return y;
}

// ---- Input shapes -------------------------------------------------------------------------------

TEST(InputShapeTest, ParsesSizesSymbolsAndBareNames) {
  const InputShapeSpec a = parse_input_shape("input=batch:1..8x3x224x224");
  EXPECT_EQ(a.name, "input");
  ASSERT_EQ(a.dims.size(), 4u);
  EXPECT_EQ(a.dims[0].symbol, "batch");
  EXPECT_EQ(a.dims[0].min, 1);
  EXPECT_EQ(a.dims[0].max, 8);
  EXPECT_EQ(a.dims[3].size, 224);
  const InputShapeSpec b = parse_input_shape("x=1x3x224x224");
  EXPECT_EQ(b.dims[0].size, 1);
  const auto both = parse_input_shapes({"ids=batch:4xmax_len:2..128", "mask=batchxmax_len"});
  ASSERT_EQ(both[1].dims.size(), 2u);
  EXPECT_EQ(both[1].dims[0].symbol, "batch");
  EXPECT_EQ(both[1].dims[1].symbol, "max_len");
  EXPECT_EQ(both[0].dims[0].min, 1);
  for (const char* bad : {"noequals", "=3", "x=3x", "x=batch", "x=b:9..2", "x=3xq", "x=b:1..", "x=3y4"}) {
    EXPECT_THROW(parse_input_shape(bad), ExportError) << bad;
  }
  EXPECT_THROW(parse_input_shapes({"x=1", "x=2"}), ExportError);
}

// ---- Op mappings --------------------------------------------------------------------------------

TEST(OnnxImporterTest, ConvPadsDilationsGroupsBiasMatchReference) {
  OnnxModel m;
  m.input("x", kFloat, {"1", "4", "7", "6"});
  const auto w = ramp(6 * 2 * 3 * 3, 0.5f, 2), b = ramp(6, 0.5f, 3);
  m.init_f32("w", {6, 2, 3, 3}, w);
  m.init_f32("b", {6}, b, /*raw=*/false);
  auto& n = m.node("Conv", {"x", "w", "b"}, {"y"}, "conv");
  attr_ints(n, "pads", {1, 2, 0, 1});
  attr_ints(n, "strides", {2, 2});
  attr_ints(n, "dilations", {1, 2});
  attr_i(n, "group", 2);
  attr_ints(n, "kernel_shape", {3, 3});
  m.output("y");
  OnnxImport imp = import_model(m);
  const Node* conv = find_op(imp.graph, OpCode::Conv2d);
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->attrs.padding[0], 1);  // top
  EXPECT_EQ(conv->attrs.padding[1], 2);  // left
  EXPECT_EQ(conv->attrs.padding[2], 0);  // bottom
  EXPECT_EQ(conv->attrs.padding[3], 1);  // right
  EXPECT_EQ(conv->attrs.groups, 2);
  EXPECT_EQ(conv->attrs.dilation[1], 2);
  const auto x = ramp(4 * 7 * 6, 1.0f, 4);
  // The reference with dilation 2 on the width only: emulate by running the general formula per axis.
  std::vector<int64_t> od;
  // Width dilation differs from height: compute directly.
  std::vector<double> ref;
  {
    const int64_t oh = (7 + 1 + 0 - 2 - 1) / 2 + 1, ow = (6 + 2 + 1 - 4 - 1) / 2 + 1;
    ref.assign(static_cast<size_t>(6 * oh * ow), 0.0);
    for (int64_t oc = 0; oc < 6; ++oc)
      for (int64_t yy = 0; yy < oh; ++yy)
        for (int64_t xx = 0; xx < ow; ++xx) {
          double acc = b[static_cast<size_t>(oc)];
          const int64_t g = oc / 3;
          for (int64_t ic = 0; ic < 2; ++ic)
            for (int64_t ky = 0; ky < 3; ++ky)
              for (int64_t kx = 0; kx < 3; ++kx) {
                const int64_t sy = yy * 2 - 1 + ky, sx = xx * 2 - 2 + kx * 2;
                if (sy < 0 || sy >= 7 || sx < 0 || sx >= 6) continue;
                acc += static_cast<double>(x[static_cast<size_t>(((g * 2 + ic) * 7 + sy) * 6 + sx)]) *
                       w[static_cast<size_t>(((oc * 2 + ic) * 3 + ky) * 3 + kx)];
              }
          ref[static_cast<size_t>((oc * oh + yy) * ow + xx)] = acc;
        }
  }
  expect_close(run1(imp.graph, {HostTensor::from_f32({1, 4, 7, 6}, x)}), ref);
}

TEST(OnnxImporterTest, ConvAutoPadSameUpperLowerValid) {
  struct Case {
    const char* mode;
    int pads[4];
  };
  // in 8, k 3, stride 2 -> out 4, total pad 1.
  for (const Case& c : {Case{"SAME_UPPER", {0, 0, 1, 1}}, Case{"SAME_LOWER", {1, 1, 0, 0}}, Case{"VALID", {0, 0, 0, 0}}}) {
    SCOPED_TRACE(c.mode);
    OnnxModel m;
    m.input("x", kFloat, {"1", "2", "8", "8"});
    const auto w = ramp(3 * 2 * 9, 0.5f, 5);
    m.init_f32("w", {3, 2, 3, 3}, w);
    auto& n = m.node("Conv", {"x", "w"}, {"y"}, "conv");
    attr_s(n, "auto_pad", c.mode);
    attr_ints(n, "strides", {2, 2});
    m.output("y");
    OnnxImport imp = import_model(m);
    const Node* conv = find_op(imp.graph, OpCode::Conv2d);
    ASSERT_NE(conv, nullptr);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(conv->attrs.padding[i], c.pads[i]) << i;
    const auto x = ramp(2 * 64, 1.0f, 6);
    std::vector<int64_t> od;
    const auto ref = conv_ref(x, {1, 2, 8, 8}, w, {3, 2, 3, 3}, nullptr, 2, c.pads[0], c.pads[1], c.pads[2], c.pads[3], 1, 1, &od);
    expect_close(run1(imp.graph, {HostTensor::from_f32({1, 2, 8, 8}, x)}), ref);
  }
}

TEST(OnnxImporterTest, GemmVariantsMatchReference) {
  const int64_t M = 3, K = 4, N = 5;
  for (int trans_a = 0; trans_a < 2; ++trans_a)
    for (int trans_b = 0; trans_b < 2; ++trans_b)
      for (int c_kind = 0; c_kind < 3; ++c_kind)  // none, [N], [M, N]
        for (int b_const = 0; b_const < 2; ++b_const) {
          SCOPED_TRACE(std::to_string(trans_a) + std::to_string(trans_b) + std::to_string(c_kind) + std::to_string(b_const));
          OnnxModel m;
          m.input("a", kFloat, trans_a ? std::vector<std::string>{"4", "3"} : std::vector<std::string>{"3", "4"});
          const auto bv = ramp(static_cast<size_t>(K * N), 1.0f, 7);
          const std::vector<int64_t> bd = trans_b ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N};
          if (b_const) {
            m.init_f32("b", bd, bv);
          } else {
            m.input("b", kFloat, {std::to_string(bd[0]), std::to_string(bd[1])});
          }
          std::vector<std::string> ins = {"a", "b"};
          const auto cv = ramp(static_cast<size_t>(c_kind == 2 ? M * N : N), 1.0f, 8);
          if (c_kind == 1) m.init_f32("c", {N}, cv);
          if (c_kind == 2) m.init_f32("c", {M, N}, cv);
          if (c_kind) ins.push_back("c");
          auto& n = m.node("Gemm", ins, {"y"}, "gemm");
          attr_i(n, "transA", trans_a);
          attr_i(n, "transB", trans_b);
          attr_f(n, "alpha", 0.5f);
          attr_f(n, "beta", 2.0f);
          m.output("y");
          OnnxImport imp = import_model(m);
          if (b_const) {
            EXPECT_EQ(count_ops(imp.graph, OpCode::Linear), 1);
          }
          const auto av = ramp(static_cast<size_t>(M * K), 1.0f, 9);
          std::vector<double> ref(static_cast<size_t>(M * N));
          for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < N; ++j) {
              double acc = 0;
              for (int64_t k = 0; k < K; ++k) {
                const double a = trans_a ? av[static_cast<size_t>(k * M + i)] : av[static_cast<size_t>(i * K + k)];
                const double b = trans_b ? bv[static_cast<size_t>(j * K + k)] : bv[static_cast<size_t>(k * N + j)];
                acc += a * b;
              }
              double c = c_kind == 0 ? 0 : c_kind == 1 ? cv[static_cast<size_t>(j)] : cv[static_cast<size_t>(i * N + j)];
              ref[static_cast<size_t>(i * N + j)] = 0.5 * acc + 2.0 * c;
            }
          std::vector<HostTensor> inputs = {HostTensor::from_f32(trans_a ? std::vector<int64_t>{K, M} : std::vector<int64_t>{M, K}, av)};
          if (!b_const) inputs.push_back(HostTensor::from_f32(bd, bv));
          expect_close(run1(imp.graph, inputs), ref);
        }
}

TEST(OnnxImporterTest, MatMulWithConstantWeightBecomesLinearAndTakesTheBias) {
  OnnxModel m;
  m.input("x", kFloat, {"2", "3", "4"});
  const auto wv = ramp(4 * 6, 1.0f, 10), bv = ramp(6, 1.0f, 11);
  m.init_f32("W", {4, 6}, wv);
  m.init_f32("bias", {6}, bv);
  m.node("MatMul", {"x", "W"}, {"mm"}, "matmul");
  m.node("Add", {"bias", "mm"}, {"y"}, "add");
  m.output("y");
  OnnxImport imp = import_model(m);
  ASSERT_EQ(imp.graph.nodes.size(), 1u);
  const Node& lin = imp.graph.nodes[0];
  EXPECT_EQ(lin.op, OpCode::Linear);
  const Value& w = imp.graph.values[static_cast<size_t>(lin.inputs[1])];
  EXPECT_EQ(w.dims[0].max, 6);  // [N, K]: transposed at export
  EXPECT_EQ(w.dims[1].max, 4);
  ASSERT_GE(lin.inputs[2], 0);
  const auto xv = ramp(24, 1.0f, 12);
  std::vector<double> ref(36);
  for (int r = 0; r < 6; ++r)
    for (int j = 0; j < 6; ++j) {
      double acc = bv[static_cast<size_t>(j)];
      for (int k = 0; k < 4; ++k) acc += static_cast<double>(xv[static_cast<size_t>(r * 4 + k)]) * wv[static_cast<size_t>(k * 6 + j)];
      ref[static_cast<size_t>(r * 6 + j)] = acc;
    }
  expect_close(run1(imp.graph, {HostTensor::from_f32({2, 3, 4}, xv)}), ref);
}

TEST(OnnxImporterTest, MatMulOfTwoActivationsStaysMatMul) {
  OnnxModel m;
  m.input("a", kFloat, {"2", "3", "4"});
  m.input("b", kFloat, {"2", "4", "5"});
  m.node("MatMul", {"a", "b"}, {"y"});
  m.output("y");
  OnnxImport imp = import_model(m);
  EXPECT_EQ(count_ops(imp.graph, OpCode::MatMul), 1);
}

TEST(OnnxImporterTest, ElementwiseSoftmaxTransposeConcatSliceSplit) {
  OnnxModel m;
  m.input("x", kFloat, {"2", "3", "4"});
  m.init_f32("two", {}, {2.0f});
  m.node("Mul", {"x", "two"}, {"a"});
  m.node("Sub", {"a", "x"}, {"b"});            // = x
  m.node("Div", {"b", "two"}, {"c"});          // = x / 2
  m.node("Pow", {"c", "two"}, {"d"});          // = x^2 / 4 (-> mul)
  m.node("Relu", {"x"}, {"r"});
  m.node("Sigmoid", {"r"}, {"s"});
  m.node("Tanh", {"s"}, {"t"});
  m.node("Add", {"d", "t"}, {"e"});
  auto& sm = m.node("Softmax", {"e"}, {"f"});
  attr_i(sm, "axis", -1);
  auto& tr = m.node("Transpose", {"f"}, {"g"});
  attr_ints(tr, "perm", {0, 2, 1});  // [2, 4, 3]
  const_i64(m, "starts", {1});
  const_i64(m, "ends", {100});
  const_i64(m, "axes", {1});
  m.node("Slice", {"g", "starts", "ends", "axes"}, {"h"});  // [2, 3, 3]
  const_i64(m, "split", {1, 2});
  auto& sp = m.node("Split", {"h", "split"}, {"p0", "p1"});
  attr_i(sp, "axis", 2);
  auto& cat = m.node("Concat", {"p1", "p0"}, {"y"});
  attr_i(cat, "axis", 2);
  m.output("y");
  OnnxImport imp = import_model(m);
  EXPECT_EQ(count_ops(imp.graph, OpCode::Softmax), 1);
  EXPECT_EQ(count_ops(imp.graph, OpCode::Slice), 3);
  const auto xv = ramp(24, 2.0f, 13);
  // Reference.
  std::vector<double> e(24);
  for (size_t i = 0; i < 24; ++i) {
    const double x = xv[i];
    e[i] = (x / 2) * (x / 2) + std::tanh(1.0 / (1.0 + std::exp(-std::max(0.0, x))));
  }
  std::vector<double> f(24);
  for (int r = 0; r < 6; ++r) {
    double mx = -1e30, sum = 0;
    for (int k = 0; k < 4; ++k) mx = std::max(mx, e[static_cast<size_t>(r * 4 + k)]);
    for (int k = 0; k < 4; ++k) sum += std::exp(e[static_cast<size_t>(r * 4 + k)] - mx);
    for (int k = 0; k < 4; ++k) f[static_cast<size_t>(r * 4 + k)] = std::exp(e[static_cast<size_t>(r * 4 + k)] - mx) / sum;
  }
  // g[b, k, j] = f[b, j, k]; h = g[:, 1:, :]; y = concat(h[..., 1:], h[..., :1]).
  std::vector<double> ref;
  for (int bb = 0; bb < 2; ++bb)
    for (int k = 1; k < 4; ++k)
      for (int jj : {1, 2, 0}) ref.push_back(f[static_cast<size_t>((bb * 3 + jj) * 4 + k)]);
  expect_close(run1(imp.graph, {HostTensor::from_f32({2, 3, 4}, xv)}), ref);
}

TEST(OnnxImporterTest, PoolingAttributes) {
  OnnxModel m;
  m.input("x", kFloat, {"1", "2", "7", "7"});
  auto& mp = m.node("MaxPool", {"x"}, {"a"}, "maxpool");
  attr_ints(mp, "kernel_shape", {3, 3});
  attr_ints(mp, "strides", {2, 2});
  attr_ints(mp, "pads", {1, 1, 1, 1});
  attr_i(mp, "ceil_mode", 1);
  auto& ap = m.node("AveragePool", {"a"}, {"b"}, "avgpool");
  attr_ints(ap, "kernel_shape", {2, 2});
  attr_ints(ap, "pads", {0, 0, 1, 1});
  attr_i(ap, "count_include_pad", 1);
  m.node("GlobalAveragePool", {"b"}, {"y"}, "gap");
  m.output("y");
  OnnxImport imp = import_model(m);
  const Node* max = find_op(imp.graph, OpCode::MaxPool2d);
  const Node* avg = find_op(imp.graph, OpCode::AvgPool2d);
  ASSERT_TRUE(max && avg);
  EXPECT_TRUE(max->attrs.ceil_mode);
  EXPECT_EQ(max->attrs.kernel[0], 3);
  EXPECT_EQ(max->attrs.stride[1], 2);
  EXPECT_EQ(max->attrs.padding[3], 1);
  EXPECT_TRUE(avg->attrs.count_include_pad);
  EXPECT_EQ(avg->attrs.stride[0], 1);  // ONNX default stride is 1
  EXPECT_EQ(avg->attrs.padding[2], 1);
  const Value& y = imp.graph.values[static_cast<size_t>(imp.graph.outputs[0].value)];
  ASSERT_EQ(y.dims.size(), 4u);
  EXPECT_EQ(y.dims[2].max, 1);
}

TEST(OnnxImporterTest, LayerNormalizationMatchesReference) {
  OnnxModel m(17);
  m.input("x", kFloat, {"2", "5"});
  const auto g = ramp(5, 1.0f, 14), b = ramp(5, 1.0f, 15);
  m.init_f32("g", {5}, g);
  m.init_f32("b", {5}, b);
  auto& ln = m.node("LayerNormalization", {"x", "g", "b"}, {"y"}, "ln");
  attr_i(ln, "axis", -1);
  attr_f(ln, "epsilon", 1e-3f);
  m.output("y");
  OnnxImport imp = import_model(m);
  const auto xv = ramp(10, 3.0f, 16);
  std::vector<double> ref(10);
  for (int r = 0; r < 2; ++r) {
    double mean = 0, var = 0;
    for (int k = 0; k < 5; ++k) mean += xv[static_cast<size_t>(r * 5 + k)] / 5.0;
    for (int k = 0; k < 5; ++k) var += std::pow(xv[static_cast<size_t>(r * 5 + k)] - mean, 2) / 5.0;
    for (int k = 0; k < 5; ++k) {
      ref[static_cast<size_t>(r * 5 + k)] =
          (xv[static_cast<size_t>(r * 5 + k)] - mean) / std::sqrt(var + 1e-3f) * g[static_cast<size_t>(k)] + b[static_cast<size_t>(k)];
    }
  }
  expect_close(run1(imp.graph, {HostTensor::from_f32({2, 5}, xv)}), ref, 1e-5);
}

TEST(OnnxImporterTest, NewOpsMapWithTheirAttributes) {
  REQUIRE_OP(OpCode::Clip);
  REQUIRE_OP(OpCode::Pad);
  REQUIRE_OP(OpCode::Gather);
  REQUIRE_OP(OpCode::ReduceMean);
  REQUIRE_OP(OpCode::Cast);
  REQUIRE_OP(OpCode::HardSigmoid);
  REQUIRE_OP(OpCode::Where);
  REQUIRE_OP(OpCode::Equal);
  REQUIRE_OP(OpCode::Erf);
  OnnxModel m;
  m.input("x", kFloat, {"2", "3", "4"});
  m.init_f32("lo", {}, {-0.5f});
  m.init_f32("hi", {}, {0.5f});
  m.node("Clip", {"x", "lo", "hi"}, {"a"}, "clip");
  const_i64(m, "pads", {0, 1, 0, 0, 0, 2});
  m.node("Pad", {"a", "pads"}, {"b"}, "pad");  // [2, 4, 6]
  const_i64(m, "idx", {2, 0});
  auto& ga = m.node("Gather", {"b", "idx"}, {"c"}, "gather");  // [2, 2, 6]
  attr_i(ga, "axis", 1);
  const_i64(m, "axes", {-1});
  auto& rm = m.node("ReduceSum", {"c", "axes"}, {"d"}, "reduce");  // [2, 2, 1]
  attr_i(rm, "keepdims", 1);
  auto& hs = m.node("HardSigmoid", {"d"}, {"e"}, "hsig");
  attr_f(hs, "alpha", 0.25f);
  m.node("Erf", {"e"}, {"f"}, "erf");
  m.node("Equal", {"f", "f"}, {"g"}, "equal");
  m.node("Where", {"g", "f", "e"}, {"h"}, "where");
  auto& cast = m.node("Cast", {"h"}, {"y"}, "cast");
  attr_i(cast, "to", onnx::TensorProto::INT32);
  m.output("y", onnx::TensorProto::INT32);
  OnnxImport imp = import_model(m);
  const Node* clip = find_op(imp.graph, OpCode::Clip);
  ASSERT_NE(clip, nullptr);
  EXPECT_FLOAT_EQ(clip->attrs.clip_min, -0.5f);
  EXPECT_FLOAT_EQ(clip->attrs.clip_max, 0.5f);
  const Node* pad = find_op(imp.graph, OpCode::Pad);
  ASSERT_NE(pad, nullptr);
  EXPECT_EQ(pad->attrs.count, 3);
  EXPECT_EQ(pad->attrs.pads[1], 1);
  EXPECT_EQ(pad->attrs.pads[5], 2);
  const Node* red = find_op(imp.graph, OpCode::ReduceSum);
  ASSERT_NE(red, nullptr);
  EXPECT_EQ(red->attrs.count, 1);
  EXPECT_EQ(red->attrs.axes[0], 2);
  const Node* c = find_op(imp.graph, OpCode::Cast);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->attrs.cast_to, ScalarType::I32);
  EXPECT_FLOAT_EQ(find_op(imp.graph, OpCode::HardSigmoid)->attrs.alpha, 0.25f);
  const Value& y = imp.graph.values[static_cast<size_t>(imp.graph.outputs[0].value)];
  EXPECT_EQ(y.dtype, ScalarType::I32);
  EXPECT_EQ(format_dims(imp.graph, y.dims), "[2, 2, 1]");
}

TEST(OnnxImporterTest, ClipWithOnlyAZeroMinIsRelu) {
  OnnxModel m;
  m.input("x", kFloat, {"4"});
  m.init_f32("zero", {}, {0.0f});
  m.node("Clip", {"x", "zero"}, {"y"});
  m.output("y");
  OnnxImport imp = import_model(m);
  EXPECT_EQ(count_ops(imp.graph, OpCode::Relu), 1);
}

// ---- BatchNorm folding --------------------------------------------------------------------------

struct BnData {
  std::vector<float> scale, bias, mean, var;
};

BnData bn_data(size_t c) {
  BnData d{ramp(c, 1.0f, 20), ramp(c, 1.0f, 21), ramp(c, 0.5f, 22), ramp(c, 0.5f, 23)};
  for (float& v : d.var) v = std::abs(v) + 0.1f;
  return d;
}

void add_bn(OnnxModel& m, const std::string& x, const std::string& y, const BnData& d, size_t c, float eps) {
  const int64_t n = static_cast<int64_t>(c);
  m.init_f32(y + ".scale", {n}, d.scale);
  m.init_f32(y + ".bias", {n}, d.bias);
  m.init_f32(y + ".mean", {n}, d.mean);
  m.init_f32(y + ".var", {n}, d.var);
  auto& bn = m.node("BatchNormalization", {x, y + ".scale", y + ".bias", y + ".mean", y + ".var"}, {y}, "bn_" + y);
  attr_f(bn, "epsilon", eps);
  attr_f(bn, "momentum", 0.9f);
}

TEST(OnnxImporterTest, BatchNormFoldsIntoConvExactly) {
  OnnxModel m;
  m.input("x", kFloat, {"2", "3", "5", "5"});
  const auto w = ramp(4 * 3 * 9, 0.5f, 24), b = ramp(4, 0.5f, 25);
  m.init_f32("w", {4, 3, 3, 3}, w);
  m.init_f32("b", {4}, b);
  auto& conv = m.node("Conv", {"x", "w", "b"}, {"c"}, "conv");
  attr_ints(conv, "pads", {1, 1, 1, 1});
  const BnData d = bn_data(4);
  add_bn(m, "c", "y", d, 4, 1e-3f);
  m.output("y");
  OnnxImport imp = import_model(m);
  EXPECT_EQ(imp.stats.folded_batch_norms, 1);
  ASSERT_EQ(imp.graph.nodes.size(), 1u);
  EXPECT_EQ(imp.graph.nodes[0].op, OpCode::Conv2d);
  const auto x = ramp(2 * 3 * 25, 1.0f, 26);
  std::vector<int64_t> od;
  std::vector<double> ref = conv_ref(x, {2, 3, 5, 5}, w, {4, 3, 3, 3}, &b, 1, 1, 1, 1, 1, 1, 1, &od);
  for (size_t i = 0; i < ref.size(); ++i) {
    const size_t ch = (i / 25) % 4;
    ref[i] = (ref[i] - d.mean[ch]) / std::sqrt(static_cast<double>(d.var[ch]) + static_cast<double>(1e-3f)) * d.scale[ch] + d.bias[ch];
  }
  expect_close(run1(imp.graph, {HostTensor::from_f32({2, 3, 5, 5}, x)}), ref, 2e-6);
}

TEST(OnnxImporterTest, BatchNormFoldsIntoGemm) {
  OnnxModel m;
  m.input("x", kFloat, {"3", "4"});
  const auto w = ramp(5 * 4, 1.0f, 27);
  m.init_f32("w", {5, 4}, w);
  auto& g = m.node("Gemm", {"x", "w"}, {"g"}, "fc");
  attr_i(g, "transB", 1);
  const BnData d = bn_data(5);
  add_bn(m, "g", "y", d, 5, 1e-5f);
  m.output("y");
  OnnxImport imp = import_model(m);
  EXPECT_EQ(imp.stats.folded_batch_norms, 1);
  ASSERT_EQ(imp.graph.nodes.size(), 1u);
  const auto x = ramp(12, 1.0f, 28);
  std::vector<double> ref(15);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j) {
      double acc = 0;
      for (int k = 0; k < 4; ++k) acc += static_cast<double>(x[static_cast<size_t>(i * 4 + k)]) * w[static_cast<size_t>(j * 4 + k)];
      ref[static_cast<size_t>(i * 5 + j)] =
          (acc - d.mean[static_cast<size_t>(j)]) / std::sqrt(static_cast<double>(d.var[static_cast<size_t>(j)]) + static_cast<double>(1e-5f)) *
              d.scale[static_cast<size_t>(j)] + d.bias[static_cast<size_t>(j)];
    }
  expect_close(run1(imp.graph, {HostTensor::from_f32({3, 4}, x)}), ref, 2e-6);
}

TEST(OnnxImporterTest, BatchNormWithTwoReadersOfTheConvIsKeptAndThePassFoldsLater) {
  REQUIRE_OP(OpCode::BatchNorm);
  OnnxModel m;
  m.input("x", kFloat, {"1", "2", "4", "4"});
  m.init_f32("w", {3, 2, 1, 1}, ramp(6, 1.0f, 29));
  m.node("Conv", {"x", "w"}, {"c"}, "conv");
  add_bn(m, "c", "y", bn_data(3), 3, 1e-5f);
  m.node("Relu", {"c"}, {"r"}, "relu");
  m.output("y");
  m.output("r");
  OnnxImport imp = import_model(m);
  EXPECT_EQ(imp.stats.folded_batch_norms, 0);
  EXPECT_EQ(count_ops(imp.graph, OpCode::BatchNorm), 1);
  // The graph-level pass refuses too (the conv output has another reader).
  Graph g = imp.graph;
  EXPECT_EQ(fold_batch_norms(g), 0);
}

TEST(OnnxImporterTest, BatchNormReadersAreCountedThroughIdentityAliases) {
  // conv -> Identity -> BN folds; but when the conv output is also read directly, it must not.
  for (bool second_reader : {false, true}) {
    SCOPED_TRACE(second_reader);
    OnnxModel m;
    m.input("x", kFloat, {"1", "2", "3", "3"});
    m.init_f32("w", {2, 2, 1, 1}, ramp(4, 1.0f, 41));
    m.node("Conv", {"x", "w"}, {"c"}, "conv");
    m.node("Identity", {"c"}, {"c_id"}, "id");
    add_bn(m, "c_id", "y", bn_data(2), 2, 1e-5f);
    m.output("y");
    if (second_reader) {
      m.node("Relu", {"c"}, {"r"}, "relu");
      m.output("r");
    }
    if (second_reader && find_op_info(OpCode::BatchNorm) == nullptr) continue;
    OnnxImport imp = import_model(m);
    EXPECT_EQ(imp.stats.folded_batch_norms, second_reader ? 0 : 1);
    const auto xv = ramp(18, 1.0f, 42);
    const auto out = evaluate(imp.graph, {HostTensor::from_f32({1, 2, 3, 3}, xv)});
    if (second_reader) {
      // relu(conv) must see the unfolded conv: compare with relu of the BN-free conv.
      const BnData d = bn_data(2);
      const auto w = ramp(4, 1.0f, 41);
      const auto r = out[1].to_f32();
      for (size_t i = 0; i < 18; ++i) {
        const size_t oc = i / 9, p = i % 9;
        const double c = static_cast<double>(xv[p]) * w[oc * 2] + static_cast<double>(xv[9 + p]) * w[oc * 2 + 1];
        EXPECT_NEAR(r[i], std::max(0.0, c), 1e-5);
      }
    }
  }
}

TEST(BatchNormFoldingPassTest, FoldsAndMatchesTheUnfoldedEvaluation) {
  REQUIRE_OP(OpCode::BatchNorm);
  GraphBuilder b;
  const ValueId x = b.input("x", ScalarType::F32, {2, 3, 5, 5});
  const ValueId w = b.random_uniform("w", {4, 3, 3, 3}, -0.5f, 0.5f);
  const ValueId bias = b.random_uniform("b", {4}, -0.5f, 0.5f);
  const ValueId c = b.conv2d(x, w, bias, Conv2dParams::same3x3(), "conv");
  const ValueId scale = b.random_uniform("scale", {4}, 0.5f, 1.5f);
  const ValueId shift = b.random_uniform("shift", {4}, -0.5f, 0.5f);
  const ValueId mean = b.random_uniform("mean", {4}, -0.5f, 0.5f);
  const ValueId var = b.random_uniform("var", {4}, 0.1f, 1.0f);
  OpAttrs a;
  a.axis = 1;
  a.epsilon = 1e-3f;
  b.output("y", b.op(OpCode::BatchNorm, {c, scale, shift, mean, var}, a, "bn"));
  Graph unfolded = b.build();
  Graph folded = unfolded;
  EXPECT_EQ(fold_batch_norms(folded), 1);
  folded.check_structure();
  EXPECT_EQ(count_ops(folded, OpCode::BatchNorm), 0);
  const auto xv = ramp(2 * 3 * 25, 1.0f, 30);
  const auto expected = run1(unfolded, {HostTensor::from_f32({2, 3, 5, 5}, xv)});
  const auto actual = run1(folded, {HostTensor::from_f32({2, 3, 5, 5}, xv)});
  expect_close(actual, std::vector<double>(expected.begin(), expected.end()), 1e-5);
}

// ---- Symbols and shape values -------------------------------------------------------------------

TEST(OnnxImporterTest, SymbolicBatchThroughShapeGatherUnsqueezeConcatReshape) {
  OnnxModel m;
  m.input("x", kFloat, {"N", "3", "4", "4"});
  m.node("Shape", {"x"}, {"shape"}, "shape");
  const_i64(m, "zero", {0}, /*scalar=*/true);
  auto& gather = m.node("Gather", {"shape", "zero"}, {"n"}, "gather");
  attr_i(gather, "axis", 0);
  const_i64(m, "axes0", {0});
  m.node("Unsqueeze", {"n", "axes0"}, {"n1"}, "unsqueeze");
  const_i64(m, "minus1", {-1});
  auto& cat = m.node("Concat", {"n1", "minus1"}, {"target"}, "concat");
  attr_i(cat, "axis", 0);
  m.node("Reshape", {"x", "target"}, {"flat"}, "reshape");
  const auto w = ramp(2 * 48, 0.1f, 31);
  m.init_f32("w", {2, 48}, w);
  auto& gemm = m.node("Gemm", {"flat", "w"}, {"y"}, "fc");
  attr_i(gemm, "transB", 1);
  m.output("y");
  EXPECT_NE(import_error(m).find("--input-shape"), std::string::npos) << import_error(m);
  OnnxImport imp = import_model(m, {"x=batch:1..8x3x4x4"});
  const Node* reshape = find_op(imp.graph, OpCode::Reshape);
  ASSERT_NE(reshape, nullptr);
  const int batch = imp.graph.find_symbol("batch");
  ASSERT_NE(batch, 0);
  EXPECT_EQ(reshape->attrs.count, 2);
  EXPECT_EQ(reshape->attrs.shape_sym[0], batch);
  EXPECT_EQ(reshape->attrs.shape[1], -1);
  const Value& y = imp.graph.values[static_cast<size_t>(imp.graph.outputs[0].value)];
  EXPECT_EQ(format_dims(imp.graph, y.dims), "[batch<=8, 2]");
  for (int64_t n : {1, 2, 5}) {
    const auto xv = ramp(static_cast<size_t>(n * 48), 1.0f, 32);
    std::vector<double> ref(static_cast<size_t>(n * 2));
    for (int64_t i = 0; i < n; ++i)
      for (int j = 0; j < 2; ++j) {
        double acc = 0;
        for (int k = 0; k < 48; ++k) acc += static_cast<double>(xv[static_cast<size_t>(i * 48 + k)]) * w[static_cast<size_t>(j * 48 + k)];
        ref[static_cast<size_t>(i * 2 + j)] = acc;
      }
    expect_close(run1(imp.graph, {HostTensor::from_f32({n, 3, 4, 4}, xv)}), ref);
  }
}

TEST(OnnxImporterTest, TransformerStyleReshapeKeepsBothSymbols) {
  OnnxModel m;
  m.input("x", kFloat, {"B", "S", "8"});
  m.node("Shape", {"x"}, {"shape"});
  const_i64(m, "i0", {0}, true);
  const_i64(m, "i1", {1}, true);
  const_i64(m, "i2", {2}, true);
  m.node("Gather", {"shape", "i0"}, {"b"});
  m.node("Gather", {"shape", "i1"}, {"s"});
  m.node("Gather", {"shape", "i2"}, {"hidden"});
  const_i64(m, "heads", {2}, true);
  m.node("Div", {"hidden", "heads"}, {"head_dim"});
  const_i64(m, "ax", {0});
  m.node("Unsqueeze", {"b", "ax"}, {"b1"});
  m.node("Unsqueeze", {"s", "ax"}, {"s1"});
  m.node("Unsqueeze", {"heads", "ax"}, {"h1"});
  m.node("Unsqueeze", {"head_dim", "ax"}, {"d1"});
  auto& cat = m.node("Concat", {"b1", "s1", "h1", "d1"}, {"target"});
  attr_i(cat, "axis", 0);
  m.node("Reshape", {"x", "target"}, {"r"}, "split_heads");
  auto& tr = m.node("Transpose", {"r"}, {"t"});
  attr_ints(tr, "perm", {0, 2, 1, 3});
  // Merge back: [B, S, H*D] via Mul of shape values (B*S would be a product: use 0 and -1).
  const_i64(m, "merge", {0, 0, -1});
  auto& tr2 = m.node("Transpose", {"t"}, {"t2"});
  attr_ints(tr2, "perm", {0, 2, 1, 3});
  m.node("Reshape", {"t2", "merge"}, {"y"}, "merge_heads");
  m.output("y");
  OnnxImport imp = import_model(m, {"x=batch:1..4xseq:1..16x8"});
  const Value& t = imp.graph.values[static_cast<size_t>(imp.graph.find_value("t"))];
  EXPECT_EQ(format_dims(imp.graph, t.dims), "[batch<=4, 2, seq<=16, 4]");
  const Value& y = imp.graph.values[static_cast<size_t>(imp.graph.outputs[0].value)];
  EXPECT_EQ(format_dims(imp.graph, y.dims), "[batch<=4, seq<=16, 8]");
  const auto xv = ramp(3 * 5 * 8, 1.0f, 33);
  const auto out = run1(imp.graph, {HostTensor::from_f32({3, 5, 8}, xv)});
  expect_close(out, std::vector<double>(xv.begin(), xv.end()), 0);
}

TEST(OnnxImporterTest, FlattenAndSqueezeUnsqueezeWithSymbols) {
  OnnxModel m;
  m.input("x", kFloat, {"N", "3", "2", "2"});
  auto& fl = m.node("Flatten", {"x"}, {"f"});
  attr_i(fl, "axis", 1);
  const_i64(m, "ax", {1});
  m.node("Unsqueeze", {"f", "ax"}, {"u"});  // [N, 1, 12]
  m.node("Squeeze", {"u", "ax"}, {"y"});    // [N, 12]
  m.output("y");
  OnnxImport imp = import_model(m, {"x=n:2..6x3x2x2"});
  const Value& y = imp.graph.values[static_cast<size_t>(imp.graph.outputs[0].value)];
  EXPECT_EQ(format_dims(imp.graph, y.dims), "[n<=6, 12]");
  OnnxModel bad;
  bad.input("x", kFloat, {"N", "3"});
  bad.node("Squeeze", {"x"}, {"y"}, "sq");
  bad.output("y");
  EXPECT_NE(import_error(bad, {"x=n:1..4x3"}).find("ambiguous"), std::string::npos);
}

TEST(OnnxImporterTest, DimParamSharedByTwoInputsTakesOneSymbol) {
  OnnxModel m;
  m.input("a", kFloat, {"N", "4"});
  m.input("b", kFloat, {"N", "4"});
  m.node("Add", {"a", "b"}, {"y"});
  m.output("y");
  OnnxImport imp = import_model(m, {"a=batch:1..3x4"});
  ASSERT_EQ(imp.graph.inputs.size(), 2u);
  const Value& b = imp.graph.values[static_cast<size_t>(imp.graph.inputs[1].value)];
  EXPECT_EQ(format_dims(imp.graph, b.dims), "[batch<=3, 4]");
  EXPECT_NE(import_error(m, {"a=1x5"}).find("fixes it to 4"), std::string::npos);
  EXPECT_NE(import_error(m, {"c=1x4"}).find("the model's inputs are: a, b"), std::string::npos);
}

TEST(OnnxImporterTest, ShapeArithmeticFoldsAtExport) {
  REQUIRE_OP(OpCode::Expand);
  // torch's x.expand(-1, 4, -1) pattern: Where(Equal(shape, -1), ones, shape) over shape values,
  // with ConstantOfShape, Range and a Shape slice (opset 15 start/end).
  OnnxModel m(15);
  m.input("x", kFloat, {"N", "1", "3"});
  const_i64(m, "target", {-1, 4, -1});
  const_i64(m, "len", {3});
  auto& cos = m.node("ConstantOfShape", {"len"}, {"ones"});
  onnx::TensorProto* v = attr_t(cos, "value");
  v->set_data_type(onnx::TensorProto::INT64);
  v->add_dims(1);
  v->add_int64_data(1);
  const_i64(m, "neg1", {-1}, true);
  m.node("Equal", {"target", "neg1"}, {"is_neg"});
  m.node("Where", {"is_neg", "ones", "target"}, {"shape"});
  m.node("Expand", {"x", "shape"}, {"e"}, "expand");
  // Range(0, 3, 1) as a Gather index list, and Shape(start=1) for a reshape target.
  const_i64(m, "r0", {0}, true);
  const_i64(m, "r1", {3}, true);
  const_i64(m, "r2", {1}, true);
  m.node("Range", {"r0", "r1", "r2"}, {"range"});
  auto& sh = m.node("Shape", {"e"}, {"tail"});
  attr_i(sh, "start", 1);
  m.node("ReduceProd", {"tail"}, {"inner"});  // keepdims=1 -> [12]
  m.node("Shape", {"e"}, {"all"});
  const_i64(m, "first", {0});
  m.node("Gather", {"all", "first"}, {"n"});
  auto& cat = m.node("Concat", {"n", "inner"}, {"target2"});
  attr_i(cat, "axis", 0);
  m.node("Reshape", {"e", "target2"}, {"y"}, "flatten");
  m.output("y");
  OnnxImport imp = import_model(m, {"x=batch:1..4x1x3"});
  const Node* expand = find_op(imp.graph, OpCode::Expand);
  ASSERT_NE(expand, nullptr);
  EXPECT_EQ(expand->attrs.count, 3);
  EXPECT_EQ(expand->attrs.shape_sym[0], imp.graph.find_symbol("batch"));
  EXPECT_EQ(expand->attrs.shape[1], 4);
  const Value& y = imp.graph.values[static_cast<size_t>(imp.graph.outputs[0].value)];
  EXPECT_EQ(format_dims(imp.graph, y.dims), "[batch<=4, 12]");
  const auto xv = ramp(6, 1.0f, 40);
  std::vector<double> ref;
  for (int b = 0; b < 2; ++b)
    for (int r = 0; r < 4; ++r)
      for (int k = 0; k < 3; ++k) ref.push_back(xv[static_cast<size_t>(b * 3 + k)]);
  expect_close(run1(imp.graph, {HostTensor::from_f32({2, 1, 3}, xv)}), ref, 0);
}

TEST(OnnxImporterTest, OpsetDependentAxesForms) {
  // Opset 11: Squeeze/Unsqueeze/ReduceSum axes are attributes; opset 18: ReduceMean axes is an input
  // and Split takes num_outputs.
  OnnxModel a(11);
  a.input("x", kFloat, {"2", "3"});
  auto& u = a.node("Unsqueeze", {"x"}, {"u"});
  attr_ints(u, "axes", {0});
  auto& sq = a.node("Squeeze", {"u"}, {"s"});
  attr_ints(sq, "axes", {0});
  auto& rs = a.node("ReduceSum", {"s"}, {"y"});
  attr_ints(rs, "axes", {1});
  attr_i(rs, "keepdims", 0);
  a.output("y");
  OnnxImport ia = import_model(a);
  expect_close(run1(ia.graph, {HostTensor::from_f32({2, 3}, {1, 2, 3, 4, 5, 6})}), {6, 15});

  OnnxModel b(18);
  b.input("x", kFloat, {"2", "4"});
  auto& sp = b.node("Split", {"x"}, {"p", "q"});
  attr_i(sp, "axis", 1);
  attr_i(sp, "num_outputs", 2);
  const_i64(b, "ax", {1});
  b.node("ReduceMean", {"q", "ax"}, {"y"});
  b.output("y");
  OnnxImport ib = import_model(b);
  expect_close(run1(ib.graph, {HostTensor::from_f32({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8})}), {3.5, 7.5});
}

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
  EXPECT_NE(import_error(e).find("only 2-D convolutions"), std::string::npos);

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

// ---- The CLI on an ONNX file --------------------------------------------------------------------

}  // namespace
}  // namespace ember::exporter
