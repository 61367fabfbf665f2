// ONNX LSTM and GRU -> Ember's lstm / gru (layout 0; runtime/kernel/op_info_rnn.cc). Every attribute
// is read: direction, hidden_size, activations with activation_alpha / activation_beta (resolved
// here to one alpha and beta per activation with onnxruntime 1.22's defaults), clip, input_forget
// (LSTM), linear_before_reset (GRU) and layout (opset 14+; layout = 1 is lowered to transposes of X,
// the initial states and the outputs). sequence_lens must be int32 (the ONNX type; an int64
// constant is converted).
#include <algorithm>
#include <cctype>
#include <cstring>
#include <string>
#include <vector>

#include "exporter/importers/onnx/importer_internal.h"

namespace ember::exporter::onnx_detail {
namespace {

struct ActivationSpec {
  const char* name;
  RnnActivation kind;
  float alpha, beta;  // defaults (onnxruntime's: 0 for ThresholdedRelu, ScaledTanh and Affine)
  bool uses_alpha, uses_beta;
};

constexpr ActivationSpec kActivations[] = {
    {"sigmoid", RnnActivation::Sigmoid, 0.0f, 0.0f, false, false},
    {"tanh", RnnActivation::Tanh, 0.0f, 0.0f, false, false},
    {"relu", RnnActivation::Relu, 0.0f, 0.0f, false, false},
    {"hardsigmoid", RnnActivation::HardSigmoid, 0.2f, 0.5f, true, true},
    {"leakyrelu", RnnActivation::LeakyRelu, 0.01f, 0.0f, true, false},
    {"thresholdedrelu", RnnActivation::ThresholdedRelu, 0.0f, 0.0f, true, false},
    {"scaledtanh", RnnActivation::ScaledTanh, 0.0f, 0.0f, true, true},
    {"affine", RnnActivation::Affine, 0.0f, 0.0f, true, true},
    {"elu", RnnActivation::Elu, 1.0f, 0.0f, true, false},
    {"softsign", RnnActivation::Softsign, 0.0f, 0.0f, false, false},
    {"softplus", RnnActivation::Softplus, 0.0f, 0.0f, false, false},
};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

OpAttrs transpose_attrs(std::initializer_list<int> perm) {
  OpAttrs p;
  p.count = static_cast<uint8_t>(perm.size());
  int i = 0;
  for (int v : perm) p.perm[i++] = v;
  return p;
}

}  // namespace

void Importer::op_rnn(NodeContext& ctx) {
  const bool lstm = ctx.op_type() == "LSTM";
  const int gates = lstm ? 4 : 3, per = lstm ? 3 : 2;
  const size_t max_inputs = lstm ? 8 : 6, max_outputs = lstm ? 3 : 2;
  if (ctx.input_count() > max_inputs) ctx.fail("takes at most " + std::to_string(max_inputs) + " inputs");
  if (ctx.output_count() > max_outputs) ctx.fail("has at most " + std::to_string(max_outputs) + " outputs");
  OpAttrs a;
  const std::string direction = ctx.attr_string("direction", "forward");
  if (direction == "forward") {
    a.rnn_direction = RnnDirection::Forward;
  } else if (direction == "reverse") {
    a.rnn_direction = RnnDirection::Reverse;
  } else if (direction == "bidirectional") {
    a.rnn_direction = RnnDirection::Bidirectional;
  } else {
    ctx.fail("attribute 'direction' = '" + direction + "' is not forward, reverse or bidirectional");
  }
  const int dirs = a.rnn_direction == RnnDirection::Bidirectional ? 2 : 1;
  const int64_t layout = ctx.attr_int("layout", 0);
  if (layout != 0 && layout != 1) ctx.fail("attribute 'layout' = " + std::to_string(layout) + " is not 0 or 1");

  // hidden_size: the attribute, or W's [D, G H, I] (which must then be known).
  const std::vector<SymInt> w_dims = dims_of(ctx, 1);
  if (w_dims.size() != 3) ctx.fail("W must be rank 3 [num_directions, " + std::to_string(gates) + "*hidden_size, input_size]");
  int64_t hidden = ctx.attr_int("hidden_size", -1);
  if (hidden == -1) {
    if (!w_dims[1].is_constant()) ctx.fail("hidden_size is absent and W's dim 1 is not known at export");
    hidden = w_dims[1].c / gates;
  }
  if (hidden <= 0 || hidden > (int64_t{1} << 30)) ctx.fail("attribute 'hidden_size' = " + std::to_string(hidden) + " is out of range");
  if (w_dims[1].is_constant() && w_dims[1].c != gates * hidden) {
    ctx.fail("W dim 1 is " + std::to_string(w_dims[1].c) + ", expected " + std::to_string(gates) + " * hidden_size = " +
             std::to_string(gates * hidden));
  }
  a.hidden_size = static_cast<int32_t>(hidden);

  // Activations: per direction in ONNX order; alphas / betas consumed in order by the activations
  // that take one, the rest defaulted (onnxruntime's rule).
  std::vector<std::string> names;
  if (const onnx::AttributeProto* acts = ctx.find("activations")) {
    if (acts->type() != onnx::AttributeProto::STRINGS && acts->type() != onnx::AttributeProto::UNDEFINED) {
      ctx.fail(std::string("attribute 'activations' has type ") + attr_type_name(acts->type()) + ", expected STRINGS");
    }
    for (const std::string& s : acts->strings()) names.push_back(s);
    if (names.size() != static_cast<size_t>(per * dirs)) {
      ctx.fail("attribute 'activations' lists " + std::to_string(names.size()) + " functions, expected " +
               std::to_string(per * dirs) + " (" + std::to_string(per) + " per direction)");
    }
  } else {
    for (int d = 0; d < dirs; ++d) {
      names.push_back("Sigmoid");
      names.push_back("Tanh");
      if (lstm) names.push_back("Tanh");
    }
  }
  std::vector<float> alphas, betas;
  ctx.attr_floats("activation_alpha", &alphas);
  ctx.attr_floats("activation_beta", &betas);
  size_t next_alpha = 0, next_beta = 0;
  a.rnn_act_count = static_cast<uint8_t>(names.size());
  for (size_t k = 0; k < names.size(); ++k) {
    const ActivationSpec* spec = nullptr;
    for (const ActivationSpec& s : kActivations) {
      if (lower(names[k]) == s.name) spec = &s;
    }
    if (spec == nullptr) ctx.fail("activation '" + names[k] + "' is not supported");
    a.rnn_act[k] = spec->kind;
    a.rnn_alpha[k] = spec->uses_alpha && next_alpha < alphas.size() ? alphas[next_alpha++] : spec->alpha;
    a.rnn_beta[k] = spec->uses_beta && next_beta < betas.size() ? betas[next_beta++] : spec->beta;
    if (!std::isfinite(a.rnn_alpha[k]) || !std::isfinite(a.rnn_beta[k])) {
      ctx.fail("activation '" + names[k] + "' has a non-finite alpha or beta");
    }
  }
  if (next_alpha < alphas.size() || next_beta < betas.size()) {
    ctx.fail("attributes 'activation_alpha' / 'activation_beta' list " + std::to_string(alphas.size()) + " / " +
             std::to_string(betas.size()) + " values, but the activations take " + std::to_string(next_alpha) + " / " +
             std::to_string(next_beta));
  }
  const float clip = ctx.attr_float("clip", 0.0f);
  if (ctx.has_attr("clip") && !(clip > 0.0f)) ctx.fail("attribute 'clip' = " + std::to_string(clip) + " must be > 0");
  a.rnn_clip = ctx.has_attr("clip") ? clip : 0.0f;
  if (lstm) {
    const int64_t input_forget = ctx.attr_int("input_forget", 0);
    if (input_forget != 0 && input_forget != 1) ctx.fail("attribute 'input_forget' must be 0 or 1");
    a.input_forget = input_forget != 0;
  } else {
    const int64_t lbr = ctx.attr_int("linear_before_reset", 0);
    if (lbr != 0 && lbr != 1) ctx.fail("attribute 'linear_before_reset' must be 0 or 1");
    a.linear_before_reset = lbr != 0;
  }

  for (size_t i = 0; i < ctx.input_count(); ++i) {
    if (ctx.has_input(i) && i != 4 && dtype_of(ctx, i) != ScalarType::F32) {
      ctx.fail("input " + std::to_string(i) + " ('" + ctx.input(i) + "') is " + to_string(dtype_of(ctx, i)) +
               "; only float32 is supported");
    }
  }
  const std::string& out0 = ctx.has_output(0) ? ctx.output(0) : ctx.name() + "/Y";
  auto to_layout0 = [&](size_t i, const char* what) {
    int v = value_of(ctx, i);
    if (layout == 1) {  // [B, T, I] / [B, D, H] -> [T, B, I] / [D, B, H]
      v = emit1(ctx, OpCode::Transpose, {v}, transpose_attrs({1, 0, 2}), out0 + "/" + what + "_layout0",
                std::string(what) + "_layout0");
    }
    return v;
  };
  std::vector<int> ins(max_inputs, -1);
  ins[0] = to_layout0(0, "x");
  ins[1] = value_of(ctx, 1);
  ins[2] = value_of(ctx, 2);
  if (ctx.has_input(3)) ins[3] = value_of(ctx, 3);
  if (ctx.has_input(4)) {
    const ScalarType t = dtype_of(ctx, 4);
    if (t == ScalarType::I32) {
      ins[4] = value_of(ctx, 4);
    } else if (const HostTensor* c = constant_of(ctx, 4); c != nullptr && is_integer_dtype(t)) {
      std::vector<int32_t> lens(c->numel());
      for (size_t i = 0; i < lens.size(); ++i) {
        const int64_t v = read_int(*c, i);
        if (v < 0 || v > INT32_MAX) ctx.fail("sequence_lens[" + std::to_string(i) + "] = " + std::to_string(v) + " is out of range");
        lens[i] = static_cast<int32_t>(v);
      }
      HostTensor h;
      h.dtype = ScalarType::I32;
      h.dims = c->dims;
      h.bytes.resize(lens.size() * 4);
      if (!lens.empty()) std::memcpy(h.bytes.data(), lens.data(), h.bytes.size());
      ins[4] = add_constant(ctx.input(4) + ".i32", std::move(h));
    } else {
      ctx.fail(std::string("sequence_lens is ") + to_string(t) + "; int32 (or an integer constant) is required");
    }
  }
  if (ctx.has_input(5)) ins[5] = to_layout0(5, "initial_h");
  if (lstm && ctx.has_input(6)) ins[6] = to_layout0(6, "initial_c");
  if (lstm && ctx.has_input(7)) ins[7] = value_of(ctx, 7);
  a.kind = AttrKind::Rnn;
  const std::vector<int> outs = emit(ctx, lstm ? OpCode::Lstm : OpCode::Gru, ins, a, out0);
  for (size_t o = 0; o < max_outputs; ++o) {
    if (!ctx.has_output(o)) continue;  // unused outputs stay unnamed temporaries
    int v = outs.at(o);
    if (layout == 1) {  // Y [T, D, B, H] -> [B, T, D, H]; Y_h, Y_c [D, B, H] -> [B, D, H]
      v = emit1(ctx, OpCode::Transpose, {v}, o == 0 ? transpose_attrs({2, 0, 1, 3}) : transpose_attrs({1, 0, 2}),
                ctx.output(o), "output" + std::to_string(o) + "_layout1");
    }
    define_value(ctx, o, v);
  }
}

}  // namespace ember::exporter::onnx_detail
