// passes/gelu_fusion on IR graphs: every matched form (div or mul by 1/sqrt(2); the 0.5 last, first
// or on (1 + erf); commuted operands; scalar or [1] constants) becomes one gelu node whose output
// matches the formula; near misses (a constant off by more than 1e-6, an intermediate read twice or
// a graph output, a broadcasting constant, a non-constant operand) leave the graph exactly as it was.
#include "exporter/passes/gelu_fusion.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "exporter/importers/builder/graph_builder.h"
#include "exporter/passes/evaluate.h"
#include "tests/exporter/onnx_test_util.h"

namespace ember::exporter {
namespace {

using testing::count_ops;
using testing::ramp;

constexpr float kSqrt2 = 1.41421356f;
constexpr float kInvSqrt2 = 0.70710678f;

enum class Scale { Div, Mul };
enum class Half { Last, First, OnSum };  // (x*t3)*0.5, (x*0.5)*t3, x*(t3*0.5)

// Which intermediate a negative case gives a second reader or makes a graph output.
enum class Tap { None, Scaled, Erf, Sum, Product };

struct Form {
  Scale scale = Scale::Div;
  Half half = Half::Last;
  bool commuted = false;           // constants first, and x / t3 swapped in the products
  std::vector<int64_t> const_dims;  // {} = scalar, {1} = [1], ...
  float sqrt2 = kSqrt2, one = 1.0f, half_value = 0.5f;  // the constants (sqrt2: 1/value for Scale::Mul)
  Tap second_reader = Tap::None;
  Tap graph_output = Tap::None;
};

std::string form_name(const Form& f) {
  return std::string(f.scale == Scale::Div ? "div" : "mul") + "/" +
         (f.half == Half::Last ? "half_last" : f.half == Half::First ? "half_first" : "half_on_sum") +
         (f.commuted ? "/commuted" : "") + "/const_rank" + std::to_string(f.const_dims.size());
}

struct Built {
  Graph graph;
  std::vector<int64_t> x_dims;
};

// x [3, 8] (or `x_dims`) -> the erf GELU in form `f` -> output "y"; relu(x) is a second output, so x
// always has another reader.
Built build_gelu(const Form& f, std::vector<DimSpec> x_dims = {3, 8}) {
  GraphBuilder b;
  Built built;
  for (const DimSpec& d : x_dims) built.x_dims.push_back(d.size());
  const ValueId x = b.input("x", ScalarType::F32, x_dims);
  auto scalar = [&](const std::string& name, float v) { return b.constant_f32(name, f.const_dims, {v}); };
  auto mul = [&](ValueId a, ValueId c, const char* name) { return f.commuted ? b.mul(c, a, name) : b.mul(a, c, name); };
  const ValueId t1 = f.scale == Scale::Div ? b.div(x, scalar("c_sqrt2", f.sqrt2), "scale")
                                           : mul(x, scalar("c_inv_sqrt2", f.sqrt2 == kSqrt2 ? kInvSqrt2 : 1.0f / f.sqrt2), "scale");
  const ValueId t2 = b.op(OpCode::Erf, {t1}, OpAttrs{}, "erf");
  const ValueId c1 = scalar("c_one", f.one);
  const ValueId t3 = f.commuted ? b.add(c1, t2, "plus_one") : b.add(t2, c1, "plus_one");
  const ValueId c_half = scalar("c_half", f.half_value);
  ValueId product = -1, y = -1;
  switch (f.half) {
    case Half::Last:
      product = f.commuted ? b.mul(t3, x, "product") : b.mul(x, t3, "product");
      y = mul(product, c_half, "y");
      break;
    case Half::First:
      product = mul(x, c_half, "product");  // x * 0.5
      y = f.commuted ? b.mul(t3, product, "y") : b.mul(product, t3, "y");
      break;
    case Half::OnSum:
      product = mul(t3, c_half, "product");  // t3 * 0.5
      y = f.commuted ? b.mul(product, x, "y") : b.mul(x, product, "y");
      break;
  }
  const ValueId taps[] = {-1, t1, t2, t3, product};
  b.output("y", y);
  b.output("x_relu", b.relu(x, "x_relu"));
  if (f.second_reader != Tap::None) b.output("tap_relu", b.relu(taps[static_cast<int>(f.second_reader)], "tap_relu"));
  if (f.graph_output != Tap::None) b.output("tap", taps[static_cast<int>(f.graph_output)]);
  built.graph = b.build();
  return built;
}

// Everything a pass could change, as text: nodes (op, attrs kind, inputs, outputs, name), values
// (name, dtype, dims, constness), IO.
std::string describe(const Graph& g) {
  std::string s;
  for (const Node& n : g.nodes) {
    s += std::string(to_string(n.op)) + ":" + n.name + "(";
    for (int in : n.inputs) s += std::to_string(in) + ",";
    s += ")->";
    for (int out : n.outputs) s += std::to_string(out) + ",";
    s += "\n";
  }
  for (size_t v = 0; v < g.values.size(); ++v) s += std::to_string(v) + " " + format_value(g, static_cast<int>(v)) + (g.values[v].is_constant() ? " const\n" : "\n");
  for (const NamedValue& nv : g.inputs) s += "in " + nv.name + "=" + std::to_string(nv.value) + "\n";
  for (const NamedValue& nv : g.outputs) s += "out " + nv.name + "=" + std::to_string(nv.value) + "\n";
  return s;
}

double gelu_exact(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

// Fused and unfused graphs agree with the double-precision formula on the reference evaluator.
void expect_gelu_outputs(const Graph& fused, const Graph& unfused, const std::vector<int64_t>& dims) {
  size_t n = 1;
  for (int64_t d : dims) n *= static_cast<size_t>(d);
  const std::vector<float> x = ramp(n, 4.0f, 7);  // [-4, 4): both tails of erf
  const std::vector<HostTensor> in{HostTensor::from_f32(dims, x)};
  const std::vector<HostTensor> a = evaluate(fused, in), b = evaluate(unfused, in);
  ASSERT_EQ(a.size(), b.size());
  const std::vector<float> ya = a[0].to_f32(), yb = b[0].to_f32();
  ASSERT_EQ(ya.size(), n);
  for (size_t i = 0; i < n; ++i) {
    const double e = gelu_exact(x[i]);
    ASSERT_NEAR(ya[i], e, 1e-6 + 1e-6 * std::fabs(e)) << "fused, element " << i << " x=" << x[i];
    ASSERT_NEAR(yb[i], e, 1e-6 + 1e-6 * std::fabs(e)) << "unfused, element " << i << " x=" << x[i];
  }
  EXPECT_EQ(a[1].to_f32(), b[1].to_f32());  // relu(x): x's other reader is untouched
}

std::vector<Form> every_form() {
  std::vector<Form> forms;
  for (Scale s : {Scale::Div, Scale::Mul})
    for (Half h : {Half::Last, Half::First, Half::OnSum})
      for (bool commuted : {false, true})
        for (std::vector<int64_t> dims : {std::vector<int64_t>{}, std::vector<int64_t>{1}}) {
          Form f;
          f.scale = s;
          f.half = h;
          f.commuted = commuted;
          f.const_dims = dims;
          forms.push_back(f);
        }
  return forms;
}

TEST(GeluFusionTest, EveryFormBecomesOneGeluNodeAndMatchesTheFormula) {
  for (const Form& f : every_form()) {
    SCOPED_TRACE(form_name(f));
    const Built built = build_gelu(f);
    Graph g = built.graph;
    ASSERT_EQ(g.nodes.size(), 6u);
    EXPECT_EQ(fuse_gelus(g), 1);
    g.check_structure();
    // gelu(x) writing "y", relu(x) writing "x_relu"; the constants are gone: values x, y, x_relu.
    ASSERT_EQ(g.nodes.size(), 2u);
    const Node& gelu = g.nodes[0];
    EXPECT_EQ(gelu.op, OpCode::Gelu);
    EXPECT_EQ(gelu.attrs.kind, AttrKind::Gelu);
    EXPECT_EQ(gelu.attrs.gelu_approx, GeluApprox::None);
    EXPECT_EQ(gelu.name, "y");
    EXPECT_EQ(gelu.source_op, "gelu_fusion");
    ASSERT_EQ(gelu.inputs.size(), 1u);
    EXPECT_EQ(gelu.inputs[0], g.find_value("x"));
    ASSERT_EQ(gelu.outputs.size(), 1u);
    EXPECT_EQ(g.outputs[0].name, "y");
    EXPECT_EQ(g.outputs[0].value, gelu.outputs[0]);
    EXPECT_EQ(g.nodes[1].op, OpCode::Relu);
    EXPECT_EQ(g.values.size(), 3u);
    for (const Value& v : g.values) EXPECT_FALSE(v.is_constant()) << v.name;
    expect_gelu_outputs(g, built.graph, built.x_dims);
  }
}

TEST(GeluFusionTest, SymbolicDimsAndSeveralGelusFuse) {
  // Two GELUs in a chain (BERT's layers) and a third on the same x as the first, batch symbolic.
  GraphBuilder b;
  b.symbol("batch", 1, 8);
  const ValueId x = b.input("x", ScalarType::F32, {DimSpec::sym("batch"), 5});
  auto gelu = [&](ValueId in, const std::string& p) {
    const ValueId t1 = b.div(in, b.constant_f32(p + "sqrt2", {}, {kSqrt2}), p + "div");
    const ValueId t3 = b.add(b.op(OpCode::Erf, {t1}, OpAttrs{}, p + "erf"), b.constant_f32(p + "one", {1}, {1.0f}), p + "add");
    return b.mul(b.mul(in, t3, p + "mul"), b.constant_f32(p + "half", {}, {0.5f}), p + "y");
  };
  const ValueId g1 = gelu(x, "a.");
  b.output("y1", gelu(b.relu(g1, "between"), "b."));
  b.output("y2", gelu(x, "c."));
  const Graph unfused = b.build();
  Graph g = unfused;
  EXPECT_EQ(fuse_gelus(g), 3);
  g.check_structure();
  EXPECT_EQ(count_ops(g, OpCode::Gelu), 3);
  EXPECT_EQ(g.nodes.size(), 4u);  // gelu, relu, gelu, gelu
  EXPECT_EQ(count_ops(g, OpCode::Erf) + count_ops(g, OpCode::Mul) + count_ops(g, OpCode::Div) + count_ops(g, OpCode::Add), 0);
  const int y = g.outputs[0].value;
  EXPECT_EQ(g.values[static_cast<size_t>(y)].dims[0].sym, g.find_symbol("batch"));
  for (int64_t batch : {1, 3}) {
    const std::vector<float> xv = ramp(static_cast<size_t>(batch) * 5, 3.0f, 11);
    const std::vector<HostTensor> in{HostTensor::from_f32({batch, 5}, xv)};
    const std::vector<HostTensor> a = evaluate(g, in), e = evaluate(unfused, in);
    for (size_t o = 0; o < 2; ++o) {
      const std::vector<float> ya = a[o].to_f32(), ye = e[o].to_f32();
      ASSERT_EQ(ya.size(), ye.size());
      for (size_t i = 0; i < ya.size(); ++i) EXPECT_NEAR(ya[i], ye[i], 1e-6 + 1e-6 * std::fabs(ye[i])) << o << " " << i;
    }
    // y2 = gelu(x) directly.
    const std::vector<float> y2 = a[1].to_f32();
    for (size_t i = 0; i < y2.size(); ++i) EXPECT_NEAR(y2[i], gelu_exact(xv[i]), 1e-6 + 1e-6 * std::fabs(y2[i]));
  }
}

// Each case must leave the graph exactly as it was (and report 0).
void expect_unchanged(const Graph& built, const std::string& why) {
  SCOPED_TRACE(why);
  Graph g = built;
  const std::string before = describe(g);
  EXPECT_EQ(fuse_gelus(g), 0);
  EXPECT_EQ(describe(g), before);
  EXPECT_EQ(count_ops(g, OpCode::Gelu), 0);
}

TEST(GeluFusionTest, WrongConstantsAreNotFused) {
  for (Form f : every_form()) {
    SCOPED_TRACE(form_name(f));
    // Each constant 2e-6 relative off (twice the tolerance; f32 resolves it), then a typical
    // hand-rounded value. sqrt2 = 1.414 also makes the Mul form's 1/1.414.
    for (float sqrt2 : {kSqrt2 * (1.0f + 2e-6f), 1.414f}) {
      Form w = f;
      w.sqrt2 = sqrt2;
      expect_unchanged(build_gelu(w).graph, "sqrt2 " + std::to_string(sqrt2));
    }
    for (float one : {1.0f + 2e-6f, 0.999f, -1.0f}) {
      Form w = f;
      w.one = one;
      expect_unchanged(build_gelu(w).graph, "one " + std::to_string(one));
    }
    for (float half : {0.5f * (1.0f - 2e-6f), 0.49f, 2.0f}) {
      Form w = f;
      w.half_value = half;
      expect_unchanged(build_gelu(w).graph, "half " + std::to_string(half));
    }
  }
  // Within the tolerance (4e-7 relative): fused.
  Form near;
  near.sqrt2 = kSqrt2 * (1.0f + 4e-7f);
  near.half_value = 0.5f * (1.0f - 4e-7f);
  Graph g = build_gelu(near).graph;
  EXPECT_EQ(fuse_gelus(g), 1);
}

TEST(GeluFusionTest, DivWithTheConstantFirstIsNotGelu) {
  // sqrt(2) / x is not x / sqrt(2).
  GraphBuilder b;
  const ValueId x = b.input("x", ScalarType::F32, {4});
  const ValueId t1 = b.div(b.constant_f32("sqrt2", {}, {kSqrt2}), x, "div");
  const ValueId t3 = b.add(b.op(OpCode::Erf, {t1}, OpAttrs{}, "erf"), b.constant_f32("one", {}, {1.0f}), "add");
  b.output("y", b.mul(b.mul(x, t3, "mul"), b.constant_f32("half", {}, {0.5f}), "y"));
  expect_unchanged(b.build(), "sqrt2 / x");
}

TEST(GeluFusionTest, IntermediatesWithAnotherReaderOrAsGraphOutputAreNotFused) {
  for (Form f : every_form()) {
    SCOPED_TRACE(form_name(f));
    for (Tap tap : {Tap::Scaled, Tap::Erf, Tap::Sum, Tap::Product}) {
      Form r = f;
      r.second_reader = tap;
      expect_unchanged(build_gelu(r).graph, "second reader of intermediate " + std::to_string(static_cast<int>(tap)));
      Form o = f;
      o.graph_output = tap;
      expect_unchanged(build_gelu(o).graph, "graph output intermediate " + std::to_string(static_cast<int>(tap)));
    }
  }
}

TEST(GeluFusionTest, ConstantsThatBroadcastOrAreNotScalarsAreNotFused) {
  // x [8] and [1, 1] constants: every intermediate is [1, 8], which gelu(x) would not reproduce.
  Form f;
  f.const_dims = {1, 1};
  expect_unchanged(build_gelu(f, {8}).graph, "[1, 1] constants broadcast a rank-1 x");
  // The same constants on a rank-2 x keep its dims: fused.
  Graph g = build_gelu(f, {3, 8}).graph;
  EXPECT_EQ(fuse_gelus(g), 1);
  g.check_structure();

  // A [2] constant holding sqrt(2) twice is not a scalar.
  GraphBuilder b;
  const ValueId x = b.input("x", ScalarType::F32, {3, 2});
  const ValueId t1 = b.div(x, b.constant_f32("sqrt2", {2}, {kSqrt2, kSqrt2}), "div");
  const ValueId t3 = b.add(b.op(OpCode::Erf, {t1}, OpAttrs{}, "erf"), b.constant_f32("one", {}, {1.0f}), "add");
  b.output("y", b.mul(b.mul(x, t3, "mul"), b.constant_f32("half", {}, {0.5f}), "y"));
  expect_unchanged(b.build(), "[2] sqrt2");

  // 0.5 as a graph input (same number at run time, but not known at export).
  GraphBuilder b2;
  const ValueId x2 = b2.input("x", ScalarType::F32, {3, 2});
  const ValueId h = b2.input("h", ScalarType::F32, {});
  const ValueId u1 = b2.div(x2, b2.constant_f32("sqrt2", {}, {kSqrt2}), "div");
  const ValueId u3 = b2.add(b2.op(OpCode::Erf, {u1}, OpAttrs{}, "erf"), b2.constant_f32("one", {}, {1.0f}), "add");
  b2.output("y", b2.mul(b2.mul(x2, u3, "mul"), h, "y"));
  expect_unchanged(b2.build(), "0.5 is an input");
}

TEST(GeluFusionTest, AGraphWithoutThePatternIsUnchanged) {
  // An erf alone, and x * erf(x / sqrt2) without the + 1.
  GraphBuilder b;
  const ValueId x = b.input("x", ScalarType::F32, {6});
  const ValueId t1 = b.div(x, b.constant_f32("sqrt2", {}, {kSqrt2}), "div");
  const ValueId t2 = b.op(OpCode::Erf, {t1}, OpAttrs{}, "erf");
  b.output("y", b.mul(b.mul(x, t2, "mul"), b.constant_f32("half", {}, {0.5f}), "y"));
  b.output("e", b.op(OpCode::Erf, {x}, OpAttrs{}, "erf_alone"));
  expect_unchanged(b.build(), "no + 1");
}

}  // namespace
}  // namespace ember::exporter
