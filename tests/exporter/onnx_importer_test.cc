// The ONNX importer's op mappings, checked against the test's own oracles and the reference
// evaluator, and BatchNorm folding (at import and as a pass). Input shapes and symbols are in
// onnx_importer_symbols_test.cc, data and errors in onnx_importer_data_test.cc.
#include "exporter/importers/onnx/onnx_importer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "exporter/importers/builder/graph_builder.h"
#include "exporter/passes/batch_norm_folding.h"
#include "tests/exporter/onnx_importer_test_util.h"
#include "tests/exporter/onnx_test_util.h"

namespace ember::exporter {
namespace {

using testing::attr_f;
using testing::attr_i;
using testing::attr_ints;
using testing::attr_s;
using testing::const_i64;
using testing::count_ops;
using testing::expect_close;
using testing::find_op;
using testing::import_model;
using testing::kFloat;
using testing::OnnxModel;
using testing::ramp;
using testing::run1;

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

// ONNX's absent max is FLT_MAX (Clip(min=0)(+inf) = FLT_MAX in onnxruntime), so only an explicit
// +inf max makes Clip(min=0) a Relu.
TEST(OnnxImporterTest, ClipWithAZeroMinIsReluOnlyWithAnInfiniteMax) {
  OnnxModel m;
  m.input("x", kFloat, {"4"});
  m.init_f32("zero", {}, {0.0f});
  m.init_f32("inf", {}, {std::numeric_limits<float>::infinity()});
  m.node("Clip", {"x", "zero"}, {"y"});
  m.node("Clip", {"x", "zero", "inf"}, {"z"});
  m.output("y");
  m.output("z");
  OnnxImport imp = import_model(m);
  EXPECT_EQ(count_ops(imp.graph, OpCode::Relu), 1);
  const Node* clip = find_op(imp.graph, OpCode::Clip);
  ASSERT_NE(clip, nullptr);
  EXPECT_EQ(clip->attrs.clip_min, 0.0f);
  EXPECT_EQ(clip->attrs.clip_max, std::numeric_limits<float>::max());
}

TEST(OnnxImporterTest, ClipWithoutBoundsUsesTheTypeLimits) {
  OnnxModel m;
  m.input("x", kFloat, {"4"});
  m.node("Clip", {"x"}, {"y"});
  m.output("y");
  OnnxImport imp = import_model(m);
  const Node* clip = find_op(imp.graph, OpCode::Clip);
  ASSERT_NE(clip, nullptr);
  EXPECT_EQ(clip->attrs.clip_min, std::numeric_limits<float>::lowest());
  EXPECT_EQ(clip->attrs.clip_max, std::numeric_limits<float>::max());
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

}  // namespace
}  // namespace ember::exporter
