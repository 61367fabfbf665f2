// ONNX handlers of the elementwise ops added for real-world models (issue 17): LeakyRelu, PRelu,
// Elu, Selu, Softplus, Log, Abs, Reciprocal, Floor, Ceil, Round, Sin, Cos, the comparisons, And /
// Or / Xor / Not, and the variadic Max / Min / Sum / Mean (chains of binary ops). Integer shape
// values among these (Max, Min, Greater, Less, ...) are evaluated at export first (onnx_known.cc).
#include <map>
#include <string>
#include <vector>

#include "exporter/importers/onnx/importer_internal.h"

namespace ember::exporter::onnx_detail {
namespace {

std::string dtype_list(std::initializer_list<ScalarType> types) {
  std::string text;
  for (ScalarType t : types) text += (text.empty() ? "" : ", ") + std::string(to_string(t));
  return text;
}

// Fails naming the input's dtype unless it is one of `types`.
void expect_dtype(const NodeContext& ctx, size_t input, ScalarType dtype, std::initializer_list<ScalarType> types) {
  for (ScalarType t : types) {
    if (t == dtype) return;
  }
  ctx.fail("input " + std::to_string(input) + " ('" + ctx.input(input) + "') has dtype " + to_string(dtype) +
           ", which Ember's " + ctx.op_type() + " does not support (" + dtype_list(types) + ")");
}

constexpr ScalarType kF32 = ScalarType::F32;
constexpr ScalarType kI32 = ScalarType::I32;
constexpr ScalarType kI64 = ScalarType::I64;
constexpr ScalarType kBool = ScalarType::Bool;

}  // namespace

// LeakyRelu (alpha = 0.01), Elu (alpha = 1), Selu (alpha, gamma: ONNX's f32 defaults), f32.
void Importer::op_activation(NodeContext& ctx) {
  expect_dtype(ctx, 0, dtype_of(ctx, 0), {kF32});
  const std::string& op = ctx.op_type();
  OpAttrs a;
  OpCode code = OpCode::LeakyRelu;
  if (op == "LeakyRelu") {
    a.alpha = ctx.attr_float("alpha", 0.01f);
  } else if (op == "Elu") {
    code = OpCode::Elu;
    a.alpha = ctx.attr_float("alpha", 1.0f);
  } else {
    code = OpCode::Selu;
    a.alpha = ctx.attr_float("alpha", 1.67326319217681884765625f);
    a.beta = ctx.attr_float("gamma", 1.05070102214813232421875f);
  }
  if (!std::isfinite(a.alpha) || !std::isfinite(a.beta)) {
    ctx.fail("attribute " + std::string(op == "Selu" && std::isfinite(a.alpha) ? "'gamma'" : "'alpha'") +
             " must be finite");
  }
  define_value(ctx, 0, emit1(ctx, code, {value_of(ctx, 0)}, a, ctx.output(0)));
}

// PRelu(x, slope): the slope broadcasts to x (ONNX's unidirectional broadcasting), f32.
void Importer::op_prelu(NodeContext& ctx) {
  expect_dtype(ctx, 0, dtype_of(ctx, 0), {kF32});
  expect_dtype(ctx, 1, dtype_of(ctx, 1), {kF32});
  const std::vector<SymInt> x = dims_of(ctx, 0), slope = dims_of(ctx, 1);
  bool ok = slope.size() <= x.size();
  for (size_t k = 0; ok && k < slope.size(); ++k) {
    const SymInt& s = slope[slope.size() - 1 - k];
    const SymInt& d = x[x.size() - 1 - k];
    ok = (s.is_constant() && s.c == 1) || s.same_as(d);
  }
  if (!ok) ctx.fail("slope " + fmt(slope) + " does not broadcast to x " + fmt(x) + " (unidirectionally)");
  define_value(ctx, 0, emit1(ctx, OpCode::PRelu, {value_of(ctx, 0), value_of(ctx, 1)}, OpAttrs{}, ctx.output(0)));
}

// Softplus, Log, Abs, Reciprocal, Floor, Ceil, Round, Sin, Cos: f32 (Abs also i32 / i64).
void Importer::op_math_unary(NodeContext& ctx) {
  static const std::map<std::string, OpCode> kOps = {
      {"Softplus", OpCode::Softplus}, {"Log", OpCode::Log},     {"Abs", OpCode::Abs},
      {"Reciprocal", OpCode::Reciprocal}, {"Floor", OpCode::Floor}, {"Ceil", OpCode::Ceil},
      {"Round", OpCode::Round},       {"Sin", OpCode::Sin},     {"Cos", OpCode::Cos}};
  const OpCode code = kOps.at(ctx.op_type());
  if (code == OpCode::Abs) {
    expect_dtype(ctx, 0, dtype_of(ctx, 0), {kF32, kI32, kI64});
  } else {
    expect_dtype(ctx, 0, dtype_of(ctx, 0), {kF32});
  }
  define_value(ctx, 0, emit1(ctx, code, {value_of(ctx, 0)}, OpAttrs{}, ctx.output(0)));
}

// Greater, Less, GreaterOrEqual, LessOrEqual: a, b of one dtype (f32, i32, i64) -> bool.
void Importer::op_compare(NodeContext& ctx) {
  static const std::map<std::string, OpCode> kOps = {{"Greater", OpCode::Greater},
                                                     {"Less", OpCode::Less},
                                                     {"GreaterOrEqual", OpCode::GreaterOrEqual},
                                                     {"LessOrEqual", OpCode::LessOrEqual}};
  const ScalarType ta = dtype_of(ctx, 0), tb = dtype_of(ctx, 1);
  expect_dtype(ctx, 0, ta, {kF32, kI32, kI64});
  if (tb != ta) ctx.fail(std::string("inputs have dtypes ") + to_string(ta) + " and " + to_string(tb) + " (must match)");
  define_value(ctx, 0, emit1(ctx, kOps.at(ctx.op_type()), {value_of(ctx, 0), value_of(ctx, 1)}, OpAttrs{}, ctx.output(0)));
}

// And, Or, Xor (bool, broadcasting) and Not (bool).
void Importer::op_logical(NodeContext& ctx) {
  const std::string& op = ctx.op_type();
  for (size_t i = 0; i < (op == "Not" ? 1u : 2u); ++i) expect_dtype(ctx, i, dtype_of(ctx, i), {kBool});
  if (op == "Not") {
    define_value(ctx, 0, emit1(ctx, OpCode::Not, {value_of(ctx, 0)}, OpAttrs{}, ctx.output(0)));
    return;
  }
  const OpCode code = op == "And" ? OpCode::And : op == "Or" ? OpCode::Or : OpCode::Xor;
  define_value(ctx, 0, emit1(ctx, code, {value_of(ctx, 0), value_of(ctx, 1)}, OpAttrs{}, ctx.output(0)));
}

// Max, Min, Sum, Mean over 1..N inputs with multidirectional broadcasting: a left-to-right chain of
// binary max / min / add ((x0 op x1) op x2 ...). Mean divides the sum by N (one correctly rounded
// division, not a multiplication by an inexact 1/N). One input is an alias of it.
void Importer::op_variadic(NodeContext& ctx) {
  const std::string& op = ctx.op_type();
  const size_t n = ctx.input_count();
  if (n == 0) ctx.fail("takes 1 or more inputs, got none");
  for (size_t i = 0; i < n; ++i) {
    if (!ctx.has_input(i)) ctx.fail("input " + std::to_string(i) + " is empty (every input of " + op + " is required)");
  }
  const ScalarType t = dtype_of(ctx, 0);
  if (op == "Max" || op == "Min") {
    expect_dtype(ctx, 0, t, {kF32, kI32, kI64});
  } else {
    expect_dtype(ctx, 0, t, {kF32});
  }
  for (size_t i = 1; i < n; ++i) {
    if (dtype_of(ctx, i) != t) {
      ctx.fail("input " + std::to_string(i) + " has dtype " + to_string(dtype_of(ctx, i)) + ", input 0 " +
               to_string(t) + " (must match)");
    }
  }
  if (n == 1) {
    define_alias(ctx, 0, 0);
    return;
  }
  const OpCode code = op == "Max" ? OpCode::Max : op == "Min" ? OpCode::Min : OpCode::Add;
  const bool mean = op == "Mean";
  int acc = value_of(ctx, 0);
  for (size_t i = 1; i < n; ++i) {
    const bool last = i + 1 == n && !mean;
    acc = emit1(ctx, code, {acc, value_of(ctx, i)}, OpAttrs{}, last ? ctx.output(0) : ctx.output(0) + "/" + std::to_string(i),
                last ? "" : "chain" + std::to_string(i));
  }
  if (mean) {
    HostTensor count;
    count.dtype = ScalarType::F32;
    const float c = static_cast<float>(n);
    count.bytes.resize(4);
    std::memcpy(count.bytes.data(), &c, 4);
    const int divisor = add_constant(ctx.name() + "/count", std::move(count));
    acc = emit1(ctx, OpCode::Div, {acc, divisor}, OpAttrs{}, ctx.output(0));
  }
  define_value(ctx, 0, acc);
}

}  // namespace ember::exporter::onnx_detail
