// ONNX handlers: constants, aliases and compute ops (conv, gemm, matmul, element-wise, pooling, norms).
#include "exporter/importers/onnx/importer_internal.h"

#include <cctype>

#include "exporter/passes/batch_norm_folding.h"
#include "exporter/passes/constant_folding.h"

namespace ember::exporter::onnx_detail {

// ---- Handlers ----------------------------------------------------------------------------------

void Importer::op_constant(NodeContext& ctx) {
  HostTensor t;
  int set = 0;
  if (const onnx::TensorProto* tp = ctx.attr_tensor("value")) {
    t = read_tensor_proto(*tp, read_options_, ctx.where() + ": attribute 'value'");
    ++set;
  }
  if (ctx.has_attr("value_float")) {
    t = HostTensor::from_f32({}, {ctx.attr_float("value_float", 0)});
    ++set;
  }
  std::vector<float> floats;
  if (ctx.has_attr("value_floats")) {
    ctx.attr_floats("value_floats", &floats);
    t = HostTensor::from_f32({static_cast<int64_t>(floats.size())}, floats);
    ++set;
  }
  auto from_ints = [&](std::vector<int64_t> v, std::vector<int64_t> dims) {
    HostTensor r;
    r.dtype = ScalarType::I64;
    r.dims = std::move(dims);
    r.bytes.resize(v.size() * 8);
    if (!v.empty()) std::memcpy(r.bytes.data(), v.data(), r.bytes.size());
    return r;
  };
  if (ctx.has_attr("value_int")) {
    t = from_ints({ctx.attr_int("value_int", 0)}, {});
    ++set;
  }
  if (ctx.has_attr("value_ints")) {
    std::vector<int64_t> v;
    ctx.attr_ints("value_ints", &v);
    t = from_ints(v, {static_cast<int64_t>(v.size())});
    ++set;
  }
  for (const char* unsupported : {"sparse_value", "value_string", "value_strings"}) {
    if (ctx.has_attr(unsupported)) ctx.fail(std::string("attribute '") + unsupported + "' is not supported");
  }
  if (set != 1) ctx.fail("needs exactly one value attribute");
  ++stats_.evaluated_at_export;
  define_constant(ctx, 0, std::move(t));
}

void Importer::op_identity(NodeContext& ctx) {
  ++stats_.removed_identity;
  define_alias(ctx, 0, 0);
}

void Importer::op_dropout(NodeContext& ctx) {
  ctx.ignore_attr("seed");
  ctx.ignore_attr("ratio");  // opset < 12
  if (ctx.has_input(2) && scalar_of(ctx, 2, 0, "training_mode") != 0) {
    ctx.fail("training_mode=true is not supported (export the model in eval mode)");
  }
  if (ctx.has_output(1) && (use_count(ctx.output(1)) > 0 || is_graph_output(ctx.output(1)))) {
    ctx.fail("output 1 (mask '" + ctx.output(1) + "') is used; only inference Dropout is supported");
  }
  ++stats_.removed_identity;
  define_alias(ctx, 0, 0);
}

void Importer::op_shape(NodeContext& ctx) {
  const std::vector<SymInt> dims = dims_of(ctx, 0);
  const int64_t rank = static_cast<int64_t>(dims.size());
  int64_t start = ctx.attr_int("start", 0), end = ctx.attr_int("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  Known k;
  k.dtype = ScalarType::I64;
  for (int64_t i = start; i < end; ++i) {
    SymInt s = dims[static_cast<size_t>(i)];
    // Derived symbols are not bound at run time by inputs: keep their identity only for same_as().
    k.elems.push_back(s);
  }
  k.dims = {static_cast<int64_t>(k.elems.size())};
  ++stats_.evaluated_at_export;
  define_known(ctx, 0, std::move(k));
}

void Importer::op_size(NodeContext& ctx) {
  SymInt n = SymInt::constant(1);
  for (const SymInt& d : dims_of(ctx, 0)) n = sym_mul(n, d);
  Known k;
  k.elems = {n};
  ++stats_.evaluated_at_export;
  define_known(ctx, 0, std::move(k));
}

void Importer::conv_like_padding(NodeContext& ctx, const std::vector<SymInt>& in_dims, const int64_t kernel[2],
                                 const int32_t stride[2], const int32_t dilation[2], int32_t padding[4], bool ceil_mode) {
  const std::string auto_pad = ctx.attr_string("auto_pad", "NOTSET");
  std::vector<int64_t> pads;
  const bool has_pads = ctx.attr_ints("pads", &pads);
  if (auto_pad == "NOTSET") {
    if (has_pads) {
      if (pads.size() != 4) ctx.fail("attribute 'pads' has " + std::to_string(pads.size()) + " values; 2-D needs 4");
      for (int i = 0; i < 4; ++i) {
        if (pads[static_cast<size_t>(i)] < 0 || pads[static_cast<size_t>(i)] > INT32_MAX) ctx.fail("attribute 'pads' has a negative or huge value");
      }
      // ONNX [h_begin, w_begin, h_end, w_end] = Ember [top, left, bottom, right].
      for (int i = 0; i < 4; ++i) padding[i] = static_cast<int32_t>(pads[static_cast<size_t>(i)]);
    }
    return;
  }
  if (auto_pad == "VALID") return;
  if (auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") {
    ctx.fail("attribute 'auto_pad' = '" + auto_pad + "' is not supported");
  }
  if (ceil_mode) ctx.fail("auto_pad " + auto_pad + " with ceil_mode=1 is not supported");
  for (int i = 0; i < 2; ++i) {
    const SymInt& in = in_dims[2 + static_cast<size_t>(i)];
    const int64_t k_eff = (kernel[i] - 1) * dilation[i] + 1;
    int64_t total = 0;
    if (in.is_constant()) {
      const int64_t out = (in.c + stride[i] - 1) / stride[i];
      total = std::max<int64_t>(0, (out - 1) * stride[i] + k_eff - in.c);
    } else if (stride[i] == 1) {
      total = k_eff - 1;
    } else {
      ctx.fail("auto_pad " + auto_pad + " with stride " + std::to_string(stride[i]) + " on a run-time spatial size (" +
               format_sym(in, graph_) + ") is not supported");
    }
    const int64_t small = total / 2, large = total - small;
    padding[i] = static_cast<int32_t>(auto_pad == "SAME_UPPER" ? small : large);       // begin
    padding[i + 2] = static_cast<int32_t>(auto_pad == "SAME_UPPER" ? large : small);   // end
  }
}

namespace {
bool read_pair(NodeContext& ctx, const char* attr, int32_t out[2]) {
  std::vector<int64_t> v;
  if (!ctx.attr_ints(attr, &v)) return false;
  if (v.size() != 2) ctx.fail(std::string("attribute '") + attr + "' has " + std::to_string(v.size()) + " values; only 2-D is supported");
  for (int i = 0; i < 2; ++i) {
    if (v[static_cast<size_t>(i)] < 1 || v[static_cast<size_t>(i)] > INT32_MAX) ctx.fail(std::string("attribute '") + attr + "' must be positive");
    out[i] = static_cast<int32_t>(v[static_cast<size_t>(i)]);
  }
  return true;
}
}  // namespace

void Importer::op_conv(NodeContext& ctx) {
  const std::vector<SymInt> x_dims = dims_of(ctx, 0);
  if (x_dims.size() != 4) return op_conv_nd(ctx, false);  // 1-D as 2-D, 3-D refused (onnx_ops_spatial.cc)
  const std::vector<SymInt> w_dims = dims_of(ctx, 1);
  if (w_dims.size() != 4 || x_dims.size() != 4) {
    ctx.fail("only 2-D convolutions are supported (input rank " + std::to_string(x_dims.size()) + ", weight rank " +
             std::to_string(w_dims.size()) + ")");
  }
  OpAttrs a;
  read_pair(ctx, "strides", a.stride);
  read_pair(ctx, "dilations", a.dilation);
  const int64_t group = ctx.attr_int("group", 1);
  if (group < 1 || group > INT32_MAX) ctx.fail("attribute 'group' = " + std::to_string(group) + " is invalid");
  a.groups = static_cast<int32_t>(group);
  int64_t kernel[2] = {w_dims[2].c, w_dims[3].c};
  std::vector<int64_t> ks;
  if (ctx.attr_ints("kernel_shape", &ks) && (ks.size() != 2 || ks[0] != kernel[0] || ks[1] != kernel[1])) {
    ctx.fail("attribute 'kernel_shape' does not match the weight's dims");
  }
  conv_like_padding(ctx, x_dims, kernel, a.stride, a.dilation, a.padding, false);
  const int x = value_of(ctx, 0), w = value_of(ctx, 1);
  const int b = ctx.has_input(2) ? value_of(ctx, 2) : -1;
  define_value(ctx, 0, emit1(ctx, OpCode::Conv2d, {x, w, b}, a, ctx.output(0)));
}

namespace {
// A 2-D transpose of any element size.
HostTensor transpose2d(const HostTensor& t) {
  HostTensor r;
  r.dtype = t.dtype;
  r.dims = {t.dims[1], t.dims[0]};
  const size_t es = static_cast<size_t>(bits_of(t.dtype) / 8);
  r.bytes.resize(t.bytes.size());
  const size_t rows = static_cast<size_t>(t.dims[0]), cols = static_cast<size_t>(t.dims[1]);
  for (size_t i = 0; i < rows; ++i) {
    for (size_t j = 0; j < cols; ++j) std::memcpy(&r.bytes[(j * rows + i) * es], &t.bytes[(i * cols + j) * es], es);
  }
  return r;
}

HostTensor scaled_f32(const HostTensor& t, double s) {
  HostTensor r = t;
  for (size_t i = 0; i < t.numel(); ++i) {
    float v;
    std::memcpy(&v, t.bytes.data() + i * 4, 4);
    v = static_cast<float>(static_cast<double>(v) * s);
    std::memcpy(r.bytes.data() + i * 4, &v, 4);
  }
  return r;
}

HostTensor f32_scalar(float v) { return HostTensor::from_f32({}, {v}); }
}  // namespace

void Importer::op_gemm(NodeContext& ctx) {
  const double alpha = ctx.attr_float("alpha", 1.0f), beta = ctx.attr_float("beta", 1.0f);
  const bool trans_a = ctx.attr_int("transA", 0) != 0, trans_b = ctx.attr_int("transB", 0) != 0;
  if (rank_of(ctx, 0) != 2 || rank_of(ctx, 1) != 2) ctx.fail("A and B must be 2-D");
  int a = value_of(ctx, 0);
  if (trans_a) {
    OpAttrs p;
    p.count = 2;
    p.perm[0] = 1;
    p.perm[1] = 0;
    a = emit1(ctx, OpCode::Transpose, {a}, p, ctx.output(0) + "/a_t", "transpose_a");
  }
  const HostTensor* bc = constant_of(ctx, 1);
  int y = -1;
  bool bias_done = !ctx.has_input(2) || beta == 0.0;
  if (bc != nullptr) {
    // Linear weights are [N, K]: B [K, N] is transposed at export (transB=1 already is [N, K]).
    HostTensor w = trans_b ? *bc : transpose2d(*bc);
    if (alpha != 1.0) {
      if (w.dtype != ScalarType::F32) ctx.fail("alpha != 1 with a " + std::string(to_string(w.dtype)) + " weight is not supported");
      w = scaled_f32(w, alpha);
    }
    const int64_t n = w.dims[0];
    int bias = -1;
    if (!bias_done) {
      const HostTensor* cc = constant_of(ctx, 2);
      if (cc != nullptr && cc->dtype == ScalarType::F32 && (cc->numel() == static_cast<uint64_t>(n) || cc->numel() == 1)) {
        const std::vector<int64_t>& cd = cc->dims;
        const bool row = cd.empty() || cd.back() == n || cc->numel() == 1;
        if (row && (cd.size() < 2 || cd[0] == 1)) {
          std::vector<float> b(static_cast<size_t>(n));
          for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(read_float(*cc, cc->numel() == 1 ? 0 : i) * beta);
          bias = add_constant(ctx.name() + ".bias", HostTensor::from_f32({n}, b));
          bias_done = true;
        }
      }
    }
    OpAttrs la;
    la.activation_quant = ActivationQuant::None;
    const int wid = add_constant(trans_b && alpha == 1.0 ? ctx.input(1) : ctx.input(1) + ".T", std::move(w));
    y = emit1(ctx, OpCode::Linear, {a, wid, bias}, la, bias_done ? ctx.output(0) : ctx.output(0) + "/linear",
              bias_done ? "" : "linear");
  } else {
    int b = value_of(ctx, 1);
    if (trans_b) {
      OpAttrs p;
      p.count = 2;
      p.perm[0] = 1;
      p.perm[1] = 0;
      b = emit1(ctx, OpCode::Transpose, {b}, p, ctx.output(0) + "/b_t", "transpose_b");
    }
    y = emit1(ctx, OpCode::MatMul, {a, b}, OpAttrs{}, ctx.output(0) + "/matmul", "matmul");
    if (alpha != 1.0) {
      y = emit1(ctx, OpCode::Mul, {y, add_constant(ctx.name() + ".alpha", f32_scalar(static_cast<float>(alpha)))}, OpAttrs{},
                ctx.output(0) + "/alpha", "alpha");
    }
  }
  if (!bias_done) {
    int c = value_of(ctx, 2);
    if (beta != 1.0) {
      c = emit1(ctx, OpCode::Mul, {c, add_constant(ctx.name() + ".beta", f32_scalar(static_cast<float>(beta)))}, OpAttrs{},
                ctx.output(0) + "/beta_c", "beta");
    }
    y = emit1(ctx, OpCode::Add, {y, c}, OpAttrs{}, ctx.output(0), "add_c");
  }
  define_value(ctx, 0, y);
}

void Importer::op_matmul(NodeContext& ctx) {
  const HostTensor* bc = constant_of(ctx, 1);
  const size_t a_rank = rank_of(ctx, 0);
  if (bc != nullptr && bc->dims.size() == 2 && a_rank >= 1 && constant_of(ctx, 0) == nullptr) {
    OpAttrs la;
    la.activation_quant = ActivationQuant::None;
    const int wid = add_constant(ctx.input(1) + ".T", transpose2d(*bc));
    define_value(ctx, 0, emit1(ctx, OpCode::Linear, {value_of(ctx, 0), wid, -1}, la, ctx.output(0)));
    return;
  }
  if (a_rank < 2 || rank_of(ctx, 1) < 2) {
    ctx.fail("1-D operands are supported only as x @ W with a constant 2-D W (ranks " + std::to_string(a_rank) + " and " +
             std::to_string(rank_of(ctx, 1)) + ")");
  }
  define_value(ctx, 0, emit1(ctx, OpCode::MatMul, {value_of(ctx, 0), value_of(ctx, 1)}, OpAttrs{}, ctx.output(0)));
}

// Add(linear_without_bias(x), b) with a constant [N] b and one reader: b becomes the bias.
bool Importer::try_fuse_bias(NodeContext& ctx) {
  for (size_t side = 0; side < 2; ++side) {
    Entry& e = entry(ctx, side);
    if (e.value < 0 || e.constant || e.known || value(e.value).is_constant()) continue;
    const int producer = value(e.value).producer;
    if (producer < 0) continue;
    Node& node = graph_.nodes[static_cast<size_t>(producer)];
    if (node.op != OpCode::Linear || node.inputs.size() < 3 || node.inputs[2] >= 0) continue;
    if (value_readers(e.value) != 1) continue;
    const HostTensor* b = constant_of(ctx, 1 - side);
    const Value& w = value(node.inputs[1]);
    if (b == nullptr || b->dtype != value(e.value).dtype || b->numel() != static_cast<uint64_t>(w.dims[0].max)) continue;
    bool row = !b->dims.empty() && b->dims.back() == w.dims[0].max;
    for (size_t i = 0; row && i + 1 < b->dims.size(); ++i) row = b->dims[i] == 1;
    if (!row || b->dims.size() > value(e.value).dims.size()) continue;
    HostTensor bias = *b;
    bias.dims = {w.dims[0].max};
    node.inputs[2] = add_constant(ctx.input(1 - side), std::move(bias));
    define_value(ctx, 0, e.value);
    return true;
  }
  return false;
}

void Importer::op_binary(NodeContext& ctx) {
  const std::string& op = ctx.op_type();
  if (op == "Add" && try_fuse_bias(ctx)) return;
  const OpCode code = op == "Add" ? OpCode::Add : op == "Sub" ? OpCode::Sub : op == "Mul" ? OpCode::Mul : OpCode::Div;
  define_value(ctx, 0, emit1(ctx, code, {value_of(ctx, 0), value_of(ctx, 1)}, OpAttrs{}, ctx.output(0)));
}

void Importer::op_pow(NodeContext& ctx) {
  const HostTensor* y = constant_of(ctx, 1);
  if (y != nullptr && y->numel() == 1 && rank_of(ctx, 1) <= rank_of(ctx, 0)) {
    const double e = read_float(*y, 0);
    const int x = value_of(ctx, 0);
    if (e == 1.0) {
      define_value(ctx, 0, x);
      return;
    }
    if (e == 2.0) {
      define_value(ctx, 0, emit1(ctx, OpCode::Mul, {x, x}, OpAttrs{}, ctx.output(0)));
      return;
    }
    if (e == 0.5) {
      define_value(ctx, 0, emit1(ctx, OpCode::Sqrt, {x}, OpAttrs{}, ctx.output(0)));
      return;
    }
  }
  define_value(ctx, 0, emit1(ctx, OpCode::Pow, {value_of(ctx, 0), value_of(ctx, 1)}, OpAttrs{}, ctx.output(0)));
}

void Importer::op_unary(NodeContext& ctx) {
  static const std::map<std::string, OpCode> kOps = {
      {"Relu", OpCode::Relu}, {"Sigmoid", OpCode::Sigmoid}, {"Tanh", OpCode::Tanh}, {"Erf", OpCode::Erf},
      {"Sqrt", OpCode::Sqrt}, {"Exp", OpCode::Exp},         {"Neg", OpCode::Neg},   {"HardSwish", OpCode::HardSwish}};
  define_value(ctx, 0, emit1(ctx, kOps.at(ctx.op_type()), {value_of(ctx, 0)}, OpAttrs{}, ctx.output(0)));
}

void Importer::op_gelu(NodeContext& ctx) {
  const std::string approx = ctx.attr_string("approximate", "none");
  OpAttrs a;
  if (approx == "none") a.gelu_approx = GeluApprox::None;
  else if (approx == "tanh") a.gelu_approx = GeluApprox::Tanh;
  else ctx.fail("attribute 'approximate' = '" + approx + "' is not supported");
  define_value(ctx, 0, emit1(ctx, OpCode::Gelu, {value_of(ctx, 0)}, a, ctx.output(0)));
}

void Importer::op_clip(NodeContext& ctx) {
  if (dtype_of(ctx, 0) != ScalarType::F32) ctx.fail(std::string("input dtype ") + to_string(dtype_of(ctx, 0)) + " is not supported (f32 only)");
  // ONNX: an absent bound is the type's lowest / max (not ±inf), so Clip(min=0)(+inf) is FLT_MAX,
  // which Relu would not give; only an explicit +inf max makes Clip(min=0) a Relu.
  const double inf = std::numeric_limits<double>::infinity();
  const double flt_max = std::numeric_limits<float>::max();
  int x = value_of(ctx, 0);
  // A bound computed at run time (openWakeWord's melspectrogram clips at max(x) - 80 dB) becomes
  // max(x, lo) / min(x, hi): the same values, NaN kept, as Clip's definition min(max(x, lo), hi).
  const bool lo_runtime = ctx.has_input(1) && constant_of(ctx, 1) == nullptr;
  const bool hi_runtime = ctx.has_input(2) && constant_of(ctx, 2) == nullptr;
  if (lo_runtime || hi_runtime) {
    for (size_t i = 1; i <= 2; ++i) {
      if (ctx.has_input(i) && dtype_of(ctx, i) != ScalarType::F32) ctx.fail("bound " + std::to_string(i) + " is not f32");
    }
    if (lo_runtime) {
      x = emit1(ctx, OpCode::Max, {x, value_of(ctx, 1)}, OpAttrs{}, ctx.output(0) + (hi_runtime || ctx.has_input(2) ? "/lo" : ""), "lo");
    } else if (ctx.has_input(1)) {
      OpAttrs a;
      a.clip_min = static_cast<float>(scalar_of(ctx, 1, -flt_max, "min"));
      a.clip_max = static_cast<float>(inf);
      x = emit1(ctx, OpCode::Clip, {x}, a, ctx.output(0) + "/lo", "lo");
    }
    if (hi_runtime) {
      x = emit1(ctx, OpCode::Min, {x, value_of(ctx, 2)}, OpAttrs{}, ctx.output(0), "hi");
    } else if (ctx.has_input(2)) {
      OpAttrs a;
      a.clip_min = static_cast<float>(-inf);
      a.clip_max = static_cast<float>(scalar_of(ctx, 2, flt_max, "max"));
      x = emit1(ctx, OpCode::Clip, {x}, a, ctx.output(0), "hi");
    }
    define_value(ctx, 0, x);
    return;
  }
  const double lo = scalar_of(ctx, 1, -flt_max, "min"), hi = scalar_of(ctx, 2, flt_max, "max");
  if (lo == 0.0 && hi == inf) {
    define_value(ctx, 0, emit1(ctx, OpCode::Relu, {x}, OpAttrs{}, ctx.output(0)));
    return;
  }
  OpAttrs a;
  a.clip_min = static_cast<float>(lo);
  a.clip_max = static_cast<float>(hi);
  define_value(ctx, 0, emit1(ctx, OpCode::Clip, {x}, a, ctx.output(0)));
}

void Importer::op_hard_sigmoid(NodeContext& ctx) {
  OpAttrs a;
  a.alpha = ctx.attr_float("alpha", 0.2f);
  a.beta = ctx.attr_float("beta", 0.5f);
  define_value(ctx, 0, emit1(ctx, OpCode::HardSigmoid, {value_of(ctx, 0)}, a, ctx.output(0)));
}

void Importer::op_softmax(NodeContext& ctx) {
  const size_t rank = rank_of(ctx, 0);
  const int64_t def = ctx.opset() >= 13 ? -1 : 1;
  const int axis = normalize_axis(ctx, ctx.attr_int("axis", def), rank);
  if (ctx.opset() < 13 && static_cast<size_t>(axis) != rank - 1) {
    ctx.fail("before opset 13, Softmax flattens the input to 2-D at 'axis' (" + std::to_string(axis) +
             "); only the last axis is supported (re-export with opset >= 13)");
  }
  OpAttrs a;
  a.axis = axis;
  define_value(ctx, 0, emit1(ctx, OpCode::Softmax, {value_of(ctx, 0)}, a, ctx.output(0)));
}

void Importer::op_pool(NodeContext& ctx) {
  const bool is_max = ctx.op_type() == "MaxPool";
  const std::vector<SymInt> x_dims = dims_of(ctx, 0);
  if (x_dims.size() != 4) ctx.fail("only 2-D pooling (rank-4 input) is supported, got rank " + std::to_string(x_dims.size()));
  OpAttrs a;
  std::vector<int64_t> ks;
  if (!ctx.attr_ints("kernel_shape", &ks)) ctx.fail("attribute 'kernel_shape' is required");
  if (ks.size() != 2) ctx.fail("attribute 'kernel_shape' has " + std::to_string(ks.size()) + " values; only 2-D is supported");
  for (int i = 0; i < 2; ++i) {
    if (ks[static_cast<size_t>(i)] < 1 || ks[static_cast<size_t>(i)] > INT32_MAX) ctx.fail("attribute 'kernel_shape' must be positive");
    a.kernel[i] = static_cast<int32_t>(ks[static_cast<size_t>(i)]);
  }
  a.stride[0] = a.stride[1] = 1;
  read_pair(ctx, "strides", a.stride);
  read_pair(ctx, "dilations", a.dilation);
  a.ceil_mode = ctx.attr_int("ceil_mode", 0) != 0;
  if (is_max) {
    if (ctx.attr_int("storage_order", 0) != 0) ctx.fail("attribute 'storage_order' = 1 is not supported");
    if (ctx.has_output(1) && (use_count(ctx.output(1)) > 0 || is_graph_output(ctx.output(1)))) {
      ctx.fail("output 1 (Indices '" + ctx.output(1) + "') is not supported");
    }
  } else {
    a.count_include_pad = ctx.attr_int("count_include_pad", 0) != 0;
  }
  const int64_t kernel[2] = {a.kernel[0], a.kernel[1]};
  conv_like_padding(ctx, x_dims, kernel, a.stride, a.dilation, a.padding, a.ceil_mode);
  define_value(ctx, 0, emit1(ctx, is_max ? OpCode::MaxPool2d : OpCode::AvgPool2d, {value_of(ctx, 0)}, a, ctx.output(0)));
}

void Importer::op_global_average_pool(NodeContext& ctx) {
  if (rank_of(ctx, 0) != 4) ctx.fail("only rank-4 (NCHW) input is supported, got rank " + std::to_string(rank_of(ctx, 0)));
  define_value(ctx, 0, emit1(ctx, OpCode::GlobalAvgPool2d, {value_of(ctx, 0)}, OpAttrs{}, ctx.output(0)));
}

void Importer::op_batch_norm(NodeContext& ctx) {
  const double eps = ctx.attr_float("epsilon", 1e-5f);
  ctx.ignore_attr("momentum");
  if (ctx.attr_int("training_mode", 0) != 0) ctx.fail("attribute 'training_mode' = 1 is not supported (export in eval mode)");
  if (ctx.attr_int("spatial", 1) != 1) ctx.fail("attribute 'spatial' = 0 is not supported");
  for (size_t o = 1; o < ctx.output_count(); ++o) {
    if (ctx.has_output(o) && (use_count(ctx.output(o)) > 0 || is_graph_output(ctx.output(o)))) {
      ctx.fail("output " + std::to_string(o) + " ('" + ctx.output(o) + "', training statistics) is not supported");
    }
  }
  if (rank_of(ctx, 0) < 2) ctx.fail("input must have rank >= 2");
  // Fold into the producing conv2d / linear when this is its only reader.
  Entry& x = entry(ctx, 0);
  BatchNormParams params;
  params.epsilon = eps;
  bool constant_params = true;
  std::vector<double>* dst[4] = {&params.scale, &params.bias, &params.mean, &params.var};
  for (size_t i = 1; i <= 4; ++i) {
    const HostTensor* c = constant_of(ctx, i);
    if (c == nullptr || c->dims.size() != 1) {
      constant_params = false;
      break;
    }
    for (size_t j = 0; j < c->numel(); ++j) dst[i - 1]->push_back(read_float(*c, j));
  }
  if (constant_params && x.value >= 0 && !x.constant && !x.known && !value(x.value).is_constant() &&
      value_readers(x.value) == 1) {
    const int producer = value(x.value).producer;
    if (producer >= 0 && fold_batch_norm_into(graph_, producer, params)) {
      const Node& p = graph_.nodes[static_cast<size_t>(producer)];
      for (size_t i = 1; i < p.inputs.size(); ++i) {
        if (p.inputs[i] >= 0) inference_->add_source(p.inputs[i]);
      }
      ++stats_.folded_batch_norms;
      define_value(ctx, 0, x.value);
      return;
    }
  }
  OpAttrs a;
  a.axis = 1;
  a.epsilon = static_cast<float>(eps);
  std::vector<int> ins = {value_of(ctx, 0)};
  for (size_t i = 1; i <= 4; ++i) {
    const HostTensor* c = constant_of(ctx, i);
    if (c != nullptr && c->dtype != ScalarType::F32 && c->dtype != ScalarType::F64) {
      ctx.fail(std::string("parameter dtype ") + to_string(c->dtype) + " is not supported (f32 only)");
    }
    ins.push_back(value_of(ctx, i));
  }
  define_value(ctx, 0, emit1(ctx, OpCode::BatchNorm, ins, a, ctx.output(0)));
}

void Importer::op_layer_norm(NodeContext& ctx) {
  const size_t rank = rank_of(ctx, 0);
  OpAttrs a;
  a.axis = normalize_axis(ctx, ctx.attr_int("axis", -1), rank);
  a.epsilon = ctx.attr_float("epsilon", 1e-5f);
  if (ctx.attr_int("stash_type", 1) != 1) ctx.fail("attribute 'stash_type' other than 1 (float) is not supported");
  for (size_t o = 1; o < ctx.output_count(); ++o) {
    if (ctx.has_output(o) && (use_count(ctx.output(o)) > 0 || is_graph_output(ctx.output(o)))) {
      ctx.fail("output " + std::to_string(o) + " ('" + ctx.output(o) + "', Mean/InvStdDev) is not supported");
    }
  }
  const int x = value_of(ctx, 0), scale = value_of(ctx, 1);
  const int bias = ctx.has_input(2) ? value_of(ctx, 2) : -1;
  define_value(ctx, 0, emit1(ctx, OpCode::LayerNorm, {x, scale, bias}, a, ctx.output(0)));
}

// ---- Einsum ------------------------------------------------------------------------------------
// Lowered to Transpose / Reshape / ReduceSum / MatMul: the two-operand form as one batched matmul
// [batch..., left, contracted] x [batch..., contracted, right] (MaxViT's attention, for one), the
// one-operand form as sums and a permutation. Ellipses and repeated letters (diagonals) are refused.

namespace {

struct EinsumSpec {
  std::vector<std::string> inputs;
  std::string output;
};

EinsumSpec parse_einsum(NodeContext& ctx, size_t operands) {
  std::string eq;
  for (char c : ctx.attr_string("equation", "")) {
    if (c != ' ') eq += c;
  }
  if (eq.empty()) ctx.fail("attribute 'equation' is missing or empty");
  if (eq.find("...") != std::string::npos) ctx.fail("equation '" + eq + "' uses an ellipsis, which is not supported");
  EinsumSpec spec;
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  size_t from = 0;
  for (;;) {
    const size_t comma = lhs.find(',', from);
    spec.inputs.push_back(lhs.substr(from, comma == std::string::npos ? std::string::npos : comma - from));
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  if (arrow != std::string::npos) {
    spec.output = eq.substr(arrow + 2);
  } else {  // implicit output: the letters that appear once, in alphabetical order
    std::map<char, int> count;
    for (const std::string& t : spec.inputs) {
      for (char c : t) ++count[c];
    }
    for (const auto& [c, n] : count) {
      if (n == 1) spec.output += c;
    }
  }
  if (spec.inputs.size() != operands) {
    ctx.fail("equation '" + eq + "' names " + std::to_string(spec.inputs.size()) + " operands, the node has " +
             std::to_string(operands));
  }
  std::vector<std::string> all = spec.inputs;
  all.push_back(spec.output);
  for (const std::string& t : all) {
    for (size_t i = 0; i < t.size(); ++i) {
      if (!std::isalpha(static_cast<unsigned char>(t[i]))) ctx.fail("equation '" + eq + "' has an invalid character");
      if (t.find(t[i], i + 1) != std::string::npos) {
        ctx.fail("equation '" + eq + "' repeats '" + std::string(1, t[i]) + "' in one term (diagonals are not supported)");
      }
    }
  }
  for (char c : spec.output) {
    bool found = false;
    for (const std::string& t : spec.inputs) found = found || t.find(c) != std::string::npos;
    if (!found) ctx.fail("output letter '" + std::string(1, c) + "' of '" + eq + "' is in no operand");
  }
  return spec;
}

}  // namespace

// Sums `x` (letters `terms`) over every letter not in `keep`; returns the value and its letters.
int Importer::einsum_reduce(NodeContext& ctx, int x, std::string* terms, const std::string& keep, const std::string& tag) {
  OpAttrs a;
  a.keepdims = false;
  std::string kept;
  for (size_t i = 0; i < terms->size(); ++i) {
    if (keep.find((*terms)[i]) == std::string::npos) a.axes[a.count++] = static_cast<int32_t>(i);
    else kept += (*terms)[i];
  }
  if (a.count == 0) return x;
  *terms = kept;
  return emit1(ctx, OpCode::ReduceSum, {x}, a, ctx.output(0) + "/" + tag + "_sum", tag + "_sum");
}

// Permutes `x` (letters `from`) into the order `to` (the same letters).
int Importer::einsum_permute(NodeContext& ctx, int x, const std::string& from, const std::string& to, const std::string& tag) {
  OpAttrs a;
  a.count = static_cast<uint8_t>(to.size());
  bool identity = true;
  for (size_t i = 0; i < to.size(); ++i) {
    a.perm[i] = static_cast<int32_t>(from.find(to[i]));
    identity = identity && a.perm[i] == static_cast<int32_t>(i);
  }
  if (identity) return x;
  return emit1(ctx, OpCode::Transpose, {x}, a, ctx.output(0) + "/" + tag + "_perm", tag + "_perm");
}

void Importer::op_einsum(NodeContext& ctx) {
  const size_t n = ctx.input_count();
  if (n != 1 && n != 2) ctx.fail(std::to_string(n) + " operands; Einsum is supported with one or two");
  const EinsumSpec spec = parse_einsum(ctx, n);
  for (size_t i = 0; i < n; ++i) {
    if (spec.inputs[i].size() != rank_of(ctx, i)) {
      ctx.fail("operand " + std::to_string(i) + " has rank " + std::to_string(rank_of(ctx, i)) + ", its term '" +
               spec.inputs[i] + "' has " + std::to_string(spec.inputs[i].size()) + " letters");
    }
  }
  const std::string& out = spec.output;
  if (n == 1) {
    std::string terms = spec.inputs[0];
    int x = einsum_reduce(ctx, value_of(ctx, 0), &terms, out, "a");
    x = einsum_permute(ctx, x, terms, out, "out");
    define_value(ctx, 0, x);
    return;
  }
  std::string ta = spec.inputs[0], tb = spec.inputs[1];
  // Letters of one operand only and not in the output are summed first.
  int a = einsum_reduce(ctx, value_of(ctx, 0), &ta, tb + out, "a");
  int b = einsum_reduce(ctx, value_of(ctx, 1), &tb, ta + out, "b");
  std::string batch, left, right, contracted;
  for (char c : out) {
    const bool in_a = ta.find(c) != std::string::npos, in_b = tb.find(c) != std::string::npos;
    if (in_a && in_b) batch += c;
    else if (in_a) left += c;
    else right += c;
  }
  for (char c : ta) {
    if (tb.find(c) != std::string::npos && out.find(c) == std::string::npos) contracted += c;
  }
  auto dims_by_letter = [&](int v, const std::string& terms) {
    std::map<char, SymInt> m;
    const std::vector<Dim>& d = value(v).dims;
    for (size_t i = 0; i < terms.size(); ++i) m[terms[i]] = dim_sym(d[i]);
    return m;
  };
  const auto da = dims_by_letter(a, ta), db = dims_by_letter(b, tb);
  for (char c : batch + contracted) {
    if (!da.at(c).same_as(db.at(c))) {
      ctx.fail("letter '" + std::string(1, c) + "' has size " + format_sym(da.at(c), graph_) + " in operand 0 and " +
               format_sym(db.at(c), graph_) + " in operand 1 (broadcasting is not supported)");
    }
  }
  auto prod = [&](const std::map<char, SymInt>& m, const std::string& letters) {
    SymInt p = SymInt::constant(1);
    for (char c : letters) p = sym_mul(p, m.at(c));
    return p;
  };
  auto with_batch = [&](std::vector<SymInt> tail) {
    std::vector<SymInt> t;
    for (char c : batch) t.push_back(da.at(c));
    t.insert(t.end(), tail.begin(), tail.end());
    return t;
  };
  a = einsum_permute(ctx, a, ta, batch + left + contracted, "a");
  b = einsum_permute(ctx, b, tb, batch + contracted + right, "b");
  a = emit_reshape(ctx, a, with_batch({prod(da, left), prod(da, contracted)}), ctx.output(0) + "/a_mat", "a_mat");
  b = emit_reshape(ctx, b, with_batch({prod(db, contracted), prod(db, right)}), ctx.output(0) + "/b_mat", "b_mat");
  int y = emit1(ctx, OpCode::MatMul, {a, b}, OpAttrs{}, ctx.output(0) + "/matmul", "matmul");
  std::vector<SymInt> full;
  for (char c : left) full.push_back(da.at(c));
  for (char c : right) full.push_back(db.at(c));
  y = emit_reshape(ctx, y, with_batch(full), ctx.output(0) + "/unflat", "unflat");
  y = einsum_permute(ctx, y, batch + left + right, out, "out");
  define_value(ctx, 0, y);
}

}  // namespace ember::exporter::onnx_detail
