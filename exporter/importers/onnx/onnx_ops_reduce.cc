// ONNX handlers of issue 17's reductions and index ops: ReduceMax / ReduceMin / ReduceProd, the
// composed reductions (ReduceLogSumExp, ReduceSumSquare, ReduceL1, ReduceLogSum), ArgMax / ArgMin,
// TopK, CumSum, GatherElements, GroupNormalization / InstanceNormalization, and the ops lowered to
// movement at import: Tile, DepthToSpace, SpaceToDepth.
#include "exporter/importers/onnx/importer_internal.h"

namespace ember::exporter::onnx_detail {
namespace {

// A [n] i64 constant.
HostTensor i64_vector(const std::vector<int64_t>& v) {
  HostTensor t;
  t.dtype = ScalarType::I64;
  t.dims = {static_cast<int64_t>(v.size())};
  t.bytes.resize(v.size() * 8);
  if (!v.empty()) std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

}  // namespace

// The axes and keepdims of a Reduce* node into `a` (axes an attribute before `input_axes_from`, an
// input from then on). True when the node is an identity: no axes and noop_with_empty_axes (an
// attribute from the same opset).
bool Importer::reduce_attrs(NodeContext& ctx, int64_t input_axes_from, OpAttrs* a) {
  const size_t rank = rank_of(ctx, 0);
  std::vector<int64_t> axes;
  bool noop_empty = false;
  if (ctx.opset() >= input_axes_from) {
    if (ctx.has_input(1)) axes = ints_of(ctx, 1, "axes");
    noop_empty = ctx.attr_int("noop_with_empty_axes", 0) != 0;
  } else {
    ctx.attr_ints("axes", &axes);
  }
  a->keepdims = ctx.attr_int("keepdims", 1) != 0;
  if (axes.empty() && noop_empty) return true;
  if (axes.size() > static_cast<size_t>(kMaxRank)) ctx.fail("too many axes");
  for (int64_t& ax : axes) ax = normalize_axis(ctx, ax, rank);
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) ctx.fail("repeats an axis");
  a->count = static_cast<uint8_t>(axes.size());
  for (size_t i = 0; i < axes.size(); ++i) a->axes[i] = static_cast<int32_t>(axes[i]);
  return false;
}

// ReduceMax / ReduceMin / ReduceProd: axes an input from opset 18.
void Importer::op_reduce_extreme(NodeContext& ctx) {
  OpAttrs a;
  if (reduce_attrs(ctx, 18, &a)) {
    define_alias(ctx, 0, 0);
    return;
  }
  const std::string& t = ctx.op_type();
  const OpCode op = t == "ReduceMax" ? OpCode::ReduceMax : t == "ReduceMin" ? OpCode::ReduceMin : OpCode::ReduceProd;
  define_value(ctx, 0, emit1(ctx, op, {value_of(ctx, 0)}, a, ctx.output(0)));
}

// The reductions ONNX defines by formula, composed from Ember ops (axes an input from opset 18):
// ReduceSumSquare = ReduceSum(x * x), ReduceL1 = ReduceSum(Abs(x)), ReduceLogSum = Log(ReduceSum(x)),
// ReduceLogSumExp = m + Log(ReduceSum(Exp(x - m))) with m = ReduceMax(x): exp never overflows (the
// largest term is exp(0) = 1). A row whose max is ±inf gives NaN (inf - inf).
void Importer::op_reduce_composed(NodeContext& ctx) {
  OpAttrs a;
  const std::string& t = ctx.op_type();
  if (reduce_attrs(ctx, 18, &a)) {
    // No axes with noop_with_empty_axes: the input, as onnx's reference evaluator defines it (which
    // still squares for ReduceSumSquare; onnxruntime 1.22 refuses all of these).
    const int x = value_of(ctx, 0);
    if (t == "ReduceSumSquare") define_value(ctx, 0, emit1(ctx, OpCode::Mul, {x, x}, OpAttrs{}, ctx.output(0)));
    else define_alias(ctx, 0, 0);
    return;
  }
  if (dtype_of(ctx, 0) != ScalarType::F32) {
    ctx.fail(std::string("input dtype ") + to_string(dtype_of(ctx, 0)) + " is not supported (f32 only)");
  }
  const int x = value_of(ctx, 0);
  const std::string& out = ctx.output(0);
  if (t == "ReduceSumSquare") {
    const int sq = emit1(ctx, OpCode::Mul, {x, x}, OpAttrs{}, out + "/square", "square");
    define_value(ctx, 0, emit1(ctx, OpCode::ReduceSum, {sq}, a, out));
  } else if (t == "ReduceL1") {
    const int ab = emit1(ctx, OpCode::Abs, {x}, OpAttrs{}, out + "/abs", "abs");
    define_value(ctx, 0, emit1(ctx, OpCode::ReduceSum, {ab}, a, out));
  } else if (t == "ReduceLogSum") {
    const int sum = emit1(ctx, OpCode::ReduceSum, {x}, a, out + "/sum", "sum");
    define_value(ctx, 0, emit1(ctx, OpCode::Log, {sum}, OpAttrs{}, out));
  } else {
    OpAttrs keep = a;
    keep.keepdims = true;
    const int m = emit1(ctx, OpCode::ReduceMax, {x}, keep, out + "/max", "max");
    const int shifted = emit1(ctx, OpCode::Sub, {x, m}, OpAttrs{}, out + "/shifted", "shifted");
    const int e = emit1(ctx, OpCode::Exp, {shifted}, OpAttrs{}, out + "/exp", "exp");
    const int sum = emit1(ctx, OpCode::ReduceSum, {e}, a, out + "/sum", "sum");
    const int lg = emit1(ctx, OpCode::Log, {sum}, OpAttrs{}, out + "/log", "log");
    int mo = m;
    if (!a.keepdims) {
      std::vector<SymInt> dims;
      for (const Dim& d : value(lg).dims) dims.push_back(dim_sym(d));
      mo = emit_reshape(ctx, m, dims, out + "/max_dropped", "max_dropped");
    }
    define_value(ctx, 0, emit1(ctx, OpCode::Add, {lg, mo}, OpAttrs{}, out));
  }
}

// ArgMax / ArgMin -> i64 indices (select_last_index from opset 12).
void Importer::op_arg(NodeContext& ctx) {
  OpAttrs a;
  a.axis = normalize_axis(ctx, ctx.attr_int("axis", 0), rank_of(ctx, 0));
  a.keepdims = ctx.attr_int("keepdims", 1) != 0;
  a.select_last_index = ctx.attr_int("select_last_index", 0) != 0;
  const OpCode op = ctx.op_type() == "ArgMax" ? OpCode::ArgMax : OpCode::ArgMin;
  define_value(ctx, 0, emit1(ctx, op, {value_of(ctx, 0)}, a, ctx.output(0)));
}

// TopK: K (an input from opset 10) must be known at export, as the output's size depends on it.
void Importer::op_topk(NodeContext& ctx) {
  const size_t rank = rank_of(ctx, 0);
  OpAttrs a;
  a.axis = normalize_axis(ctx, ctx.attr_int("axis", -1), rank);
  a.largest = ctx.attr_int("largest", 1) != 0;
  a.sorted = ctx.attr_int("sorted", 1) != 0;
  const Known* k = known_of(ctx, 1);
  if (k == nullptr) {
    ctx.fail("K (input '" + ctx.input(1) + "') is computed at run time; Ember needs it known at export (a constant "
             "or Shape arithmetic) because the outputs' size depends on it");
  }
  if (k->numel() != 1) ctx.fail("K must have one element, got " + std::to_string(k->numel()));
  if (!k->elems[0].is_constant()) {
    ctx.fail("K = " + fmt(k->elems) + " depends on run-time sizes; it must be a constant");
  }
  a.k = k->elems[0].c;
  const SymInt dim = dims_of(ctx, 0)[static_cast<size_t>(a.axis)];
  if (a.k < 0) ctx.fail("K = " + std::to_string(a.k) + " is negative");
  if (dim.is_constant() && a.k > dim.c) {
    ctx.fail("K = " + std::to_string(a.k) + " exceeds axis " + std::to_string(a.axis) + "'s size " + std::to_string(dim.c));
  }
  const std::vector<int> outs = emit(ctx, OpCode::TopK, {value_of(ctx, 0)}, a, ctx.output(0));
  define_value(ctx, 0, outs.at(0));
  if (ctx.has_output(1)) define_value(ctx, 1, outs.at(1));
}

// CumSum: the axis input must be a constant (Ember's attribute).
void Importer::op_cumsum(NodeContext& ctx) {
  const std::vector<int64_t> axis = ints_of(ctx, 1, "axis");
  if (axis.size() != 1) ctx.fail("axis must have one element, got " + std::to_string(axis.size()));
  OpAttrs a;
  a.axis = normalize_axis(ctx, axis[0], rank_of(ctx, 0));
  a.exclusive = ctx.attr_int("exclusive", 0) != 0;
  a.reverse = ctx.attr_int("reverse", 0) != 0;
  define_value(ctx, 0, emit1(ctx, OpCode::CumSum, {value_of(ctx, 0)}, a, ctx.output(0)));
}

void Importer::op_gather_elements(NodeContext& ctx) {
  OpAttrs a;
  a.axis = normalize_axis(ctx, ctx.attr_int("axis", 0), rank_of(ctx, 0));
  define_value(ctx, 0, emit1(ctx, OpCode::GatherElements, {value_of(ctx, 0), value_of(ctx, 1)}, a, ctx.output(0)));
}

// GroupNormalization (opset 18: scale and bias per group, expanded here to per channel by a gather;
// opset 21: per channel) and InstanceNormalization (groups = C) -> group_norm. C must be static.
void Importer::op_group_norm(NodeContext& ctx) {
  const bool instance = ctx.op_type() == "InstanceNormalization";
  const std::vector<SymInt> dims = dims_of(ctx, 0);
  if (dims.size() < (instance ? 3u : 2u)) ctx.fail("input must be [N, C, ...], got rank " + std::to_string(dims.size()));
  if (!dims[1].is_constant()) ctx.fail("the channel dim " + format_sym(dims[1], graph_) + " must be static");
  const int64_t c = dims[1].c;
  OpAttrs a;
  a.epsilon = ctx.attr_float("epsilon", 1e-5f);
  int64_t groups = c;
  if (!instance) {
    const onnx::AttributeProto* g = ctx.find("num_groups");
    if (g == nullptr) ctx.fail("attribute 'num_groups' is required");
    groups = ctx.attr_int("num_groups", 0);
    if (ctx.opset() >= 21 && ctx.attr_int("stash_type", 1) != 1) {
      ctx.fail("attribute 'stash_type' other than 1 (float) is not supported");
    }
  }
  if (groups < 1 || groups > c || c % groups != 0) {
    ctx.fail("num_groups " + std::to_string(groups) + " does not divide the " + std::to_string(c) + " channels");
  }
  a.groups = static_cast<int32_t>(groups);
  int scale = value_of(ctx, 1), bias = value_of(ctx, 2);
  if (!instance && ctx.opset() < 21 && groups != c) {
    // Per-group parameters: channel ch takes entry ch / (C / groups).
    std::vector<int64_t> index(static_cast<size_t>(c));
    for (int64_t ch = 0; ch < c; ++ch) index[static_cast<size_t>(ch)] = ch / (c / groups);
    const int idx = add_constant(ctx.name() + "/channel_group", i64_vector(index));
    OpAttrs g;
    g.axis = 0;
    scale = emit1(ctx, OpCode::Gather, {scale, idx}, g, ctx.output(0) + "/scale", "scale");
    bias = emit1(ctx, OpCode::Gather, {bias, idx}, g, ctx.output(0) + "/bias", "bias");
  }
  define_value(ctx, 0, emit1(ctx, OpCode::GroupNorm, {value_of(ctx, 0), scale, bias}, a, ctx.output(0)));
}

// Tile = reshape (a 1 before every repeated dim) + expand (the 1s to the repeats) + reshape (merge).
void Importer::op_tile(NodeContext& ctx) {
  const std::vector<SymInt> in = dims_of(ctx, 0);
  const std::vector<int64_t> repeats = ints_of(ctx, 1, "repeats");
  if (repeats.size() != in.size()) {
    ctx.fail("repeats has " + std::to_string(repeats.size()) + " entries for rank " + std::to_string(in.size()));
  }
  std::vector<SymInt> split, expanded, merged;
  for (size_t i = 0; i < in.size(); ++i) {
    if (repeats[i] < 0) ctx.fail("repeats[" + std::to_string(i) + "] = " + std::to_string(repeats[i]) + " is negative");
    if (repeats[i] != 1) {
      split.push_back(SymInt::constant(1));
      expanded.push_back(SymInt::constant(repeats[i]));
    }
    split.push_back(in[i]);
    expanded.push_back(in[i]);
    merged.push_back(sym_mul(SymInt::constant(repeats[i]), in[i]));
  }
  const int x = value_of(ctx, 0);
  if (split.size() == in.size()) {
    define_value(ctx, 0, x);
    return;
  }
  if (split.size() > static_cast<size_t>(kMaxRank)) {
    ctx.fail("tiling " + std::to_string(split.size() - in.size()) + " dims of a rank-" + std::to_string(in.size()) +
             " tensor needs rank " + std::to_string(split.size()) + " > " + std::to_string(kMaxRank));
  }
  const std::string& out = ctx.output(0);
  const int s = emit_reshape(ctx, x, split, out + "/split", "split");
  const int e = emit_expand(ctx, s, expanded, out + "/expanded", "expanded");
  define_value(ctx, 0, emit_reshape(ctx, e, merged, out, "merged"));
}

// DepthToSpace (DCR, CRD) and SpaceToDepth on [N, C, H, W]: reshape to rank 6, transpose, reshape.
void Importer::op_depth_space(NodeContext& ctx) {
  const bool to_space = ctx.op_type() == "DepthToSpace";
  const std::vector<SymInt> in = dims_of(ctx, 0);
  if (in.size() != 4) ctx.fail("input must be [N, C, H, W], got rank " + std::to_string(in.size()));
  const onnx::AttributeProto* attr = ctx.find("blocksize");
  if (attr == nullptr) ctx.fail("attribute 'blocksize' is required");
  const int64_t b = ctx.attr_int("blocksize", 0);
  if (b < 1) ctx.fail("blocksize " + std::to_string(b) + " must be >= 1");
  const SymInt bs = SymInt::constant(b), b2 = SymInt::constant(b * b);
  const SymInt &n = in[0], &c = in[1], &h = in[2], &w = in[3];
  std::vector<SymInt> split, merged;
  OpAttrs perm;
  perm.count = 6;
  auto set_perm = [&](std::initializer_list<int> p) {
    int i = 0;
    for (int v : p) perm.perm[i++] = v;
  };
  if (to_space) {
    if (!c.is_constant() || c.c % (b * b) != 0) {
      ctx.fail("channels " + format_sym(c, graph_) + " must be a static multiple of blocksize^2 = " + std::to_string(b * b));
    }
    const SymInt cc = SymInt::constant(c.c / (b * b));
    const std::string mode = ctx.attr_string("mode", "DCR");
    if (mode == "DCR") {
      split = {n, bs, bs, cc, h, w};
      set_perm({0, 3, 4, 1, 5, 2});
    } else if (mode == "CRD") {
      split = {n, cc, bs, bs, h, w};
      set_perm({0, 1, 4, 2, 5, 3});
    } else {
      ctx.fail("attribute 'mode' = '" + mode + "' is not supported (DCR or CRD)");
    }
    merged = {n, cc, sym_mul(h, bs), sym_mul(w, bs)};
  } else {
    for (const SymInt* s : {&h, &w}) {
      if (!s->is_constant() || s->c % b != 0) {
        ctx.fail("spatial dim " + format_sym(*s, graph_) + " must be a static multiple of blocksize " + std::to_string(b));
      }
    }
    const SymInt hb = SymInt::constant(h.c / b), wb = SymInt::constant(w.c / b);
    split = {n, c, hb, bs, wb, bs};
    set_perm({0, 3, 5, 1, 2, 4});
    merged = {n, sym_mul(c, b2), hb, wb};
  }
  const std::string& out = ctx.output(0);
  const int s = emit_reshape(ctx, value_of(ctx, 0), split, out + "/split", "split");
  const int t = emit1(ctx, OpCode::Transpose, {s}, perm, out + "/moved", "moved");
  define_value(ctx, 0, emit_reshape(ctx, t, merged, out, "merged"));
}

// expand of x to `dims` (each static or an input symbol), as op_expand emits it.
int Importer::emit_expand(const NodeContext& ctx, int x, const std::vector<SymInt>& dims, const std::string& out_name,
                          const std::string& suffix) {
  OpAttrs at;
  at.count = static_cast<uint8_t>(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i].is_constant()) {
      at.shape[i] = dims[i].c;
    } else if (dims[i].is_symbol() && dims[i].symbol_id() <= declared_symbols_) {
      at.shape[i] = graph_.symbols[dims[i].symbol_id() - 1u].max;
      at.shape_sym[i] = dims[i].symbol_id();
    } else {
      ctx.fail("expands to " + fmt(dims) + ": dim " + std::to_string(i) + " is neither static nor an input symbol");
    }
  }
  return emit1(ctx, OpCode::Expand, {x}, at, out_name, suffix);
}

}  // namespace ember::exporter::onnx_detail
