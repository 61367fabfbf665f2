// passes/gelu_fusion on IR graphs: every matched form (erf: div or mul by 1/sqrt(2); tanh: the cube
// as x * (x * x), (x * x) * x or pow(x, 3); the 0.5 last, first or on (1 + u); commuted operands;
// scalar or [1] constants) becomes one gelu node of the right approximation whose output matches the
// formula; near misses (a constant off by more than 1e-6, an intermediate read twice or a graph
// output, a broadcasting constant, a non-constant operand) leave the graph exactly as it was.
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
constexpr float kSqrtTwoOverPi = 0.79788456f;
constexpr float kKappa = 0.044715f;

enum class Head { ErfDiv, ErfMul, TanhXSquare, TanhSquareX, TanhPow };
enum class Half { Last, First, OnSum };  // (x*t)*0.5, (x*0.5)*t, x*(t*0.5)

bool is_tanh(Head h) { return h != Head::ErfDiv && h != Head::ErfMul; }

struct Form {
  Head head = Head::ErfDiv;
  Half half = Half::Last;
  bool commuted = false;            // constants first, and x / t swapped in the products
  std::vector<int64_t> const_dims;  // {} = scalar, {1} = [1], ...
  // The constants (ErfMul multiplies by 1 / sqrt2).
  float sqrt2 = kSqrt2, beta = kSqrtTwoOverPi, kappa = kKappa, three = 3.0f, one = 1.0f, half_value = 0.5f;
  int second_reader = -1;  // an intermediate (Built::intermediates index) gets another reader
  int graph_output = -1;   // an intermediate becomes a graph output
};

std::string form_name(const Form& f) {
  static const char* const kHeads[] = {"erf_div", "erf_mul", "tanh_x_square", "tanh_square_x", "tanh_pow"};
  return std::string(kHeads[static_cast<int>(f.head)]) + "/" +
         (f.half == Half::Last ? "half_last" : f.half == Half::First ? "half_first" : "half_on_sum") +
         (f.commuted ? "/commuted" : "") + "/const_rank" + std::to_string(f.const_dims.size());
}

struct Built {
  Graph graph;
  std::vector<int64_t> x_dims;
  std::vector<ValueId> intermediates;  // every value of the pattern but x and y
};

// x [3, 8] (or `x_dims`) -> the GELU in form `f` -> output "y"; relu(x) is a second output, so x
// always has another reader.
Built build_gelu(const Form& f, std::vector<DimSpec> x_dims = {3, 8}) {
  GraphBuilder b;
  Built built;
  for (const DimSpec& d : x_dims) built.x_dims.push_back(d.size());
  const ValueId x = b.input("x", ScalarType::F32, x_dims);
  auto scalar = [&](const std::string& name, float v) { return b.constant_f32(name, f.const_dims, {v}); };
  auto mul = [&](ValueId a, ValueId c, const char* name) { return f.commuted ? b.mul(c, a, name) : b.mul(a, c, name); };
  auto keep = [&](ValueId v) {
    built.intermediates.push_back(v);
    return v;
  };
  ValueId u = -1;
  switch (f.head) {
    case Head::ErfDiv:
      u = b.op(OpCode::Erf, {keep(b.div(x, scalar("c_sqrt2", f.sqrt2), "scale"))}, OpAttrs{}, "erf");
      break;
    case Head::ErfMul:
      u = b.op(OpCode::Erf, {keep(mul(x, scalar("c_inv_sqrt2", f.sqrt2 == kSqrt2 ? kInvSqrt2 : 1.0f / f.sqrt2), "scale"))},
               OpAttrs{}, "erf");
      break;
    default: {
      ValueId cube = -1;
      if (f.head == Head::TanhPow) {
        cube = b.op(OpCode::Pow, {x, scalar("c_three", f.three)}, OpAttrs{}, "cube");
      } else {
        const ValueId square = keep(b.mul(x, x, "square"));
        cube = f.head == Head::TanhXSquare ? b.mul(x, square, "cube") : b.mul(square, x, "cube");
      }
      const ValueId term = keep(mul(keep(cube), scalar("c_kappa", f.kappa), "term"));
      const ValueId sum = keep(f.commuted ? b.add(term, x, "sum") : b.add(x, term, "sum"));
      u = b.tanh(keep(mul(sum, scalar("c_beta", f.beta), "inner")), "tanh");
    }
  }
  keep(u);
  const ValueId c1 = scalar("c_one", f.one);
  const ValueId t = keep(f.commuted ? b.add(c1, u, "plus_one") : b.add(u, c1, "plus_one"));
  const ValueId c_half = scalar("c_half", f.half_value);
  ValueId y = -1;
  switch (f.half) {
    case Half::Last:
      y = mul(keep(f.commuted ? b.mul(t, x, "product") : b.mul(x, t, "product")), c_half, "y");
      break;
    case Half::First: {
      const ValueId product = keep(mul(x, c_half, "product"));  // x * 0.5
      y = f.commuted ? b.mul(t, product, "y") : b.mul(product, t, "y");
      break;
    }
    case Half::OnSum: {
      const ValueId product = keep(mul(t, c_half, "product"));  // t * 0.5
      y = f.commuted ? b.mul(product, x, "y") : b.mul(x, product, "y");
      break;
    }
  }
  b.output("y", y);
  b.output("x_relu", b.relu(x, "x_relu"));
  if (f.second_reader >= 0) {
    b.output("tap_relu", b.relu(built.intermediates.at(static_cast<size_t>(f.second_reader)), "tap_relu"));
  }
  if (f.graph_output >= 0) b.output("tap", built.intermediates.at(static_cast<size_t>(f.graph_output)));
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
double gelu_tanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
}

// Fused and unfused graphs agree with the double-precision formula on the reference evaluator.
void expect_gelu_outputs(const Graph& fused, const Graph& unfused, const std::vector<int64_t>& dims, bool tanh) {
  size_t n = 1;
  for (int64_t d : dims) n *= static_cast<size_t>(d);
  const std::vector<float> x = ramp(n, 4.0f, 7);  // [-4, 4): both tails of erf
  const std::vector<HostTensor> in{HostTensor::from_f32(dims, x)};
  const std::vector<HostTensor> a = evaluate(fused, in), b = evaluate(unfused, in);
  ASSERT_EQ(a.size(), b.size());
  const std::vector<float> ya = a[0].to_f32(), yb = b[0].to_f32();
  ASSERT_EQ(ya.size(), n);
  for (size_t i = 0; i < n; ++i) {
    const double e = tanh ? gelu_tanh(x[i]) : gelu_exact(x[i]);
    ASSERT_NEAR(ya[i], e, 1e-6 + 1e-6 * std::fabs(e)) << "fused, element " << i << " x=" << x[i];
    ASSERT_NEAR(yb[i], e, 1e-6 + 1e-6 * std::fabs(e)) << "unfused, element " << i << " x=" << x[i];
  }
  EXPECT_EQ(a[1].to_f32(), b[1].to_f32());  // relu(x): x's other reader is untouched
}

std::vector<Form> every_form() {
  std::vector<Form> forms;
  for (Head head : {Head::ErfDiv, Head::ErfMul, Head::TanhXSquare, Head::TanhSquareX, Head::TanhPow})
    for (Half h : {Half::Last, Half::First, Half::OnSum})
      for (bool commuted : {false, true})
        for (std::vector<int64_t> dims : {std::vector<int64_t>{}, std::vector<int64_t>{1}}) {
          Form f;
          f.head = head;
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
    const bool tanh = is_tanh(f.head);
    ASSERT_EQ(g.nodes.size(), f.head == Head::TanhPow ? 9u : tanh ? 10u : 6u);
    EXPECT_EQ(fuse_gelus(g), 1);
    g.check_structure();
    // gelu(x) writing "y", relu(x) writing "x_relu"; the constants are gone: values x, y, x_relu.
    ASSERT_EQ(g.nodes.size(), 2u);
    const Node& gelu = g.nodes[0];
    EXPECT_EQ(gelu.op, OpCode::Gelu);
    EXPECT_EQ(gelu.attrs.kind, AttrKind::Gelu);
    EXPECT_EQ(gelu.attrs.gelu_approx, tanh ? GeluApprox::Tanh : GeluApprox::None);
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
    expect_gelu_outputs(g, built.graph, built.x_dims, tanh);
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
  // Each constant 2e-6 relative off (twice the tolerance; f32 resolves it), then a typical
  // hand-rounded or plainly wrong value. sqrt2 = 1.414 also makes the ErfMul form's 1/1.414.
  struct Knob {
    const char* name;
    float Form::*field;
    std::vector<float> values;
    bool tanh_only, erf_only;
  };
  const Knob knobs[] = {
      {"sqrt2", &Form::sqrt2, {kSqrt2 * (1.0f + 2e-6f), 1.414f}, false, true},
      {"beta", &Form::beta, {kSqrtTwoOverPi * (1.0f + 2e-6f), 0.7978f, 1.0f}, true, false},
      {"kappa", &Form::kappa, {kKappa * (1.0f - 2e-6f), 0.0447f, 0.5f}, true, false},
      {"three", &Form::three, {3.0f * (1.0f + 2e-6f), 2.0f}, true, false},  // only read by TanhPow
      {"one", &Form::one, {1.0f + 2e-6f, 0.999f, -1.0f}, false, false},
      {"half", &Form::half_value, {0.5f * (1.0f - 2e-6f), 0.49f, 2.0f}, false, false},
  };
  for (const Form& f : every_form()) {
    SCOPED_TRACE(form_name(f));
    for (const Knob& k : knobs) {
      if ((k.tanh_only && !is_tanh(f.head)) || (k.erf_only && is_tanh(f.head))) continue;
      if (k.field == &Form::three && f.head != Head::TanhPow) continue;
      for (float v : k.values) {
        Form w = f;
        w.*k.field = v;
        expect_unchanged(build_gelu(w).graph, std::string(k.name) + " " + std::to_string(v));
      }
    }
  }
  // Within the tolerance (4e-7 relative): fused.
  for (Head head : {Head::ErfDiv, Head::TanhPow}) {
    Form near;
    near.head = head;
    near.sqrt2 = kSqrt2 * (1.0f + 4e-7f);
    near.beta = kSqrtTwoOverPi * (1.0f - 4e-7f);
    near.kappa = kKappa * (1.0f + 4e-7f);
    near.three = 3.0f * (1.0f + 2e-7f);
    near.half_value = 0.5f * (1.0f - 4e-7f);
    Graph g = build_gelu(near).graph;
    EXPECT_EQ(fuse_gelus(g), 1) << form_name(near);
  }
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
  for (const Form& f : every_form()) {
    SCOPED_TRACE(form_name(f));
    const size_t count = build_gelu(f).intermediates.size();
    // erf: scaled, erf, sum, product; tanh: + the square (not with pow), cube, kappa term, inner sum.
    ASSERT_EQ(count, f.head == Head::TanhPow ? 7u : is_tanh(f.head) ? 8u : 4u);
    for (size_t i = 0; i < count; ++i) {
      Form r = f;
      r.second_reader = static_cast<int>(i);
      expect_unchanged(build_gelu(r).graph, "second reader of intermediate " + std::to_string(i));
      Form o = f;
      o.graph_output = static_cast<int>(i);
      expect_unchanged(build_gelu(o).graph, "graph output intermediate " + std::to_string(i));
    }
  }
}

TEST(GeluFusionTest, ConstantsThatBroadcastOrAreNotScalarsAreNotFused) {
  // x [8] and [1, 1] constants: every intermediate is [1, 8], which gelu(x) would not reproduce.
  for (Head head : {Head::ErfDiv, Head::TanhXSquare}) {
    Form f;
    f.head = head;
    f.const_dims = {1, 1};
    expect_unchanged(build_gelu(f, {8}).graph, "[1, 1] constants broadcast a rank-1 x");
    // The same constants on a rank-2 x keep its dims: fused.
    Graph g = build_gelu(f, {3, 8}).graph;
    EXPECT_EQ(fuse_gelus(g), 1);
    g.check_structure();
  }

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

TEST(GeluFusionTest, TanhFormNeedsTheCubeOfTheSameX) {
  // (kappa * c + x) with c = x * x (a square), z * (z * z) or pow(z, 3) for another z, x * (z * z),
  // pow(x, 2), and a tanh alone: none is the tanh GELU of x.
  enum Case { Square, OtherCube, OtherPow, MixedCube, PowTwo, TanhAlone };
  for (Case c : {Square, OtherCube, OtherPow, MixedCube, PowTwo, TanhAlone}) {
    GraphBuilder b;
    const ValueId x = b.input("x", ScalarType::F32, {2, 3});
    const ValueId z = b.input("z", ScalarType::F32, {2, 3});
    ValueId cube = -1;
    switch (c) {
      case Square: cube = b.mul(x, x, "square"); break;
      case OtherCube: cube = b.mul(z, b.mul(z, z, "zz"), "zcube"); break;
      case OtherPow: cube = b.op(OpCode::Pow, {z, b.constant_f32("three", {}, {3.0f})}, OpAttrs{}, "zpow"); break;
      case MixedCube: cube = b.mul(x, b.mul(z, z, "zz"), "xzz"); break;
      case PowTwo: cube = b.op(OpCode::Pow, {x, b.constant_f32("two", {}, {2.0f})}, OpAttrs{}, "pow2"); break;
      case TanhAlone: break;
    }
    if (c == TanhAlone) {
      b.output("y", b.tanh(x, "tanh"));
    } else {
      const ValueId sum = b.add(x, b.mul(b.constant_f32("kappa", {}, {kKappa}), cube, "term"), "sum");
      const ValueId u = b.tanh(b.mul(b.constant_f32("beta", {}, {kSqrtTwoOverPi}), sum, "inner"), "tanh");
      const ValueId t = b.add(b.constant_f32("one", {}, {1.0f}), u, "plus_one");
      b.output("y", b.mul(b.constant_f32("half", {}, {0.5f}), b.mul(x, t, "product"), "y"));
    }
    b.output("z_relu", b.relu(z, "z_relu"));
    expect_unchanged(b.build(), "case " + std::to_string(c));
  }
}

}  // namespace
}  // namespace ember::exporter
